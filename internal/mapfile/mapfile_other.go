//go:build !unix

package mapfile

import (
	"fmt"
	"io"
	"os"
)

// Map reads the first n bytes of f: without mmap, the file is read into
// memory.
func Map(f *os.File, n int64, _ bool) ([]byte, error) {
	b := make([]byte, n)
	if _, err := io.ReadFull(io.NewSectionReader(f, 0, n), b); err != nil {
		return nil, fmt.Errorf("read %s: %w", f.Name(), err)
	}
	return b, nil
}

// Unmap undoes Map.
func Unmap([]byte) {}
