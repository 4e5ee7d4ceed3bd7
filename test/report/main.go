// Command report reads the JSON event stream of `go test -json` and
// prints what a person needs from it: one line per package, the whole
// output of every failed test, and every skipped test with the reason it
// gave. With -summary FILE... it reads saved streams instead and prints
// the counts of all of them together, the skips with their reasons, and
// the closing line "tests: N passed, N failed, N skipped". test/all.sh
// uses both.
//
//	go test -json ./... | tee unit.json | go run ./test/report
//	go run ./test/report -summary unit.json blackbox.json
//
// A skip without a reason is counted as unexplained; -summary fails
// (exit 1) on any failure or unexplained skip.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
)

// event is one line of `go test -json` (cmd/test2json).
type event struct {
	Action  string
	Package string
	Test    string
	Elapsed float64
	Output  string
	// FailedBuild names the package whose build failed (Go 1.24's
	// test2json); the build's messages come as "build-output" events.
	FailedBuild string
}

// results gathers the outcome of every test of one or more streams.
type results struct {
	out     map[string]*strings.Builder // output so far, by package + test
	passed  int
	failed  []string // "pkg Test"
	skipped []skip
	broken  []string // packages that failed outside any test (build errors, panics in TestMain)
	live    io.Writer
}

type skip struct{ name, reason string }

func newResults(live io.Writer) *results {
	return &results{out: map[string]*strings.Builder{}, live: live}
}

func key(e event) string { return e.Package + " " + e.Test }

// add takes one event.
func (r *results) add(e event) {
	k := key(e)
	switch e.Action {
	case "build-output":
		if r.live != nil {
			fmt.Fprint(r.live, e.Output)
		}
	case "output":
		b := r.out[k]
		if b == nil {
			b = &strings.Builder{}
			r.out[k] = b
		}
		if b.Len() < 64<<10 {
			b.WriteString(e.Output)
		}
	case "pass":
		if e.Test != "" {
			r.passed++
		} else if r.live != nil {
			fmt.Fprintf(r.live, "ok    %s %.1fs\n", e.Package, e.Elapsed)
		}
		delete(r.out, k)
	case "skip":
		if e.Test == "" {
			if r.live != nil {
				fmt.Fprintf(r.live, "ok    %s (no tests)\n", e.Package)
			}
			break
		}
		s := skip{e.Package + " " + e.Test, skipReason(r.text(k))}
		r.skipped = append(r.skipped, s)
		if r.live != nil {
			fmt.Fprintf(r.live, "SKIP  %s: %s\n", s.name, orUnexplained(s.reason))
		}
		delete(r.out, k)
	case "fail":
		if e.Test != "" {
			r.failed = append(r.failed, e.Package+" "+e.Test)
			if r.live != nil {
				fmt.Fprintf(r.live, "--- FAIL %s %s (%.1fs)\n%s\n", e.Package, e.Test, e.Elapsed, r.text(k))
			}
		} else {
			if r.live != nil {
				fmt.Fprintf(r.live, "FAIL  %s %.1fs\n", e.Package, e.Elapsed)
			}
			if out := r.text(k); e.FailedBuild != "" || packageTrouble(out) {
				// Output outside any test: a build error, a panic, a
				// timeout, a TestMain that gave up.
				r.broken = append(r.broken, e.Package)
				if r.live != nil {
					fmt.Fprintln(r.live, out)
				}
			}
		}
		delete(r.out, k)
	}
}

// packageTrouble reports whether a failed package's own output (outside
// its tests) says more than go test's closing lines: then the failure is
// not any test's (a build error, a panic, a timeout).
func packageTrouble(out string) bool {
	for _, l := range strings.Split(out, "\n") {
		if l != "" && l != "FAIL" && l != "PASS" && !strings.HasPrefix(l, "FAIL\t") && !strings.HasPrefix(l, "ok  \t") {
			return true
		}
	}
	return false
}

func (r *results) text(k string) string {
	if b := r.out[k]; b != nil {
		return b.String()
	}
	return ""
}

// skipReason finds the text of t.Skip in a skipped test's output: the
// lines between "=== RUN" and "--- SKIP", without the file:line prefix.
func skipReason(out string) string {
	var lines []string
	for _, l := range strings.Split(out, "\n") {
		t := strings.TrimSpace(l)
		if t == "" || strings.HasPrefix(t, "=== ") || strings.HasPrefix(t, "--- SKIP") {
			continue
		}
		if _, rest, ok := strings.Cut(t, ".go:"); ok {
			if _, msg, ok := strings.Cut(rest, ": "); ok {
				t = msg
			}
		}
		lines = append(lines, t)
	}
	if len(lines) == 0 {
		return ""
	}
	return lines[len(lines)-1]
}

func orUnexplained(s string) string {
	if s == "" {
		return "(no reason given: unexplained)"
	}
	return s
}

// read feeds a stream into r; lines that are not JSON (go vet's or the
// build's messages) are passed to the live output.
func (r *results) read(in io.Reader) error {
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var e event
		if len(line) == 0 || line[0] != '{' || json.Unmarshal(line, &e) != nil {
			if r.live != nil {
				fmt.Fprintf(r.live, "%s\n", line)
			}
			continue
		}
		r.add(e)
	}
	return sc.Err()
}

func main() {
	summary := flag.Bool("summary", false, "read the files named as arguments and print the summary of all of them")
	flag.Parse()
	if !*summary {
		r := newResults(os.Stdout)
		if err := r.read(os.Stdin); err != nil {
			fmt.Fprintln(os.Stderr, "report:", err)
			os.Exit(1)
		}
		return
	}
	r := newResults(nil)
	for _, name := range flag.Args() {
		f, err := os.Open(name)
		if err != nil {
			fmt.Fprintln(os.Stderr, "report:", err)
			os.Exit(1)
		}
		err = r.read(f)
		f.Close()
		if err != nil {
			fmt.Fprintln(os.Stderr, "report:", err)
			os.Exit(1)
		}
	}
	os.Exit(r.print(os.Stdout))
}

// print writes the summary and returns the exit status.
func (r *results) print(w io.Writer) int {
	unexplained := 0
	if len(r.skipped) > 0 {
		sort.Slice(r.skipped, func(i, j int) bool { return r.skipped[i].name < r.skipped[j].name })
		fmt.Fprintln(w, "skipped tests and why:")
		for _, s := range r.skipped {
			if s.reason == "" {
				unexplained++
			}
			fmt.Fprintf(w, "  %s: %s\n", s.name, orUnexplained(s.reason))
		}
	}
	sort.Strings(r.failed)
	for _, f := range r.failed {
		fmt.Fprintf(w, "FAIL %s\n", f)
	}
	for _, p := range r.broken {
		fmt.Fprintf(w, "FAIL %s (outside any test: see its output above)\n", p)
	}
	if unexplained > 0 {
		fmt.Fprintf(w, "%d skipped tests gave no reason: each skip must say why\n", unexplained)
	}
	fmt.Fprintf(w, "tests: %d passed, %d failed, %d skipped\n", r.passed, len(r.failed)+len(r.broken), len(r.skipped))
	if len(r.failed)+len(r.broken) > 0 || unexplained > 0 {
		return 1
	}
	return 0
}
