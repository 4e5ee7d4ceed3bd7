package spam

import (
	"context"
	"fmt"
	"testing"

	"pimail/internal/store"
	"pimail/internal/store/sqlite"
)

// testStore is a store with n accounts; ids[i] is the i-th account's ID.
func testStore(t testing.TB, n int) (*sqlite.Store, []int64) {
	t.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(t.TempDir(), sqlite.Options{Logger: quiet(), CollectInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if _, err := st.AddDomain(ctx, "example.com"); err != nil {
		t.Fatal(err)
	}
	var ids []int64
	for i := range n {
		a, err := st.AddAccount(ctx, fmt.Sprintf("u%d@example.com", i), "h")
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, a.ID)
	}
	return st, ids
}

// deliverBlob stores raw for the account and returns its blob ID.
func deliverBlob(t *testing.T, st *sqlite.Store, account int64, raw []byte) int64 {
	t.Helper()
	ctx := context.Background()
	if _, err := st.Deliver(ctx, store.Delivery{Raw: raw, Recipients: []store.Recipient{{AccountID: account}}}); err != nil {
		t.Fatal(err)
	}
	mb, err := st.Mailbox(ctx, account, "INBOX")
	if err != nil {
		t.Fatal(err)
	}
	ms, err := st.UIDs(ctx, mb.ID)
	if err != nil {
		t.Fatal(err)
	}
	return ms[len(ms)-1].BlobID
}
