// Package websession holds what the webmail and the web admin share about
// browser sessions: the session table, kept in the store (store.Sessions)
// so that a login survives a restart and holds on every node, with idle
// expiry and a bound per account; random tokens for session ids and CSRF
// tokens; constant-time token comparison; and the check that a
// state-changing request came from this site.
//
// The store never sees a session's cookie: it keeps a SHA-256 digest of
// it, so that a copy of the database (a backup) holds no session anyone
// could take over. A use of a session moves its expiry forward with a
// write at most once per touchEvery; the expiry is therefore up to that
// much earlier than an idle time of exactly the TTL. A session read from
// the store is used again for recheck without reading it (a page and its
// frames come together); so a session ended through another node still
// opens pages here for at most that long, while one ended here ends at
// once.
package websession

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"pimail/internal/store"
)

// Session is one logged-in browser.
type Session struct {
	ID        string // the cookie value
	AccountID int64
	Address   string
	CSRF      string // the token every state-changing request carries
	Created   time.Time

	key string // the store's ID: the digest of ID
}

// Store is the session table of one program (store.Session's App). Safe
// for concurrent use.
type Store struct {
	st  store.Sessions
	app string
	ttl time.Duration
	max int

	mu      sync.Mutex
	streams map[string]int     // open long-lived streams per session key, on this node
	recent  map[string]checked // sessions read from the store lately, by key
}

// checked is a session as the store had it, and when that was read.
type checked struct {
	s        Session
	lastSeen time.Time
	expires  time.Time
	read     time.Time
}

const (
	// touchEvery is how often at most a use of a session is written.
	touchEvery = time.Minute
	// recheck is how long a session read from the store is used again
	// without reading it.
	recheck = time.Second
	// maxRecent bounds the sessions kept for recheck.
	maxRecent = 10000
)

// New returns the session table of app: sessions expire after ttl without
// use, and an account keeps at most maxPerAccount of them (a new login
// ends the least recently used beyond).
func New(st store.Sessions, app string, ttl time.Duration, maxPerAccount int) *Store {
	return &Store{st: st, app: app, ttl: ttl, max: maxPerAccount, streams: map[string]int{}, recent: map[string]checked{}}
}

