package delivery

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base32"
	"errors"
	"fmt"
	"strings"
	"time"

	"pimail/internal/store"
)

// The Sender Rewriting Scheme (SRS; Shevek's "Sender Rewriting Scheme"
// paper, as implemented by libsrs2 and postsrsd). A message forwarded to a
// remote target keeps its author, but its envelope sender is rewritten to
// an address at the forwarding domain, so SPF (RFC 7208) at the
// destination checks this server rather than the original sender's
// domain, which never authorised it:
//
//	SRS0=HASH=TT=orig-domain=orig-local@forwarding-domain
//
// TT is the day of the rewrite (days since the Unix epoch modulo 1024, two
// base32 characters) and HASH an HMAC of TT, domain and local part under a
// per-installation secret. A bounce to such an address (RFC 5321 §4.5.5:
// sent to the reverse-path, with the null sender) is accepted only with a
// valid hash and a recent TT, and is sent on to the original sender: the
// address cannot be forged into an open relay, and old ones expire.

// SRS parameters.
const (
	srsPrefix = "SRS0="
	// srsHashLen is the number of base32 characters kept of the HMAC (30
	// bits; libsrs2 keeps 4 base64 characters, 24 bits).
	srsHashLen = 6
	// srsDays is the period of the day stamp: two base32 characters.
	srsDays = 1024
	// DefaultSRSMaxAge is how long a rewritten address accepts bounces
	// (libsrs2's default is 21 days; delivery is retried for 5).
	DefaultSRSMaxAge = 21 * 24 * time.Hour
	// SRSSecretName names the secret in the store (store.Secrets).
	SRSSecretName = "srs"
)

// srsBase32 is the RFC 4648 base32 alphabet, lower case: MTAs may change
// the case of a local part, so hashes compare case-insensitively.
var srsBase32 = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// Errors of SRS.Reverse.
var (
	ErrNotSRS     = errors.New("srs: not an SRS address")
	ErrSRSHash    = errors.New("srs: hash does not match")
	ErrSRSExpired = errors.New("srs: address has expired")
)

// SRS rewrites envelope senders of forwarded mail and reverses the
// rewritten addresses of bounces. It is safe for concurrent use.
type SRS struct {
	secret []byte
	maxAge time.Duration
	now    func() time.Time
}

// NewSRS returns an SRS with the given secret (at least 16 bytes) and
// the maximum age of a rewritten address (0: DefaultSRSMaxAge).
func NewSRS(secret []byte, maxAge time.Duration) (*SRS, error) {
	if len(secret) < 16 {
		return nil, fmt.Errorf("srs: secret of %d bytes is too short (want 16 or more)", len(secret))
	}
	if maxAge <= 0 {
		maxAge = DefaultSRSMaxAge
	}
	return &SRS{secret: append([]byte(nil), secret...), maxAge: maxAge, now: time.Now}, nil
}

// LoadSRSSecret returns the SRS secret the store keeps (store.Secrets,
// under SRSSecretName), making 32 random bytes at the first start. The
// secret stays the same for the life of the installation, and is the
// same on every node, so addresses handed out before a restart (or by
// another node) still accept their bounces.
func LoadSRSSecret(ctx context.Context, st store.Secrets) ([]byte, error) {
	fresh := make([]byte, 32)
	if _, err := rand.Read(fresh); err != nil {
		return nil, fmt.Errorf("srs: make secret: %w", err)
	}
	secret, err := st.Secret(ctx, SRSSecretName, fresh)
	if err != nil {
		return nil, fmt.Errorf("srs: secret: %w", err)
	}
	return secret, nil
}

// Forward returns the envelope sender for sender's mail forwarded from
// domain (a local domain): its SRS0 address. The null sender stays null
// (a bounce is never bounced); an address without a domain or with a
// quoted local part is kept.
func (s *SRS) Forward(sender, domain string) string {
	at := strings.LastIndexByte(sender, '@')
	if sender == "" || at <= 0 || domain == "" {
		return sender
	}
	local, dom := sender[:at], sender[at+1:]
	if strings.ContainsAny(local, "\"\\ ") {
		// A quoted local part cannot be carried inside a dot-atom
		// (RFC 5321 §4.1.2); such rare senders are kept as they are.
		return sender
	}
	tt := s.stamp(s.now())
	return srsPrefix + s.hash(tt, dom, local) + "=" + tt + "=" + dom + "=" + local + "@" + domain
}

// IsSRS reports whether addr looks like an SRS0 address (without checking
// it).
func IsSRS(addr string) bool {
	return len(addr) > len(srsPrefix) && strings.EqualFold(addr[:len(srsPrefix)], srsPrefix) && strings.Contains(addr, "@")
}

// Reverse checks an SRS0 address made by Forward and returns the original
// sender. It fails with ErrNotSRS, ErrSRSHash or ErrSRSExpired.
func (s *SRS) Reverse(addr string) (string, error) {
	if !IsSRS(addr) {
		return "", ErrNotSRS
	}
	at := strings.LastIndexByte(addr, '@')
	// HASH=TT=domain=local; the original local part may itself hold '='.
	parts := strings.SplitN(addr[len(srsPrefix):at], "=", 4)
	if len(parts) != 4 || parts[2] == "" || parts[3] == "" || len(parts[1]) != 2 {
		return "", ErrNotSRS
	}
	hash, tt, dom, local := parts[0], strings.ToLower(parts[1]), parts[2], parts[3]
	if !hmac.Equal([]byte(strings.ToLower(hash)), []byte(s.hash(tt, dom, local))) {
		return "", ErrSRSHash
	}
	day, ok := decodeStamp(tt)
	if !ok {
		return "", ErrNotSRS
	}
	today := s.now().Unix() / 86400 % srsDays
	age := (today - day + srsDays) % srsDays
	if time.Duration(age)*24*time.Hour > s.maxAge {
		return "", ErrSRSExpired
	}
	return local + "@" + dom, nil
}

// hash is the first srsHashLen base32 characters of HMAC-SHA256 over the
// day stamp, domain and local part, all lower-cased.
func (s *SRS) hash(tt, dom, local string) string {
	m := hmac.New(sha256.New, s.secret)
	m.Write([]byte(strings.ToLower(tt + "=" + dom + "=" + local)))
	return srsBase32.EncodeToString(m.Sum(nil))[:srsHashLen]
}

// stamp is the day of t modulo 1024 as two base32 characters.
func (s *SRS) stamp(t time.Time) string {
	const alphabet = "abcdefghijklmnopqrstuvwxyz234567"
	d := t.Unix() / 86400 % srsDays
	return string([]byte{alphabet[d>>5], alphabet[d&31]})
}

func decodeStamp(tt string) (int64, bool) {
	const alphabet = "abcdefghijklmnopqrstuvwxyz234567"
	hi, lo := strings.IndexByte(alphabet, tt[0]), strings.IndexByte(alphabet, tt[1])
	if hi < 0 || lo < 0 {
		return 0, false
	}
	return int64(hi<<5 | lo), true
}
