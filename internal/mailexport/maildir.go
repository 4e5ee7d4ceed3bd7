package mailexport

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"pimail/internal/imapwire"
	"pimail/internal/store"
)

// keywordForwarded is written as Maildir's P flag.
const keywordForwarded = "$Forwarded"

// MaildirFolderDir is the Maildir++ directory of a mailbox, relative to
// the root: "" for INBOX, ".Sub.Folder" for "Sub/Folder".
func MaildirFolderDir(name string) string {
	if strings.EqualFold(name, "INBOX") {
		return ""
	}
	levels := strings.Split(name, store.HierarchySeparator)
	for i, l := range levels {
		levels[i] = imapwire.EncodeMUTF7(strings.ReplaceAll(l, ".", "_"))
	}
	return "." + strings.Join(levels, ".")
}

// ExportMaildir writes the mailboxes into a new Maildir++ tree at root
// (which must not exist or be empty).
func (e *Exporter) ExportMaildir(ctx context.Context, root string, mbs []store.Mailbox) error {
	if err := checkEmptyDir(root); err != nil {
		return err
	}
	host := maildirHost()
	var subscribed []string
	for _, mb := range mbs {
		rel := MaildirFolderDir(mb.Name)
		if strings.Contains(mb.Name, ".") {
			e.log.Warn("'.' in a mailbox name becomes '_' in Maildir++", "mailbox", mb.Name)
		}
		dir := filepath.Join(root, rel)
		if err := makeMaildir(dir, rel != ""); err != nil {
			return err
		}
		if err := e.exportMaildirFolder(ctx, dir, mb, host); err != nil {
			return err
		}
		if mb.Subscribed && rel != "" {
			subscribed = append(subscribed, strings.TrimPrefix(rel, "."))
		}
	}
	if len(subscribed) > 0 {
		data := strings.Join(subscribed, "\n") + "\n"
		if err := os.WriteFile(filepath.Join(root, "subscriptions"), []byte(data), 0o600); err != nil {
			return fmt.Errorf("write subscriptions: %w", err)
		}
	}
	return nil
}

// checkEmptyDir accepts a missing or empty directory.
func checkEmptyDir(dir string) error {
	f, err := os.Open(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("export directory: %w", err)
	}
	defer f.Close()
	if _, err := f.Readdirnames(1); err == nil {
		return fmt.Errorf("export directory %s is not empty", dir)
	} else if !errors.Is(err, io.EOF) {
		return fmt.Errorf("export directory %s: %w", dir, err)
	}
	return nil
}

// makeMaildir creates cur/, new/ and tmp/ (and the maildirfolder marker of
// a Maildir++ subfolder).
func makeMaildir(dir string, folder bool) error {
	for _, sub := range []string{"cur", "new", "tmp"} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o700); err != nil {
			return fmt.Errorf("create maildir: %w", err)
		}
	}
	if folder {
		if err := os.WriteFile(filepath.Join(dir, "maildirfolder"), nil, 0o600); err != nil {
			return fmt.Errorf("create maildirfolder: %w", err)
		}
	}
	return nil
}

// maildirHost is the host part of file names, with '/' and ':' escaped as
// the Maildir specification asks.
func maildirHost() string {
	h, err := os.Hostname()
	if err != nil || h == "" {
		h = "localhost"
	}
	return strings.NewReplacer("/", `\057`, ":", `\072`).Replace(h)
}

func (e *Exporter) exportMaildirFolder(ctx context.Context, dir string, mb store.Mailbox, host string) error {
	letters := map[string]byte{} // keyword → a..z
	var order []string
	n := 0
	err := e.each(ctx, mb, func(m store.MessageMeta, raw []byte) error {
		info := maildirInfo(m.Flags, m.Keywords, func(kw string) (byte, bool) {
			if c, ok := letters[kw]; ok {
				return c, true
			}
			if len(order) == 26 {
				e.log.Warn("more than 26 keywords in a folder: keyword dropped", "mailbox", mb.Name, "keyword", kw)
				return 0, false
			}
			c := byte('a' + len(order))
			letters[kw] = c
			order = append(order, kw)
			return c, true
		})
		n++
		date := m.InternalDate
		name := fmt.Sprintf("%d.M%dU%dV%d.%s:2,%s", date.Unix(), n, m.UID, mb.UIDValidity, host, info)
		return writeMaildirFile(dir, name, raw, date)
	})
	if err != nil {
		return err
	}
	if len(order) > 0 {
		var b strings.Builder
		for i, kw := range order {
			b.WriteString(strconv.Itoa(i) + " " + kw + "\n")
		}
		if err := os.WriteFile(filepath.Join(dir, "dovecot-keywords"), []byte(b.String()), 0o600); err != nil {
			return fmt.Errorf("write dovecot-keywords: %w", err)
		}
	}
	return nil
}

// maildirInfo renders the flags after ":2,", in ASCII order as the
// Maildir specification requires.
func maildirInfo(f store.Flags, kws []string, letter func(string) (byte, bool)) string {
	var b []byte
	if f&store.FlagDraft != 0 {
		b = append(b, 'D')
	}
	if f&store.FlagFlagged != 0 {
		b = append(b, 'F')
	}
	var lower []byte
	forwarded := false
	for _, kw := range kws {
		if strings.EqualFold(kw, keywordForwarded) {
			forwarded = true
			continue
		}
		if c, ok := letter(kw); ok {
			lower = append(lower, c)
		}
	}
	if forwarded {
		b = append(b, 'P')
	}
	if f&store.FlagAnswered != 0 {
		b = append(b, 'R')
	}
	if f&store.FlagSeen != 0 {
		b = append(b, 'S')
	}
	if f&store.FlagDeleted != 0 {
		b = append(b, 'T')
	}
	sort.Slice(lower, func(i, j int) bool { return lower[i] < lower[j] })
	return string(append(b, lower...))
}

// writeMaildirFile writes a message to tmp/ and renames it into cur/, with
// the internal date as its modification time.
func writeMaildirFile(dir, name string, raw []byte, date time.Time) error {
	tmp := filepath.Join(dir, "tmp", name)
	if err := os.WriteFile(tmp, raw, 0o600); err != nil {
		return fmt.Errorf("write message: %w", err)
	}
	if !date.IsZero() {
		if err := os.Chtimes(tmp, date, date); err != nil {
			return fmt.Errorf("set message date: %w", err)
		}
	}
	if err := os.Rename(tmp, filepath.Join(dir, "cur", name)); err != nil {
		return fmt.Errorf("move message into cur: %w", err)
	}
	return nil
}
