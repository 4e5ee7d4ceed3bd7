package arc

import (
	"context"
	"crypto/rsa"
	"errors"
	"fmt"
	"strings"
	"time"

	"pimail/internal/dkim"
)

// KeySource gives the signing keys of a local domain (dkim.Signer does,
// from the store).
type KeySource interface {
	SigningKeys(ctx context.Context, domain string) ([]dkim.SigningKey, error)
}

// Sealer seals messages with the DKIM keys of the forwarding domain.
type Sealer struct {
	keys KeySource
	now  func() time.Time
}

// NewSealer returns a Sealer over keys.
func NewSealer(keys KeySource) *Sealer { return &Sealer{keys: keys, now: time.Now} }

// Seal returns raw with a new ARC set on top (see Seal), signed with the
// domain's RSA key: RFC 8617 §4.1.3 names rsa-sha256 as the algorithm
// validators must support. authResults is this server's
// Authentication-Results field for the message (with or without its
// name); chain the validation of the chain it arrived with.
func (s *Sealer) Seal(ctx context.Context, domain string, raw []byte, authResults string, chain Result) ([]byte, error) {
	keys, err := s.keys.SigningKeys(ctx, domain)
	if err != nil {
		return nil, fmt.Errorf("arc: keys of %s: %w", domain, err)
	}
	for _, k := range keys {
		if _, ok := k.Signer.Public().(*rsa.PublicKey); !ok {
			continue
		}
		payload := strings.TrimSuffix(authResults, "\r\n")
		if name, v, ok := strings.Cut(payload, ":"); ok && strings.EqualFold(strings.TrimSpace(name), "Authentication-Results") {
			payload = v
		}
		f, err := Seal(raw, SealOptions{Domain: k.Domain, Selector: k.Selector, Signer: k.Signer,
			AuthResults: payload, Chain: chain, Time: s.now()})
		if err != nil {
			return nil, err
		}
		return append([]byte(f), raw...), nil
	}
	return nil, errors.New("arc: no RSA key for " + domain)
}
