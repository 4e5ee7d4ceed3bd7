package mailimport

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"pimail/internal/store"
)

// Message is one message read from a source, ready to be stored.
type Message struct {
	Raw          []byte
	Flags        store.Flags
	Keywords     []string
	InternalDate time.Time // zero means now
}

// Stats counts what an import did.
type Stats struct {
	Messages  int   // stored
	Bytes     int64 // stored bytes
	Skipped   int   // not stored (too large, already imported, invalid)
	Mailboxes int   // mailboxes written to
	Errors    int   // folders or messages that failed (logged)
}

// Add adds o to s.
func (s *Stats) Add(o Stats) {
	s.Messages += o.Messages
	s.Bytes += o.Bytes
	s.Skipped += o.Skipped
	s.Mailboxes += o.Mailboxes
	s.Errors += o.Errors
}

// DefaultMaxMessageSize bounds one message read from a source (and so the
// memory an import needs); larger messages are skipped and counted.
const DefaultMaxMessageSize = 64 << 20

// Store is what an import needs of the store: the account, its
// mailboxes (created and subscribed as in the source), the messages
// already there (to skip them again) and Append.
type Store interface {
	store.DirectoryReader
	store.MailboxReader
	store.MailboxWriter
	store.MessageReader
	store.BlobReader
	store.Appender
}

// Importer stores messages into one account.
type Importer struct {
	st   Store
	acct store.Account
	log  *slog.Logger
	// MaxMessageSize is the largest message read; 0 means DefaultMaxMessageSize.
	MaxMessageSize int64
	// Progress, when set, is called after every stored message.
	Progress func(Stats)

	mu      sync.Mutex // guards stats and touched (an IMAP import runs folders in parallel)
	stats   Stats
	touched map[int64]bool
}

// New returns an importer into the account with the given address.
func New(ctx context.Context, st Store, address string, log *slog.Logger) (*Importer, error) {
	if log == nil {
		log = slog.Default()
	}
	acct, err := st.Account(ctx, strings.ToLower(strings.TrimSpace(address)))
	if err != nil {
		return nil, fmt.Errorf("account %s: %w", address, err)
	}
	return &Importer{st: st, acct: acct, log: log, touched: map[int64]bool{}}, nil
}

// Account is the account messages are imported into.
func (im *Importer) Account() store.Account { return im.acct }

// Stats returns what has been imported so far.
func (im *Importer) Stats() Stats {
	im.mu.Lock()
	defer im.mu.Unlock()
	return im.stats
}

func (im *Importer) maxSize() int64 {
	if im.MaxMessageSize > 0 {
		return im.MaxMessageSize
	}
	return DefaultMaxMessageSize
}

// Mailbox returns the local mailbox with the given name, creating it (and
// its parents) when missing. When specialUse is set and the account has a
// mailbox with that special use, that mailbox is returned instead.
func (im *Importer) Mailbox(ctx context.Context, name, specialUse string) (store.Mailbox, error) {
	if specialUse != "" {
		mbs, err := im.st.Mailboxes(ctx, im.acct.ID)
		if err != nil {
			return store.Mailbox{}, fmt.Errorf("list mailboxes: %w", err)
		}
		for _, mb := range mbs {
			if mb.SpecialUse == specialUse {
				return mb, nil
			}
		}
	}
	mb, err := im.st.Mailbox(ctx, im.acct.ID, name)
	if err == nil {
		return mb, nil
	}
	if !errors.Is(err, store.ErrNotFound) {
		return store.Mailbox{}, fmt.Errorf("mailbox %q: %w", name, err)
	}
	mb, err = im.st.CreateMailbox(ctx, im.acct.ID, name, specialUse)
	if errors.Is(err, store.ErrExists) {
		mb, err = im.st.Mailbox(ctx, im.acct.ID, name)
	} else if err == nil {
		// Imported folders are subscribed, so that IMAP clients that
		// list subscribed folders show them (store/subscriptions.go).
		err = im.st.SetSubscribed(ctx, im.acct.ID, name, true)
	}
	if err != nil {
		return store.Mailbox{}, fmt.Errorf("create mailbox %q: %w", name, err)
	}
	im.log.Info("created mailbox", "mailbox", name)
	return mb, nil
}

// Append stores one message into a mailbox. Keywords the store refuses
// (not an IMAP atom) are dropped with a warning rather than losing the
// message.
func (im *Importer) Append(ctx context.Context, mb store.Mailbox, m *Message) (store.Delivered, error) {
	kws := validKeywords(m.Keywords)
	if len(kws) != len(m.Keywords) {
		im.log.Warn("dropped keywords that are not IMAP atoms", "mailbox", mb.Name, "keywords", m.Keywords)
	}
	d, err := im.st.Append(ctx, mb.ID, m.Raw, m.Flags, kws, m.InternalDate)
	if err != nil {
		return store.Delivered{}, fmt.Errorf("append to %q: %w", mb.Name, err)
	}
	im.mu.Lock()
	defer im.mu.Unlock()
	if !im.touched[mb.ID] {
		im.touched[mb.ID] = true
		im.stats.Mailboxes++
	}
	im.stats.Messages++
	im.stats.Bytes += int64(len(m.Raw))
	if im.Progress != nil {
		im.Progress(im.stats)
	}
	return d, nil
}

// skip counts a message that was not stored.
func (im *Importer) skip(reason string, args ...any) {
	im.mu.Lock()
	im.stats.Skipped++
	im.mu.Unlock()
	im.log.Warn("message skipped: "+reason, args...)
}

// fail counts an error that did not stop the import.
func (im *Importer) fail(msg string, args ...any) {
	im.mu.Lock()
	im.stats.Errors++
	im.mu.Unlock()
	im.log.Error(msg, args...)
}

// validKeywords keeps the keywords that are IMAP atoms (RFC 9051 §9:
// flag-keyword = atom, without atom-specials) and not system flags.
func validKeywords(kws []string) []string {
	out := kws[:0:0]
	for _, k := range kws {
		if isAtom(k) && !strings.HasPrefix(k, `\`) {
			out = append(out, k)
		}
	}
	return out
}

func isAtom(s string) bool {
	if s == "" || len(s) > 200 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c <= ' ' || c >= 0x7f || strings.IndexByte(`(){%*"\]`, c) >= 0 {
			return false
		}
	}
	return true
}
