package mailimport

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// MboxMailboxName is the default mailbox for an mbox file: its base name
// without a .mbox or .mbx extension ("inbox" in any case means INBOX).
func MboxMailboxName(path string) string {
	name := filepath.Base(path)
	for _, ext := range []string{".mbox", ".mbx"} {
		if strings.HasSuffix(strings.ToLower(name), ext) && len(name) > len(ext) {
			name = name[:len(name)-len(ext)]
			break
		}
	}
	if strings.EqualFold(name, "INBOX") {
		return "INBOX"
	}
	return name
}

// ImportMboxFile imports the mbox file at path into the named mailbox.
func (im *Importer) ImportMboxFile(ctx context.Context, path, mailbox string, variant MboxVariant) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("open mbox: %w", err)
	}
	defer f.Close()
	if err := im.ImportMbox(ctx, f, mailbox, variant); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// ImportMbox reads an mbox stream and appends its messages, in file order,
// to the named mailbox (created when missing). Oversized and empty
// messages are skipped and counted; a store error stops the import.
func (im *Importer) ImportMbox(ctx context.Context, r io.Reader, mailbox string, variant MboxVariant) error {
	mb, err := im.Mailbox(ctx, mailbox, "")
	if err != nil {
		return err
	}
	mr := NewMboxReader(r, variant, im.maxSize())
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		m, err := mr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if errors.Is(err, errTooLarge) || errors.Is(err, errEmpty) {
			im.skip(err.Error(), "mailbox", mailbox)
			continue
		}
		if err != nil {
			return err
		}
		if _, err := im.Append(ctx, mb, m); err != nil {
			return err
		}
	}
}
