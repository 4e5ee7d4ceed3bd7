package imapd

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"pimail/internal/store"
	"pimail/internal/store/sqlite"
	"pimail/internal/testcorpus"
)

// splitMbox cuts an mbox into messages with CRLF line endings (enough for
// a benchmark: ">From " quoting is left alone).
func splitMbox(b []byte) [][]byte {
	var out [][]byte
	for _, m := range bytes.Split(b, []byte("\nFrom ")) {
		if i := bytes.IndexByte(m, '\n'); i >= 0 {
			m = m[i+1:] // the "From " separator line
		}
		m = bytes.ReplaceAll(bytes.TrimRight(m, "\n"), []byte("\n"), []byte("\r\n"))
		if len(m) > 0 {
			out = append(out, append(m, '\r', '\n'))
		}
	}
	return out
}

var benchEnvOnce struct {
	sync.Once
	addr, plainAddr string // the server, and one on the same store without the fast paths
	err             error
}

// benchServer starts one server for all benchmarks of the process, its
// INBOX loaded with benchMbox.
func benchServer(b *testing.B, plain bool) string {
	b.Helper()
	// The large corpus' 1k mailbox; the benchmarks skip without it.
	dir, err := testcorpus.LargeDir()
	if err != nil {
		b.Skip(err)
	}
	raw, err := os.ReadFile(filepath.Join(dir, "mailbox", "mailbox-1k.mbox"))
	if err != nil {
		b.Skipf("benchmark mailbox not available: %v", err)
	}
	benchEnvOnce.Do(func() {
		benchEnvOnce.addr, benchEnvOnce.plainAddr, benchEnvOnce.err = startBenchServer(splitMbox(raw))
	})
	if benchEnvOnce.err != nil {
		b.Fatal(benchEnvOnce.err)
	}
	if plain {
		return benchEnvOnce.plainAddr
	}
	return benchEnvOnce.addr
}

func startBenchServer(msgs [][]byte) (addr, plainAddr string, err error) {
	dir, err := os.MkdirTemp("", "imapd-bench")
	if err != nil {
		return "", "", fmt.Errorf("temp dir: %w", err)
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	st, err := sqlite.Open(dir, sqlite.Options{Logger: quiet})
	if err != nil {
		return "", "", fmt.Errorf("open store: %w", err)
	}
	ctx := context.Background()
	if _, err := st.AddDomain(ctx, "example.org"); err != nil {
		return "", "", fmt.Errorf("add domain: %w", err)
	}
	acct, err := st.AddAccount(ctx, "alice@example.org", "x")
	if err != nil {
		return "", "", fmt.Errorf("add account: %w", err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, len(msgs))
	sem := make(chan struct{}, 16) // concurrent deliveries share commits
	for _, m := range msgs {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			_, err := st.Deliver(ctx, store.Delivery{Raw: m, InternalDate: time.Now(),
				Recipients: []store.Recipient{{AccountID: acct.ID}}})
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			return "", "", fmt.Errorf("deliver: %w", err)
		}
	}
	// The full-text indexer catches up in the background; let it finish
	// so that it does not run during the measurements.
	if err := st.WaitIndexed(ctx); err != nil {
		return "", "", fmt.Errorf("wait for the full-text index: %w", err)
	}
	var addrs []string
	for _, s := range []Store{st, generalStore{st}} {
		srv := New(Config{AllowInsecureAuth: true}, s, testAuth{st}, quiet)
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return "", "", fmt.Errorf("listen: %w", err)
		}
		go srv.Serve(ln)
		addrs = append(addrs, ln.Addr().String())
	}
	return addrs[0], addrs[1], nil
}

// benchFetch times one FETCH command over the loaded INBOX.
func benchFetch(b *testing.B, command string, plain bool) {
	addr := benchServer(b, plain)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	br := bufio.NewReaderSize(c, 1<<16)
	run := func(tag, cmd string) int64 {
		if _, err := fmt.Fprintf(c, "%s %s\r\n", tag, cmd); err != nil {
			b.Fatal(err)
		}
		var n int64
		for range 10_000_000 {
			l, err := br.ReadSlice('\n')
			if err != nil && err != bufio.ErrBufferFull {
				b.Fatal(err)
			}
			n += int64(len(l))
			if bytes.HasPrefix(l, []byte(tag+" ")) {
				if !bytes.HasPrefix(l, []byte(tag+" OK")) {
					b.Fatalf("%s: %q", cmd, l)
				}
				return n
			}
		}
		b.Fatal("no tagged response")
		return 0
	}
	if _, err := br.ReadString('\n'); err != nil {
		b.Fatal(err)
	}
	run("L", "LOGIN alice@example.org "+testPassword)
	run("S", "SELECT INBOX")
	run("W", command) // warm: page cache, prepared paths
	b.ResetTimer()
	cpu0 := cpuTime()
	var n int64
	for i := 0; i < b.N; i++ {
		n = run("F", command)
	}
	// CPU time of the process (server and client) per FETCH: less
	// sensitive than wall time to other work on a shared machine.
	b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/1000/float64(b.N), "cpu-ms/op")
	b.SetBytes(n)
}

const (
	envelopeCmd = "UID FETCH 1:* (UID FLAGS INTERNALDATE RFC822.SIZE ENVELOPE)"
	headerCmd   = "UID FETCH 1:* (BODY.PEEK[HEADER])"
)

// The General variants run on a server whose store hides the fast paths
// (the code before them, but with the overlapped chunk reads), for a
// before/after ratio measured in one run.

func BenchmarkFetchEnvelope(b *testing.B)        { benchFetch(b, envelopeCmd, false) }
func BenchmarkFetchEnvelopeGeneral(b *testing.B) { benchFetch(b, envelopeCmd, true) }
func BenchmarkFetchHeader(b *testing.B)          { benchFetch(b, headerCmd, false) }
func BenchmarkFetchHeaderGeneral(b *testing.B)   { benchFetch(b, headerCmd, true) }
func BenchmarkFetchBodyStructure(b *testing.B)   { benchFetch(b, "UID FETCH 1:* (BODYSTRUCTURE)", false) }

// cpuTime is the user plus system CPU time used by this process so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
