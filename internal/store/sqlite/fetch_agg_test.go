package sqlite

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"pimail/internal/store"
)

// The chunk queries (pimail_fetch_rows) answer every shape of UID set as
// the general Fetch does: the rows in the set, in UID order, with their
// flags, keywords, sizes, envelopes and headers.
func TestFetchRowsSets(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	if _, err := s.AddDomain(ctx, "example.org"); err != nil {
		t.Fatal(err)
	}
	acct, err := s.AddAccount(ctx, "rows@example.org", "pw")
	if err != nil {
		t.Fatal(err)
	}
	mb := mustInbox(t, s, acct.ID)
	for i := range 40 {
		raw := fmt.Sprintf("From: \"Sender %d\" <s%d@example.net>\r\nTo: a@example.org, b@example.org\r\n"+
			"Subject: message \"%d\" \\ é\r\nMessage-ID: <m%d@x>\r\nDate: Mon, 2 Jan 2023 10:00:00 +0100\r\n\r\nbody %d\r\n", i, i, i, i, i)
		if _, err := s.Deliver(ctx, store.Delivery{Raw: []byte(raw), InternalDate: time.Unix(1700000000+int64(i), 0),
			Recipients: []store.Recipient{{AccountID: acct.ID}}}); err != nil {
			t.Fatal(err)
		}
	}
	// Flags and keywords on some, and holes in the UIDs.
	if _, err := s.StoreFlags(ctx, mb, store.UIDSet{{Start: 3, Stop: 9}}, store.FlagsAdd, store.FlagSeen|store.FlagFlagged, []string{"$Junk", "Work"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.StoreFlags(ctx, mb, store.UIDSet{{Start: 11, Stop: 20}}, store.FlagsAdd, store.FlagDeleted, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Expunge(ctx, mb, store.UIDSet{{Start: 11, Stop: 14}}); err != nil {
		t.Fatal(err)
	}
	sets := []store.UIDSet{
		nil,
		{{Start: 1, Stop: 0}},
		{{Start: 5, Stop: 5}},
		{{Start: 30, Stop: 2}}, // reversed, as 30:2 may be sent
		{{Start: 10, Stop: 16}},
		{{Start: 1, Stop: 3}, {Start: 7, Stop: 8}, {Start: 12, Stop: 25}, {Start: 39, Stop: 0}},
		{{Start: 100, Stop: 200}}, // nothing there
	}
	for _, set := range sets {
		want, err := s.Fetch(ctx, mb, set, store.FetchOptions{Parsed: true})
		if err != nil {
			t.Fatal(err)
		}
		envs, err := s.FetchEnvelopes(ctx, mb, set)
		if err != nil {
			t.Fatalf("FetchEnvelopes %v: %v", set, err)
		}
		metas, headers, err := s.FetchHeaders(ctx, mb, set)
		if err != nil {
			t.Fatalf("FetchHeaders %v: %v", set, err)
		}
		if len(envs) != len(want) || len(metas) != len(want) || len(headers) != len(want) {
			t.Fatalf("set %v: %d envelopes, %d headers, want %d", set, len(envs), len(metas), len(want))
		}
		// The buffered variants answer the same (without the sizes when
		// not asked for), until released.
		benvs, release, err := s.FetchEnvelopesBuffered(ctx, mb, set)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(benvs, envs) {
			t.Errorf("set %v: buffered envelopes differ", set)
		}
		release()
		for _, withSize := range []bool{true, false} {
			bmetas, bheaders, release, err := s.FetchHeadersBuffered(ctx, mb, set, withSize)
			if err != nil {
				t.Fatal(err)
			}
			for i := range bmetas {
				if !withSize {
					if bmetas[i].Size != 0 {
						t.Errorf("set %v: size %d without withSize", set, bmetas[i].Size)
					}
					bmetas[i].Size = metas[i].Size
				}
			}
			if !reflect.DeepEqual(bmetas, metas) || !reflect.DeepEqual(bheaders, headers) {
				t.Errorf("set %v withSize %v: buffered headers differ", set, withSize)
			}
			release()
		}
		for i, w := range want {
			for _, got := range []store.MessageMeta{envs[i], metas[i]} {
				if got.UID != w.UID || got.ModSeq != w.ModSeq || got.Flags != w.Flags || got.Size != w.Size ||
					got.BlobID != w.BlobID || got.MailboxID != mb || !got.InternalDate.Equal(w.InternalDate) ||
					!reflect.DeepEqual(got.Keywords, w.Keywords) {
					t.Errorf("set %v uid %d: %+v, want %+v", set, w.UID, got, w)
				}
			}
			if !reflect.DeepEqual(envs[i].Parsed.Envelope, w.Parsed.Envelope) {
				t.Errorf("set %v uid %d: envelope %+v, want %+v", set, w.UID, envs[i].Parsed.Envelope, w.Parsed.Envelope)
			}
			raw, err := s.ReadBlob(ctx, w.BlobID)
			if err != nil {
				t.Fatal(err)
			}
			if string(headers[i]) != string(raw[:w.Parsed.Body.BodyStart]) {
				t.Errorf("set %v uid %d: header %q", set, w.UID, headers[i])
			}
		}
	}
	// UIDs (SELECT) lists what Fetch lists.
	all, err := s.Fetch(ctx, mb, nil, store.FetchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if uids, err := s.UIDs(ctx, mb); err != nil || !reflect.DeepEqual(uids, all) || len(uids) != 36 {
		t.Errorf("UIDs: %d messages, %v; want the %d of Fetch", len(uids), err, len(all))
	}
	if _, err := s.UIDs(ctx, 999999); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("UIDs of a missing mailbox: %v, want ErrNotFound", err)
	}
	if _, err := s.FetchEnvelopes(ctx, 999999, nil); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("FetchEnvelopes of a missing mailbox: %v, want ErrNotFound", err)
	}
	if _, _, err := s.FetchHeaders(ctx, 999999, store.UIDSet{{Start: 1, Stop: 5}}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("FetchHeaders of a missing mailbox: %v, want ErrNotFound", err)
	}
}

// A cancelled request ends its query with an error and leaves nothing
// behind for the next one (the statements are prepared with the store's
// context).
func TestFetchRowsCancelled(t *testing.T) {
	s := openTest(t)
	ctx := context.Background()
	if _, err := s.AddDomain(ctx, "example.org"); err != nil {
		t.Fatal(err)
	}
	acct, err := s.AddAccount(ctx, "c@example.org", "pw")
	if err != nil {
		t.Fatal(err)
	}
	mb := mustInbox(t, s, acct.ID)
	if _, err := s.Deliver(ctx, store.Delivery{Raw: benchMsg(1), Recipients: []store.Recipient{{AccountID: acct.ID}}}); err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := s.FetchEnvelopes(cctx, mb, store.UIDSet{{Start: 1, Stop: 0}}); err == nil {
		t.Error("FetchEnvelopes with a cancelled context succeeded")
	}
	envs, err := s.FetchEnvelopes(ctx, mb, store.UIDSet{{Start: 1, Stop: 0}})
	if err != nil || len(envs) != 1 || envs[0].Parsed.Envelope.Subject != "bench 1" {
		t.Fatalf("FetchEnvelopes after a cancelled one: %v, %v", envs, err)
	}
}

// Rows that arrive out of UID order (another query plan) are sorted with
// their data and their noFetch marks.
func TestFetchSinkSort(t *testing.T) {
	k := &fetchSink{
		metas:   []store.MessageMeta{{UID: 7}, {UID: 2}, {UID: 9}, {UID: 4}},
		data:    [][]byte{[]byte("7"), []byte("2"), nil, []byte("4")},
		noFetch: []int{2, 3},
	}
	k.sortByUID()
	var uids []uint32
	for i, m := range k.metas {
		uids = append(uids, m.UID)
		if d := k.data[i]; d != nil && string(d) != fmt.Sprint(m.UID) {
			t.Errorf("uid %d has data %q", m.UID, d)
		}
	}
	if !reflect.DeepEqual(uids, []uint32{2, 4, 7, 9}) || k.data[3] != nil {
		t.Errorf("sorted to %v, data %q", uids, k.data)
	}
	if !reflect.DeepEqual(k.noFetch, []int{1, 3}) {
		t.Errorf("noFetch %v, want [1 3] (uids 4 and 9)", k.noFetch)
	}
}

// More fetches at once than there are sink slots (and far more than
// pooled connections) all finish with the right rows: the ones beyond
// the slots wait for a free one.
func TestFetchRowsMoreThanSlots(t *testing.T) {
	opts := testOptions()
	opts.ReadConns = 2
	s, err := Open(t.TempDir(), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	if _, err := s.AddDomain(ctx, "example.org"); err != nil {
		t.Fatal(err)
	}
	acct, err := s.AddAccount(ctx, "many@example.org", "pw")
	if err != nil {
		t.Fatal(err)
	}
	mb := mustInbox(t, s, acct.ID)
	for i := range 20 {
		if _, err := s.Deliver(ctx, store.Delivery{Raw: benchMsg(int64(i)), Recipients: []store.Recipient{{AccountID: acct.ID}}}); err != nil {
			t.Fatal(err)
		}
	}
	n := len(fetchSinks) + 60
	errs := make(chan error, n)
	for i := range n {
		go func() {
			metas, headers, release, err := s.FetchHeadersBuffered(ctx, mb, store.UIDSet{{Start: 1, Stop: 0}}, i%2 == 0)
			switch {
			case err != nil:
			case len(metas) != 20 || len(headers) != 20 || !strings.HasPrefix(string(headers[19]), "From: a@example.net"):
				err = fmt.Errorf("%d messages, last header %.20q", len(metas), headers[len(headers)-1])
			}
			release()
			errs <- err
		}()
	}
	for range n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if got := len(fetchFreeSlots); got != len(fetchSinks) {
		t.Errorf("%d free slots after the fetches, want %d", got, len(fetchSinks))
	}
}
