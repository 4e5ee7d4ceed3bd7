package sqlite

import (
	"errors"
	"fmt"
	"syscall"

	sqlite "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// markNoSpace makes a full disk recognisable to callers: SQLITE_FULL (the
// database could not grow, sqlite.org/rescode.html#full) is wrapped so
// that errors.Is(err, syscall.ENOSPC) holds, as it already does for a
// message file that could not be written. Protocol servers turn it into a
// temporary "insufficient storage" reply (RFC 3463 X.3.1) instead of a
// generic local error. Other errors are returned unchanged.
func markNoSpace(err error) error {
	if err == nil || errors.Is(err, syscall.ENOSPC) || !isFull(err) {
		return err
	}
	return fmt.Errorf("%w (%w)", err, syscall.ENOSPC)
}

// isFull reports SQLITE_FULL (any extended code).
func isFull(err error) bool {
	var se *sqlite.Error
	if errors.As(err, &se) {
		return se.Code()&0xff == sqlite3.SQLITE_FULL
	}
	return false
}
