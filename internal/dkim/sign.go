package dkim

import (
	"bytes"
	"context"
	"crypto"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"pimail/internal/message"
	"pimail/internal/store"
)

// Oversigned are the fields every signature covers once more than the
// message has them (RFC 6376 §8.15): an absent instance is signed as
// absent (§5.4.2), so no relay can add a second From or Subject, or a
// Reply-To that was not there, without breaking the signature.
var Oversigned = []string{
	"From", "To", "Cc", "Subject", "Date", "Reply-To", "Sender", "Message-ID",
	"In-Reply-To", "References", "MIME-Version", "Content-Type", "Content-Transfer-Encoding",
}

// HeadersToSign is the signing policy: the h= list for raw. Every field
// of Oversigned as often as it occurs plus once, and the List-* fields
// (RFC 2369, RFC 2919, RFC 8058's List-Unsubscribe-Post) as often as they
// occur, so a list's own fields are covered without stopping a list
// from adding them to a copy it sends on.
func HeadersToSign(raw []byte) []string {
	counts := map[string]int{}
	var lists []string
	message.ScanFields(raw, func(f message.RawField) bool {
		name := string(f.Name)
		key := strings.ToLower(name)
		if counts[key] == 0 && strings.HasPrefix(key, "list-") {
			lists = append(lists, name)
		}
		counts[key]++
		return true
	})
	var h []string
	for _, name := range Oversigned {
		for range counts[strings.ToLower(name)] + 1 {
			h = append(h, name)
		}
	}
	for _, name := range lists {
		for range counts[strings.ToLower(name)] {
			h = append(h, name)
		}
	}
	return h
}

// Signer signs messages with the keys of their From domain. It is safe for
// concurrent use.
type Signer struct {
	st  store.SigningKeys
	log *slog.Logger
	now func() time.Time

	mu    sync.Mutex
	cache map[string][]loadedKey // domain → parsed keys
	gen   sync.Mutex             // serialises key generation
}

type loadedKey struct {
	key    store.DKIMKey
	signer crypto.Signer
}

// NewSigner returns a Signer over the store's keys.
func NewSigner(st store.SigningKeys, logger *slog.Logger) *Signer {
	if logger == nil {
		logger = slog.Default()
	}
	return &Signer{st: st, log: logger.With("component", "dkim"), now: time.Now, cache: map[string][]loadedKey{}}
}

// EnsureKeys returns the domain's keys, generating an RSA and an Ed25519
// key first when the domain has none.
func (s *Signer) EnsureKeys(ctx context.Context, domain string) ([]store.DKIMKey, error) {
	lks, err := s.keys(ctx, domain)
	if err != nil {
		return nil, err
	}
	out := make([]store.DKIMKey, len(lks))
	for i, lk := range lks {
		out[i] = lk.key
	}
	return out, nil
}

// EnsureKeys is the Signer-less form, for the CLI: it returns the domain's
// keys and generates them when there are none.
func EnsureKeys(ctx context.Context, st store.SigningKeys, domain string) ([]store.DKIMKey, error) {
	return NewSigner(st, slog.New(slog.DiscardHandler)).EnsureKeys(ctx, domain)
}

func (s *Signer) keys(ctx context.Context, domain string) ([]loadedKey, error) {
	domain = strings.ToLower(strings.TrimSuffix(domain, "."))
	s.mu.Lock()
	lks, ok := s.cache[domain]
	s.mu.Unlock()
	if ok {
		return lks, nil
	}
	s.gen.Lock()
	defer s.gen.Unlock()
	ks, err := s.st.DKIMKeys(ctx, domain)
	if err != nil {
		return nil, fmt.Errorf("dkim: keys of %s: %w", domain, err)
	}
	if len(ks) == 0 {
		ks, err = s.generate(ctx, domain)
		if err != nil {
			return nil, err
		}
	}
	for _, k := range ks {
		sg, err := signer(k)
		if err != nil {
			return nil, err
		}
		lks = append(lks, loadedKey{key: k, signer: sg})
	}
	s.mu.Lock()
	s.cache[domain] = lks
	s.mu.Unlock()
	return lks, nil
}

// generate creates and stores the domain's first keys. Another process may
// do the same at the same moment: a selector that exists already is fine,
// the stored keys are read back.
func (s *Signer) generate(ctx context.Context, domain string) ([]store.DKIMKey, error) {
	now := s.now()
	for _, alg := range []string{store.DKIMRSA, store.DKIMEd25519} {
		k, err := NewKey(domain, alg, now)
		if err != nil {
			return nil, err
		}
		if err := s.st.AddDKIMKey(ctx, k); err != nil && !errors.Is(err, store.ErrExists) {
			return nil, fmt.Errorf("dkim: store key for %s: %w", domain, err)
		}
	}
	ks, err := s.st.DKIMKeys(ctx, domain)
	if err != nil {
		return nil, fmt.Errorf("dkim: keys of %s: %w", domain, err)
	}
	for _, k := range ks {
		if r, err := PublicRecord(k); err == nil {
			s.log.Warn("generated a DKIM key; publish its DNS record", "domain", domain, "name", r.Name, "record", r.Value)
		}
	}
	return ks, nil
}

// SigningKey is a private key of a domain, ready to sign with.
type SigningKey struct {
	Domain, Selector string
	Signer           crypto.Signer
}

// SigningKeys returns the domain's keys (generated when it has none), for
// ARC seals (package arc) made with the same keys as DKIM signatures.
func (s *Signer) SigningKeys(ctx context.Context, domain string) ([]SigningKey, error) {
	lks, err := s.keys(ctx, domain)
	if err != nil {
		return nil, err
	}
	out := make([]SigningKey, len(lks))
	for i, lk := range lks {
		out[i] = SigningKey{Domain: lk.key.Domain, Selector: lk.key.Selector, Signer: lk.signer}
	}
	return out, nil
}

// Sign returns DKIM-Signature header fields for raw, one per key of
// domain, ready to be prepended to the message. Headers and body are
// canonicalized relaxed/relaxed (RFC 6376 §3.4.2, §3.4.4). A message
// without a body (no empty line after the header) is signed with an
// empty body, as RFC 6376 §3.4.3 and §3.4.4 read it.
func (s *Signer) Sign(ctx context.Context, domain string, raw []byte) ([]byte, error) {
	lks, err := s.keys(ctx, domain)
	if err != nil {
		return nil, err
	}
	h := HeadersToSign(raw)
	now := s.now()
	var out bytes.Buffer
	for _, lk := range lks {
		f, err := SignField(raw, SignOptions{Domain: lk.key.Domain, Selector: lk.key.Selector, Signer: lk.signer, Headers: h, Time: now})
		if err != nil {
			return nil, fmt.Errorf("dkim: sign for %s: %w", domain, err)
		}
		out.WriteString(f)
	}
	return out.Bytes(), nil
}

// SignMessage returns raw with the signatures of domain prepended.
func (s *Signer) SignMessage(ctx context.Context, domain string, raw []byte) ([]byte, error) {
	sig, err := s.Sign(ctx, domain, raw)
	if err != nil {
		return nil, err
	}
	return append(sig, raw...), nil
}
