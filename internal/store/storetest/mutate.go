package storetest

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"pimail/internal/store"
)

func testStoreFlags(t *testing.T, s store.Store) {
	c := ctx(t)
	f := setup(t, s, 1)
	inbox := f.mailbox(t, 0, "INBOX")
	f.appendN(t, inbox, 0, 4)
	hms := f.mailbox(t, 0, "INBOX").HighestModSeq

	ups, err := s.StoreFlags(c, inbox.ID, store.UIDSet{{Start: 1, Stop: 2}}, store.FlagsAdd, store.FlagSeen, nil)
	if err != nil {
		t.Fatalf("StoreFlags: %v", err)
	}
	if len(ups) != 2 || ups[0].UID != 1 || ups[1].UID != 2 || ups[0].Flags != store.FlagSeen || ups[0].ModSeq <= hms {
		t.Fatalf("StoreFlags +Seen 1:2 = %+v (HIGHESTMODSEQ was %d)", ups, hms)
	}
	hms = f.mailbox(t, 0, "INBOX").HighestModSeq
	if ups[1].ModSeq > hms {
		t.Fatalf("update modseq %d above HIGHESTMODSEQ %d", ups[1].ModSeq, hms)
	}

	// No real change: nothing returned, nothing bumped (RFC 7162 §3.2).
	ups, err = s.StoreFlags(c, inbox.ID, store.UIDSet{{Start: 1, Stop: 2}}, store.FlagsAdd, store.FlagSeen, nil)
	if err != nil || len(ups) != 0 {
		t.Fatalf("repeated +Seen = %+v, %v; want no updates", ups, err)
	}
	if m := f.mailbox(t, 0, "INBOX"); m.HighestModSeq != hms {
		t.Fatalf("HIGHESTMODSEQ moved on a no-op store: %d → %d", hms, m.HighestModSeq)
	}

	// Add to all: only 3 and 4 change.
	ups, err = s.StoreFlags(c, inbox.ID, nil, store.FlagsAdd, store.FlagSeen, nil)
	if err != nil || !equalUIDs(flagUIDs(ups), []uint32{3, 4}) {
		t.Fatalf("+Seen on all = %+v, %v; want 3 and 4", ups, err)
	}
	ups, err = s.StoreFlags(c, inbox.ID, store.UIDSet{{Start: 2, Stop: 3}}, store.FlagsRemove, store.FlagSeen, nil)
	if err != nil || !equalUIDs(flagUIDs(ups), []uint32{2, 3}) || ups[0].Flags != 0 {
		t.Fatalf("-Seen 2:3 = %+v, %v", ups, err)
	}
	ups, err = s.StoreFlags(c, inbox.ID, store.UIDSet{{Start: 4, Stop: 4}}, store.FlagsReplace, store.FlagAnswered|store.FlagDraft, nil)
	if err != nil || len(ups) != 1 || ups[0].Flags != store.FlagAnswered|store.FlagDraft {
		t.Fatalf("replace on 4 = %+v, %v", ups, err)
	}
	want := map[uint32]store.Flags{1: store.FlagSeen, 2: 0, 3: 0, 4: store.FlagAnswered | store.FlagDraft}
	for _, m := range fetchAll(t, s, inbox.ID) {
		if m.Flags != want[m.UID] {
			t.Errorf("UID %d flags = %v, want %v", m.UID, m.Flags, want[m.UID])
		}
	}
	// A UID that does not exist is ignored.
	ups, err = s.StoreFlags(c, inbox.ID, store.UIDSet{{Start: 99, Stop: 99}}, store.FlagsAdd, store.FlagSeen, nil)
	if err != nil || len(ups) != 0 {
		t.Fatalf("StoreFlags on missing UID = %+v, %v", ups, err)
	}
	_, err = s.StoreFlags(c, 1<<40, nil, store.FlagsAdd, store.FlagSeen, nil)
	wantErr(t, "StoreFlags unknown mailbox", err, store.ErrNotFound)
}

func flagUIDs(ups []store.FlagUpdate) []uint32 {
	var out []uint32
	for _, u := range ups {
		out = append(out, u.UID)
	}
	return out
}

