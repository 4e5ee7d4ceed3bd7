package main

import (
	"bufio"
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// textSource is the prose that message bodies are cut from: the bodies of
// real ham messages when a corpus directory is given, else generated
// words. It is read once and shared by every message.
type textSource struct {
	text []byte // CRLF lines, each at most 78 bytes
}

// loadText reads up to maxBytes of body text from the .eml files in dir
// (sorted by name, so every run uses the same text). An empty dir, or one
// that yields nothing, gives generated text.
func loadText(dir string, maxBytes int) (*textSource, error) {
	var b bytes.Buffer
	if dir != "" {
		names, err := filepath.Glob(filepath.Join(dir, "*.eml"))
		if err != nil {
			return nil, fmt.Errorf("corpus %s: %w", dir, err)
		}
		sort.Strings(names)
		for _, n := range names {
			if b.Len() >= maxBytes {
				break
			}
			if err := appendBody(&b, n); err != nil {
				return nil, err
			}
		}
	}
	if b.Len() < 4096 {
		b.Reset()
		generateText(&b, maxBytes)
	}
	return &textSource{text: b.Bytes()}, nil
}

// appendBody appends the plain-text looking body lines of one message
// file: header skipped, lines that look like MIME, HTML or base64 dropped,
// long lines folded, LF turned into CRLF, 8-bit bytes replaced by '?'.
func appendBody(b *bytes.Buffer, name string) error {
	f, err := os.Open(name)
	if err != nil {
		return fmt.Errorf("corpus: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	inBody := false
	for sc.Scan() {
		line := strings.TrimRight(sc.Text(), "\r")
		if !inBody {
			inBody = line == ""
			continue
		}
		if skipLine(line) {
			continue
		}
		line = strings.Map(func(r rune) rune {
			if r < 32 && r != '\t' || r > 126 {
				return '?'
			}
			return r
		}, line)
		for len(line) > 78 {
			b.WriteString(line[:78])
			b.WriteString("\r\n")
			line = line[78:]
		}
		b.WriteString(line)
		b.WriteString("\r\n")
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("corpus %s: %w", name, err)
	}
	return nil
}

func skipLine(l string) bool {
	t := strings.TrimSpace(l)
	switch {
	case strings.HasPrefix(t, "--"), strings.HasPrefix(t, "<"),
		strings.HasPrefix(strings.ToLower(t), "content-"):
		return true
	case len(t) >= 60 && !strings.Contains(t, " "):
		return true // base64 or a long token
	}
	return false
}

// generateText fills b with n bytes of word-like text, for runs without
// a corpus.
func generateText(b *bytes.Buffer, n int) {
	words := strings.Fields("the meeting report attached please review budget " +
		"project schedule thanks regards tomorrow office update client " +
		"draft invoice quarter team agenda notes friday call list server " +
		"results question answer week plan summary changes")
	rng := rand.New(rand.NewPCG(7, 11))
	col := 0
	for b.Len() < n {
		w := words[rng.IntN(len(words))]
		if col+len(w)+1 > 72 {
			b.WriteString("\r\n")
			col = 0
		}
		b.WriteString(w)
		b.WriteByte(' ')
		col += len(w) + 1
	}
	b.WriteString("\r\n")
}

// buildMessage returns message seq of about size bytes: a header with a
// unique Message-ID and Subject, and a text/plain body cut (at a line end)
// from the shared text, starting at a place that depends on seq so
// messages differ.
func (t *textSource) buildMessage(runID string, seq, size int, from string, to []string) []byte {
	now := time.Now()
	var h strings.Builder
	fmt.Fprintf(&h, "From: Bench Sender <%s>\r\n", from)
	fmt.Fprintf(&h, "To: %s\r\n", strings.Join(to, ", "))
	fmt.Fprintf(&h, "Subject: smtpload %s %d\r\n", runID, seq)
	fmt.Fprintf(&h, "Date: %s\r\n", now.Format(time.RFC1123Z))
	fmt.Fprintf(&h, "Message-ID: %s\r\n", messageID(runID, seq))
	h.WriteString("MIME-Version: 1.0\r\nContent-Type: text/plain; charset=us-ascii\r\n" +
		"Content-Transfer-Encoding: 7bit\r\n\r\n")
	msg := make([]byte, 0, size+200)
	msg = append(msg, h.String()...)
	for len(msg) < size {
		need := size - len(msg)
		start := (seq * 7919) % len(t.text)
		if i := bytes.Index(t.text[start:], []byte("\r\n")); i >= 0 {
			start += i + 2
		}
		if start >= len(t.text) {
			start = 0
		}
		chunk := t.text[start:min(len(t.text), start+need)]
		if cut := bytes.LastIndex(chunk, []byte("\r\n")); cut >= 0 {
			chunk = chunk[:cut+2]
		} else {
			msg = append(msg, "\r\n"...)
			break
		}
		msg = append(msg, chunk...)
		seq++
	}
	return msg
}

// messageID is the Message-ID of message seq of a run; the watcher
// matches it (watch.go, idRe).
func messageID(runID string, seq int) string {
	return fmt.Sprintf("<sl-%s-%d@smtpload.bench>", runID, seq)
}
