package blackbox

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestAttackDescriptorExhaustion (issue 28, item 1): pimail serve under
// a limit of 1,024 open files, 1,100 idle connections to the submission
// port, then an IMAP login, an SMTP delivery and a web page. Before the
// fix submission took connections without limit, the IMAP accept failed
// with EMFILE and the server exited. Now every listener has a limit, the
// limits are fitted to the descriptor limit at start, and an accept that
// fails for lack of descriptors is retried, not fatal.
func TestAttackDescriptorExhaustion(t *testing.T) {
	requireTool(t, "prlimit")
	raiseNoFile(t, 4096)
	srv := NewServer(t, "")
	users := srv.AddAccounts("fd")
	l := withListeners(t, "submission", "http")
	srv.Prefix = []string{"prlimit", "--nofile=1024:1024"}
	srv.StartWith(l)

	var mu sync.Mutex
	var conns []net.Conn
	greeted, refused := 0, 0
	var wg sync.WaitGroup
	sem := make(chan struct{}, 50)
	for i := range 1100 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			c, err := dialFrom(i, l.Submission)
			if err != nil {
				return
			}
			_ = c.SetReadDeadline(time.Now().Add(20 * time.Second))
			line, _ := bufio.NewReader(c).ReadString('\n')
			mu.Lock()
			defer mu.Unlock()
			switch {
			case strings.HasPrefix(line, "220 "):
				greeted++
				conns = append(conns, c) // held open, idle
			case strings.HasPrefix(line, "421 "):
				refused++
				c.Close()
			default:
				c.Close()
			}
		}()
	}
	wg.Wait()
	defer closeAll(conns)
	t.Logf("1,100 connections to submission: %d held, %d refused with 421", greeted, refused)
	if !srv.Running() {
		t.Fatalf("the server exited during the flood:\n%s", srv.Logs())
	}
	if refused == 0 {
		t.Errorf("no connection refused: submission has no connection limit")
	}
	// The other listeners still serve.
	start := time.Now()
	imapLogin(t, srv.IMAP, users[0], nil).Close()
	dialSMTP(t, srv.SMTP).send("someone@example.org", users, generatedMessage("fd-probe", 1, 500))
	resp, err := http.Get("http://" + l.HTTP + "/login")
	if err != nil {
		t.Fatalf("webmail during the flood: %v", err)
	}
	resp.Body.Close()
	t.Logf("IMAP login, SMTP delivery and a web page during the flood: %v", time.Since(start).Round(time.Millisecond))
	if !srv.Running() {
		t.Fatalf("the server exited:\n%s", srv.Logs())
	}
}

// TestAttackConnectionLimitsEveryListener: submission and the web server
// take no more connections than configured, answer the others with 421
// and 503, and give places back as connections close.
func TestAttackConnectionLimitsEveryListener(t *testing.T) {
	srv := NewServer(t, "[submission]\nmax_connections = 20\n[http]\nmax_connections = 20\n")
	srv.AddAccounts("limits")
	l := withListeners(t, "submission", "http")
	srv.StartWith(l)

	for _, c := range []struct {
		name, addr, ok, over string
	}{
		{"submission", l.Submission, "220 ", "421 4.7.0 "},
		{"http", l.HTTP, "", "HTTP/1.1 503 "},
	} {
		t.Run(c.name, func(t *testing.T) {
			var held []net.Conn
			defer func() { closeAll(held) }()
			refused := 0
			for i := range 30 {
				conn, err := dialFrom(i, c.addr)
				if err != nil {
					t.Fatal(err)
				}
				_ = conn.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
				line, err := bufio.NewReader(conn).ReadString('\n')
				switch {
				case strings.HasPrefix(line, c.over):
					refused++
					conn.Close()
				case c.ok == "" && err != nil && isTimeout(err), c.ok != "" && strings.HasPrefix(line, c.ok):
					held = append(held, conn) // admitted, waiting for us
				default:
					t.Fatalf("connection %d: %q %v", i, line, err)
				}
			}
			if len(held) != 20 || refused != 10 {
				t.Fatalf("%d held, %d refused; want 20 and 10", len(held), refused)
			}
			held[0].Close()
			time.Sleep(200 * time.Millisecond)
			conn, err := dialFrom(99, c.addr)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			if c.name == "http" {
				_, _ = io.WriteString(conn, "GET /login HTTP/1.1\r\nHost: x\r\n\r\n")
			}
			_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
			line, err := bufio.NewReader(conn).ReadString('\n')
			if err != nil || strings.HasPrefix(line, c.over) {
				t.Fatalf("after one closed, a new connection got %q %v", line, err)
			}
		})
	}
}
