package mailexport

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"pimail/internal/store"
)

// asctime is the date form of From_ lines (RFC 4155 §2), always in UTC.
const asctime = "Mon Jan _2 15:04:05 2006"

// ExportMbox writes the messages of one mailbox to w as mboxrd.
func (e *Exporter) ExportMbox(ctx context.Context, w io.Writer, mb store.Mailbox) error {
	bw := bufio.NewWriterSize(w, 64<<10)
	err := e.each(ctx, mb, func(m store.MessageMeta, raw []byte) error {
		return writeMboxMessage(bw, m, raw)
	})
	if err != nil {
		return err
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("write mbox: %w", err)
	}
	return nil
}

// ExportMboxFile writes one mailbox to a new file (an existing file is not
// overwritten); "-" writes to standard output.
func (e *Exporter) ExportMboxFile(ctx context.Context, path string, mb store.Mailbox) error {
	if path == "-" {
		return e.ExportMbox(ctx, os.Stdout, mb)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("create mbox: %w", err)
	}
	if err := e.ExportMbox(ctx, f, mb); err != nil {
		f.Close()
		return fmt.Errorf("%s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("fsync %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("close %s: %w", path, err)
	}
	return nil
}

// ExportMboxDir writes each mailbox to dir/<name>.mbox, where the '/' of
// hierarchical names become directories ("Lists/go" → dir/Lists/go.mbox).
func (e *Exporter) ExportMboxDir(ctx context.Context, dir string, mbs []store.Mailbox) error {
	for _, mb := range mbs {
		p := filepath.Join(dir, filepath.FromSlash(safePath(mb.Name))+".mbox")
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			return fmt.Errorf("create directory for %q: %w", mb.Name, err)
		}
		if err := e.ExportMboxFile(ctx, p, mb); err != nil {
			return err
		}
	}
	return nil
}

// safePath makes a mailbox name usable as a relative path: levels "." and
// ".." and empty levels are replaced, so nothing is written outside the
// export directory.
func safePath(name string) string {
	levels := strings.Split(name, store.HierarchySeparator)
	for i, l := range levels {
		l = strings.ReplaceAll(l, "\\", "_")
		if l == "" || l == "." || l == ".." {
			l = "_"
		}
		levels[i] = l
	}
	return strings.Join(levels, "/")
}

// writeMboxMessage writes one message: From_ line, header with the status
// fields, body quoted per mboxrd, separating empty line.
func writeMboxMessage(w *bufio.Writer, m store.MessageMeta, raw []byte) error {
	date := m.InternalDate
	if date.IsZero() {
		date = time.Unix(0, 0)
	}
	fmt.Fprintf(w, "From %s %s\n", senderOf(raw), date.UTC().Format(asctime))
	eol := lineEnding(raw)
	hdrEnd := headerEnd(raw)
	writeQuoted(w, raw[:hdrEnd])
	if hdrEnd > 0 && raw[hdrEnd-1] != '\n' {
		w.WriteString(eol) // header without a final line break
	}
	w.WriteString(statusFields(m.Flags, m.Keywords, eol))
	writeQuoted(w, raw[hdrEnd:])
	if hdrEnd < len(raw) && raw[len(raw)-1] != '\n' {
		w.WriteString(eol)
	}
	w.WriteString("\n")
	if err := w.Flush(); err != nil {
		return fmt.Errorf("write mbox: %w", err)
	}
	return nil
}

// lineEnding is the line break the message uses: CRLF or LF.
func lineEnding(raw []byte) string {
	if i := bytes.IndexByte(raw, '\n'); i > 0 && raw[i-1] == '\r' {
		return "\r\n"
	}
	return "\n"
}

// headerEnd is the offset of the empty line that ends the header (or the
// end of the message when there is none).
func headerEnd(raw []byte) int {
	pos := 0
	for pos < len(raw) {
		if raw[pos] == '\n' || raw[pos] == '\r' && pos+1 < len(raw) && raw[pos+1] == '\n' {
			return pos
		}
		nl := bytes.IndexByte(raw[pos:], '\n')
		if nl < 0 {
			return len(raw)
		}
		pos += nl + 1
	}
	return len(raw)
}

// writeQuoted writes b with every line matching ^>*From  given one more
// '>' (mboxrd).
func writeQuoted(w *bufio.Writer, b []byte) {
	for len(b) > 0 {
		line := b
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			line = b[:i+1]
		}
		if needsQuote(line) {
			w.WriteByte('>')
		}
		w.Write(line)
		b = b[len(line):]
	}
}

func needsQuote(line []byte) bool {
	i := 0
	for i < len(line) && line[i] == '>' {
		i++
	}
	return bytes.HasPrefix(line[i:], []byte("From "))
}

// statusFields renders the message state as mutt and Dovecot write it.
func statusFields(f store.Flags, kws []string, eol string) string {
	var b strings.Builder
	b.WriteString("Status: ")
	if f&store.FlagSeen != 0 {
		b.WriteString("R")
	}
	b.WriteString("O" + eol)
	var xs string
	if f&store.FlagAnswered != 0 {
		xs += "A"
	}
	if f&store.FlagFlagged != 0 {
		xs += "F"
	}
	if f&store.FlagDraft != 0 {
		xs += "T"
	}
	if f&store.FlagDeleted != 0 {
		xs += "D"
	}
	if xs != "" {
		b.WriteString("X-Status: " + xs + eol)
	}
	if len(kws) > 0 {
		b.WriteString("X-Keywords: " + strings.Join(kws, " ") + eol)
	}
	return b.String()
}
