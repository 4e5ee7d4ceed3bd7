package blackbox

import (
	"bufio"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"
)

// imapLogin connects with go-imap's client (plain text: loopback) and
// logs in with testPassword.
func imapLogin(t *testing.T, addr, user string, opts *imapclient.Options) *imapclient.Client {
	t.Helper()
	if opts == nil {
		opts = &imapclient.Options{}
	}
	opts.Dialer = &net.Dialer{Timeout: 10 * time.Second}
	c, err := imapclient.DialInsecure(addr, opts)
	if err != nil {
		t.Fatalf("IMAP dial %s: %v", addr, err)
	}
	t.Cleanup(func() { c.Close() })
	if err := c.Login(user, testPassword).Wait(); err != nil {
		t.Fatalf("IMAP LOGIN %s: %v", user, err)
	}
	return c
}

// fetchAll returns every message of a mailbox (BODY.PEEK[]) keyed by
// "uid:N".
func fetchAll(t *testing.T, c *imapclient.Client, mailbox string) map[string][]byte {
	t.Helper()
	sel, err := c.Select(mailbox, &imap.SelectOptions{ReadOnly: true}).Wait()
	if err != nil {
		t.Fatalf("IMAP EXAMINE %s: %v", mailbox, err)
	}
	out := map[string][]byte{}
	if sel.NumMessages == 0 {
		return out
	}
	section := &imap.FetchItemBodySection{Peek: true}
	var all imap.SeqSet
	all.AddRange(1, 0) // 1:*
	msgs, err := c.Fetch(all, &imap.FetchOptions{UID: true, BodySection: []*imap.FetchItemBodySection{section}}).Collect()
	if err != nil {
		t.Fatalf("IMAP FETCH 1:* BODY.PEEK[]: %v", err)
	}
	for _, m := range msgs {
		out[fmt.Sprintf("uid:%d", m.UID)] = m.FindBodySection(section)
	}
	if uint32(len(out)) != sel.NumMessages {
		t.Errorf("%s: EXAMINE said %d messages, FETCH 1:* returned %d", mailbox, sel.NumMessages, len(out))
	}
	return out
}

// imapConn is a raw IMAP connection for sending malformed input and
// reading the server's exact answers.
type imapConn struct {
	t *testing.T
	c net.Conn
	r *bufio.Reader
}

// dialIMAP connects and reads the greeting.
func dialIMAP(t *testing.T, addr string) *imapConn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		t.Fatalf("dial IMAP %s: %v", addr, err)
	}
	t.Cleanup(func() { c.Close() })
	ic := &imapConn{t: t, c: c, r: bufio.NewReader(c)}
	line, err := ic.line()
	if err != nil || !strings.HasPrefix(line, "* OK") {
		t.Fatalf("IMAP greeting %q: %v", line, err)
	}
	return ic
}

// line reads one response line without its CRLF. Literals in responses
// are not expected by the tests that use this.
func (ic *imapConn) line() (string, error) {
	_ = ic.c.SetReadDeadline(time.Now().Add(ioTimeout))
	var b []byte
	for len(b) < 1<<20 {
		chunk, isPrefix, err := ic.r.ReadLine()
		if err != nil {
			return string(b), fmt.Errorf("read IMAP response: %w", err)
		}
		b = append(b, chunk...)
		if !isPrefix {
			return string(b), nil
		}
	}
	return clip(string(b), 200), fmt.Errorf("IMAP response line longer than 1 MiB")
}

// write sends raw bytes.
func (ic *imapConn) write(s string) error {
	_ = ic.c.SetWriteDeadline(time.Now().Add(ioTimeout))
	_, err := ic.c.Write([]byte(s))
	return err
}

// command sends "TAG REST\r\n" and returns the tagged status line
// ("OK ...", "NO ...", "BAD ...") with the untagged lines before it.
func (ic *imapConn) command(tag, rest string) (string, []string, error) {
	if err := ic.write(tag + " " + rest + "\r\n"); err != nil {
		return "", nil, err
	}
	return ic.tagged(tag)
}

// tagged reads up to the response tagged tag.
func (ic *imapConn) tagged(tag string) (string, []string, error) {
	var untagged []string
	for range 10000 {
		line, err := ic.line()
		if err != nil {
			return "", untagged, err
		}
		if status, ok := strings.CutPrefix(line, tag+" "); ok {
			return status, untagged, nil
		}
		untagged = append(untagged, line)
	}
	return "", untagged, fmt.Errorf("no tagged response for %s in 10000 lines", tag)
}

// expectStatus sends a command and fails unless the tagged status starts
// with want ("OK", "NO" or "BAD").
func (ic *imapConn) expectStatus(tag, rest, want string) string {
	ic.t.Helper()
	status, untagged, err := ic.command(tag, rest)
	if err != nil || !strings.HasPrefix(status, want+" ") && status != want {
		ic.t.Fatalf("IMAP %s %q: want %s, got %q (untagged %q) %v", tag, clip(rest, 80), want, status, untagged, err)
	}
	return status
}

// login logs in with LOGIN and testPassword.
func (ic *imapConn) login(user string) {
	ic.t.Helper()
	ic.expectStatus("L1", fmt.Sprintf("LOGIN %q %q", user, testPassword), "OK")
}
