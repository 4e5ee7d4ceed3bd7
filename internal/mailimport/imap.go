package mailimport

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"

	"pimail/internal/store"
)

// Security is how an IMAP import connects.
type Security int

const (
	SecurityTLS      Security = iota // implicit TLS (port 993)
	SecurityStartTLS                 // STARTTLS (RFC 9051 §6.2.1), port 143
	SecurityInsecure                 // plain text; only for trusted networks
)

// DefaultBatch is how many messages one UID FETCH asks for.
const DefaultBatch = 200

// IMAPSource is a remote account to import.
type IMAPSource struct {
	Addr      string // host:port
	User      string
	Password  string
	Security  Security
	TLSConfig *tls.Config // nil: system roots, ServerName from Addr
	// Batch is the number of messages per UID FETCH; 0 means DefaultBatch.
	Batch int
	// StatePath is the journal file (see IMAPStatePath); required.
	StatePath string
	// Reimport imports again, from the start, folders whose UIDVALIDITY
	// changed since the last run (which may copy messages twice);
	// otherwise such folders are skipped with an error.
	Reimport bool
	// IncludeAll also imports virtual \All folders (Gmail's "All Mail"),
	// which hold copies of messages from the other folders.
	IncludeAll bool
	// DialTimeout bounds connecting and the TLS handshake; 0 means 30 s.
	DialTimeout time.Duration
	// Connections is how many folders are copied at once, each over its
	// own connection; 0 means DefaultConnections. Servers limit the
	// connections of one user (Dovecot 10 per address, Gmail 15); when
	// the server refuses one, the import goes on with fewer.
	Connections int
}

// remoteFolder is one folder of the remote account.
type remoteFolder struct {
	name       string // remote name (decoded from modified UTF-7 by the client)
	local      string // local mailbox name
	specialUse string
}

// ImportIMAP copies every selectable folder of the remote account. It
// continues an earlier run from its journal. A folder that fails is
// logged and counted, and the others continue; a connection or store
// failure ends the import with an error (the journal keeps what is done).
//
// Folders are imported Connections at a time, each worker over its own
// connection, so that the store's group commit and the message files'
// fsyncs of one folder overlap with another's. The messages of one local
// mailbox always come from one worker, in remote UID order, so that the
// local UIDs keep the remote order and the resume check (the newest local
// message against the first remote one left) stays valid; remote folders
// that land in the same local mailbox (two \Sent folders) are imported
// one after the other by the same worker.
func (im *Importer) ImportIMAP(ctx context.Context, src IMAPSource) error {
	if src.StatePath == "" {
		return errors.New("imap import: no state path")
	}
	if src.Batch <= 0 {
		src.Batch = DefaultBatch
	}
	if src.Connections <= 0 {
		src.Connections = DefaultConnections
	}
	j, err := openJournal(src.StatePath)
	if err != nil {
		return err
	}
	defer j.Close()

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	c, err := dialLogin(ctx, src)
	if err != nil {
		return err
	}
	defer c.Close()
	folders, err := listFolders(c, src.IncludeAll)
	if err != nil {
		return err
	}
	im.log.Info("remote folders", "count", len(folders))
	groups, err := im.localGroups(ctx, folders)
	if err != nil {
		return err
	}

	work := make(chan []localFolder)
	var (
		wg       sync.WaitGroup
		fatalMu  sync.Mutex
		fatalErr error
	)
	fatal := func(err error) {
		fatalMu.Lock()
		if fatalErr == nil {
			fatalErr = err
		}
		fatalMu.Unlock()
		cancel()
	}
	worker := func(c *imapclient.Client) {
		defer wg.Done()
		for g := range work {
			for _, f := range g {
				if ctx.Err() != nil {
					return
				}
				err := im.importFolder(ctx, c, j, f.remoteFolder, f.mb, src)
				if err == nil {
					continue
				}
				if ctx.Err() != nil {
					return
				}
				var se errStore
				if errors.As(err, &se) || isConnError(c) {
					fatal(err)
					return
				}
				im.fail("imap folder failed", "folder", f.name, "err", err)
			}
		}
	}
	conns := []*imapclient.Client{c}
	for range min(src.Connections, len(groups)) - 1 {
		// More connections are a speed-up, not a need: a server that
		// limits connections per user leaves the import with fewer.
		extra, err := dialLogin(ctx, src)
		if err != nil {
			im.log.Info("imap import continues with fewer connections", "connections", len(conns), "err", err)
			break
		}
		defer extra.Close()
		conns = append(conns, extra)
	}
	for _, conn := range conns {
		wg.Add(1)
		go worker(conn)
	}
feed:
	for _, g := range groups {
		select {
		case work <- g:
		case <-ctx.Done():
			break feed
		}
	}
	close(work)
	wg.Wait()
	if fatalErr != nil {
		return fatalErr
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	for _, conn := range conns {
		if err := conn.Logout().Wait(); err != nil {
			im.log.Debug("imap logout", "err", err)
		}
	}
	return nil
}

// DefaultConnections is how many folders an IMAP import copies at once.
const DefaultConnections = 4

// dialLogin connects and logs in; cancelling ctx closes the connection
// (the client's commands take no context).
func dialLogin(ctx context.Context, src IMAPSource) (*imapclient.Client, error) {
	c, err := dialIMAP(src)
	if err != nil {
		return nil, err
	}
	context.AfterFunc(ctx, func() { c.Close() })
	if err := c.Login(src.User, src.Password).Wait(); err != nil {
		c.Close()
		return nil, fmt.Errorf("imap login as %s: %w", src.User, err)
	}
	return c, nil
}

// localFolder is a remote folder with the local mailbox it goes into.
type localFolder struct {
	remoteFolder
	mb store.Mailbox
}

// localGroups finds (or creates) the local mailbox of every remote folder
// and groups the folders by it, in the order of folders.
func (im *Importer) localGroups(ctx context.Context, folders []remoteFolder) ([][]localFolder, error) {
	var groups [][]localFolder
	index := map[int64]int{}
	for _, f := range folders {
		mb, err := im.Mailbox(ctx, f.local, f.specialUse)
		if err != nil {
			return nil, errStore{err}
		}
		i, ok := index[mb.ID]
		if !ok {
			i = len(groups)
			index[mb.ID] = i
			groups = append(groups, nil)
		}
		groups[i] = append(groups[i], localFolder{f, mb})
	}
	return groups, nil
}

// errStore marks a local failure that must stop the import.
type errStore struct{ error }

func (e errStore) Unwrap() error { return e.error }

// isConnError reports whether the connection is gone.
func isConnError(c *imapclient.Client) bool {
	select {
	case <-c.Closed():
		return true
	default:
		return false
	}
}

func dialIMAP(src IMAPSource) (*imapclient.Client, error) {
	timeout := src.DialTimeout
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	opts := &imapclient.Options{TLSConfig: src.TLSConfig, Dialer: &net.Dialer{Timeout: timeout}}
	if opts.TLSConfig == nil {
		host, _, err := net.SplitHostPort(src.Addr)
		if err != nil {
			return nil, fmt.Errorf("imap address %q: %w", src.Addr, err)
		}
		opts.TLSConfig = &tls.Config{ServerName: host, MinVersion: tls.VersionTLS12}
	}
	var c *imapclient.Client
	var err error
	switch src.Security {
	case SecurityTLS:
		c, err = imapclient.DialTLS(src.Addr, opts)
	case SecurityStartTLS:
		c, err = imapclient.DialStartTLS(src.Addr, opts)
	default:
		c, err = imapclient.DialInsecure(src.Addr, opts)
	}
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", src.Addr, err)
	}
	if err := c.WaitGreeting(); err != nil {
		c.Close()
		return nil, fmt.Errorf("imap greeting from %s: %w", src.Addr, err)
	}
	return c, nil
}

