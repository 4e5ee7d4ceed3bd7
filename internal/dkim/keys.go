// Package dkim is DomainKeys Identified Mail (RFC 6376) for pimail: the
// canonicalizations (§3.4), tag lists (§3.2), key records (§3.6.1, with
// RSA and Ed25519 per RFC 8463, rsa-sha1 refused per RFC 8301), signing
// and verification (§5, §6), with the parts that the library pimail used
// before got wrong or left out: l= (a signature over part of the body is
// "policy", not "fail"), the t=s key flag, and signing a message that has
// no body. ARC (package arc) builds its seals on the same code.
//
// Outgoing mail gets one RSA-2048 and one Ed25519 signature, with the
// keys of the domain in the From: field and the signing policy of
// HeadersToSign (the fields a reader relies on, oversigned). Keys live in
// the store and are generated the first time a domain needs them.
package dkim

import (
	"crypto"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"fmt"
	"strings"
	"time"

	"pimail/internal/store"
)

// RSABits is the size of generated RSA keys. RFC 8301 §3.2 requires at
// least 1024 and recommends 2048; a 2048-bit key's record still fits a
// TXT record split into 255-byte strings.
const RSABits = 2048

// NewKey generates a key for domain with the algorithm (store.DKIMRSA or
// store.DKIMEd25519). The selector names the algorithm and the month, so
// that a later rotation can add keys beside these.
func NewKey(domain, algorithm string, now time.Time) (store.DKIMKey, error) {
	var priv any
	switch algorithm {
	case store.DKIMRSA:
		k, err := rsa.GenerateKey(rand.Reader, RSABits)
		if err != nil {
			return store.DKIMKey{}, fmt.Errorf("dkim: generate RSA key: %w", err)
		}
		priv = k
	case store.DKIMEd25519:
		_, k, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			return store.DKIMKey{}, fmt.Errorf("dkim: generate Ed25519 key: %w", err)
		}
		priv = k
	default:
		return store.DKIMKey{}, fmt.Errorf("dkim: unknown algorithm %q", algorithm)
	}
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return store.DKIMKey{}, fmt.Errorf("dkim: encode key: %w", err)
	}
	short := "rsa"
	if algorithm == store.DKIMEd25519 {
		short = "ed"
	}
	return store.DKIMKey{
		Domain:     strings.ToLower(domain),
		Selector:   fmt.Sprintf("pm%s%s", now.UTC().Format("200601"), short),
		Algorithm:  algorithm,
		PrivateKey: der,
		Created:    now,
	}, nil
}

// signer decodes the stored private key.
func signer(k store.DKIMKey) (crypto.Signer, error) {
	p, err := x509.ParsePKCS8PrivateKey(k.PrivateKey)
	if err != nil {
		return nil, fmt.Errorf("dkim: key %s._domainkey.%s: %w", k.Selector, k.Domain, err)
	}
	s, ok := p.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("dkim: key %s._domainkey.%s is not a signing key", k.Selector, k.Domain)
	}
	switch p.(type) {
	case *rsa.PrivateKey, ed25519.PrivateKey:
	default:
		return nil, fmt.Errorf("dkim: key %s._domainkey.%s: unsupported type %T", k.Selector, k.Domain, p)
	}
	return s, nil
}

// Record is a DNS TXT record to publish for a key.
type Record struct {
	Name  string // selector._domainkey.domain, without the trailing dot
	Value string // the whole record text; split it with Strings for zone files
}

// PublicRecord builds the key record of RFC 6376 §3.6.1: "v=DKIM1; k=rsa;
// p=<base64 SubjectPublicKeyInfo>" for RSA, and "k=ed25519; p=<base64 of
// the 32 raw public key bytes>" for Ed25519 (RFC 8463 §4.2).
func PublicRecord(k store.DKIMKey) (Record, error) {
	s, err := signer(k)
	if err != nil {
		return Record{}, err
	}
	var p []byte
	switch pub := s.Public().(type) {
	case *rsa.PublicKey:
		if p, err = x509.MarshalPKIXPublicKey(pub); err != nil {
			return Record{}, fmt.Errorf("dkim: encode public key: %w", err)
		}
	case ed25519.PublicKey:
		p = pub
	}
	return Record{
		Name:  k.Selector + "._domainkey." + k.Domain,
		Value: fmt.Sprintf("v=DKIM1; k=%s; p=%s", k.Algorithm, base64.StdEncoding.EncodeToString(p)),
	}, nil
}

// Strings splits the record text into the 255-octet character-strings a
// TXT record is made of (RFC 1035 §3.3.14); verifiers concatenate them
// (RFC 6376 §3.6.2.2).
func (r Record) Strings() []string {
	var out []string
	v := r.Value
	for len(v) > 255 {
		out = append(out, v[:255])
		v = v[255:]
	}
	return append(out, v)
}

// ZoneLine formats the record for a zone file: name, TTL class type, and
// the quoted strings.
func (r Record) ZoneLine() string {
	parts := r.Strings()
	for i, p := range parts {
		parts[i] = `"` + p + `"`
	}
	return fmt.Sprintf("%s. 3600 IN TXT ( %s )", r.Name, strings.Join(parts, " "))
}
