package sqlite

import (
	"testing"

	"pimail/internal/store"
	"pimail/internal/store/storetest"
)

func TestSieveSuite(t *testing.T) {
	storetest.RunSieve(t, func(t *testing.T) store.Store {
		s, err := Open(t.TempDir(), testOptions())
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		return s
	})
}