// specialUses are the RFC 6154 attributes that map onto the local
// account's special mailboxes.
var specialUses = []string{store.SpecialSent, store.SpecialDrafts, store.SpecialTrash, store.SpecialJunk, store.SpecialArchive}

// listFolders lists the selectable remote folders with their local names.
// The personal namespace prefix (Courier and Cyrus put folders under
// "INBOX.") is dropped, and the remote hierarchy delimiter becomes '/'.
func listFolders(c *imapclient.Client, includeAll bool) ([]remoteFolder, error) {
	prefix := ""
	if c.Caps().Has(imap.CapNamespace) {
		if ns, err := c.Namespace().Wait(); err == nil && len(ns.Personal) > 0 {
			prefix = ns.Personal[0].Prefix
		}
	}
	list, err := c.List("", "*", nil).Collect()
	if err != nil {
		return nil, fmt.Errorf("imap list: %w", err)
	}
	var out []remoteFolder
	for _, l := range list {
		f := remoteFolder{name: l.Mailbox}
		skip := false
		for _, a := range l.Attrs {
			switch {
			case strings.EqualFold(string(a), string(imap.MailboxAttrNoSelect)),
				strings.EqualFold(string(a), string(imap.MailboxAttrNonExistent)),
				strings.EqualFold(string(a), string(imap.MailboxAttrFlagged)),
				strings.EqualFold(string(a), string(imap.MailboxAttrAll)) && !includeAll:
				skip = true
			}
			for _, su := range specialUses {
				if strings.EqualFold(string(a), su) {
					f.specialUse = su
				}
			}
		}
		if skip {
			continue
		}
		f.local = localFolderName(l.Mailbox, l.Delim, prefix)
		out = append(out, f)
	}
	slices.SortFunc(out, func(a, b remoteFolder) int {
		if a.local == "INBOX" {
			return -1
		}
		if b.local == "INBOX" {
			return 1
		}
		return strings.Compare(a.local, b.local)
	})
	return out, nil
}

// localFolderName maps a remote folder name to a pimail mailbox name.
func localFolderName(name string, delim rune, prefix string) string {
	if strings.EqualFold(name, "INBOX") {
		return "INBOX"
	}
	if prefix != "" && len(name) > len(prefix) && strings.EqualFold(name[:len(prefix)], prefix) {
		name = name[len(prefix):]
	}
	if delim == 0 || string(delim) == store.HierarchySeparator {
		return name
	}
	levels := strings.Split(name, string(delim))
	for i, l := range levels {
		// A '/' inside a level would create a hierarchy level that the
		// remote side does not have.
		levels[i] = strings.ReplaceAll(l, store.HierarchySeparator, "_")
		if levels[i] == "" {
			levels[i] = "_"
		}
	}
	return strings.Join(levels, store.HierarchySeparator)
}
