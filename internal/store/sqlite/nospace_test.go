package sqlite

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestDatabaseFullIsENOSPC caps the database at its current size (PRAGMA
// max_page_count on the single write connection), so that SQLite answers
// SQLITE_FULL as it does on a full disk. Append must then fail with an
// error that is errors.Is(syscall.ENOSPC), leave nothing behind, and work
// again once the cap is lifted.
func TestDatabaseFullIsENOSPC(t *testing.T) {
	s := openTest(t)
	ctx := context.Background()
	a := mustAccount(t, s, "full@example.org")
	inbox := inboxOf(t, s, a)
	var pages int64
	if err := s.wdb.QueryRow("PRAGMA page_count").Scan(&pages); err != nil {
		t.Fatal(err)
	}
	if _, err := s.wdb.Exec(fmt.Sprintf("PRAGMA max_page_count = %d", pages)); err != nil {
		t.Fatal(err)
	}
	var err error
	stored := 0
	for i := range 500 {
		big := []byte(fmt.Sprintf("Subject: full %d\r\n\r\n%s\r\n", i, strings.Repeat("x", 3000)))
		if _, err = s.Append(ctx, inbox.ID, big, 0, nil, time.Time{}); err != nil {
			break
		}
		stored++
	}
	if err == nil {
		t.Fatalf("500 appends fitted in a database capped at %d pages", pages)
	}
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("append to a full database: %v; want an error that is syscall.ENOSPC", err)
	}
	t.Logf("after %d appends: %v", stored, err)
	st, err := s.MailboxStatus(ctx, a.ID, "INBOX")
	if err != nil {
		t.Fatal(err)
	}
	if st.Messages != stored {
		t.Errorf("INBOX has %d messages after %d successful appends and one refused", st.Messages, stored)
	}
	if _, err := s.wdb.Exec("PRAGMA max_page_count = 1073741823"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Append(ctx, inbox.ID, testMsg(1), 0, nil, time.Time{}); err != nil {
		t.Fatalf("append once the database can grow again: %v", err)
	}
}

func TestMarkNoSpaceLeavesOtherErrors(t *testing.T) {
	other := errors.New("other")
	if got := markNoSpace(other); got != other {
		t.Errorf("markNoSpace changed an unrelated error: %v", got)
	}
	if markNoSpace(nil) != nil {
		t.Error("markNoSpace(nil) != nil")
	}
}
