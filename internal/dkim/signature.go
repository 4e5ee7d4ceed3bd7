package dkim

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"pimail/internal/message"
)

// Errors of a signature check. ErrPerm and ErrFail wrap the detail;
// ErrKeyUnavailable (record.go) is the temporary one.
var (
	// ErrPerm: the signature cannot be checked (malformed, an algorithm
	// not accepted, no usable key): permerror in RFC 8601 §2.7.1 terms.
	ErrPerm = errors.New("permanent error")
	// ErrFail: the body hash or the signature does not verify: fail.
	ErrFail = errors.New("does not verify")
)

func permError(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrPerm, fmt.Sprintf(format, args...))
}

// Sig is a parsed signature of the DKIM kind: DKIM-Signature (RFC 6376
// §3.5) or ARC-Message-Signature (RFC 8617 §4.1.2), which share tags and
// verification.
type Sig struct {
	Tags  Tags
	Field []byte // the whole field as in the message
	// Algorithm is a= ("rsa-sha256", "ed25519-sha256").
	Algorithm     string
	keyAlg        string
	HeaderRelaxed bool
	BodyRelaxed   bool
	Domain        string // d=, lower case
	Selector      string // s=
	Headers       []string
	bodyHash      []byte
	sig           []byte
	// Length is l=, -1 when absent.
	Length int64
}

// ParseSig reads the tags every DKIM-style signature needs: a, b, bh, d,
// h, s (RFC 6376 §3.5), and c and l when present.
func ParseSig(field []byte) (*Sig, error) {
	colon := bytes.IndexByte(field, ':')
	if colon < 0 {
		return nil, permError("no colon")
	}
	t, err := ParseTags(string(field[colon+1:]))
	if err != nil {
		return nil, permError("%v", err)
	}
	s := &Sig{Tags: t, Field: field, Length: -1}
	for _, k := range []string{"a", "b", "bh", "d", "h", "s"} {
		if _, ok := t[k]; !ok {
			return s, permError("no %s= tag", k)
		}
	}
	s.Domain = strings.ToLower(strings.TrimSuffix(t["d"], "."))
	s.Selector = t["s"]
	s.Algorithm = strings.ToLower(t["a"])
	switch s.Algorithm {
	case "rsa-sha256":
		s.keyAlg = "rsa"
	case "ed25519-sha256":
		s.keyAlg = "ed25519"
	case "rsa-sha1":
		// RFC 8301 §3.1: rsa-sha1 MUST NOT be used for verifying.
		return s, permError("rsa-sha1 is not accepted (RFC 8301)")
	default:
		return s, permError("unknown algorithm %q", s.Algorithm)
	}
	if c, ok := t["c"]; ok {
		hc, bc, _ := strings.Cut(strings.ToLower(c), "/")
		if bc == "" {
			bc = Simple
		}
		if (hc != Simple && hc != Relaxed) || (bc != Simple && bc != Relaxed) {
			return s, permError("unknown canonicalization %q", c)
		}
		s.HeaderRelaxed, s.BodyRelaxed = hc == Relaxed, bc == Relaxed
	}
	s.Headers = colonList(t["h"])
	if len(s.Headers) == 0 {
		return s, permError("empty h=")
	}
	if s.bodyHash, err = base64.StdEncoding.DecodeString(stripWSP(t["bh"])); err != nil {
		return s, permError("bh= is not base64")
	}
	if s.sig, err = base64.StdEncoding.DecodeString(stripWSP(t["b"])); err != nil || len(s.sig) == 0 {
		return s, permError("b= is not base64")
	}
	if l, ok := t["l"]; ok {
		n, err := strconv.ParseInt(l, 10, 64)
		if err != nil || n < 0 || len(l) > 76 {
			return s, permError("bad l=")
		}
		s.Length = n
	}
	// RFC 8616 §3: d= may be written with U-labels; keys are asked for,
	// and alignment compared, in A-labels.
	d, ok := message.ASCIIDomain(s.Domain)
	if !ok {
		return s, permError("bad d=")
	}
	s.Domain = d
	return s, nil
}

// BPrefix is the start of b=, which tells signatures apart in
// Authentication-Results (RFC 6008 §4).
func (s *Sig) BPrefix() string {
	b := stripWSP(s.Tags["b"])
	if len(b) > 8 {
		b = b[:8]
	}
	return b
}

