package storetest

import (
	"bytes"
	"io"
	"slices"
	"testing"
	"time"

	"pimail/internal/message"
	"pimail/internal/store"
)

func testDeliverAndFetch(t *testing.T, s store.Store) {
	c := ctx(t)
	f := setup(t, s, 1)
	idate := time.Date(2024, 3, 4, 5, 6, 7, 0, time.UTC)
	var got []store.Delivered
	for i := range 3 {
		d, err := s.Deliver(c, store.Delivery{
			Raw:          msg(i),
			InternalDate: idate,
			Recipients: []store.Recipient{{
				AccountID: f.accounts[0].ID, Flags: store.FlagFlagged, Keywords: []string{"$Junk", "$Forwarded"},
			}},
		})
		if err != nil {
			t.Fatalf("Deliver: %v", err)
		}
		got = append(got, d...)
	}
	inbox := f.mailbox(t, 0, "INBOX")
	for i, d := range got {
		if d.UID != uint32(i+1) || d.MailboxID != inbox.ID || d.UIDValidity != inbox.UIDValidity || d.AccountID != f.accounts[0].ID {
			t.Fatalf("Delivered[%d] = %+v, inbox %+v", i, d, inbox)
		}
	}
	if inbox.UIDNext != 4 {
		t.Fatalf("UIDNext = %d, want 4", inbox.UIDNext)
	}

	all := fetchAll(t, s, inbox.ID)
	if !equalUIDs(uidsOf(all), []uint32{1, 2, 3}) {
		t.Fatalf("UIDs = %v", uidsOf(all))
	}
	for i, m := range all {
		if m.Parsed != nil {
			t.Errorf("UIDs filled Parsed")
		}
		if m.Size != int64(len(msg(i))) || m.MailboxID != inbox.ID || m.BlobID == 0 || m.ModSeq == 0 {
			t.Errorf("meta %d = %+v", i, m)
		}
		if m.Flags != store.FlagFlagged || !slices.Equal(m.Keywords, []string{"$Forwarded", "$Junk"}) {
			t.Errorf("flags of %d = %v %v, want Flagged [$Forwarded $Junk] (sorted)", i, m.Flags, m.Keywords)
		}
		if !m.InternalDate.Equal(idate) {
			t.Errorf("InternalDate = %v, want %v", m.InternalDate, idate)
		}
	}

	// Fetch a subset with parsed content; fields restored from the index.
	ms, err := s.Fetch(c, inbox.ID, store.UIDSet{{Start: 2, Stop: 0}}, store.FetchOptions{Parsed: true})
	if err != nil {
		t.Fatalf("Fetch: %v", err)
	}
	if !equalUIDs(uidsOf(ms), []uint32{2, 3}) {
		t.Fatalf("Fetch 2:* = %v", uidsOf(ms))
	}
	want := message.Parse(msg(1))
	p := ms[0].Parsed
	if p == nil {
		t.Fatalf("Fetch with Parsed returned nil Parsed")
	}
	if p.Subject != want.Subject || p.From != want.From || p.To != want.To || p.Cc != want.Cc ||
		!slices.Equal(p.References, want.References) || !p.Date.Equal(want.Date) {
		t.Errorf("Parsed fields = %q %q %q %q %v %v, want %q %q %q %q %v %v",
			p.Subject, p.From, p.To, p.Cc, p.References, p.Date,
			want.Subject, want.From, want.To, want.Cc, want.References, want.Date)
	}
	if _, off := p.Date.Zone(); !want.Date.IsZero() && off != 3600 {
		t.Errorf("Parsed.Date zone offset = %d, want +0100", off)
	}
	if p.Envelope.MessageID != want.Envelope.MessageID || p.Envelope.Subject != want.Envelope.Subject ||
		len(p.Envelope.To) != len(want.Envelope.To) {
		t.Errorf("Envelope = %+v, want %+v", p.Envelope, want.Envelope)
	}
	if p.Body == nil || want.Body == nil || p.Body.Type != want.Body.Type || len(p.Body.Parts) != len(want.Body.Parts) ||
		p.Body.End != want.Body.End {
		t.Errorf("Body = %+v, want %+v", p.Body, want.Body)
	}

	// Several ranges, out of order, and a range that matches nothing.
	ms, err = s.Fetch(c, inbox.ID, store.UIDSet{{Start: 3, Stop: 3}, {Start: 1, Stop: 1}, {Start: 10, Stop: 20}}, store.FetchOptions{})
	if err != nil || !equalUIDs(uidsOf(ms), []uint32{1, 3}) {
		t.Fatalf("Fetch 3,1,10:20 = %v, %v", uidsOf(ms), err)
	}

	// Raw bytes, both ways.
	raw, err := s.ReadBlob(c, all[1].BlobID)
	if err != nil || !bytes.Equal(raw, msg(1)) {
		t.Fatalf("ReadBlob = %q, %v", raw, err)
	}
	rc, size, err := s.OpenBlob(c, all[2].BlobID)
	if err != nil {
		t.Fatalf("OpenBlob: %v", err)
	}
	defer rc.Close()
	if size != int64(len(msg(2))) {
		t.Fatalf("OpenBlob size = %d, want %d", size, len(msg(2)))
	}
	if _, err := rc.Seek(6, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	rest, err := io.ReadAll(rc)
	if err != nil || !bytes.Equal(rest, msg(2)[6:]) {
		t.Fatalf("OpenBlob after Seek read %q, %v", rest, err)
	}
	_, err = s.ReadBlob(c, 1<<40)
	wantErr(t, "ReadBlob unknown", err, store.ErrNotFound)
	_, err = s.UIDs(c, 1<<40)
	wantErr(t, "UIDs unknown mailbox", err, store.ErrNotFound)
}

func testDeliverManyRecipients(t *testing.T, s store.Store) {
	c := ctx(t)
	f := setup(t, s, 15)
	before := stats(t, s)
	all := []int{}
	for i := range 15 {
		all = append(all, i)
	}
	ds := f.deliver(t, 1, all...)
	st := stats(t, s)
	if st.Blobs != before.Blobs+1 || st.Messages != before.Messages+15 || st.BlobBytes != before.BlobBytes+int64(len(msg(1))) {
		t.Fatalf("Stats after 15-recipient delivery = %+v, before %+v: want one blob, 15 messages", st, before)
	}
	var blob int64
	for i, d := range ds {
		if d.AccountID != f.accounts[i].ID || d.UID != 1 {
			t.Fatalf("Delivered[%d] = %+v", i, d)
		}
		ms := fetchAll(t, s, d.MailboxID)
		if len(ms) != 1 {
			t.Fatalf("recipient %d has %d messages", i, len(ms))
		}
		if blob == 0 {
			blob = ms[0].BlobID
		} else if ms[0].BlobID != blob {
			t.Fatalf("recipient %d has blob %d, others %d", i, ms[0].BlobID, blob)
		}
	}
	// The same bytes delivered again are still one blob.
	f.deliver(t, 1, 0, 1)
	if st2 := stats(t, s); st2.Blobs != st.Blobs || st2.Messages != st.Messages+2 {
		t.Fatalf("Stats after redelivery = %+v, want %d blobs, %d messages", st2, st.Blobs, st.Messages+2)
	}
	// Several recipients in one account's different mailboxes.
	ds, err := s.Deliver(c, store.Delivery{Raw: msg(2), Recipients: []store.Recipient{
		{AccountID: f.accounts[0].ID}, {AccountID: f.accounts[0].ID, Mailbox: "Archive"},
	}})
	if err != nil || len(ds) != 2 || ds[0].MailboxID == ds[1].MailboxID {
		t.Fatalf("Deliver to two mailboxes = %+v, %v", ds, err)
	}
}

func testDeliverCreatesMailbox(t *testing.T, s store.Store) {
	c := ctx(t)
	f := setup(t, s, 1)
	ds, err := s.Deliver(c, store.Delivery{Raw: msg(1), Recipients: []store.Recipient{
		{AccountID: f.accounts[0].ID, Mailbox: "Lists/golang"},
	}})
	if err != nil {
		t.Fatalf("Deliver: %v", err)
	}
	m := f.mailbox(t, 0, "Lists/golang")
	if ds[0].MailboxID != m.ID || ds[0].UID != 1 || ds[0].UIDValidity != m.UIDValidity {
		t.Fatalf("Delivered = %+v, mailbox %+v", ds[0], m)
	}
	// "inbox" in any case is INBOX.
	ds, err = s.Deliver(c, store.Delivery{Raw: msg(2), Recipients: []store.Recipient{
		{AccountID: f.accounts[0].ID, Mailbox: "inbox"},
	}})
	if err != nil || ds[0].MailboxID != f.mailbox(t, 0, "INBOX").ID {
		t.Fatalf("Deliver to inbox = %+v, %v", ds, err)
	}
}

func testDeliverUnknownAccount(t *testing.T, s store.Store) {
	c := ctx(t)
	f := setup(t, s, 1)
	before := stats(t, s)
	_, err := s.Deliver(c, store.Delivery{Raw: msg(1), Recipients: []store.Recipient{
		{AccountID: f.accounts[0].ID}, {AccountID: f.accounts[0].ID + 1000},
	}})
	wantErr(t, "Deliver to unknown account", err, store.ErrNotFound)
	if st := stats(t, s); st.Messages != before.Messages || st.Blobs != before.Blobs {
		t.Fatalf("failed delivery left %+v (before %+v)", st, before)
	}
	// The failed delivery did not use up a UID.
	ds := f.deliver(t, 2, 0)
	if ds[0].UID != 1 {
		t.Fatalf("UID after failed delivery = %d, want 1", ds[0].UID)
	}
	_, err = s.Deliver(c, store.Delivery{Raw: msg(1)})
	wantErr(t, "Deliver without recipients", err, store.ErrInvalid)
}

// testDeliverKeepsNoRaw: Deliver and Append do not keep the caller's
// bytes: overwritten right after the call returns, a small message (kept
// in the database by store/sqlite) and a large one (a file of its own)
// still read back as they were.
func testDeliverKeepsNoRaw(t *testing.T, s store.Store) {
	c := ctx(t)
	f := setup(t, s, 1)
	for _, size := range []int{2 << 10, 300 << 10} {
		want := append([]byte(nil), msg(size)...)
		for len(want) < size {
			want = append(want, "filler line of the message body\r\n"...)
		}
		buf := append([]byte(nil), want...)
		ds, err := s.Deliver(c, store.Delivery{Raw: buf, Recipients: []store.Recipient{{AccountID: f.accounts[0].ID}}})
		if err != nil {
			t.Fatal(err)
		}
		for i := range buf {
			buf[i] = 'X'
		}
		mb := f.mailbox(t, 0, "INBOX")
		appended := append([]byte(nil), want...)
		if _, err := s.Append(c, mb.ID, appended, 0, nil, time.Time{}); err != nil {
			t.Fatalf("Append of %d bytes: %v", size, err)
		}
		for i := range appended {
			appended[i] = 'Y'
		}
		compared := 0
		for _, m := range fetchAll(t, s, ds[0].MailboxID) {
			if m.Size != int64(len(want)) {
				continue // the other size's
			}
			raw, err := s.ReadBlob(c, m.BlobID)
			if err != nil {
				t.Fatal(err)
			}
			if string(raw) != string(want) {
				t.Fatalf("%d-byte message changed with the caller's buffer: %.80q", size, raw)
			}
			compared++
		}
		if compared != 2 { // the delivered and the appended copy
			t.Fatalf("%d messages of %d bytes read back, want 2", compared, len(want))
		}
	}
}

func testAppend(t *testing.T, s store.Store) {
	c := ctx(t)
	f := setup(t, s, 1)
	sent := f.mailbox(t, 0, "Sent")
	when := time.Date(2023, 12, 24, 18, 0, 0, 0, time.UTC)
	d, err := s.Append(c, sent.ID, msg(7), store.FlagSeen|store.FlagDraft, []string{"$MDNSent"}, when)
	if err != nil {
		t.Fatalf("Append: %v", err)
	}
	if d.UID != 1 || d.MailboxID != sent.ID || d.UIDValidity != sent.UIDValidity || d.AccountID != f.accounts[0].ID {
		t.Fatalf("Append = %+v", d)
	}
	ms := fetchAll(t, s, sent.ID)
	if len(ms) != 1 || ms[0].Flags != store.FlagSeen|store.FlagDraft || !slices.Equal(ms[0].Keywords, []string{"$MDNSent"}) || !ms[0].InternalDate.Equal(when) {
		t.Fatalf("appended = %+v", ms)
	}
	_, err = s.Append(c, 1<<40, msg(1), 0, nil, time.Time{})
	wantErr(t, "Append to unknown mailbox", err, store.ErrNotFound)
	_, err = s.Append(c, sent.ID, msg(1), 0, []string{"bad keyword"}, time.Time{})
	wantErr(t, "Append with bad keyword", err, store.ErrInvalid)
	// A zero internal date means now.
	before := time.Now().Add(-2 * time.Second)
	if _, err := s.Append(c, sent.ID, msg(8), 0, nil, time.Time{}); err != nil {
		t.Fatal(err)
	}
	ms = fetchAll(t, s, sent.ID)
	if got := ms[len(ms)-1].InternalDate; got.Before(before) || got.After(time.Now().Add(2*time.Second)) {
		t.Fatalf("InternalDate of zero-date append = %v, want about now", got)
	}
}

func testMonotonic(t *testing.T, s store.Store) {
	c := ctx(t)
	f := setup(t, s, 1)
	inbox := f.mailbox(t, 0, "INBOX")
	last := inbox.HighestModSeq
	check := func(what string) store.Mailbox {
		t.Helper()
		m := f.mailbox(t, 0, "INBOX")
		if m.HighestModSeq <= last {
			t.Fatalf("HIGHESTMODSEQ after %s = %d, want > %d", what, m.HighestModSeq, last)
		}
		last = m.HighestModSeq
		return m
	}
	f.deliver(t, 1, 0)
	f.deliver(t, 2, 0)
	f.deliver(t, 3, 0)
	check("deliveries")
	if _, err := s.StoreFlags(c, inbox.ID, store.UIDSet{{Start: 3, Stop: 3}}, store.FlagsAdd, store.FlagDeleted, nil); err != nil {
		t.Fatal(err)
	}
	check("flags")
	if _, err := s.Expunge(c, inbox.ID, nil); err != nil {
		t.Fatal(err)
	}
	m := check("expunge")
	if m.UIDNext != 4 {
		t.Fatalf("UIDNEXT after expunging the last message = %d, want 4 (never goes back)", m.UIDNext)
	}
	if d := f.deliver(t, 4, 0); d[0].UID != 4 {
		t.Fatalf("UID after expunge of the highest = %d, want 4", d[0].UID)
	}
	check("delivery after expunge")
	// Every message's MODSEQ is at most HIGHESTMODSEQ and UIDs ascend.
	var prev uint32
	for _, mm := range fetchAll(t, s, inbox.ID) {
		if mm.ModSeq > last || mm.UID <= prev {
			t.Fatalf("message %+v: modseq above HIGHESTMODSEQ %d or UIDs not ascending", mm, last)
		}
		prev = mm.UID
	}
}

// testFetchManyRanges uses a UID set with many ranges, as a client's
// sequence set after expunges produces, and reversed ranges ("5:3").
func testFetchManyRanges(t *testing.T, s store.Store) {
	c := ctx(t)
	f := setup(t, s, 1)
	inbox := f.mailbox(t, 0, "INBOX")
	f.appendN(t, inbox, 0, 90)
	var set store.UIDSet
	var want []uint32
	for u := uint32(2); u <= 80; u += 2 {
		set = append(set, store.UIDRange{Start: u, Stop: u})
		want = append(want, u)
	}
	ms, err := s.Fetch(c, inbox.ID, set, store.FetchOptions{})
	if err != nil || !equalUIDs(uidsOf(ms), want) {
		t.Fatalf("Fetch of %d ranges = %v, %v; want %v", len(set), uidsOf(ms), err, want)
	}
	ups, err := s.StoreFlags(c, inbox.ID, set, store.FlagsAdd, store.FlagSeen, nil)
	if err != nil || len(ups) != len(want) {
		t.Fatalf("StoreFlags on %d ranges changed %d, %v", len(set), len(ups), err)
	}
	ms, err = s.Fetch(c, inbox.ID, store.UIDSet{{Start: 89, Stop: 0}, {Start: 5, Stop: 3}}, store.FetchOptions{})
	if err != nil || !equalUIDs(uidsOf(ms), []uint32{3, 4, 5, 89, 90}) {
		t.Fatalf("Fetch 89:*,5:3 = %v, %v", uidsOf(ms), err)
	}
}
