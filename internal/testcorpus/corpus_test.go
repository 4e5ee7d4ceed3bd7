package testcorpus

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/corpus from the generator")

// TestUpToDate holds the committed corpus to the generator: after a change
// here, `go test ./internal/testcorpus -update` rewrites it.
func TestUpToDate(t *testing.T) {
	files := Generate()
	if *update {
		dir := filepath.Join("..", "..", "testdata", "corpus")
		if err := Write(dir, files); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %d files to %s", len(files), dir)
	}
	dir, err := Dir()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{}
	for _, f := range files {
		want[filepath.FromSlash(f.Path)] = true
		got, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(f.Path)))
		if err != nil {
			t.Errorf("%v (run go test ./internal/testcorpus -update)", err)
			continue
		}
		if !bytes.Equal(got, f.Data) {
			t.Errorf("%s differs from what the generator makes (run go test ./internal/testcorpus -update)", f.Path)
		}
	}
	for _, sub := range []string{"ham", "spam", "edge", "mailbox"} {
		old, _ := filepath.Glob(filepath.Join(dir, sub, "*"))
		for _, p := range old {
			if rel, _ := filepath.Rel(dir, p); !want[rel] {
				t.Errorf("%s is not generated any more (run go test ./internal/testcorpus -update)", rel)
			}
		}
	}
}

// TestDeterministic: two runs give the same bytes.
func TestDeterministic(t *testing.T) {
	a, b := Generate(), Generate()
	if len(a) != len(b) {
		t.Fatalf("%d files, then %d", len(a), len(b))
	}
	for i := range a {
		if a[i].Path != b[i].Path || !bytes.Equal(a[i].Data, b[i].Data) {
			t.Fatalf("%s differs between two runs", a[i].Path)
		}
	}
}
