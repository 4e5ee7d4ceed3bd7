package webmail

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// Limits on what a user can store in preferences.
const (
	maxSignature     = 4 << 10
	maxDisplayName   = 200
	maxRemoteSenders = 1000
)

// prefs are one account's webmail preferences. The store has no place for
// them yet, so they live in a small JSON file per account.
type prefs struct {
	DisplayName string `json:"display_name,omitempty"`
	Signature   string `json:"signature,omitempty"`
	// RemoteSenders are lower-case sender addresses whose remote content
	// (images) is always loaded.
	RemoteSenders []string `json:"remote_senders,omitempty"`
}

func (p prefs) allowsRemote(sender string) bool {
	_, ok := slices.BinarySearch(p.RemoteSenders, strings.ToLower(sender))
	return ok && sender != ""
}

// prefsStore caches preferences in memory and writes them through to
// dir/webmail/<account id>.json (atomically: temp file, fsync, rename).
type prefsStore struct {
	dir   string // "" keeps preferences in memory only
	mu    sync.Mutex
	cache map[int64]prefs
}

func newPrefsStore(dataDir string) *prefsStore {
	ps := &prefsStore{cache: map[int64]prefs{}}
	if dataDir != "" {
		ps.dir = filepath.Join(dataDir, "webmail")
	}
	return ps
}

func (ps *prefsStore) path(accountID int64) string {
	return filepath.Join(ps.dir, strconv.FormatInt(accountID, 10)+".json")
}

// get returns the account's preferences (zero value when none are saved).
func (ps *prefsStore) get(accountID int64) (prefs, error) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if p, ok := ps.cache[accountID]; ok {
		return p, nil
	}
	var p prefs
	if ps.dir != "" {
		b, err := os.ReadFile(ps.path(accountID))
		switch {
		case errors.Is(err, fs.ErrNotExist):
		case err != nil:
			return prefs{}, fmt.Errorf("webmail prefs: %w", err)
		default:
			if err := json.Unmarshal(b, &p); err != nil {
				return prefs{}, fmt.Errorf("webmail prefs %s: %w", ps.path(accountID), err)
			}
		}
	}
	ps.cache[accountID] = p
	return p, nil
}

// update applies fn to the account's preferences and saves them.
func (ps *prefsStore) update(accountID int64, fn func(*prefs)) error {
	p, err := ps.get(accountID)
	if err != nil {
		return err
	}
	ps.mu.Lock()
	defer ps.mu.Unlock()
	p.RemoteSenders = slices.Clone(p.RemoteSenders)
	fn(&p)
	if ps.dir != "" {
		if err := ps.writeLocked(accountID, p); err != nil {
			return err
		}
	}
	ps.cache[accountID] = p
	return nil
}

func (ps *prefsStore) writeLocked(accountID int64, p prefs) error {
	if err := os.MkdirAll(ps.dir, 0o700); err != nil {
		return fmt.Errorf("webmail prefs: %w", err)
	}
	b, err := json.MarshalIndent(p, "", "  ")
	if err != nil {
		return fmt.Errorf("webmail prefs: %w", err)
	}
	f, err := os.CreateTemp(ps.dir, ".prefs-*")
	if err != nil {
		return fmt.Errorf("webmail prefs: %w", err)
	}
	tmp := f.Name()
	defer os.Remove(tmp)
	if _, err := f.Write(b); err != nil {
		f.Close()
		return fmt.Errorf("webmail prefs: write %s: %w", tmp, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("webmail prefs: sync %s: %w", tmp, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("webmail prefs: close %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, ps.path(accountID)); err != nil {
		return fmt.Errorf("webmail prefs: %w", err)
	}
	return nil
}

// addRemoteSender adds addr to the sorted allow list.
func (p *prefs) addRemoteSender(addr string) {
	addr = strings.ToLower(strings.TrimSpace(addr))
	if addr == "" || len(p.RemoteSenders) >= maxRemoteSenders {
		return
	}
	i, found := slices.BinarySearch(p.RemoteSenders, addr)
	if !found {
		p.RemoteSenders = slices.Insert(p.RemoteSenders, i, addr)
	}
}
