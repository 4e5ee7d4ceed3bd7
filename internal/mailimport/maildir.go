package mailimport

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"pimail/internal/imapwire"
	"pimail/internal/store"
)

// MaildirFolder is one folder of a Maildir++ tree.
type MaildirFolder struct {
	Name string // pimail mailbox name ("INBOX", "Sub/Folder")
	Path string // directory holding cur/ and new/
}

// isMaildir reports whether dir holds a cur/ or new/ directory.
func isMaildir(dir string) bool {
	for _, sub := range []string{"cur", "new"} {
		if fi, err := os.Stat(filepath.Join(dir, sub)); err == nil && fi.IsDir() {
			return true
		}
	}
	return false
}

// MaildirFolderName turns a Maildir++ folder directory name (".Sub.Folder",
// levels separated by '.', each in modified UTF-7, RFC 3501 §5.1.3) into
// a pimail mailbox name ("Sub/Folder"). A leading "INBOX." (Courier's
// subscriptions) is dropped.
func MaildirFolderName(dir string) (string, error) {
	s := strings.TrimPrefix(dir, ".")
	if len(s) > 6 && strings.EqualFold(s[:6], "INBOX.") {
		s = s[6:]
	}
	if s == "" || strings.EqualFold(s, "INBOX") {
		return "INBOX", nil
	}
	levels := strings.Split(s, ".")
	for i, l := range levels {
		if l == "" {
			return "", fmt.Errorf("folder %q: empty level", dir)
		}
		d, err := imapwire.DecodeMUTF7(l)
		if err != nil {
			d = l // not modified UTF-7: take it as written
		}
		levels[i] = d
	}
	return strings.Join(levels, store.HierarchySeparator), nil
}

// MaildirFolders lists the folders of a Maildir++ tree: root itself as
// INBOX (when it is a maildir) and its ".Name" subdirectories, sorted so
// that parents come before their children.
func MaildirFolders(root string) ([]MaildirFolder, error) {
	var out []MaildirFolder
	if isMaildir(root) {
		out = append(out, MaildirFolder{Name: "INBOX", Path: root})
	}
	entries, err := os.ReadDir(root)
	if err != nil {
		return nil, fmt.Errorf("read maildir: %w", err)
	}
	for _, e := range entries {
		n := e.Name()
		if !strings.HasPrefix(n, ".") || n == "." || n == ".." {
			continue
		}
		p := filepath.Join(root, n)
		if fi, err := os.Stat(p); err != nil || !fi.IsDir() || !isMaildir(p) {
			continue
		}
		name, err := MaildirFolderName(n)
		if err != nil {
			return nil, err
		}
		out = append(out, MaildirFolder{Name: name, Path: p})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: not a maildir (no cur/ or new/ and no .Folder subdirectories)", root)
	}
	slices.SortStableFunc(out, func(a, b MaildirFolder) int {
		if a.Name == "INBOX" {
			return -1
		}
		if b.Name == "INBOX" {
			return 1
		}
		return strings.Compare(a.Name, b.Name)
	})
	return out, nil
}

// maildirFile is one message file of a folder.
type maildirFile struct {
	path      string
	delivered int64  // seconds, from the start of the name; 0 if unknown
	info      string // the flags after ":2,", empty in new/
}

// parseMaildirName splits a file name "time.unique.host:2,FLAGS" (the
// Maildir specification by D. J. Bernstein; ';' stands for ':' on file
// systems without colons).
func parseMaildirName(name string) (delivered int64, info string) {
	base := name
	for _, sep := range []string{":2,", ";2,", "!2,"} {
		if i := strings.LastIndex(name, sep); i >= 0 {
			base, info = name[:i], name[i+len(sep):]
			break
		}
	}
	if i := strings.IndexByte(base, '.'); i > 0 {
		if n, err := strconv.ParseInt(base[:i], 10, 64); err == nil && n > 0 {
			delivered = n
		}
	}
	return delivered, info
}

// listMaildir returns the message files of a folder (cur/ and new/) in
// delivery order.
func listMaildir(dir string) ([]maildirFile, error) {
	var out []maildirFile
	for _, sub := range []string{"cur", "new"} {
		entries, err := os.ReadDir(filepath.Join(dir, sub))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", sub, err)
		}
		for _, e := range entries {
			if e.IsDir() || strings.HasPrefix(e.Name(), ".") {
				continue
			}
			f := maildirFile{path: filepath.Join(dir, sub, e.Name())}
			f.delivered, f.info = parseMaildirName(e.Name())
			if sub == "new" {
				f.info = "" // messages in new/ have not been seen by a client
			}
			out = append(out, f)
		}
	}
	slices.SortFunc(out, func(a, b maildirFile) int {
		if a.delivered != b.delivered {
			if a.delivered < b.delivered {
				return -1
			}
			return 1
		}
		return naturalCompare(filepath.Base(a.path), filepath.Base(b.path))
	})
	return out, nil
}

// naturalCompare orders names with runs of digits compared as numbers, so
// that "1.M2" comes before "1.M10" (the unique part of a Maildir name
// usually counts up within a second).
// Names equal that way are ordered as plain strings.
func naturalCompare(a, b string) int {
	if c := naturalCompareRuns(a, b); c != 0 {
		return c
	}
	return strings.Compare(a, b)
}

