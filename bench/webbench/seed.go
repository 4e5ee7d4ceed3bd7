package main

import (
	"bufio"
	"bytes"
	"fmt"
	"net/smtp"
	"os"
	"strings"
	"time"
)

// seed delivers the first count corpus messages and three text/plain
// messages of exactly 1,000 / 20,000 / 120,000 bytes (subjects
// "rcbench size N", newest, as the Roundcube peer's seed.py makes them) to
// every user, through SMTP: one transaction per message with all users as
// recipients, so each message is stored once.
func seed(addr, mbox string, count int, names []string) error {
	var rcpts []string
	for _, n := range names {
		rcpts = append(rcpts, n+"@"+*domain)
	}
	var msgs [][]byte
	if mbox != "" {
		var err error
		if msgs, err = readMbox(mbox, count); err != nil {
			return err
		}
	}
	ok, refused := 0, 0
	for _, m := range msgs {
		if err := sendPlain(addr, "seed@corpus.bench.test", rcpts, m); err != nil {
			refused++ // spam verdicts, malformed corpus mail: counted, not fatal
			continue
		}
		ok++
	}
	for _, size := range []int{1000, 20000, 120000} {
		if err := sendPlain(addr, "sender@corpus.bench.test", rcpts, sizedMessage(size)); err != nil {
			return fmt.Errorf("sized message %d: %w", size, err)
		}
	}
	fmt.Printf("seeded %d corpus messages (%d refused) and 3 sized messages to %d users\n", ok, refused, len(names))
	return nil
}

// readMbox returns the first n messages of an mbox file, with CRLF line
// endings and ">From " unescaped.
func readMbox(path string, n int) ([][]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("corpus: %w", err)
	}
	defer f.Close()
	var (
		out [][]byte
		cur bytes.Buffer
		in  bool
	)
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() && len(out) < n {
		line := strings.TrimRight(sc.Text(), "\r")
		if strings.HasPrefix(line, "From ") {
			if in && cur.Len() > 0 {
				out = append(out, bytes.Clone(cur.Bytes()))
			}
			cur.Reset()
			in = true
			continue
		}
		if strings.HasPrefix(line, ">") && strings.HasPrefix(strings.TrimLeft(line, ">"), "From ") {
			line = line[1:]
		}
		cur.WriteString(line)
		cur.WriteString("\r\n")
	}
	if in && cur.Len() > 0 && len(out) < n {
		out = append(out, cur.Bytes())
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("corpus: %w", err)
	}
	return out, nil
}

// sizedMessage is a text/plain message of exactly size bytes.
func sizedMessage(size int) []byte {
	hdr := "From: Corpus Sender <sender@corpus.bench.test>\r\n" +
		"To: <bench@bench.test>\r\n" +
		fmt.Sprintf("Subject: rcbench size %d\r\n", size) +
		"Date: " + time.Now().UTC().Format(time.RFC1123Z) + "\r\n" +
		fmt.Sprintf("Message-ID: <rcbench-size-%d@bench.test>\r\n", size) +
		"MIME-Version: 1.0\r\nContent-Type: text/plain; charset=us-ascii\r\nContent-Transfer-Encoding: 7bit\r\n\r\n"
	text := strings.ReplaceAll(bodyText(size), "\n", "\r\n")
	room := size - len(hdr) - 2
	body := strings.TrimRight(text[:min(room, len(text))], "\r\n ")
	body += strings.Repeat("x", room-len(body))
	return []byte(hdr + body + "\r\n")
}

// sendPlain sends one message over plain SMTP on loopback (no STARTTLS:
// the server's certificate is self-signed).
func sendPlain(addr, from string, rcpts []string, msg []byte) error {
	c, err := smtp.Dial(addr)
	if err != nil {
		return err
	}
	defer c.Close()
	if err := c.Hello("webbench.bench.test"); err != nil {
		return err
	}
	if err := c.Mail(from); err != nil {
		return err
	}
	for _, r := range rcpts {
		if err := c.Rcpt(r); err != nil {
			return err
		}
	}
	w, err := c.Data()
	if err != nil {
		return err
	}
	if _, err := w.Write(msg); err != nil {
		return err
	}
	if err := w.Close(); err != nil {
		return err
	}
	return c.Quit()
}
