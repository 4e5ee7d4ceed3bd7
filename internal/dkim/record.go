package dkim

import (
	"context"
	"crypto"
	"crypto/ed25519"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"

	"pimail/internal/dnsresolver"
)

// MinRSABits is the smallest RSA key accepted (RFC 8301 §3.2: verifiers
// MUST NOT consider signatures with keys below 1024 bits valid).
const MinRSABits = 1024

// TXTResolver is the DNS lookup key retrieval needs.
type TXTResolver interface {
	LookupTXT(ctx context.Context, name string) ([]dnsresolver.TXTRecord, dnsresolver.Result, error)
}

// PublicKey is a parsed key record (RFC 6376 §3.6.1).
type PublicKey struct {
	// Algorithm is the k= tag: "rsa" or "ed25519" (RFC 8463).
	Algorithm string
	Key       crypto.PublicKey
	// Hashes are the acceptable hash algorithms (h=), nil for any.
	Hashes []string
	// Strict is the "s" flag of t=: the AUID's domain must be the
	// signing domain itself, not a subdomain (§3.6.1).
	Strict bool
	// Testing is the "y" flag of t=.
	Testing bool
}

// Errors of key retrieval: ErrKeyUnavailable is temporary (temperror),
// the others permanent (permerror).
var (
	ErrKeyUnavailable = errors.New("key unavailable")
	ErrNoKey          = errors.New("no key for signature")
	ErrKeyRevoked     = errors.New("key revoked")
	ErrKeySyntax      = errors.New("key syntax error")
)

// LookupKey fetches and parses the key at selector._domainkey.domain
// (RFC 6376 §3.6.2.1). Of several TXT records the first valid one is
// used.
func LookupKey(ctx context.Context, r TXTResolver, selector, domain string) (*PublicKey, error) {
	name := selector + "._domainkey." + domain
	recs, _, err := r.LookupTXT(ctx, name)
	if err != nil {
		if errors.Is(err, dnsresolver.ErrInvalidName) {
			return nil, fmt.Errorf("%w: %s", ErrNoKey, name)
		}
		return nil, fmt.Errorf("%w: %s", ErrKeyUnavailable, name)
	}
	if len(recs) == 0 {
		return nil, fmt.Errorf("%w: %s", ErrNoKey, name)
	}
	var firstErr error
	for _, rec := range recs {
		k, err := ParseKey(rec.Text)
		if err == nil {
			return k, nil
		}
		if firstErr == nil {
			firstErr = err
		}
	}
	return nil, firstErr
}

// ParseKey reads a key record (RFC 6376 §3.6.1; Ed25519 per RFC 8463
// §4.2: p= is the 32-octet public key itself).
func ParseKey(s string) (*PublicKey, error) {
	t, err := ParseTags(s)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrKeySyntax, err)
	}
	if v, ok := t["v"]; ok && v != "DKIM1" {
		return nil, fmt.Errorf("%w: version %q", ErrKeySyntax, v)
	}
	k := &PublicKey{Algorithm: strings.ToLower(t["k"])}
	if k.Algorithm == "" {
		k.Algorithm = "rsa"
	}
	if h, ok := t["h"]; ok {
		k.Hashes = colonList(strings.ToLower(h))
	}
	if s, ok := t["s"]; ok {
		services := colonList(strings.ToLower(s))
		if !contains(services, "*") && !contains(services, "email") {
			return nil, fmt.Errorf("%w: not for email", ErrKeySyntax)
		}
	}
	for _, f := range colonList(strings.ToLower(t["t"])) {
		switch f {
		case "s":
			k.Strict = true
		case "y":
			k.Testing = true
		}
	}
	p, ok := t["p"]
	if !ok {
		return nil, fmt.Errorf("%w: no p=", ErrKeySyntax)
	}
	p = stripWSP(p)
	if p == "" {
		return nil, ErrKeyRevoked // §3.6.1: an empty p= revokes the key
	}
	der, err := base64.StdEncoding.DecodeString(p)
	if err != nil {
		return nil, fmt.Errorf("%w: p= is not base64", ErrKeySyntax)
	}
	switch k.Algorithm {
	case "rsa":
		pub, err := x509.ParsePKIXPublicKey(der)
		if err != nil {
			// Some publish the bare RSAPublicKey (PKCS #1).
			rk, err1 := x509.ParsePKCS1PublicKey(der)
			if err1 != nil {
				return nil, fmt.Errorf("%w: RSA key: %w", ErrKeySyntax, err)
			}
			pub = rk
		}
		rk, ok := pub.(*rsa.PublicKey)
		if !ok {
			return nil, fmt.Errorf("%w: k=rsa but not an RSA key", ErrKeySyntax)
		}
		if rk.N.BitLen() < MinRSABits {
			return nil, fmt.Errorf("%w: RSA key of %d bits", ErrKeySyntax, rk.N.BitLen())
		}
		k.Key = rk
	case "ed25519":
		if len(der) != ed25519.PublicKeySize {
			return nil, fmt.Errorf("%w: Ed25519 key of %d octets", ErrKeySyntax, len(der))
		}
		k.Key = ed25519.PublicKey(der)
	default:
		return nil, fmt.Errorf("%w: unknown key type %q", ErrKeySyntax, k.Algorithm)
	}
	return k, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
