package mapfile

import (
	"os"
	"path/filepath"
	"testing"
)

func TestMap(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(p, []byte("hello, world"), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b, err := Map(f, 5, false)
	if err != nil || string(b) != "hello" {
		t.Fatalf("read-only map: %q %v", b, err)
	}
	Unmap(b)
	rw, err := os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer rw.Close()
	w, err := Map(rw, 12, true)
	if err != nil {
		t.Fatal(err)
	}
	copy(w, "HELLO")
	if string(w) != "HELLO, world" {
		t.Fatalf("writable map: %q", w)
	}
	Unmap(w)
	if got, _ := os.ReadFile(p); string(got) != "hello, world" {
		t.Fatalf("a private mapping's writes reached the file: %q", got)
	}
	if b, err := Map(f, 0, false); b != nil || err != nil {
		t.Fatalf("empty map: %q %v", b, err)
	}
}
