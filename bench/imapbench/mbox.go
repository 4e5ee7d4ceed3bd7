package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
)

// maxMessage bounds one message read from an mbox.
const maxMessage = 64 << 20

// readMbox reads an mboxrd file (lines "From " separate messages; body
// lines ">From ", ">>From " … lose one '>') and returns the messages with
// CRLF line endings, as IMAP APPEND sends them (RFC 9051 §6.3.12).
func readMbox(path string, limit int) ([][]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open mbox: %w", err)
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 1<<20)
	var msgs [][]byte
	var cur *bytes.Buffer
	flush := func() {
		if cur == nil {
			return
		}
		b := cur.Bytes()
		// The separator's preceding blank line belongs to the mbox.
		b = bytes.TrimSuffix(b, []byte("\r\n"))
		if len(b) > 0 {
			msgs = append(msgs, bytes.Clone(b))
		}
		cur = nil
	}
	for {
		line, err := r.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			// A very long line: read the rest of it.
			rest, err2 := r.ReadBytes('\n')
			line = append(bytes.Clone(line), rest...)
			err = err2
		}
		if len(line) > 0 {
			if bytes.HasPrefix(line, []byte("From ")) {
				flush()
				if limit > 0 && len(msgs) >= limit {
					return msgs, nil
				}
				cur = &bytes.Buffer{}
			} else if cur != nil {
				body := bytes.TrimRight(line, "\r\n")
				if q := bytes.TrimLeft(body, ">"); len(q) < len(body) && bytes.HasPrefix(q, []byte("From ")) {
					body = body[1:] // mboxrd unquoting
				}
				if cur.Len()+len(body)+2 > maxMessage {
					return nil, fmt.Errorf("mbox message %d larger than %d bytes", len(msgs)+1, maxMessage)
				}
				cur.Write(body)
				cur.WriteString("\r\n")
			}
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("read mbox: %w", err)
		}
	}
	flush()
	return msgs, nil
}
