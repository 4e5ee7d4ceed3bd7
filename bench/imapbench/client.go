package main

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"
)

// client is a minimal IMAP4 client (RFC 9051, RFC 3501): tagged commands,
// untagged data with literals read and counted, nothing parsed beyond what
// the benchmark needs, so that the time measured is the server's.
type client struct {
	conn        net.Conn
	r           *bufio.Reader
	w           *bufio.Writer
	tag         int
	timeout     time.Duration
	literalPlus bool
	multiAppend bool // the server advertises MULTIAPPEND (RFC 3502)
}

// maxLine bounds one response line.
const maxLine = 1 << 20

func dial(addr string, useTLS, insecure bool, timeout time.Duration) (*client, error) {
	d := &net.Dialer{Timeout: 10 * time.Second}
	var conn net.Conn
	var err error
	if useTLS {
		host, _, _ := net.SplitHostPort(addr)
		conn, err = tls.DialWithDialer(d, "tcp", addr, &tls.Config{ServerName: host, InsecureSkipVerify: insecure})
	} else {
		conn, err = d.Dial("tcp", addr)
	}
	if err != nil {
		return nil, fmt.Errorf("connect %s: %w", addr, err)
	}
	c := &client{conn: conn, r: bufio.NewReaderSize(conn, 1<<16), w: bufio.NewWriterSize(conn, 1<<16), timeout: timeout}
	conn.SetDeadline(time.Now().Add(timeout))
	greeting, _, err := c.readLine()
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("greeting: %w", err)
	}
	if !strings.HasPrefix(greeting, "* OK") {
		conn.Close()
		return nil, fmt.Errorf("greeting: %q", greeting)
	}
	return c, nil
}

func (c *client) close() {
	c.cmd("LOGOUT")
	c.conn.Close()
}

// readLine reads one line without CRLF; lit is the size of a literal
// announced at its end ("{123}"), or -1.
func (c *client) readLine() (line string, lit int64, err error) {
	var b []byte
	for {
		part, isPrefix, err := c.r.ReadLine()
		if err != nil {
			return "", -1, err
		}
		b = append(b, part...)
		if len(b) > maxLine {
			return "", -1, fmt.Errorf("response line longer than %d bytes", maxLine)
		}
		if !isPrefix {
			break
		}
	}
	lit = -1
	if n := len(b); n > 2 && b[n-1] == '}' {
		if i := bytes.LastIndexByte(b, '{'); i >= 0 {
			if v, err := strconv.ParseInt(strings.TrimSuffix(string(b[i+1:n-1]), "+"), 10, 64); err == nil {
				lit = v
			}
		}
	}
	return string(b), lit, nil
}

// response is what a command returned.
type response struct {
	untagged []string // untagged lines (literal contents replaced by their size)
	bytes    int64    // bytes received, literals included
	status   string   // the tagged line
}

// cmd sends a command and reads to its tagged completion.
func (c *client) cmd(format string, args ...any) (response, error) {
	c.tag++
	tag := fmt.Sprintf("B%d", c.tag)
	c.conn.SetDeadline(time.Now().Add(c.timeout))
	fmt.Fprintf(c.w, "%s %s\r\n", tag, fmt.Sprintf(format, args...))
	if err := c.w.Flush(); err != nil {
		return response{}, fmt.Errorf("send: %w", err)
	}
	return c.readResponse(tag)
}

func (c *client) readResponse(tag string) (response, error) {
	var res response
	for range 100_000_000 { // bounded: far more lines than any mailbox answers
		line, lit, err := c.readLine()
		if err != nil {
			return res, fmt.Errorf("read response: %w", err)
		}
		res.bytes += int64(len(line)) + 2
		for lit >= 0 {
			// Skip the literal and read the rest of the logical line.
			if _, err := io.CopyN(io.Discard, c.r, lit); err != nil {
				return res, fmt.Errorf("read literal: %w", err)
			}
			res.bytes += lit
			var more string
			more, lit, err = c.readLine()
			if err != nil {
				return res, fmt.Errorf("read response: %w", err)
			}
			res.bytes += int64(len(more)) + 2
			line += " {literal}" + more
		}
		if strings.HasPrefix(line, tag+" ") {
			res.status = line[len(tag)+1:]
			if !strings.HasPrefix(res.status, "OK") {
				return res, fmt.Errorf("server: %s", res.status)
			}
			return res, nil
		}
		if strings.HasPrefix(line, "+") {
			return res, fmt.Errorf("unexpected continuation request: %q", line)
		}
		if len(res.untagged) < 1_000_000 {
			res.untagged = append(res.untagged, line)
		}
	}
	return res, fmt.Errorf("response without end")
}

