package dkim

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"

	"pimail/internal/message"
)

// DKIM results in the terms of RFC 8601 §2.7.1.
const (
	Pass      = "pass"
	Fail      = "fail"
	Policy    = "policy"
	Neutral   = "neutral"
	Temperror = "temperror"
	Permerror = "permerror"
)

// Verification is the check of one DKIM-Signature field.
type Verification struct {
	// Result is pass, fail, policy (valid, but not acceptable here: a
	// body length that leaves part of the body unsigned), temperror or
	// permerror.
	Result string
	// Domain is d= (A-labels, lower case), Selector s=, Algorithm a=.
	Domain, Selector, Algorithm string
	// Identifier is the AUID (i=), "@"+Domain when absent.
	Identifier string
	// BPrefix is the first 8 characters of b= (RFC 6008).
	BPrefix string
	// Reason explains a result other than pass.
	Reason string
	// Testing: the key has the "y" flag (testing mode, §3.6.1).
	Testing bool
}

// Verify checks the first max DKIM-Signature fields of raw, in header
// order (RFC 6376 §6.1). now is the time expiry (x=) is judged at. A
// message without signatures gives none.
func Verify(ctx context.Context, r TXTResolver, raw []byte, max int, now time.Time) []Verification {
	var fields [][]byte
	message.ScanFields(raw, func(f message.RawField) bool {
		if f.Is("DKIM-Signature") {
			fields = append(fields, raw[f.Start:f.End])
		}
		return len(fields) < max
	})
	if len(fields) == 0 {
		return nil
	}
	bodies := NewBodyCache(raw)
	out := make([]Verification, 0, len(fields))
	for _, f := range fields {
		out = append(out, verifyOne(ctx, r, raw, f, bodies, now))
	}
	return out
}

func verifyOne(ctx context.Context, r TXTResolver, raw, field []byte, bodies *BodyCache, now time.Time) Verification {
	v := Verification{Result: Permerror}
	s, err := ParseSig(field)
	if s != nil {
		v.Domain, v.Selector, v.Algorithm, v.BPrefix = s.Domain, s.Selector, s.Algorithm, s.BPrefix()
	}
	if err != nil {
		v.Reason = reasonOf(err)
		return v
	}
	t := s.Tags
	if t["v"] != "1" {
		v.Reason = "version is not 1"
		return v
	}
	// §3.5 i=: the AUID is at d= or a subdomain of it.
	v.Identifier = "@" + s.Domain
	if i, ok := t["i"]; ok {
		v.Identifier = i
		at := strings.LastIndexByte(i, '@')
		id, _ := message.ASCIIDomain(i[at+1:])
		if at < 0 || (id != s.Domain && !strings.HasSuffix(id, "."+s.Domain)) {
			v.Reason = "i= is not within d="
			return v
		}
	}
	// §5.4: From MUST be signed.
	if !containsFold(s.Headers, "From") {
		v.Reason = "From is not signed"
		return v
	}
	if q, ok := t["q"]; ok && !containsFold(colonList(q), "dns/txt") {
		v.Reason = "unknown query method"
		return v
	}
	// §3.5 t= and x=: x MUST be later than t; an expired signature is
	// not valid.
	var ts, xs int64 = -1, -1
	if tv, ok := t["t"]; ok {
		if ts, err = strconv.ParseInt(tv, 10, 64); err != nil {
			v.Reason = "bad t="
			return v
		}
	}
	if xv, ok := t["x"]; ok {
		if xs, err = strconv.ParseInt(xv, 10, 64); err != nil || (ts >= 0 && xs < ts) {
			v.Reason = "bad x="
			return v
		}
		if now.Unix() > xs {
			v.Reason = "signature expired"
			return v
		}
	}
	key, bodyLen, err := s.Check(ctx, r, raw, bodies)
	if key != nil {
		v.Testing = key.Testing
	}
	if err != nil {
		v.Result, v.Reason = resultOf(err), reasonOf(err)
		return v
	}
	// §3.6.1 t=s: the i= domain must be d= itself.
	if key.Strict {
		at := strings.LastIndexByte(v.Identifier, '@')
		if id, _ := message.ASCIIDomain(v.Identifier[at+1:]); id != s.Domain {
			v.Result, v.Reason = Permerror, "key is strict (t=s) and i= is a subdomain"
			return v
		}
	}
	// §8.2: with l= shorter than the body, content was added after
	// signing that the signature does not cover. The signature is
	// valid, but does not vouch for what a reader sees: policy.
	if s.Length >= 0 && s.Length < bodyLen {
		v.Result, v.Reason = Policy, "l= leaves part of the body unsigned"
		return v
	}
	v.Result = Pass
	return v
}

// resultOf maps a Check error to an RFC 8601 result.
func resultOf(err error) string {
	switch {
	case errors.Is(err, ErrKeyUnavailable):
		return Temperror
	case errors.Is(err, ErrFail):
		return Fail
	}
	return Permerror
}

// reasonOf is a short reason without the error's prefixes.
func reasonOf(err error) string {
	s := err.Error()
	s = strings.TrimPrefix(s, ErrPerm.Error()+": ")
	return s
}

func containsFold(list []string, s string) bool {
	for _, x := range list {
		if strings.EqualFold(x, s) {
			return true
		}
	}
	return false
}