func testKeywords(t *testing.T, s store.Store) {
	c := ctx(t)
	f := setup(t, s, 1)
	inbox := f.mailbox(t, 0, "INBOX")
	f.appendN(t, inbox, 0, 2)
	one := store.UIDSet{{Start: 1, Stop: 1}}
	ups, err := s.StoreFlags(c, inbox.ID, one, store.FlagsAdd, 0, []string{"$Label1", "Work"})
	if err != nil || len(ups) != 1 || !slices.Equal(ups[0].Keywords, []string{"$Label1", "Work"}) {
		t.Fatalf("add keywords = %+v, %v", ups, err)
	}
	// Keywords are case-insensitive: adding "work" changes nothing.
	ups, err = s.StoreFlags(c, inbox.ID, one, store.FlagsAdd, 0, []string{"work"})
	if err != nil || len(ups) != 0 {
		t.Fatalf("add keyword in other case = %+v, %v; want no change", ups, err)
	}
	ups, err = s.StoreFlags(c, inbox.ID, one, store.FlagsRemove, 0, []string{"WORK"})
	if err != nil || len(ups) != 1 || !slices.Equal(ups[0].Keywords, []string{"$Label1"}) {
		t.Fatalf("remove keyword = %+v, %v", ups, err)
	}
	ups, err = s.StoreFlags(c, inbox.ID, one, store.FlagsReplace, store.FlagSeen, []string{"b", "a"})
	if err != nil || len(ups) != 1 || !slices.Equal(ups[0].Keywords, []string{"a", "b"}) || ups[0].Flags != store.FlagSeen {
		t.Fatalf("replace keywords = %+v, %v", ups, err)
	}
	ms, err := s.Fetch(c, inbox.ID, one, store.FetchOptions{})
	if err != nil || len(ms) != 1 || !slices.Equal(ms[0].Keywords, []string{"a", "b"}) {
		t.Fatalf("Fetch keywords = %+v, %v", ms, err)
	}
	for _, bad := range []string{"", "two words", `\Seen`, "paren(", "quote\""} {
		_, err = s.StoreFlags(c, inbox.ID, one, store.FlagsAdd, 0, []string{bad})
		wantErr(t, "keyword "+bad, err, store.ErrInvalid)
	}
}

func testCopy(t *testing.T, s store.Store) {
	c := ctx(t)
	f := setup(t, s, 2)
	inbox := f.mailbox(t, 0, "INBOX")
	arch := f.mailbox(t, 0, "Archive")
	f.appendN(t, inbox, 0, 5)
	f.appendN(t, arch, 100, 2) // destination already has UIDs 1, 2
	if _, err := s.StoreFlags(c, inbox.ID, store.UIDSet{{Start: 4, Stop: 4}}, store.FlagsAdd, store.FlagFlagged, []string{"$Important"}); err != nil {
		t.Fatal(err)
	}
	before := stats(t, s)
	archBefore := f.mailbox(t, 0, "Archive")

	res, err := s.Copy(c, inbox.ID, store.UIDSet{{Start: 4, Stop: 5}, {Start: 2, Stop: 2}}, arch.ID)
	if err != nil {
		t.Fatalf("Copy: %v", err)
	}
	if res.UIDValidity != arch.UIDValidity || !equalUIDs(res.SourceUIDs, []uint32{2, 4, 5}) || !equalUIDs(res.DestUIDs, []uint32{3, 4, 5}) {
		t.Fatalf("Copy = %+v, want source [2 4 5] → dest [3 4 5]", res)
	}
	st := stats(t, s)
	if st.Messages != before.Messages+3 || st.Blobs != before.Blobs {
		t.Fatalf("Stats after copy = %+v, before %+v: want 3 more rows, no new blob", st, before)
	}
	src := fetchAll(t, s, inbox.ID)
	dst := fetchAll(t, s, arch.ID)
	if len(src) != 5 || len(dst) != 5 {
		t.Fatalf("after copy: source %d, dest %d messages", len(src), len(dst))
	}
	if dst[3].BlobID != src[3].BlobID || dst[3].Flags != store.FlagFlagged || !slices.Equal(dst[3].Keywords, []string{"$Important"}) {
		t.Fatalf("copy of UID 4 = %+v, source %+v: want same blob, flags, keywords", dst[3], src[3])
	}
	if !dst[2].InternalDate.Equal(src[1].InternalDate) {
		t.Errorf("copy changed INTERNALDATE")
	}
	archAfter := f.mailbox(t, 0, "Archive")
	if archAfter.UIDNext != 6 || archAfter.HighestModSeq <= archBefore.HighestModSeq {
		t.Fatalf("dest after copy = %+v, before %+v", archAfter, archBefore)
	}
	// Copy of nothing.
	res, err = s.Copy(c, inbox.ID, store.UIDSet{{Start: 50, Stop: 60}}, arch.ID)
	if err != nil || len(res.SourceUIDs) != 0 || len(res.DestUIDs) != 0 {
		t.Fatalf("empty Copy = %+v, %v", res, err)
	}
	// Accounts are isolated.
	_, err = s.Copy(c, inbox.ID, nil, f.mailbox(t, 1, "INBOX").ID)
	wantErr(t, "Copy to another account", err, store.ErrInvalid)
	_, err = s.Copy(c, inbox.ID, nil, 1<<40)
	wantErr(t, "Copy to unknown mailbox", err, store.ErrNotFound)
}

