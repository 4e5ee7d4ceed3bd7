package mailimport

import (
	"context"
	"io"
	"log/slog"
	"testing"

	"pimail/internal/store"
	"pimail/internal/store/sqlite"
)

var discard = slog.New(slog.NewTextHandler(io.Discard, nil))

// newStore opens a fresh store with one account, alice@example.org.
func newStore(t testing.TB) *sqlite.Store {
	t.Helper()
	st, err := sqlite.Open(t.TempDir(), sqlite.Options{Logger: discard})
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() { st.Close() })
	ctx := context.Background()
	if _, err := st.AddDomain(ctx, "example.org"); err != nil {
		t.Fatal(err)
	}
	if _, err := st.AddAccount(ctx, "alice@example.org", "x"); err != nil {
		t.Fatal(err)
	}
	return st
}

func newImporter(t testing.TB, st store.Store) *Importer {
	t.Helper()
	im, err := New(context.Background(), st, "Alice@example.org", discard)
	if err != nil {
		t.Fatal(err)
	}
	return im
}

// stored is one message as read back from the store.
type stored struct {
	raw   string
	meta  store.MessageMeta
	flags store.Flags
	kws   []string
}

// readMailbox returns the messages of a mailbox in UID order.
func readMailbox(t testing.TB, st store.Store, acct int64, name string) []stored {
	t.Helper()
	ctx := context.Background()
	mb, err := st.Mailbox(ctx, acct, name)
	if err != nil {
		t.Fatalf("mailbox %q: %v", name, err)
	}
	metas, err := st.Fetch(ctx, mb.ID, nil, store.FetchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := make([]stored, 0, len(metas))
	for _, m := range metas {
		raw, err := st.ReadBlob(ctx, m.BlobID)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, stored{raw: string(raw), meta: m, flags: m.Flags, kws: m.Keywords})
	}
	return out
}
