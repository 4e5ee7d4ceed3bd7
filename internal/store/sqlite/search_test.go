package sqlite

import (
	"context"
	"testing"
	"time"

	"pimail/internal/store"
	"pimail/internal/store/storetest"
)

func TestSearchSuite(t *testing.T) {
	storetest.RunSearch(t,
		func(t *testing.T) store.Store {
			s, err := Open(t.TempDir(), testOptions())
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			return s
		},
		func(t *testing.T, s store.Store) {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			if err := s.(*Store).WaitIndexed(ctx); err != nil {
				t.Fatalf("WaitIndexed: %v", err)
			}
		})
}
