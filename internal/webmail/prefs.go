package webmail

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"pimail/internal/store"
)

// Limits on what a user can store in preferences.
const (
	maxSignature     = 4 << 10
	maxDisplayName   = 200
	maxRemoteSenders = 1000
)

// prefs are one account's webmail preferences, kept in the store as a
// JSON document (store.Preferences, app prefsApp).
type prefs struct {
	DisplayName string `json:"display_name,omitempty"`
	Signature   string `json:"signature,omitempty"`
	// RemoteSenders are lower-case sender addresses whose remote content
	// (images) is always loaded.
	RemoteSenders []string `json:"remote_senders,omitempty"`
	// Pane is where a message opens beside its list: "right" (""),
	// "below", or "off" (on a page of its own).
	Pane string `json:"pane,omitempty"`
	// Sort, SortAsc and Threads are the message lists' order (listSpec).
	Sort    string `json:"sort,omitempty"`
	SortAsc bool   `json:"sort_asc,omitempty"`
	Threads bool   `json:"threads,omitempty"`
	// ComposeHTML starts new messages in the formatting editor.
	ComposeHTML bool `json:"compose_html,omitempty"`
}

// panes are the reading pane's places, as the settings offer them.
var panes = []struct{ Key, Label string }{{"right", "Right of the list"}, {"below", "Below the list"}, {"off", "Off (a page of its own)"}}

// pane is where messages open: "right", "below" or "off".
func (p prefs) pane() string {
	if p.Pane == "below" || p.Pane == "off" {
		return p.Pane
	}
	return "right"
}

// PrefsApp names the webmail's preferences in the store
// (store.Preferences); internal/upgrade moves older files there.
const PrefsApp = "webmail"

func (p prefs) allowsRemote(sender string) bool {
	_, ok := slices.BinarySearch(p.RemoteSenders, strings.ToLower(sender))
	return ok && sender != ""
}

// prefsStore reads and writes preferences through the store: every read
// is the store's (one primary-key read), so that a change made through
// another node shows at once.
type prefsStore struct {
	st store.Preferences
}

// maxPrefsRetries bounds the attempts of update when other writes of the
// same account's preferences keep coming first.
const maxPrefsRetries = 5

// get returns the account's preferences (zero value when none are saved).
func (ps prefsStore) get(ctx context.Context, accountID int64) (prefs, error) {
	p, _, err := ps.read(ctx, accountID)
	return p, err
}

func (ps prefsStore) read(ctx context.Context, accountID int64) (prefs, int64, error) {
	var p prefs
	doc, version, err := ps.st.Preferences(ctx, accountID, PrefsApp)
	if err != nil {
		return p, 0, fmt.Errorf("webmail prefs: %w", err)
	}
	if len(doc) > 0 {
		if err := json.Unmarshal(doc, &p); err != nil {
			return p, 0, fmt.Errorf("webmail prefs of account %d: %w", accountID, err)
		}
	}
	return p, version, nil
}

// update applies fn to the account's preferences and saves them. When
// another write came first, it reads them again and applies fn again.
func (ps prefsStore) update(ctx context.Context, accountID int64, fn func(*prefs)) error {
	for range maxPrefsRetries {
		p, version, err := ps.read(ctx, accountID)
		if err != nil {
			return err
		}
		fn(&p)
		doc, err := json.Marshal(p)
		if err != nil {
			return fmt.Errorf("webmail prefs: %w", err)
		}
		_, err = ps.st.SetPreferences(ctx, accountID, PrefsApp, doc, version)
		if !errors.Is(err, store.ErrModified) {
			if err != nil {
				return fmt.Errorf("webmail prefs: %w", err)
			}
			return nil
		}
	}
	return fmt.Errorf("webmail prefs of account %d: changed by others %d times meanwhile: %w", accountID, maxPrefsRetries, store.ErrModified)
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
