// Command importcheck prepares and checks the IMAP import measurement of
// bench/run-import.sh (issue 8: "An IMAP import of mailbox-9k.mbox, loaded
// into a second IMAP server first, keeps every message, flag and internal
// date; a re-run imports nothing twice").
//
//	importcheck load -addr 127.0.0.1:2143 -user U -pass P -mbox FILE
//	importcheck load -append -limit 3 ... (3 more messages, nothing emptied)
//	importcheck empty -addr 127.0.0.1:2143 -user U -pass P
//	importcheck dump -addr 127.0.0.1:2143 -user U -pass P -out FILE
//
// load empties the account (deletes its folders, expunges INBOX) and
// APPENDs every message of the mbox into one of a few folders, each with a
// deterministic set of flags and keywords and an internal date taken from
// the mbox's From_ line, shifted by a per-message number of seconds and
// time zone, so that a date the importer replaced by "now" or by the Date:
// header shows.
//
// dump lists every message of every folder of an account as one line,
// "folder<TAB>sha256 of BODY[]<TAB>flags<TAB>internal date in Unix
// seconds", sorted, with \Recent dropped and the flags sorted. Two dumps
// are equal exactly when both accounts hold the same messages, byte for
// byte, in the same folders with the same flags and internal dates, each
// the same number of times. The summary (messages, folders, a SHA-256 over
// the sorted lines) goes to standard error.
package main

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"

	"pimail/internal/mailimport"
)

// folders are where load puts the messages, message i into
// folders[i%len(folders)]: INBOX, a top-level folder, a nested one, and a
// name that needs modified UTF-7 (RFC 3501 §5.1.3).
var folders = []string{"INBOX", "Lists", "Archive/1996", "Projekte/Größe"}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: importcheck load|dump [flags]")
		os.Exit(2)
	}
	fs := flag.NewFlagSet(os.Args[1], flag.ExitOnError)
	addr := fs.String("addr", "127.0.0.1:2143", "IMAP server host:port (no TLS)")
	user := fs.String("user", "", "login user")
	pass := fs.String("pass", "", "password")
	mbox := fs.String("mbox", "", "load: the mbox file")
	limit := fs.Int("limit", 0, "load: at most this many messages (0: all)")
	appendOnly := fs.Bool("append", false, "load: add to the folders as they are (no emptying)")
	out := fs.String("out", "", "dump: output file")
	_ = fs.Parse(os.Args[2:])
	c, err := imapclient.DialInsecure(*addr, nil)
	if err == nil {
		err = c.Login(*user, *pass).Wait()
	}
	if err != nil {
		fatal(fmt.Errorf("connect to %s as %s: %w", *addr, *user, err))
	}
	defer c.Close()
	switch os.Args[1] {
	case "load":
		err = load(c, *mbox, *limit, *appendOnly)
	case "empty":
		err = empty(c)
	case "dump":
		err = dump(c, *out)
	default:
		err = fmt.Errorf("unknown mode %q", os.Args[1])
	}
	if err != nil {
		fatal(err)
	}
	_ = c.Logout().Wait()
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "importcheck:", err)
	os.Exit(1)
}

// flagsFor returns message i's flags: a spread over every system flag
// and two keywords, \Deleted included (an import must keep it).
func flagsFor(i int) []imap.Flag {
	var f []imap.Flag
	if i%3 != 0 {
		f = append(f, imap.FlagSeen)
	}
	if i%5 == 0 {
		f = append(f, imap.FlagAnswered)
	}
	if i%7 == 0 {
		f = append(f, imap.FlagFlagged)
	}
	if i%53 == 0 {
		f = append(f, imap.FlagDraft)
	}
	if i%97 == 0 {
		f = append(f, imap.FlagDeleted)
	}
	if i%11 == 0 {
		f = append(f, "$Forwarded")
	}
	if i%13 == 0 {
		f = append(f, "$label1")
	}
	return f
}

// dateFor shifts the From_ line date by i seconds into one of a few zones.
func dateFor(i int, from time.Time) time.Time {
	if from.IsZero() {
		from = time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC)
	}
	zones := []int{0, 3600, -5 * 3600, 5*3600 + 1800, -8 * 3600}
	return from.Add(time.Duration(i) * time.Second).In(time.FixedZone("", zones[i%len(zones)]))
}

// crlf turns bare LF line endings into CRLF, as APPEND wants them
// (RFC 9051 §6.3.12); Dovecot stores LF and sends CRLF back.
func crlf(raw []byte) []byte {
	var b bytes.Buffer
	b.Grow(len(raw) + len(raw)/30)
	for len(raw) > 0 {
		i := bytes.IndexByte(raw, '\n')
		if i < 0 {
			b.Write(raw)
			break
		}
		line := raw[:i]
		b.Write(line)
		if len(line) == 0 || line[len(line)-1] != '\r' {
			b.WriteByte('\r')
		}
		b.WriteByte('\n')
		raw = raw[i+1:]
	}
	return b.Bytes()
}