// appendMsg sends APPEND with the message as a literal (LITERAL+ when the
// server has it, RFC 7888; otherwise waiting for the continuation).
func (c *client) appendMsg(mailbox string, date time.Time, msg []byte) error {
	return c.appendMulti(mailbox, []time.Time{date}, [][]byte{msg})
}

// appendMulti sends one MULTIAPPEND command (RFC 3502) with all msgs,
// each with its date, as LITERAL+ literals when the server has them,
// otherwise waiting for the continuation of each.
func (c *client) appendMulti(mailbox string, dates []time.Time, msgs [][]byte) error {
	tag, err := c.sendAppend(mailbox, dates, msgs)
	if err != nil {
		return err
	}
	if err := c.w.Flush(); err != nil {
		return fmt.Errorf("send: %w", err)
	}
	_, err = c.readResponse(tag)
	return err
}

// sendAppend writes one APPEND command with msgs into the send buffer and
// returns its tag; without LITERAL+ it flushes and waits for each
// continuation, with it nothing is flushed.
func (c *client) sendAppend(mailbox string, dates []time.Time, msgs [][]byte) (string, error) {
	c.tag++
	tag := fmt.Sprintf("B%d", c.tag)
	c.conn.SetDeadline(time.Now().Add(c.timeout))
	plus := ""
	if c.literalPlus {
		plus = "+"
	}
	fmt.Fprintf(c.w, "%s APPEND %s", tag, quote(mailbox))
	for i, msg := range msgs {
		dt := ""
		if !dates[i].IsZero() {
			dt = ` "` + dates[i].Format("02-Jan-2006 15:04:05 -0700") + `"`
		}
		fmt.Fprintf(c.w, " ()%s {%d%s}\r\n", dt, len(msg), plus)
		if !c.literalPlus {
			if err := c.w.Flush(); err != nil {
				return "", fmt.Errorf("send: %w", err)
			}
			line, _, err := c.readLine()
			if err != nil {
				return "", fmt.Errorf("append: %w", err)
			}
			if !strings.HasPrefix(line, "+") {
				return "", fmt.Errorf("append refused: %s", line)
			}
		}
		c.w.Write(msg)
	}
	c.w.WriteString("\r\n")
	return tag, nil
}

// recreate creates mailbox name, deleting it first if an interrupted run
// left it behind.
func (c *client) recreate(name string) error {
	c.cmd("DELETE %s", quote(name))
	_, err := c.cmd("CREATE %s", quote(name))
	return err
}

func quote(s string) string {
	return `"` + strings.ReplaceAll(strings.ReplaceAll(s, `\`, `\\`), `"`, `\"`) + `"`
}

// login authenticates and learns whether LITERAL+ may be used.
func (c *client) login(user, pass string) error {
	res, err := c.cmd("LOGIN %s %s", quote(user), quote(pass))
	if err != nil {
		return fmt.Errorf("login: %w", err)
	}
	caps := res.status
	if res, err := c.cmd("CAPABILITY"); err == nil {
		caps += " " + strings.Join(res.untagged, " ")
	}
	c.literalPlus = strings.Contains(strings.ToUpper(caps), "LITERAL+")
	c.multiAppend = strings.Contains(strings.ToUpper(caps), "MULTIAPPEND")
	return nil
}

// searchCount returns how many numbers an untagged SEARCH response lists.
func searchCount(res response) int {
	n := 0
	for _, l := range res.untagged {
		if strings.HasPrefix(l, "* SEARCH") {
			n += len(strings.Fields(l)) - 2
		}
	}
	return n
}

// searchUIDs returns the numbers of untagged SEARCH responses.
func searchUIDs(res response) []uint32 {
	var out []uint32
	for _, l := range res.untagged {
		if !strings.HasPrefix(l, "* SEARCH") {
			continue
		}
		for _, f := range strings.Fields(l)[2:] {
			if v, err := strconv.ParseUint(f, 10, 32); err == nil {
				out = append(out, uint32(v))
			}
		}
	}
	return out
}
