package webmail

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"sync"
	"time"
)

// maxSessions bounds the in-memory session table; beyond it the oldest
// sessions are dropped first.
const maxSessions = 10000

// session is one logged-in browser. Its fields are immutable after
// creation except lastSeen, guarded by the store's lock.
type session struct {
	id        string
	accountID int64
	address   string
	csrf      string
	created   time.Time
	lastSeen  time.Time
	streams   int // open event streams, bounded per session
}

// sessionStore keeps sessions in memory: a restart logs everybody out,
// which is acceptable for a single-process server and keeps no secrets on
// disk.
type sessionStore struct {
	mu   sync.Mutex
	ttl  time.Duration
	byID map[string]*session
}

func newSessionStore(ttl time.Duration) *sessionStore {
	return &sessionStore{ttl: ttl, byID: map[string]*session{}}
}

// randomToken returns 32 bytes from crypto/rand, base64url encoded.
func randomToken() string {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		panic("webmail: crypto/rand failed: " + err.Error()) // never happens on Linux
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

// create starts a new session with fresh random id and CSRF token.
func (ss *sessionStore) create(accountID int64, address string, now time.Time) *session {
	s := &session{
		id:        randomToken(),
		accountID: accountID,
		address:   address,
		csrf:      randomToken(),
		created:   now,
		lastSeen:  now,
	}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if len(ss.byID) >= maxSessions {
		ss.sweepLocked(now)
	}
	for len(ss.byID) >= maxSessions {
		ss.dropOldestLocked()
	}
	ss.byID[s.id] = s
	return s
}

// get returns the live session with id and refreshes its idle timer.
func (ss *sessionStore) get(id string, now time.Time) (*session, bool) {
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

// alive reports whether the session still exists and has not expired,
// without refreshing it (used by long-lived event streams).
func (ss *sessionStore) alive(id string, now time.Time) bool {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	s, ok := ss.byID[id]
	return ok && now.Sub(s.lastSeen) <= ss.ttl
}

func (ss *sessionStore) delete(id string) {
	ss.mu.Lock()
	delete(ss.byID, id)
	ss.mu.Unlock()
}

// deleteAccount ends every session of an account (after a password change),
// except keep.
func (ss *sessionStore) deleteAccount(accountID int64, keep string) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	for id, s := range ss.byID {
		if s.accountID == accountID && id != keep {
			delete(ss.byID, id)
		}
	}
}

// openStream counts an event stream against the session's limit.
func (ss *sessionStore) openStream(s *session, limit int) bool {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if s.streams >= limit {
		return false
	}
	s.streams++
	return true
}

func (ss *sessionStore) closeStream(s *session) {
	ss.mu.Lock()
	s.streams--
	ss.mu.Unlock()
}

func (ss *sessionStore) sweepLocked(now time.Time) {
	for id, s := range ss.byID {
		if now.Sub(s.lastSeen) > ss.ttl {
			delete(ss.byID, id)
		}
	}
}

func (ss *sessionStore) dropOldestLocked() {
	var oldest *session
	for _, s := range ss.byID {
		if oldest == nil || s.lastSeen.Before(oldest.lastSeen) {
			oldest = s
		}
	}
	if oldest != nil {
		delete(ss.byID, oldest.id)
	}
}

// tokenEqual compares two tokens in constant time; empty never matches.
func tokenEqual(a, b string) bool {
	if a == "" || b == "" {
		return false
	}
	return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}