func load(c *imapclient.Client, path string, limit int, appendOnly bool) error {
	if !appendOnly {
		if err := empty(c); err != nil {
			return err
		}
		for _, f := range folders[1:] {
			if err := c.Create(f, nil).Wait(); err != nil {
				return fmt.Errorf("create %q: %w", f, err)
			}
		}
	}
	fh, err := os.Open(path)
	if err != nil {
		return err
	}
	defer fh.Close()
	r := mailimport.NewMboxReader(fh, mailimport.MboxRD, 0)
	start := time.Now()
	n := 0
	for limit == 0 || n < limit {
		m, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("mbox message %d: %w", n+1, err)
		}
		raw := crlf(m.Raw)
		cmd := c.Append(folders[n%len(folders)], int64(len(raw)), &imap.AppendOptions{
			Flags: flagsFor(n), Time: dateFor(n, m.InternalDate),
		})
		if _, err := cmd.Write(raw); err != nil {
			return fmt.Errorf("append message %d: %w", n+1, err)
		}
		if err := cmd.Close(); err != nil {
			return fmt.Errorf("append message %d: %w", n+1, err)
		}
		if _, err := cmd.Wait(); err != nil {
			return fmt.Errorf("append message %d: %w", n+1, err)
		}
		n++
	}
	el := time.Since(start)
	fmt.Fprintf(os.Stderr, "loaded %d messages into %d folders in %v (%.0f msgs/s)\n",
		n, len(folders), el.Round(time.Millisecond), float64(n)/el.Seconds())
	return nil
}

// empty deletes every folder but INBOX and expunges INBOX.
func empty(c *imapclient.Client) error {
	list, err := c.List("", "*", nil).Collect()
	if err != nil {
		return fmt.Errorf("list: %w", err)
	}
	// Children before parents.
	sort.Slice(list, func(i, j int) bool { return len(list[i].Mailbox) > len(list[j].Mailbox) })
	for _, l := range list {
		if strings.EqualFold(l.Mailbox, "INBOX") || noSelect(l) {
			continue
		}
		if err := c.Delete(l.Mailbox).Wait(); err != nil {
			return fmt.Errorf("delete %q: %w", l.Mailbox, err)
		}
	}
	sel, err := c.Select("INBOX", nil).Wait()
	if err != nil {
		return fmt.Errorf("select INBOX: %w", err)
	}
	if sel.NumMessages > 0 {
		var all imap.SeqSet
		all.AddRange(1, 0)
		if err := c.Store(all, &imap.StoreFlags{Op: imap.StoreFlagsAdd, Silent: true, Flags: []imap.Flag{imap.FlagDeleted}}, nil).Close(); err != nil {
			return fmt.Errorf("store \\Deleted: %w", err)
		}
		if err := c.Expunge().Close(); err != nil {
			return fmt.Errorf("expunge: %w", err)
		}
	}
	return c.Unselect().Wait()
}

// noSelect reports whether a listed name is only a hierarchy level.
func noSelect(l *imap.ListData) bool {
	return slices.ContainsFunc(l.Attrs, func(a imap.MailboxAttr) bool {
		return strings.EqualFold(string(a), string(imap.MailboxAttrNoSelect)) ||
			strings.EqualFold(string(a), string(imap.MailboxAttrNonExistent))
	})
}

func dump(c *imapclient.Client, out string) error {
	list, err := c.List("", "*", nil).Collect()
	if err != nil {
		return fmt.Errorf("list: %w", err)
	}
	var lines []string
	nonEmpty := 0
	for _, l := range list {
		if noSelect(l) {
			continue
		}
		sel, err := c.Select(l.Mailbox, &imap.SelectOptions{ReadOnly: true}).Wait()
		if err != nil {
			return fmt.Errorf("examine %q: %w", l.Mailbox, err)
		}
		if sel.NumMessages == 0 {
			continue
		}
		nonEmpty++
		name := l.Mailbox
		if strings.EqualFold(name, "INBOX") {
			name = "INBOX"
		}
		var all imap.SeqSet
		all.AddRange(1, 0)
		cmd := c.Fetch(all, &imap.FetchOptions{
			UID: true, Flags: true, InternalDate: true,
			BodySection: []*imap.FetchItemBodySection{{Peek: true}},
		})
		for {
			msg := cmd.Next()
			if msg == nil {
				break
			}
			var sum, flags string
			var date time.Time
			for {
				item := msg.Next()
				if item == nil {
					break
				}
				switch it := item.(type) {
				case imapclient.FetchItemDataFlags:
					var fl []string
					for _, f := range it.Flags {
						if !strings.EqualFold(string(f), `\Recent`) {
							fl = append(fl, strings.ToLower(string(f)))
						}
					}
					sort.Strings(fl)
					flags = strings.Join(fl, " ")
				case imapclient.FetchItemDataInternalDate:
					date = it.Time
				case imapclient.FetchItemDataBodySection:
					h := sha256.New()
					if _, err := io.Copy(h, it.Literal); err != nil {
						return fmt.Errorf("read body in %q: %w", name, err)
					}
					sum = hex.EncodeToString(h.Sum(nil))
				}
			}
			lines = append(lines, name+"\t"+sum+"\t"+flags+"\t"+strconv.FormatInt(date.Unix(), 10))
		}
		if err := cmd.Close(); err != nil {
			return fmt.Errorf("fetch %q: %w", name, err)
		}
	}
	sort.Strings(lines)
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	h := sha256.New()
	for _, l := range lines {
		w.WriteString(l + "\n")
		h.Write([]byte(l + "\n"))
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "%d messages in %d folders; sha256 of the sorted list %s\n",
		len(lines), nonEmpty, hex.EncodeToString(h.Sum(nil))[:16])
	return nil
}
