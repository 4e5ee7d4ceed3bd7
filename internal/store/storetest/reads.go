package storetest

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"pimail/internal/message"
	"pimail/internal/store"
)

// Tests of HeaderReader, Lister and AppendBatch.

// headerMsgs are messages whose envelope and header a fast read must get
// right: groups, encoded words, LF line ends, no body, no header.
var headerMsgs = []string{
	"From: =?utf-8?q?J=C3=B6rg?= <j@example.net>\r\nSender: s@example.net\r\nReply-To: r@example.net\r\n" +
		"To: \"Group\": a@example.org, b@example.org;, c@example.org\r\nCc: d@example.org\r\nBcc: e@example.org\r\n" +
		"Subject: =?iso-8859-1?q?Gr=FC=DFe?=\r\nDate: Tue, 02 Jan 2024 15:04:05 +0100\r\n" +
		"In-Reply-To: <p@example.net>\r\nMessage-ID: <m@example.net>\r\n\r\nbody\r\n",
	"From: a@b.c\nTo: x@y.z\nSubject: lf only\n\nbody\n",
	"Subject: no body\r\n\r\n",
	"no header, no blank line",
	"\r\nbody only\r\n",
}

func testHeaderReads(t *testing.T, s store.Store) {
	c := ctx(t)
	f := setup(t, s, 1)
	inbox := f.mailbox(t, 0, "INBOX")
	var raws [][]byte
	for i := range 3 {
		raws = append(raws, msg(i))
	}
	for _, m := range headerMsgs {
		raws = append(raws, []byte(m))
	}
	for _, raw := range raws {
		if _, err := s.Append(c, inbox.ID, raw, store.FlagSeen, []string{"$Kw"}, time.Time{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, uids := range []store.UIDSet{nil, {{Start: 2, Stop: 3}, {Start: 6, Stop: 0}}, {{Start: 99, Stop: 0}}} {
		full, err := s.Fetch(c, inbox.ID, uids, store.FetchOptions{Parsed: true})
		if err != nil {
			t.Fatal(err)
		}
		check := func(what string, metas []store.MessageMeta, withSize bool) {
			t.Helper()
			if len(metas) != len(full) {
				t.Fatalf("%s %v: %d messages, Fetch %d", what, uids, len(metas), len(full))
			}
			for i, m := range metas {
				want := full[i]
				if !withSize {
					m.Size = want.Size
				}
				if m.UID != want.UID || m.ModSeq != want.ModSeq || m.Flags != want.Flags || !reflect.DeepEqual(m.Keywords, want.Keywords) ||
					!m.InternalDate.Equal(want.InternalDate) || m.Size != want.Size || m.BlobID != want.BlobID {
					t.Fatalf("%s %v: message %d = %+v, Fetch %+v", what, uids, i, m, want)
				}
			}
		}
		envs, err := s.FetchEnvelopes(c, inbox.ID, uids)
		if err != nil {
			t.Fatal(err)
		}
		check("FetchEnvelopes", envs, true)
		benvs, release, err := s.FetchEnvelopesBuffered(c, inbox.ID, uids)
		if err != nil {
			t.Fatal(err)
		}
		check("FetchEnvelopesBuffered", benvs, true)
		for i := range envs {
			want := full[i].Parsed.Envelope
			for _, got := range []*message.Parsed{envs[i].Parsed, benvs[i].Parsed} {
				if got == nil || !reflect.DeepEqual(got.Envelope, want) {
					t.Fatalf("envelope of UID %d = %+v, Fetch's %+v", full[i].UID, got, want)
				}
			}
		}
		release()
		metas, headers, err := s.FetchHeaders(c, inbox.ID, uids)
		if err != nil {
			t.Fatal(err)
		}
		check("FetchHeaders", metas, true)
		for _, withSize := range []bool{true, false} {
			bmetas, bheaders, release, err := s.FetchHeadersBuffered(c, inbox.ID, uids, withSize)
			if err != nil {
				t.Fatal(err)
			}
			check(fmt.Sprintf("FetchHeadersBuffered(withSize %v)", withSize), bmetas, withSize)
			for i := range full {
				raw := raws[full[i].UID-1]
				want := raw[:full[i].Parsed.Body.BodyStart]
				if !bytes.Equal(headers[i], want) || !bytes.Equal(bheaders[i], want) {
					t.Fatalf("header of UID %d = %q / %q, want %q", full[i].UID, headers[i], bheaders[i], want)
				}
			}
			release()
		}
	}
	if _, err := s.FetchEnvelopes(c, inbox.ID+1000, nil); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("FetchEnvelopes of an unknown mailbox: %v, want ErrNotFound", err)
	}
	if _, _, err := s.FetchHeaders(c, inbox.ID+1000, nil); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("FetchHeaders of an unknown mailbox: %v, want ErrNotFound", err)
	}
}

func testMailboxPage(t *testing.T, s store.Store) {
	c := ctx(t)
	f := setup(t, s, 1)
	a := f.accounts[0]
	inbox := f.mailbox(t, 0, "INBOX")
	const n = 7
	for i := 1; i <= n; i++ {
		raw := fmt.Sprintf("From: =?utf-8?q?J=C3=B6rg?= <j%d@example.net>\r\nTo: u@example.org\r\nSubject: number %d\r\nDate: Mon, 2 Jan 2006 15:04:05 +0200\r\n\r\nbody\r\n", i, i)
		var flags store.Flags
		if i%2 == 0 {
			flags = store.FlagSeen
		}
		if _, err := s.Append(c, inbox.ID, []byte(raw), flags, []string{"$Junk"}, time.Unix(int64(1000+i), 0)); err != nil {
			t.Fatal(err)
		}
	}
	page, err := s.MailboxPage(c, inbox.ID, 2, 3)
	if err != nil {
		t.Fatal(err)
	}
	if len(page) != 3 || page[0].UID != 5 || page[2].UID != 3 {
		t.Fatalf("page = %+v, want UIDs 5,4,3", page)
	}
	it := page[0]
	if it.Subject != "number 5" || it.From != "Jörg <j5@example.net>" || it.To != "u@example.org" {
		t.Errorf("columns = %q %q %q", it.Subject, it.From, it.To)
	}
	if _, off := it.Date.Zone(); off != 7200 || it.Date.Unix() != time.Date(2006, 1, 2, 13, 4, 5, 0, time.UTC).Unix() {
		t.Errorf("date = %v", it.Date)
	}
	if it.InternalDate.Unix() != 1005 || it.Flags != 0 || page[1].Flags != store.FlagSeen || len(it.Keywords) != 1 || it.Size == 0 {
		t.Errorf("meta = %+v / %+v", it, page[1])
	}
	if it.HasAttachment {
		t.Error("plain message has an attachment")
	}
	if tail, err := s.MailboxPage(c, inbox.ID, 6, 50); err != nil || len(tail) != 1 || tail[0].UID != 1 {
		t.Errorf("tail = %+v, %v", tail, err)
	}
	if none, err := s.MailboxPage(c, inbox.ID, 50, 50); err != nil || len(none) != 0 {
		t.Errorf("past the end = %+v, %v", none, err)
	}
	if none, err := s.MailboxPage(c, inbox.ID+1000, 0, 50); err != nil || len(none) != 0 {
		t.Errorf("an unknown mailbox = %+v, %v; want no messages", none, err)
	}
	if _, err := s.MailboxPage(c, inbox.ID, -1, 5); err == nil {
		t.Error("negative offset accepted")
	}

	counts, err := s.MailboxCounts(c, a.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(counts) != len(store.DefaultMailboxes) {
		t.Fatalf("counts = %+v", counts)
	}
	for i, cnt := range counts {
		want, unseen := 0, 0
		if cnt.ID == inbox.ID {
			want, unseen = n, 4
		}
		if cnt.Messages != want || cnt.Unseen != unseen || cnt.AccountID != a.ID {
			t.Errorf("%s: %d messages, %d unseen; want %d, %d", cnt.Name, cnt.Messages, cnt.Unseen, want, unseen)
		}
		if i > 0 && counts[i-1].Name >= cnt.Name {
			t.Errorf("counts not ordered by name: %q before %q", counts[i-1].Name, cnt.Name)
		}
	}
}

// testMailboxPageAttachment checks the attachment flag against the rule
// of message.Part.IsAttachment, including the cases decided by decoding.
func testMailboxPageAttachment(t *testing.T, s store.Store) {
	c := ctx(t)
	f := setup(t, s, 1)
	inbox := f.mailbox(t, 0, "INBOX")
	mp := func(partHeader string) string {
		return "From: a@example.net\r\nSubject: s\r\nMIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary=XX\r\n\r\n" +
			"--XX\r\nContent-Type: text/plain\r\n\r\nhello\r\n--XX\r\n" + partHeader + "\r\n\r\nAAAA\r\n--XX--\r\n"
	}
	cases := []struct {
		raw  string
		want bool
	}{
		{mp("Content-Type: application/pdf\r\nContent-Disposition: attachment; filename=a.pdf"), true},
		{mp("Content-Type: application/pdf; name=\"a.pdf\""), true},                           // named, no disposition
		{mp("Content-Type: image/png; name=\"a.png\"\r\nContent-Disposition: inline"), false}, // inline image
		{mp("Content-Type: text/plain; name=\"notes.txt\""), false},                           // named text is shown
		{mp("Content-Type: text/plain\r\nContent-Disposition: attachment"), true},
		{"From: \"{\\\"k\\\":\\\"name\\\"\" <a@example.net>\r\nSubject: \"disp\":\"attachment\"\r\n\r\nplain\r\n", false},
	}
	for i, tc := range cases {
		if _, err := s.Append(c, inbox.ID, []byte(tc.raw), 0, nil, time.Time{}); err != nil {
			t.Fatal(err)
		}
		page, err := s.MailboxPage(c, inbox.ID, 0, 1)
		if err != nil || len(page) != 1 {
			t.Fatalf("case %d: %v %v", i, page, err)
		}
		if page[0].HasAttachment != tc.want {
			t.Errorf("case %d: HasAttachment = %v, want %v", i, page[0].HasAttachment, tc.want)
		}
	}
}

func testAppendBatch(t *testing.T, s store.Store) {
	c := ctx(t)
	f := setup(t, s, 1)
	inbox := f.mailbox(t, 0, "INBOX")
	f.appendN(t, inbox, 0, 1)
	date := time.Date(2001, 8, 16, 10, 0, 0, 0, time.UTC)
	msgs := []store.AppendMessage{
		{Raw: msg(1), Flags: store.FlagSeen, InternalDate: date},
		{Raw: msg(2), Keywords: []string{"$Forwarded"}},
		{Raw: msg(1)}, // the same content again: one blob, two references
	}
	before := stats(t, s)
	ds, err := s.AppendBatch(c, inbox.ID, msgs)
	if err != nil {
		t.Fatal(err)
	}
	if len(ds) != 3 {
		t.Fatalf("%d results, want 3", len(ds))
	}
	for i, d := range ds {
		if d.UID != uint32(2+i) || d.MailboxID != inbox.ID || d.UIDValidity != inbox.UIDValidity || d.AccountID != f.accounts[0].ID {
			t.Fatalf("result %d = %+v, want UID %d in mailbox %d", i, d, 2+i, inbox.ID)
		}
	}
	ms, err := s.Fetch(c, inbox.ID, store.UIDSet{{Start: 2, Stop: 4}}, store.FetchOptions{})
	if err != nil || len(ms) != 3 {
		t.Fatalf("Fetch = %d messages, %v", len(ms), err)
	}
	if ms[0].Flags != store.FlagSeen || !ms[0].InternalDate.Equal(date) {
		t.Errorf("message 1: flags %v date %v", ms[0].Flags, ms[0].InternalDate)
	}
	if len(ms[1].Keywords) != 1 || ms[1].Keywords[0] != "$Forwarded" {
		t.Errorf("message 2 keywords %v", ms[1].Keywords)
	}
	if ms[0].BlobID != ms[2].BlobID {
		t.Errorf("same content in two blobs: %d, %d", ms[0].BlobID, ms[2].BlobID)
	}
	for i, m := range ms {
		raw, err := s.ReadBlob(c, m.BlobID)
		if err != nil || !bytes.Equal(raw, msgs[i].Raw) {
			t.Fatalf("message %d content: %v", i+1, err)
		}
	}
	if after := stats(t, s); after.Blobs != before.Blobs+2 || after.Messages != before.Messages+3 {
		t.Errorf("stats after the batch %+v, before %+v: want 2 blobs and 3 messages more", after, before)
	}
	// All or nothing: a batch with a bad message stores none of them.
	if _, err := s.AppendBatch(c, inbox.ID, []store.AppendMessage{{Raw: msg(3)}, {}}); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("batch with an empty message: %v, want ErrInvalid", err)
	}
	if _, err := s.AppendBatch(c, inbox.ID+1000, msgs); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("batch into a missing mailbox: %v, want ErrNotFound", err)
	}
	if st, err := s.MailboxStatus(c, f.accounts[0].ID, "INBOX"); err != nil || st.Messages != 4 || st.UIDNext != 5 {
		t.Fatalf("after the failed batches: %+v, %v; want 4 messages, UIDNEXT 5", st, err)
	}
}
