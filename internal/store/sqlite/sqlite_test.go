package sqlite

import (
	"io"
	"log/slog"
	"testing"

	"pimail/internal/store"
	"pimail/internal/store/storetest"
)

// quietLogger keeps test output readable.
func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func testOptions() Options {
	return Options{Logger: quietLogger(), CollectInterval: -1}
}

// fileOptions keeps every message in a file of its own, for the tests of
// message files (collection, orphans, snapshots of files).
func fileOptions() Options {
	o := testOptions()
	o.InlineMax = -1
	return o
}

func openTest(t testing.TB) *Store {
	t.Helper()
	return openWith(t, testOptions())
}

func openFileTest(t *testing.T) *Store {
	t.Helper()
	return openWith(t, fileOptions())
}

func openWith(t testing.TB, o Options) *Store {
	t.Helper()
	s, err := Open(t.TempDir(), o)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestSuite(t *testing.T) {
	storetest.Run(t,
		func(t *testing.T) store.Store {
			// The background collector runs often, so the suite exercises it.
			opts := testOptions()
			opts.CollectInterval = 100 * 1e6 // 100ms
			s, err := Open(t.TempDir(), opts)
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			return s
		},
		func(t *testing.T, closed store.Store) store.Store {
			s, err := Open(closed.(*Store).Dir(), testOptions())
			if err != nil {
				t.Fatalf("reopen: %v", err)
			}
			return s
		})
}
