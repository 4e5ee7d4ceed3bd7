package auth

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"sync"
	"time"
)

// cache remembers successful password checks for a while, as Dovecot's
// auth_cache does: phones and sync clients that reconnect all day would
// otherwise pay a full argon2id verification (its time and memory are in
// docs/benchmarks.md) for every connection.
//
// An entry holds the account name, a keyed hash of the password (HMAC-
// SHA-256 under a key made at start and never stored, so neither the
// password nor something that can be checked offline is kept), the stored
// password hash it was checked against, and its expiry. A login hits only
// with the same password while the stored hash is the same: a password
// change (a new hash) or the TTL ends the entry. Failed checks are never
// cached.
type cache struct {
	ttl time.Duration
	key [32]byte
	max int

	mu sync.Mutex
	m  map[string]cacheEntry // by account name
}

type cacheEntry struct {
	sum     [sha256.Size]byte
	hash    string // the stored password hash the password matched
	expires time.Time
}

func newCache(ttl time.Duration, max int) *cache {
	c := &cache{ttl: ttl, max: max, m: map[string]cacheEntry{}}
	_, _ = rand.Read(c.key[:])
	return c
}

func (c *cache) sum(user, pw string) (s [sha256.Size]byte) {
	m := hmac.New(sha256.New, c.key[:])
	m.Write([]byte(user))
	m.Write([]byte{0})
	m.Write([]byte(pw))
	m.Sum(s[:0])
	return s
}

// hit reports whether pw was checked against storedHash for user before,
// within the TTL.
func (c *cache) hit(user, pw, storedHash string, now time.Time) bool {
	if c == nil {
		return false
	}
	c.mu.Lock()
	e, ok := c.m[user]
	c.mu.Unlock()
	if !ok || e.hash != storedHash || now.After(e.expires) {
		return false
	}
	s := c.sum(user, pw)
	return subtle.ConstantTimeCompare(s[:], e.sum[:]) == 1
}

// put remembers a successful check.
func (c *cache) put(user, pw, storedHash string, now time.Time) {
	if c == nil {
		return
	}
	e := cacheEntry{sum: c.sum(user, pw), hash: storedHash, expires: now.Add(c.ttl)}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.m[user]; !ok && len(c.m) >= c.max {
		for k, old := range c.m {
			if now.After(old.expires) || len(c.m) >= c.max {
				delete(c.m, k)
			}
		}
	}
	c.m[user] = e
}
