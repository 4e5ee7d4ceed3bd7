package main

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"net/smtp"
	"time"
)

// worker sends messages taken from next over one connection, reconnecting
// after an error at most cfg.reconnects times.
func worker(ctx context.Context, cfg config, id int, body []byte, next <-chan int, res *results) {
	reconnects := 0
	var c *smtp.Client
	var conn net.Conn
	defer func() {
		if c != nil {
			_ = c.Quit()
			_ = conn.Close()
		}
	}()
	for i := range next {
		if ctx.Err() != nil {
			res.fail(fmt.Errorf("benchmark timeout: message %d not sent", i))
			continue
		}
		if c == nil {
			if reconnects > cfg.reconnects {
				res.fail(fmt.Errorf("worker %d gave up after %d reconnects", id, cfg.reconnects))
				continue
			}
			var err error
			if conn, c, err = dial(cfg); err != nil {
				reconnects++
				res.fail(err)
				continue
			}
		}
		_ = conn.SetDeadline(time.Now().Add(cfg.ioTimeout))
		t0 := time.Now()
		err := send(c, cfg, message(i, cfg.size, body))
		if err != nil {
			res.fail(fmt.Errorf("message %d: %w", i, err))
			_ = conn.Close()
			c, conn = nil, nil
			reconnects++
			continue
		}
		res.ok(time.Since(t0))
		if err := c.Reset(); err != nil {
			res.fail(fmt.Errorf("RSET: %w", err))
			_ = conn.Close()
			c, conn = nil, nil
			reconnects++
		}
	}
}

// dial opens an SMTP connection and says EHLO.
func dial(cfg config) (net.Conn, *smtp.Client, error) {
	conn, err := net.DialTimeout("tcp", cfg.addr, 10*time.Second)
	if err != nil {
		return nil, nil, fmt.Errorf("dial: %w", err)
	}
	_ = conn.SetDeadline(time.Now().Add(cfg.ioTimeout))
	host, _, _ := net.SplitHostPort(cfg.addr)
	c, err := smtp.NewClient(conn, host)
	if err != nil {
		conn.Close()
		return nil, nil, fmt.Errorf("greeting: %w", err)
	}
	if err := c.Hello("bench.example"); err != nil {
		conn.Close()
		return nil, nil, fmt.Errorf("EHLO: %w", err)
	}
	return conn, c, nil
}

// send runs MAIL, RCPT and DATA for one message; it returns after the
// reply to the final dot.
func send(c *smtp.Client, cfg config, msg []byte) error {
	if err := c.Mail(cfg.from); err != nil {
		return fmt.Errorf("MAIL: %w", err)
	}
	for _, r := range cfg.rcpts {
		if err := c.Rcpt(r); err != nil {
			return fmt.Errorf("RCPT %s: %w", r, err)
		}
	}
	w, err := c.Data()
	if err != nil {
		return fmt.Errorf("DATA: %w", err)
	}
	if _, err := w.Write(msg); err != nil {
		return fmt.Errorf("message data: %w", err)
	}
	if err := w.Close(); err != nil {
		return fmt.Errorf("end of data: %w", err)
	}
	return nil
}

// makeBody returns size bytes of 76-column random text lines (CRLF), the
// shared body from which each message takes what its header leaves.
func makeBody(size int) []byte {
	rng := rand.New(rand.NewPCG(1, 2))
	const letters = "abcdefghijklmnopqrstuvwxyz ABCDEFGHIJKLMNOPQRSTUVWXYZ 0123456789"
	var b bytes.Buffer
	line := make([]byte, 76)
	for b.Len() < size {
		for i := range line {
			line[i] = letters[rng.IntN(len(letters))]
		}
		b.Write(line)
		b.WriteString("\r\n")
	}
	return b.Bytes()
}

// message builds message i: a unique header and body text up to size
// bytes in all, ending with CRLF.
func message(i, size int, body []byte) []byte {
	head := fmt.Sprintf("From: Bench <bench@example.org>\r\nTo: <rcpt@localhost>\r\n"+
		"Subject: ingest %d\r\nMessage-ID: <ingest-%d-%d@bench.example>\r\n"+
		"Date: %s\r\n\r\n", i, i, time.Now().UnixNano(), time.Now().Format(time.RFC1123Z))
	msg := make([]byte, 0, size+80)
	msg = append(msg, head...)
	rest := max(size-len(head), 2)
	// Cut the body at a line end so every line stays whole.
	cut := bytes.LastIndex(body[:min(rest, len(body))], []byte("\r\n"))
	if cut < 0 {
		return append(msg, "x\r\n"...)
	}
	return append(msg, body[:cut+2]...)
}
