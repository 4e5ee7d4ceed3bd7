//go:build unix

package smtpserver

import (
	"fmt"
	"os"
	"syscall"
)

// mapFile maps the first n bytes of f into memory, private and writable:
// the pipeline writes its fields into the room in front of the message and
// moves the header in place, and those changes stay in the process (copy
// on write) instead of going back to the file. The pages are the file's:
// they cost page cache, not heap, and are gone with unmap.
func mapFile(f *os.File, n int64) ([]byte, error) {
	if n == 0 {
		return nil, nil
	}
	b, err := syscall.Mmap(int(f.Fd()), 0, int(n), syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE)
	if err != nil {
		return nil, fmt.Errorf("map spooled message: %w", err)
	}
	return b, nil
}

// unmapFile undoes mapFile.
func unmapFile(b []byte) {
	if b != nil {
		_ = syscall.Munmap(b)
	}
}