// BodyCache keeps body hashes of one message by canonicalization and
// length, so signatures that agree on them (DKIM signatures, ARC message
// signatures) cost one pass over the body. NewBodyCache makes one.
type BodyCache struct {
	body []byte
	m    map[bodyKey]bodyHash
}

type bodyKey struct {
	relaxed bool
	limit   int64
}

type bodyHash struct {
	sum []byte
	n   int64 // canonical length of the whole body
}

func NewBodyCache(raw []byte) *BodyCache {
	return &BodyCache{body: raw[message.HeaderEnd(raw):], m: map[bodyKey]bodyHash{}}
}

func (c *BodyCache) get(relaxed bool, limit int64) bodyHash {
	k := bodyKey{relaxed, limit}
	if h, ok := c.m[k]; ok {
		return h
	}
	h := sha256.New()
	n := hashBody(h, c.body, relaxed, limit)
	bh := bodyHash{sum: h.Sum(nil), n: n}
	c.m[k] = bh
	return bh
}

// Check verifies the signature over raw (RFC 6376 §6.1.3): key, body hash,
// header hash. bodies is raw's body cache (nil: a new one). It returns
// the key (its flags matter to the caller) and the canonical length of
// the whole body. Errors wrap ErrPerm, ErrFail or ErrKeyUnavailable.
func (s *Sig) Check(ctx context.Context, r TXTResolver, raw []byte, bodies *BodyCache) (*PublicKey, int64, error) {
	if bodies == nil {
		bodies = NewBodyCache(raw)
	}
	key, err := LookupKey(ctx, r, s.Selector, s.Domain)
	if err != nil {
		if errors.Is(err, ErrKeyUnavailable) {
			return nil, 0, err
		}
		return nil, 0, fmt.Errorf("%w: %w", ErrPerm, err)
	}
	if key.Algorithm != s.keyAlg {
		return key, 0, permError("key is %s, signature %s", key.Algorithm, s.Algorithm)
	}
	if key.Hashes != nil && !contains(key.Hashes, "sha256") {
		return key, 0, permError("key does not allow sha256")
	}
	bh := bodies.get(s.BodyRelaxed, s.Length)
	if s.Length > bh.n {
		// §3.5: l= larger than the body cannot have been signed over it.
		return key, bh.n, permError("l= is longer than the body")
	}
	if subtle.ConstantTimeCompare(bh.sum, s.bodyHash) != 1 {
		return key, bh.n, fmt.Errorf("%w: body hash", ErrFail)
	}
	h := sha256.New()
	for _, f := range pickFields(raw, s.Headers) {
		if f != nil {
			h.Write(CanonHeader(f, s.HeaderRelaxed))
		}
	}
	h.Write(bytes.TrimSuffix(CanonHeader(WithoutB(s.Field), s.HeaderRelaxed), crlf))
	if err := VerifyHash(key.Key, h.Sum(nil), s.sig); err != nil {
		return key, bh.n, fmt.Errorf("%w: signature", ErrFail)
	}
	return key, bh.n, nil
}

// VerifyHash checks a signature over a SHA-256 header hash: RSASSA-PKCS1
// v1.5 (RFC 6376 §3.3.1), or Ed25519 over the hash itself (RFC 8463 §3).
func VerifyHash(pub crypto.PublicKey, sum, sig []byte) error {
	switch k := pub.(type) {
	case *rsa.PublicKey:
		return rsa.VerifyPKCS1v15(k, crypto.SHA256, sum, sig)
	case ed25519.PublicKey:
		if !ed25519.Verify(k, sum, sig) {
			return errors.New("ed25519: invalid signature")
		}
		return nil
	}
	return errors.New("unsupported key")
}

// SignHash signs a SHA-256 header hash with an RSA or Ed25519 key.
func SignHash(signer crypto.Signer, sum []byte) ([]byte, error) {
	switch signer.Public().(type) {
	case *rsa.PublicKey:
		return signer.Sign(rand.Reader, sum, crypto.SHA256)
	case ed25519.PublicKey:
		return signer.Sign(nil, sum, crypto.Hash(0))
	}
	return nil, fmt.Errorf("dkim: unsupported key type %T", signer.Public())
}
