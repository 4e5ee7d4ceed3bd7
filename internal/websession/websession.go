// Package websession holds what the webmail and the web admin share about
// browser sessions: an in-memory session table with idle expiry and a
// bound on its size, random tokens for session ids and CSRF tokens,
// constant-time token comparison, and the check that a state-changing
// request came from this site.
//
// Sessions live in memory only: a restart logs everybody out, which is
// acceptable for a single-process server and keeps no secrets on disk.
package websession

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
)

// Session is one logged-in browser. Its exported fields never change after
// Create.
type Session struct {
	ID        string // the cookie value
	AccountID int64
	Address   string
	CSRF      string // the token every state-changing request carries
	Created   time.Time

	lastSeen time.Time // guarded by Store.mu
	streams  int       // open long-lived streams, guarded by Store.mu
}

// Store is a table of sessions.
type Store struct {
	mu   sync.Mutex
	ttl  time.Duration
	max  int
	byID map[string]*Session
}

// New returns a table whose sessions expire after ttl without use; beyond
// max sessions the expired, then the least recently used, are dropped.
func New(ttl time.Duration, max int) *Store {
	return &Store{ttl: ttl, max: max, byID: map[string]*Session{}}
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

// Create starts a new session with a fresh random id and CSRF token.
func (ss *Store) Create(accountID int64, address string, now time.Time) *Session {
	s := &Session{ID: Token(), AccountID: accountID, Address: address, CSRF: Token(), Created: now, lastSeen: now}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if len(ss.byID) >= ss.max {
		for id, old := range ss.byID {
			if now.Sub(old.lastSeen) > ss.ttl {
				delete(ss.byID, id)
			}
		}
	}
	for len(ss.byID) >= ss.max {
		var oldest *Session
		for _, x := range ss.byID {
			if oldest == nil || x.lastSeen.Before(oldest.lastSeen) {
				oldest = x
			}
		}
		delete(ss.byID, oldest.ID)
	}
	ss.byID[s.ID] = s
	return s
}

// Get returns the live session with id and refreshes its idle timer.
func (ss *Store) Get(id string, now time.Time) (*Session, bool) {
	if id == "" {
		return nil, false
	}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	s, ok := ss.byID[id]
	if !ok {
		return nil, false
	}
	if now.Sub(s.lastSeen) > ss.ttl {
		delete(ss.byID, id)
		return nil, false
	}
	s.lastSeen = now
	return s, true
}

// Alive reports whether the session still exists and has not expired,
// without refreshing it (for long-lived streams).
func (ss *Store) Alive(id string, now time.Time) bool {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	s, ok := ss.byID[id]
	return ok && now.Sub(s.lastSeen) <= ss.ttl
}

// Delete ends a session.
func (ss *Store) Delete(id string) {
	ss.mu.Lock()
	delete(ss.byID, id)
	ss.mu.Unlock()
}

// DeleteAccount ends every session of an account except keep (after a
// password change).
func (ss *Store) DeleteAccount(accountID int64, keep string) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	for id, s := range ss.byID {
		if s.AccountID == accountID && id != keep {
			delete(ss.byID, id)
		}
	}
}

// OpenStream counts a long-lived stream against the session's limit; it
// reports false when the limit is reached. CloseStream undoes it.
func (ss *Store) OpenStream(s *Session, limit int) bool {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if s.streams >= limit {
		return false
	}
	s.streams++
	return true
}

// CloseStream ends a stream counted by OpenStream.
func (ss *Store) CloseStream(s *Session) {
	ss.mu.Lock()
	s.streams--
	ss.mu.Unlock()
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
