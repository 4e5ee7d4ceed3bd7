//go:build !unix

package smtpserver

import (
	"fmt"
	"io"
	"os"
)

// mapFile reads the first n bytes of f: without mmap, a spooled message is
// read into memory for its delivery (LargeDeliveries still bounds how many
// at once).
func mapFile(f *os.File, n int64) ([]byte, error) {
	b := make([]byte, n)
	if _, err := io.ReadFull(io.NewSectionReader(f, 0, n), b); err != nil {
		return nil, fmt.Errorf("read spooled message: %w", err)
	}
	return b, nil
}

func unmapFile([]byte) {}