func testMove(t *testing.T, s store.Store) {
	c := ctx(t)
	f := setup(t, s, 2)
	inbox := f.mailbox(t, 0, "INBOX")
	junk := f.mailbox(t, 0, "Junk")
	f.appendN(t, inbox, 0, 4)
	before := stats(t, s)
	inboxBefore := f.mailbox(t, 0, "INBOX")

	res, err := s.Move(c, inbox.ID, store.UIDSet{{Start: 2, Stop: 3}}, junk.ID)
	if err != nil {
		t.Fatalf("Move: %v", err)
	}
	if !equalUIDs(res.SourceUIDs, []uint32{2, 3}) || !equalUIDs(res.DestUIDs, []uint32{1, 2}) || res.UIDValidity != junk.UIDValidity {
		t.Fatalf("Move = %+v", res)
	}
	if got := uidsOf(fetchAll(t, s, inbox.ID)); !equalUIDs(got, []uint32{1, 4}) {
		t.Fatalf("source after move = %v, want [1 4]", got)
	}
	if got := uidsOf(fetchAll(t, s, junk.ID)); !equalUIDs(got, []uint32{1, 2}) {
		t.Fatalf("dest after move = %v, want [1 2]", got)
	}
	if st := stats(t, s); st.Messages != before.Messages || st.Blobs != before.Blobs {
		t.Fatalf("Stats after move = %+v, before %+v", st, before)
	}
	ch, err := s.Changes(c, inbox.ID, inboxBefore.HighestModSeq)
	if err != nil {
		t.Fatal(err)
	}
	if !equalUIDs(ch.Expunged, []uint32{2, 3}) || len(ch.Updated) != 0 {
		t.Fatalf("source Changes after move = %+v, want expunged [2 3]", ch)
	}
	_, err = s.Move(c, inbox.ID, nil, f.mailbox(t, 1, "INBOX").ID)
	wantErr(t, "Move to another account", err, store.ErrInvalid)
	if got := uidsOf(fetchAll(t, s, inbox.ID)); !equalUIDs(got, []uint32{1, 4}) {
		t.Fatalf("failed move changed the source: %v", got)
	}
}

func testExpunge(t *testing.T, s store.Store) {
	c := ctx(t)
	f := setup(t, s, 1)
	inbox := f.mailbox(t, 0, "INBOX")
	f.appendN(t, inbox, 0, 6)
	if _, err := s.StoreFlags(c, inbox.ID, store.UIDSet{{Start: 2, Stop: 2}, {Start: 4, Stop: 5}}, store.FlagsAdd, store.FlagDeleted, nil); err != nil {
		t.Fatal(err)
	}
	// UID EXPUNGE: only deleted messages inside the set.
	got, err := s.Expunge(c, inbox.ID, store.UIDSet{{Start: 4, Stop: 6}})
	if err != nil || !equalUIDs(got, []uint32{4, 5}) {
		t.Fatalf("Expunge 4:6 = %v, %v; want [4 5]", got, err)
	}
	got, err = s.Expunge(c, inbox.ID, nil)
	if err != nil || !equalUIDs(got, []uint32{2}) {
		t.Fatalf("Expunge all = %v, %v; want [2]", got, err)
	}
	got, err = s.Expunge(c, inbox.ID, nil)
	if err != nil || len(got) != 0 {
		t.Fatalf("Expunge with nothing deleted = %v, %v", got, err)
	}
	if left := uidsOf(fetchAll(t, s, inbox.ID)); !equalUIDs(left, []uint32{1, 3, 6}) {
		t.Fatalf("left after expunge = %v", left)
	}
	ch, err := s.Changes(c, inbox.ID, 0)
	if err != nil || !equalUIDs(ch.Expunged, []uint32{2, 4, 5}) {
		t.Fatalf("Changes(0).Expunged = %v, %v; want tombstones [2 4 5]", ch.Expunged, err)
	}
	_, err = s.Expunge(c, 1<<40, nil)
	wantErr(t, "Expunge unknown mailbox", err, store.ErrNotFound)
}