func naturalCompareRuns(a, b string) int {
	for a != "" && b != "" {
		da, db := digitRun(a), digitRun(b)
		if da > 0 && db > 0 {
			na, nb := strings.TrimLeft(a[:da], "0"), strings.TrimLeft(b[:db], "0")
			if len(na) != len(nb) {
				return cmp.Compare(len(na), len(nb))
			}
			if c := strings.Compare(na, nb); c != 0 {
				return c
			}
			a, b = a[da:], b[db:]
			continue
		}
		if a[0] != b[0] {
			return cmp.Compare(a[0], b[0])
		}
		a, b = a[1:], b[1:]
	}
	return cmp.Compare(len(a), len(b))
}

func digitRun(s string) int {
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	return i
}

// readDovecotKeywords reads a folder's dovecot-keywords file, which maps
// the lower case info letters a, b, c… (index 0, 1, 2…) to keyword names:
// one "index name" pair a line.
func readDovecotKeywords(dir string) (map[byte]string, error) {
	f, err := os.Open(filepath.Join(dir, "dovecot-keywords"))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("open dovecot-keywords: %w", err)
	}
	defer f.Close()
	m := map[byte]string{}
	sc := bufio.NewScanner(io.LimitReader(f, 1<<20))
	for sc.Scan() {
		idx, name, ok := strings.Cut(strings.TrimSpace(sc.Text()), " ")
		n, err := strconv.Atoi(idx)
		if !ok || err != nil || n < 0 || n >= 26 || name == "" {
			continue
		}
		m[byte('a'+n)] = strings.TrimSpace(name)
	}
	return m, sc.Err()
}

// maildirFlags maps the info letters to flags and keywords.
func maildirFlags(info string, kwmap map[byte]string) (store.Flags, []string) {
	var f store.Flags
	var kws []string
	for i := 0; i < len(info); i++ {
		switch c := info[i]; c {
		case 'D':
			f |= store.FlagDraft
		case 'F':
			f |= store.FlagFlagged
		case 'P':
			kws = append(kws, KeywordForwarded)
		case 'R':
			f |= store.FlagAnswered
		case 'S':
			f |= store.FlagSeen
		case 'T':
			f |= store.FlagDeleted
		default:
			if k, ok := kwmap[c]; ok {
				kws = append(kws, k)
			}
		}
	}
	return f, kws
}

// maildirDate is the internal date of a message file: its modification
// time, else the delivery time of its name, else zero (the Date: header is
// used by the caller).
func maildirDate(fi os.FileInfo, delivered int64) time.Time {
	if mt := fi.ModTime(); mt.Year() > 1970 {
		return mt
	}
	if delivered > 0 {
		return time.Unix(delivered, 0)
	}
	return time.Time{}
}

// ImportMaildir imports every folder of the Maildir++ tree at root.
// A folder that fails is logged and counted, and the others continue.
func (im *Importer) ImportMaildir(ctx context.Context, root string) error {
	folders, err := MaildirFolders(root)
	if err != nil {
		return err
	}
	for _, f := range folders {
		if err := im.importMaildirFolder(ctx, f); err != nil {
			if ctx.Err() != nil {
				return err
			}
			im.fail("maildir folder failed", "folder", f.Name, "err", err)
		}
	}
	im.applySubscriptions(ctx, root)
	return nil
}

func (im *Importer) importMaildirFolder(ctx context.Context, f MaildirFolder) error {
	mb, err := im.Mailbox(ctx, f.Name, "")
	if err != nil {
		return err
	}
	kwmap, err := readDovecotKeywords(f.Path)
	if err != nil {
		return err
	}
	files, err := listMaildir(f.Path)
	if err != nil {
		return err
	}
	for _, mf := range files {
		if err := ctx.Err(); err != nil {
			return err
		}
		fi, err := os.Stat(mf.path)
		if err != nil {
			im.skip("cannot stat", "file", mf.path, "err", err)
			continue
		}
		if fi.Size() > im.maxSize() || fi.Size() == 0 {
			im.skip("empty or too large", "file", mf.path, "size", fi.Size())
			continue
		}
		raw, err := os.ReadFile(mf.path)
		if err != nil {
			im.skip("cannot read", "file", mf.path, "err", err)
			continue
		}
		m := &Message{Raw: raw, InternalDate: maildirDate(fi, mf.delivered)}
		if m.InternalDate.IsZero() {
			m.InternalDate = headerDate(raw)
		}
		m.Flags, m.Keywords = maildirFlags(mf.info, kwmap)
		if _, err := im.Append(ctx, mb, m); err != nil {
			return err
		}
	}
	return nil
}

// applySubscriptions marks the folders listed in the Maildir++
// subscriptions file (one folder a line, '.'-separated) as subscribed.
func (im *Importer) applySubscriptions(ctx context.Context, root string) {
	data, err := os.ReadFile(filepath.Join(root, "subscriptions"))
	if err != nil {
		return
	}
	for _, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		name, err := MaildirFolderName(line)
		if err != nil {
			continue
		}
		if err := im.st.SetSubscribed(ctx, im.acct.ID, name, true); err != nil && !errors.Is(err, store.ErrNotFound) {
			im.log.Warn("subscribe failed", "mailbox", name, "err", err)
		}
	}
}
