package message

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"pimail/internal/testcorpus"
)

// corpusFiles lists the files of the test corpus (testdata/corpus)
// matching pattern; none is an error.
func corpusFiles(t testing.TB, pattern string) []string {
	t.Helper()
	dir, err := testcorpus.Dir()
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob(filepath.Join(dir, pattern))
	if err != nil || len(files) == 0 {
		t.Fatalf("test corpus %s: %d files, %v", pattern, len(files), err)
	}
	return files
}

// checkInvariants verifies the structural promises of Parse: offsets inside
// raw and ordered, children inside their parents, sizes matching offsets,
// message/rfc822 parts complete and multiparts non-empty.
func checkInvariants(raw []byte, p *Parsed) error {
	if p == nil || p.Body == nil {
		return fmt.Errorf("nil result")
	}
	if p.Body.HeaderStart != 0 || p.Body.End != int64(len(raw)) {
		return fmt.Errorf("top part spans [%d,%d), want [0,%d)", p.Body.HeaderStart, p.Body.End, len(raw))
	}
	count := 0
	var check func(pt *Part, lo, hi int64, depth int) error
	check = func(pt *Part, lo, hi int64, depth int) error {
		count++
		if depth > MaxDepth+1 {
			return fmt.Errorf("depth %d exceeds limit", depth)
		}
		if !(lo <= pt.HeaderStart && pt.HeaderStart <= pt.BodyStart && pt.BodyStart <= pt.End && pt.End <= hi) {
			return fmt.Errorf("part %s/%s offsets hs=%d bs=%d end=%d outside [%d,%d]", pt.Type, pt.Subtype, pt.HeaderStart, pt.BodyStart, pt.End, lo, hi)
		}
		if pt.Size != pt.End-pt.BodyStart {
			return fmt.Errorf("size %d != end-bodystart %d", pt.Size, pt.End-pt.BodyStart)
		}
		if pt.Type == "" || pt.Subtype == "" {
			return fmt.Errorf("empty type %q/%q", pt.Type, pt.Subtype)
		}
		if pt.Type == "multipart" && len(pt.Parts) == 0 {
			return fmt.Errorf("multipart/%s without children", pt.Subtype)
		}
		if pt.Type != "multipart" && len(pt.Parts) != 0 {
			return fmt.Errorf("%s/%s with children", pt.Type, pt.Subtype)
		}
		if isMessageType(pt.Type, pt.Subtype) && (pt.Message == nil || pt.Envelope == nil) {
			return fmt.Errorf("message/%s without message or envelope", pt.Subtype)
		}
		prev := pt.BodyStart
		for _, c := range pt.Parts {
			if c.HeaderStart < prev {
				return fmt.Errorf("child at %d overlaps previous ending %d", c.HeaderStart, prev)
			}
			if err := check(c, pt.BodyStart, pt.End, depth+1); err != nil {
				return err
			}
			prev = c.End
		}
		if pt.Message != nil {
			if pt.Message.HeaderStart != pt.BodyStart || pt.Message.End != pt.End {
				return fmt.Errorf("enclosed message [%d,%d) != body [%d,%d)", pt.Message.HeaderStart, pt.Message.End, pt.BodyStart, pt.End)
			}
			if err := check(pt.Message, pt.BodyStart, pt.End, depth+1); err != nil {
				return err
			}
		}
		return nil
	}
	if err := check(p.Body, 0, int64(len(raw)), 0); err != nil {
		return err
	}
	if count > MaxParts+MaxDepth+1 {
		return fmt.Errorf("%d parts exceed limit", count)
	}
	return nil
}

func TestCorpusEdge(t *testing.T) {
	recoverPanics = false
	defer func() { recoverPanics = true }()
	for _, f := range corpusFiles(t, "edge/*.eml") {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		p := Parse(raw)
		if err := checkInvariants(raw, p); err != nil {
			t.Errorf("%s: %v", filepath.Base(f), err)
		}
		p.Body.Walk(func(pt *Part) bool {
			if pt.Type == "text" {
				if _, err := DecodeText(raw, pt); err != nil {
					t.Errorf("%s: DecodeText: %v", filepath.Base(f), err)
				}
			}
			return true
		})
	}
}

func TestCorpusHamSpam(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	recoverPanics = false
	defer func() { recoverPanics = true }()
	files := append(corpusFiles(t, "ham/*.eml"), corpusFiles(t, "spam/*.eml")...)
	dated := 0
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		p := Parse(raw)
		if err := checkInvariants(raw, p); err != nil {
			t.Errorf("%s: %v", filepath.Base(f), err)
		}
		if !p.Date.IsZero() {
			dated++
		}
	}
	// Nearly every corpus message has a parseable Date.
	if dated < len(files)*98/100 {
		t.Errorf("only %d of %d dates parsed", dated, len(files))
	}
}