func testChanges(t *testing.T, s store.Store) {
	c := ctx(t)
	f := setup(t, s, 1)
	inbox := f.mailbox(t, 0, "INBOX")
	f.appendN(t, inbox, 0, 3)
	m0 := f.mailbox(t, 0, "INBOX")

	ch, err := s.Changes(c, inbox.ID, m0.HighestModSeq)
	if err != nil || len(ch.Updated) != 0 || len(ch.Expunged) != 0 || ch.HighestModSeq != m0.HighestModSeq || ch.UIDNext != 4 {
		t.Fatalf("Changes(HIGHESTMODSEQ) = %+v, %v; want nothing", ch, err)
	}
	ch, err = s.Changes(c, inbox.ID, 0)
	if err != nil || !equalUIDs(uidsOf(ch.Updated), []uint32{1, 2, 3}) {
		t.Fatalf("Changes(0) = %+v, %v", ch, err)
	}
	// Flag change on 2, expunge of 3, new message 4.
	if _, err := s.StoreFlags(c, inbox.ID, store.UIDSet{{Start: 2, Stop: 2}}, store.FlagsAdd, store.FlagSeen, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.StoreFlags(c, inbox.ID, store.UIDSet{{Start: 3, Stop: 3}}, store.FlagsAdd, store.FlagDeleted, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Expunge(c, inbox.ID, nil); err != nil {
		t.Fatal(err)
	}
	f.appendN(t, inbox, 10, 1)
	ch, err = s.Changes(c, inbox.ID, m0.HighestModSeq)
	if err != nil {
		t.Fatalf("Changes: %v", err)
	}
	if !equalUIDs(uidsOf(ch.Updated), []uint32{2, 4}) || !equalUIDs(ch.Expunged, []uint32{3}) {
		t.Fatalf("Changes = updated %v expunged %v; want [2 4] and [3]", uidsOf(ch.Updated), ch.Expunged)
	}
	if ch.Updated[0].Flags != store.FlagSeen || ch.Updated[0].Parsed != nil || ch.UIDNext != 5 {
		t.Fatalf("Changes details = %+v", ch)
	}
	m1 := f.mailbox(t, 0, "INBOX")
	if ch.HighestModSeq != m1.HighestModSeq {
		t.Fatalf("Changes.HighestModSeq = %d, mailbox says %d", ch.HighestModSeq, m1.HighestModSeq)
	}
	for _, u := range ch.Updated {
		if u.ModSeq <= m0.HighestModSeq || u.ModSeq > m1.HighestModSeq {
			t.Fatalf("updated %+v has modseq outside (%d, %d]", u, m0.HighestModSeq, m1.HighestModSeq)
		}
	}
	_, err = s.Changes(c, 1<<40, 0)
	wantErr(t, "Changes unknown mailbox", err, store.ErrNotFound)
}

// testChangesEverySince builds a mailbox history of every kind of change
// (deliveries, appends, copies and moves in, flag changes on old and new
// messages, expunges) and checks Changes after every MODSEQ against the
// mailbox as Fetch reads it.
func testChangesEverySince(t *testing.T, s store.Store) {
	c := ctx(t)
	f := setup(t, s, 2)
	inbox := f.mailbox(t, 0, "INBOX")
	arch := f.mailbox(t, 0, "Archive")
	flag := func(uid uint32, fl store.Flags) {
		t.Helper()
		if _, err := s.StoreFlags(c, inbox.ID, store.UIDSet{{Start: uid, Stop: uid}}, store.FlagsAdd, fl, nil); err != nil {
			t.Fatalf("StoreFlags %d: %v", uid, err)
		}
	}
	f.deliver(t, 1, 0, 1)
	f.deliver(t, 2, 0)
	f.appendN(t, inbox, 3, 2) // UIDs 3, 4
	CheckChanges(t, s, inbox.ID)
	flag(2, store.FlagSeen)
	f.appendN(t, arch, 10, 3)
	if _, err := s.Copy(c, arch.ID, store.UIDSet{{Start: 1, Stop: 2}}, inbox.ID); err != nil { // 5, 6
		t.Fatal(err)
	}
	flag(5, store.FlagFlagged)
	if _, err := s.Move(c, arch.ID, store.UIDSet{{Start: 3, Stop: 3}}, inbox.ID); err != nil { // 7
		t.Fatal(err)
	}
	CheckChanges(t, s, inbox.ID)
	flag(1, store.FlagDeleted)
	if _, err := s.Expunge(c, inbox.ID, nil); err != nil {
		t.Fatal(err)
	}
	f.deliver(t, 20, 0, 1) // 8
	flag(8, store.FlagAnswered)
	flag(2, store.FlagAnswered)
	f.deliver(t, 21, 0) // 9
	CheckChanges(t, s, inbox.ID)
}

// CheckChanges checks Changes(mailboxID, m) for every m from 0 to the
// mailbox's HIGHESTMODSEQ: its new and changed messages must be the
// messages Fetch reads with a MODSEQ above m, in UID order, with their
// MODSEQ and flags.
func CheckChanges(t *testing.T, s store.Store, mailboxID int64) {
	t.Helper()
	c := ctx(t)
	all, err := s.Fetch(c, mailboxID, nil, store.FetchOptions{})
	if err != nil {
		t.Fatalf("Fetch: %v", err)
	}
	ch, err := s.Changes(c, mailboxID, 0)
	if err != nil {
		t.Fatalf("Changes(0): %v", err)
	}
	for since := uint64(0); since <= ch.HighestModSeq; since++ {
		got, err := s.Changes(c, mailboxID, since)
		if err != nil {
			t.Fatalf("Changes(%d): %v", since, err)
		}
		var want []store.MessageMeta
		for _, m := range all {
			if m.ModSeq > since {
				want = append(want, m)
			}
		}
		ok := len(got.Updated) == len(want)
		for i := 0; ok && i < len(want); i++ {
			g, w := got.Updated[i], want[i]
			ok = g.UID == w.UID && g.ModSeq == w.ModSeq && g.Flags == w.Flags
		}
		if !ok {
			t.Fatalf("Changes(%d).Updated = %v; want %v", since, uidModSeqs(got.Updated), uidModSeqs(want))
		}
	}
}

func uidModSeqs(ms []store.MessageMeta) []string {
	var out []string
	for _, m := range ms {
		out = append(out, fmt.Sprintf("%d@%d", m.UID, m.ModSeq))
	}
	return out
}

func testBlobReleased(t *testing.T, s store.Store) {
	c := ctx(t)
	f := setup(t, s, 1)
	inbox := f.mailbox(t, 0, "INBOX")
	f.appendN(t, inbox, 0, 2)
	before := stats(t, s)
	if _, err := s.StoreFlags(c, inbox.ID, store.UIDSet{{Start: 1, Stop: 1}}, store.FlagsAdd, store.FlagDeleted, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Expunge(c, inbox.ID, nil); err != nil {
		t.Fatal(err)
	}
	// Blob collection may be deferred: wait a bounded time for the count.
	deadline := time.Now().Add(10 * time.Second)
	for {
		st := stats(t, s)
		if st.Blobs == before.Blobs-1 && st.BlobBytes == before.BlobBytes-int64(len(msg(0))) && st.Messages == before.Messages-1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Stats after expunging a message = %+v, before %+v: blob not released", st, before)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// The other message is intact.
	ms := fetchAll(t, s, inbox.ID)
	if raw, err := s.ReadBlob(c, ms[0].BlobID); err != nil || string(raw) != string(msg(1)) {
		t.Fatalf("remaining message unreadable: %v", err)
	}
}
