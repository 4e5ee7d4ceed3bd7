//go:build unix

package mapfile

import (
	"fmt"
	"os"
	"syscall"
)

// Map maps the first n bytes of f into memory. Writable mappings are
// private: writes stay in the process (copy on write) and never reach
// the file.
func Map(f *os.File, n int64, writable bool) ([]byte, error) {
	if n == 0 {
		return nil, nil
	}
	prot, flags := syscall.PROT_READ, syscall.MAP_SHARED
	if writable {
		prot, flags = syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE
	}
	b, err := syscall.Mmap(int(f.Fd()), 0, int(n), prot, flags)
	if err != nil {
		return nil, fmt.Errorf("map %s: %w", f.Name(), err)
	}
	return b, nil
}

// Unmap undoes Map; b must not be used after.
func Unmap(b []byte) {
	if b != nil {
		_ = syscall.Munmap(b)
	}
}
