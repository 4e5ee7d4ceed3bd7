// Package testcorpus makes and finds the small mail corpus every test runs
// on: testdata/corpus at the module root. The messages are generated here,
// deterministically, in the shapes real mail has (plain and HTML,
// multipart with attachments, quoted-printable and base64, 8-bit text
// declared and undeclared, charsets from ISO-8859-1 to GB2312 and
// ISO-2022-JP, mailing-list threads, spam and ham, and malformed edge
// cases), so that the corpus has no licence question and a fresh clone
// needs nothing beside the repository.
//
// The layout follows the large corpus used by the benchmarks
// (../shared/corpus): ham/, spam/ and edge/ hold one message a file,
// mailbox/mailbox-1k.mbox a mailing list of 1,000 messages (mboxrd) with
// its index, train.txt and test.txt a fixed split of ham and spam, and
// manifest.tsv every file. After a change to the generator, rewrite the
// files with
//
//	go test ./internal/testcorpus -update
//
// and commit them; the package's test fails while they differ.
package testcorpus

import (
	"bytes"
	"crypto/sha1"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// File is one file of the corpus.
type File struct {
	Path  string // relative to the corpus directory, slash-separated
	Label string // ham, spam, edge or mailbox; "" for the lists
	Data  []byte
}

// Dir returns the corpus directory: testdata/corpus in the module root,
// found from the working directory upwards (go test runs in the package's
// directory).
func Dir() (string, error) {
	root, err := moduleRoot()
	if err != nil {
		return "", err
	}
	c := filepath.Join(root, "testdata", "corpus")
	if _, err := os.Stat(filepath.Join(c, "manifest.tsv")); err != nil {
		return "", fmt.Errorf("test corpus: %w (go test ./internal/testcorpus -update writes it)", err)
	}
	return c, nil
}

// moduleRoot is the directory of go.mod, above the working directory.
func moduleRoot() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := wd; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d, nil
		}
		if d == filepath.Dir(d) {
			return "", errors.New("testcorpus: no go.mod above " + wd)
		}
	}
}

// Counts of generated messages.
const (
	HamCount     = 200
	SpamCount    = 200
	MailboxCount = 1000
)

// Generate returns every file of the corpus, sorted by path.
func Generate() []File {
	var files []File
	for i := range HamCount {
		files = append(files, File{fmt.Sprintf("ham/ham-%03d.eml", i+1), "ham", ham(i)})
	}
	for i := range SpamCount {
		files = append(files, File{fmt.Sprintf("spam/spam-%03d.eml", i+1), "spam", spam(i)})
	}
	for i, e := range edgeCases() {
		files = append(files, File{fmt.Sprintf("edge/edge-%03d-%s.eml", i+1, e.name), "edge", e.raw})
	}
	mbox, index := mailbox(MailboxCount)
	files = append(files,
		File{"mailbox/mailbox-1k.mbox", "mailbox", mbox},
		File{"mailbox/mailbox-1k.index.tsv", "", index})

	// The split: by a hash of the file name, 70 % train, 30 % test.
	var train, test bytes.Buffer
	for _, f := range files {
		if f.Label != "ham" && f.Label != "spam" {
			continue
		}
		h := sha1.Sum([]byte(filepath.Base(f.Path)))
		line := f.Path + "\t" + f.Label + "\n"
		if int(h[0])*100/256 < 70 {
			train.WriteString(line)
		} else {
			test.WriteString(line)
		}
	}
	files = append(files, File{"train.txt", "", train.Bytes()}, File{"test.txt", "", test.Bytes()})
	sort.Slice(files, func(i, j int) bool { return files[i].Path < files[j].Path })

	var man strings.Builder
	man.WriteString("path\tlabel\tbytes\n")
	for _, f := range files {
		fmt.Fprintf(&man, "%s\t%s\t%d\n", f.Path, f.Label, len(f.Data))
	}
	files = append(files, File{"manifest.tsv", "", []byte(man.String())})
	sort.Slice(files, func(i, j int) bool { return files[i].Path < files[j].Path })
	return files
}

// Write writes files under dir, removing generated files that are no
// longer generated (README.md and other hand-written files stay).
func Write(dir string, files []File) error {
	keep := map[string]bool{}
	for _, f := range files {
		p := filepath.Join(dir, filepath.FromSlash(f.Path))
		keep[p] = true
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, f.Data, 0o644); err != nil {
			return err
		}
	}
	for _, sub := range []string{"ham", "spam", "edge", "mailbox"} {
		old, _ := filepath.Glob(filepath.Join(dir, sub, "*"))
		for _, p := range old {
			if !keep[p] {
				if err := os.Remove(p); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// LargeDir returns the large corpus of real mail that only benchmarks use
// (docs/benchmarks.md says which): $PIMAIL_CORPUS, else shared/corpus
// beside the module's directory. Tests never need it; a benchmark that
// does skips with this error's text when it is absent.
func LargeDir() (string, error) {
	dir := os.Getenv("PIMAIL_CORPUS")
	if dir == "" {
		root, err := moduleRoot()
		if err != nil {
			return "", err
		}
		dir = filepath.Join(filepath.Dir(root), "shared", "corpus")
	}
	if _, err := os.Stat(filepath.Join(dir, "manifest.tsv")); err != nil {
		return "", fmt.Errorf("large corpus not found (set PIMAIL_CORPUS to benchmark on real mail): %w", err)
	}
	return dir, nil
}
