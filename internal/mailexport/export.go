// Package mailexport writes a pimail account's mail out as mbox files or as
// a Maildir++ tree, the formats internal/mailimport reads back: an export
// imported again gives the same messages (byte for byte), flags, keywords
// and internal dates (to the second).
//
// # mbox (mboxrd)
//
// Each message is written as a From_ line ("From <sender> <asctime in
// UTC>"; the sender is the first address of From:, else MAILER-DAEMON),
// the message with every line matching ^>*From  given one more '>'
// (mboxrd, reversible), and an empty line (RFC 4155). The state of the
// message is added at the end of its header, as mutt and Dovecot write it:
// "Status: RO" (R when \Seen), "X-Status:" with A \Answered, F \Flagged,
// T \Draft, D \Deleted, and "X-Keywords:" with the keywords. A message that
// does not end with a line break gets one (mbox cannot represent it).
//
// # Maildir++
//
// INBOX is the root (cur/ new/ tmp/), every other mailbox a ".Sub.Folder"
// directory with a maildirfolder file, its levels in modified UTF-7 (a '.'
// inside a level, which Maildir++ cannot hold, becomes '_'). Messages go to
// cur/ as "<date>.M<n>U<uid>V<uidvalidity>.<host>:2,<flags>" with the flags
// D F P R S T (P is $Forwarded) and the letters a–z for other keywords,
// which are listed in the folder's dovecot-keywords file (26 at most; more
// are dropped with a warning). The file's mtime is the internal date. A
// subscriptions file lists the subscribed folders. Files are written in
// tmp/ and renamed into cur/, but not fsynced: an export interrupted by a
// crash is simply run again.
package mailexport

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"pimail/internal/message"
	"pimail/internal/store"
)

// Stats counts what an export wrote.
type Stats struct {
	Mailboxes int
	Messages  int
	Bytes     int64 // message bytes (without From_ lines and added headers)
}

// Store is what an export reads of the store.
type Store interface {
	store.DirectoryReader
	store.MailboxReader
	store.MessageReader
	store.BlobReader
}

// Exporter reads one account's mail.
type Exporter struct {
	st    Store
	acct  store.Account
	log   *slog.Logger
	stats Stats
}

// New returns an exporter of the account with the given address.
func New(ctx context.Context, st Store, address string, log *slog.Logger) (*Exporter, error) {
	if log == nil {
		log = slog.Default()
	}
	acct, err := st.Account(ctx, strings.ToLower(strings.TrimSpace(address)))
	if err != nil {
		return nil, fmt.Errorf("account %s: %w", address, err)
	}
	return &Exporter{st: st, acct: acct, log: log}, nil
}

// Stats returns what has been written so far.
func (e *Exporter) Stats() Stats { return e.stats }

// Mailboxes returns the named mailbox, or all of the account's mailboxes
// when name is empty.
func (e *Exporter) Mailboxes(ctx context.Context, name string) ([]store.Mailbox, error) {
	if name != "" {
		mb, err := e.st.Mailbox(ctx, e.acct.ID, name)
		if err != nil {
			return nil, fmt.Errorf("mailbox %q: %w", name, err)
		}
		return []store.Mailbox{mb}, nil
	}
	mbs, err := e.st.Mailboxes(ctx, e.acct.ID)
	if err != nil {
		return nil, fmt.Errorf("list mailboxes: %w", err)
	}
	return mbs, nil
}

// each calls fn for every message of the mailbox in UID order with its
// metadata and bytes; only one message is held in memory at a time.
func (e *Exporter) each(ctx context.Context, mb store.Mailbox, fn func(m store.MessageMeta, raw []byte) error) error {
	metas, err := e.st.UIDs(ctx, mb.ID)
	if err != nil {
		return fmt.Errorf("list messages of %q: %w", mb.Name, err)
	}
	for _, m := range metas {
		if err := ctx.Err(); err != nil {
			return err
		}
		raw, err := e.st.ReadBlob(ctx, m.BlobID)
		if errors.Is(err, store.ErrNotFound) {
			continue // expunged meanwhile
		}
		if err != nil {
			return fmt.Errorf("read message %d of %q: %w", m.UID, mb.Name, err)
		}
		if err := fn(m, raw); err != nil {
			return err
		}
		e.stats.Messages++
		e.stats.Bytes += int64(len(raw))
	}
	e.stats.Mailboxes++
	return nil
}

// senderOf is the address for a From_ line: the first From: address, or
// MAILER-DAEMON when there is none or it would not be one word.
func senderOf(raw []byte) string {
	for _, f := range message.HeaderFields(raw) {
		if !strings.EqualFold(f.Name, "From") {
			continue
		}
		for _, a := range message.ParseAddressList(f.Unfolded()) {
			if s := a.Addr(); s != "" && !strings.ContainsAny(s, " \t\r\n") {
				return s
			}
		}
		break
	}
	return "MAILER-DAEMON"
}
