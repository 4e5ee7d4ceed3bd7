package blackbox

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// slowlorisConfig shortens the SMTP command timeout and the IMAP idle
// timeout (which also bounds a pre-login IMAP session) to 3 s, so a
// trickling client must be cut off within a test's patience. HTTP keeps
// its fixed 10 s ReadHeaderTimeout.
const slowlorisConfig = `[smtp]
max_connections = 5000
command_timeout = "3s"
[imap]
idle_timeout = "3s"
[spam]
enabled = false
`

// trickle opens a connection, sends prefix and then one byte every
// interval, never finishing the line, until the server closes the
// connection or limit passes. It returns how long the server let it live
// (limit when it never closed it).
func trickle(n int, addr, prefix string, interval, limit time.Duration) (time.Duration, error) {
	c, err := dialFrom(n, addr)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	start := time.Now()
	closed := make(chan struct{})
	go func() { // the server's greeting and any last words, then EOF
		buf := make([]byte, 4096)
		_ = c.SetReadDeadline(start.Add(limit + 5*time.Second))
		for {
			if _, err := c.Read(buf); err != nil {
				close(closed)
				return
			}
		}
	}()
	_ = c.SetWriteDeadline(start.Add(limit))
	if _, err := c.Write([]byte(prefix)); err != nil {
		return time.Since(start), nil
	}
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for i := 0; time.Since(start) < limit && i < 100000; i++ {
		select {
		case <-closed:
			return time.Since(start), nil
		case <-tick.C:
		}
		if _, err := c.Write([]byte{'x'}); err != nil {
			return time.Since(start), nil
		}
	}
	return limit, nil
}

// TestFloodSlowloris trickles one byte every 300 ms on many SMTP, IMAP
// and HTTP connections at once (never completing a command line or an
// HTTP header). The server must cut each off by its timeout, keep its
// memory bounded, and serve an ordinary client meanwhile.
func TestFloodSlowloris(t *testing.T) {
	per := pick(150, 600)
	raiseNoFile(t, uint64(per)*6+200)
	srv := NewServer(t, slowlorisConfig)
	user := srv.AddAccounts("slow")[0]
	l := withListeners(t, "pop3", "http")
	srv.StartWith(l)
	base := warmRSS(t, srv, user)

	targets := []struct {
		name, addr, prefix string
		timeout            time.Duration // the server's
	}{
		{"smtp", srv.SMTP, "EHLO ", 3 * time.Second},
		{"imap", srv.IMAP, "a1 LOGIN ", 3 * time.Second},
		{"http", l.HTTP, "GET / HTTP/1.1\r\nHost: test.local\r\nX-Slow: ", 10 * time.Second},
	}
	const limit = 40 * time.Second
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		lived    = map[string][]time.Duration{}
		failures atomic.Int32
	)
	for _, tg := range targets {
		for i := range per {
			wg.Add(1)
			go func() {
				defer wg.Done()
				d, err := trickle(i, tg.addr, tg.prefix, 300*time.Millisecond, limit)
				if err != nil {
					failures.Add(1)
					return
				}
				mu.Lock()
				lived[tg.name] = append(lived[tg.name], d)
				mu.Unlock()
			}()
		}
	}
	// While they trickle: ordinary service and memory.
	time.Sleep(1500 * time.Millisecond)
	lat := probe(t, srv, l, user)
	rss := srv.RSSKiB()
	t.Logf("probe latency with %d trickling connections: %v; RSS %d KiB (base %d)", per*len(targets), lat, rss, base)
	for proto, d := range lat {
		if d > 10*time.Second {
			t.Errorf("%s probe took %v during the slowloris flood", proto, d)
		}
	}
	wg.Wait()
	if n := failures.Load(); n > 0 {
		t.Errorf("%d trickling connections could not connect", n)
	}
	hwm := srv.HWMKiB()
	t.Logf("RSS peak %d KiB (base %d KiB)", hwm, base)
	if hwm-base > 128<<10 {
		t.Errorf("peak RSS %d KiB is %d KiB over the base during the slowloris flood", hwm, hwm-base)
	}
	for _, tg := range targets {
		ds := lived[tg.name]
		var worst time.Duration
		for _, d := range ds {
			worst = max(worst, d)
		}
		t.Logf("%s: %d trickling connections, the longest lived %v (server timeout %v)", tg.name, len(ds), worst.Round(time.Millisecond), tg.timeout)
		// Generous slack for a busy machine; never cut off is the failure.
		if worst >= limit || worst > 3*tg.timeout+5*time.Second {
			t.Errorf("%s: a trickling connection lived %v; the %v timeout does not bound a slow command", tg.name, worst, tg.timeout)
		}
	}
	if !srv.Running() {
		t.Fatal("server died")
	}
	_ = probe(t, srv, l, user)
}