// Token returns 32 bytes from crypto/rand, base64url encoded.
func Token() string {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		panic("websession: crypto/rand failed: " + err.Error()) // never happens on Linux
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

// TokenEqual compares two tokens in constant time; empty never matches.
func TokenEqual(a, b string) bool {
	return a != "" && b != "" && subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}

// key is the store's ID of the session whose cookie is id.
func key(id string) string {
	sum := sha256.Sum256([]byte(id))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

// Create starts a new session with a fresh random id and CSRF token;
// client describes the browser (Describe) for the user's list.
func (ss *Store) Create(ctx context.Context, accountID int64, address, client string, now time.Time) (*Session, error) {
	s := &Session{ID: Token(), AccountID: accountID, Address: address, CSRF: Token(), Created: now}
	s.key = key(s.ID)
	err := ss.st.CreateSession(ctx, store.Session{App: ss.app, ID: s.key, AccountID: accountID, CSRF: s.CSRF,
		Created: now, LastSeen: now, Expires: now.Add(ss.ttl), Client: client}, ss.max)
	if err != nil {
		return nil, fmt.Errorf("websession: create: %w", err)
	}
	return s, nil
}

// Get returns the live session with id, or nil when there is none (or it
// expired), and records the use.
func (ss *Store) Get(ctx context.Context, id string, now time.Time) (*Session, error) {
	if id == "" {
		return nil, nil
	}
	k := key(id)
	ss.mu.Lock()
	c, ok := ss.recent[k]
	ss.mu.Unlock()
	if !ok || now.Sub(c.read) >= recheck || now.Sub(c.read) < 0 || !now.Before(c.expires) {
		st, err := ss.st.Session(ctx, ss.app, k, now)
		if errors.Is(err, store.ErrNotFound) {
			ss.mu.Lock()
			delete(ss.recent, k)
			ss.mu.Unlock()
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("websession: %w", err)
		}
		c = checked{s: Session{ID: id, AccountID: st.AccountID, Address: st.Address, CSRF: st.CSRF, Created: st.Created, key: k},
			lastSeen: st.LastSeen, expires: st.Expires, read: now}
	}
	if now.Sub(c.lastSeen) >= touchEvery {
		// A failed touch is tried again by the next use.
		if ss.st.TouchSession(ctx, ss.app, k, now, now.Add(ss.ttl)) == nil {
			c.lastSeen, c.expires = now, now.Add(ss.ttl)
		}
	}
	ss.mu.Lock()
	if len(ss.recent) >= maxRecent {
		clear(ss.recent)
	}
	ss.recent[k] = c
	ss.mu.Unlock()
	s := c.s
	return &s, nil
}

// Alive reports whether the session still exists and has not expired,
// without recording a use (for long-lived streams).
func (ss *Store) Alive(ctx context.Context, s *Session, now time.Time) (bool, error) {
	_, err := ss.st.Session(ctx, ss.app, s.key, now)
	if errors.Is(err, store.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("websession: %w", err)
	}
	return true, nil
}

// Delete ends the session whose cookie is id.
func (ss *Store) Delete(ctx context.Context, id string) error {
	if id == "" {
		return nil
	}
	k := key(id)
	err := ss.st.DeleteSession(ctx, ss.app, k)
	// After the store's delete: a Get that read the session before it
	// must not keep it.
	ss.mu.Lock()
	delete(ss.recent, k)
	ss.mu.Unlock()
	if err != nil {
		return fmt.Errorf("websession: delete: %w", err)
	}
	return nil
}

// DeleteAccount ends every session of an account except keep (after a
// password change).
func (ss *Store) DeleteAccount(ctx context.Context, accountID int64, keep *Session) error {
	k := ""
	if keep != nil {
		k = keep.key
	}
	err := ss.st.DeleteAccountSessions(ctx, ss.app, accountID, k)
	ss.mu.Lock()
	for key, c := range ss.recent {
		if c.s.AccountID == accountID && key != k {
			delete(ss.recent, key)
		}
	}
	ss.mu.Unlock()
	if err != nil {
		return fmt.Errorf("websession: delete sessions of account %d: %w", accountID, err)
	}
	return nil
}

// Listed is one of an account's sessions as its owner sees them: Key
// names it for End (the store's ID, a digest that cannot be used as a
// cookie), Current marks the one asking.
type Listed struct {
	Key      string
	Client   string
	Created  time.Time
	LastSeen time.Time
	Current  bool
}

// List returns the account of cur's live sessions, most recently used
// first.
func (ss *Store) List(ctx context.Context, cur *Session, now time.Time) ([]Listed, error) {
	l, err := ss.st.AccountSessions(ctx, ss.app, cur.AccountID, now)
	if err != nil {
		return nil, fmt.Errorf("websession: list: %w", err)
	}
	out := make([]Listed, len(l))
	for i, s := range l {
		out[i] = Listed{Key: s.ID, Client: s.Client, Created: s.Created, LastSeen: s.LastSeen, Current: s.ID == cur.key}
	}
	return out, nil
}

// End ends the session of cur's account that List named key; one that is
// gone, or is another account's, is no error and stays as it is.
func (ss *Store) End(ctx context.Context, cur *Session, key string, now time.Time) error {
	l, err := ss.st.AccountSessions(ctx, ss.app, cur.AccountID, now)
	if err != nil {
		return fmt.Errorf("websession: end: %w", err)
	}
	for _, s := range l {
		if s.ID != key {
			continue
		}
		err := ss.st.DeleteSession(ctx, ss.app, key)
		ss.mu.Lock()
		delete(ss.recent, key)
		ss.mu.Unlock()
		if err != nil {
			return fmt.Errorf("websession: end: %w", err)
		}
	}
	return nil
}

// Describe names the browser of a request for a list of sessions: its
// kind and system from User-Agent, and the client's address.
func Describe(r *http.Request) string {
	ua := r.Header.Get("User-Agent")
	pick := func(names [][2]string, none string) string {
		for _, n := range names {
			if strings.Contains(ua, n[0]) {
				return n[1]
			}
		}
		return none
	}
	browser := pick([][2]string{{"Edg/", "Edge"}, {"OPR/", "Opera"}, {"Firefox/", "Firefox"}, {"Chromium/", "Chromium"},
		{"HeadlessChrome/", "Chromium (headless)"}, {"Chrome/", "Chrome"}, {"Safari/", "Safari"}, {"curl/", "curl"}}, "A browser")
	system := pick([][2]string{{"Android", "Android"}, {"iPhone", "iOS"}, {"iPad", "iPadOS"}, {"Windows", "Windows"},
		{"Mac OS X", "macOS"}, {"CrOS", "ChromeOS"}, {"Linux", "Linux"}}, "")
	if system != "" {
		browser += " on " + system
	}
	return browser + ", " + ClientIP(r)
}

// OpenStream counts a long-lived stream against the session's limit on
// this node; it reports false when the limit is reached. CloseStream
// undoes it.
func (ss *Store) OpenStream(s *Session, limit int) bool {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.streams[s.key] >= limit {
		return false
	}
	ss.streams[s.key]++
	return true
}

// CloseStream ends a stream counted by OpenStream.
func (ss *Store) CloseStream(s *Session) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.streams[s.key]--; ss.streams[s.key] <= 0 {
		delete(ss.streams, s.key)
	}
}

// CrossOrigin reports a request that must not change state because it did
// not come from this origin. Browsers that send Sec-Fetch-Site are trusted
// on it (same-origin, or none for a typed URL; Fetch Metadata, W3C). An
// Origin header (RFC 6454 §7), when present, must name this host; the
// opaque origin "null" — what a browser sends for a form POST from a page
// whose Referrer-Policy is no-referrer, and also from a sandboxed frame —
// is accepted only with nullOK, and then only when Sec-Fetch-Site vouches
// for the request or is absent.
func CrossOrigin(r *http.Request, nullOK bool) bool {
	site := r.Header.Get("Sec-Fetch-Site")
	if site != "" && site != "same-origin" && site != "none" {
		return true
	}
	o := r.Header.Get("Origin")
	switch {
	case o == "":
		return false
	case o == "null":
		return !nullOK && site == ""
	}
	u, err := url.Parse(o)
	return err != nil || !strings.EqualFold(u.Host, r.Host)
}

// ClientIP returns the address of a request's client without the port.
func ClientIP(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return strings.TrimSpace(r.RemoteAddr)
	}
	return host
}
