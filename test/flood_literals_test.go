package blackbox

import (
	"bytes"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"
)

// literalFloodConfig lowers APPENDLIMIT to 1 MiB so that the per-command
// literal cap (APPENDLIMIT + 1 MiB) is small enough to show per
// connection in the server's memory.
const literalFloodConfig = "[imap]\nmax_literal_size = 1048576\n[spam]\nenabled = false\n"

// literalFlood sends, on c, a command head followed by up to count
// non-synchronising literals of size bytes each (RFC 7888), never ending
// the command, and returns how many bytes the server took before it
// refused or stopped reading.
func literalFlood(c net.Conn, head string, size, count int) int {
	_ = c.SetWriteDeadline(time.Now().Add(20 * time.Second))
	lit := bytes.Repeat([]byte("y"), size)
	sent := 0
	if _, err := c.Write([]byte(head)); err != nil {
		return 0
	}
	for range count {
		if _, err := fmt.Fprintf(c, " {%d+}\r\n", size); err != nil {
			return sent
		}
		if _, err := c.Write(lit); err != nil {
			return sent
		}
		sent += size
	}
	return sent
}

// TestFloodIMAPLiterals is the Cyrus CVE-2024-34055 class: many literals,
// each within the per-literal limit, in one command that never ends. The
// server must refuse once the command's literals pass their cap (before
// login: two small LOGIN arguments), so memory per connection stays
// bounded; then a probe client still gets service.
func TestFloodIMAPLiterals(t *testing.T) {
	srv := NewServer(t, literalFloodConfig)
	user := srv.AddAccounts("literal")[0]
	srv.Start()
	base := warmRSS(t, srv, user)

	run := func(what string, conns int, dial func(i int) (net.Conn, error), head string, size, count int) {
		var wg sync.WaitGroup
		var mu sync.Mutex
		var held []net.Conn
		var took []int
		for i := range conns {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c, err := dial(i)
				if err != nil {
					t.Errorf("%s: connect: %v", what, err)
					return
				}
				n := literalFlood(c, head, size, count)
				mu.Lock()
				held = append(held, c)
				took = append(took, n)
				mu.Unlock()
			}()
		}
		wg.Wait()
		time.Sleep(300 * time.Millisecond)
		rss, hwm := srv.RSSKiB(), srv.HWMKiB()
		most := 0
		for _, n := range took {
			most = max(most, n)
		}
		offered := size * count
		t.Logf("%s: %d connections offered %d KiB of literals each; RSS %d KiB, peak %d KiB (base %d KiB)",
			what, conns, offered>>10, rss, hwm, base)
		// The server stops reading: it cannot hold what it never read. A
		// socket buffer pair (a few MiB) may swallow the rest unread.
		if most >= offered {
			t.Logf("%s: a client got all %d bytes out (into socket buffers)", what, most)
		}
		perConn := (hwm - base) * 1024 / int64(conns)
		t.Logf("%s: %d bytes of peak RSS per connection", what, perConn)
		if perConn > int64(offered)/4 {
			t.Errorf("%s: %d bytes of peak RSS per connection for %d offered: literals are buffered past the cap",
				what, perConn, offered)
		}
		lat := probe(t, srv, Listeners{}, user)
		t.Logf("%s: probe latency while held: %v", what, lat)
		for _, c := range held {
			c.Close()
		}
	}

	preConns := pick(200, 1000)
	raiseNoFile(t, uint64(preConns)*2+200)
	// Before login: LOGIN with 120 literals of 8,000 bytes (the
	// pre-login literal limit is 8 KiB): 960 KB per connection offered.
	run("before login", preConns, func(i int) (net.Conn, error) {
		c, err := dialFrom(i, srv.IMAP)
		if err == nil {
			_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
			buf := make([]byte, 512)
			_, err = c.Read(buf) // greeting
			_ = c.SetReadDeadline(time.Time{})
		}
		return c, err
	}, "a LOGIN", 8000, 120)

	// After login: SEARCH with 64 KiB literals, 64 MiB offered per
	// connection against a 2 MiB command cap.
	postConns := pick(8, 32)
	run("after login", postConns, func(i int) (net.Conn, error) {
		ic, err := rawIMAPLogin(srv.IMAP, user)
		if err != nil {
			return nil, err
		}
		return ic.c, nil
	}, "s SEARCH CHARSET UTF-8 OR TEXT", 64<<10, 1024)

	if !srv.Running() {
		t.Fatal("server died")
	}
}
