// Package arc is Authenticated Received Chain (RFC 8617): it validates
// the ARC sets a message arrives with and seals a message that pimail
// forwards, so that a receiver further on can see the authentication
// results this server found before forwarding changed the envelope (SPF
// of the forwarder, not of the author) or a relay changed the message.
//
// An ARC set is three header fields with one instance number i=:
// ARC-Authentication-Results (the results the sealer found),
// ARC-Message-Signature (a DKIM signature of the message, §4.1.2) and
// ARC-Seal (a signature over all sets so far, §4.1.3). Signatures,
// canonicalization and keys are those of DKIM (package dkim).
package arc

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"pimail/internal/dkim"
	"pimail/internal/message"
)

// Chain validation statuses (RFC 8617 §4.4).
const (
	None = "none"
	Pass = "pass"
	Fail = "fail"
)

// MaxInstances is the most ARC sets a chain may have (RFC 8617 §4.2.1).
const MaxInstances = 50

// Result is the validation of a message's chain (RFC 8617 §5.2).
type Result struct {
	// Status is none (no ARC sets), pass or fail.
	Status string
	// Instances is the highest instance (0 without a chain).
	Instances int
	// Domain is the sealer of the highest instance (d= of its seal).
	Domain string
	// Reason explains a fail.
	Reason string
}

// set is one instance's three fields, as they appear in the message.
type set struct {
	aar, ams, as []byte
}

// Verify validates the ARC chain of raw (RFC 8617 §5.2): the structure
// (instances 1…N, each exactly one of each field, cv=none at 1 and pass
// after), the newest message signature (AMS of instance N), and every
// seal from N down to 1. A chain that already says cv=fail is fail.
func Verify(ctx context.Context, r dkim.TXTResolver, raw []byte) Result {
	sets, n, err := collect(raw)
	if err != nil {
		return Result{Status: Fail, Instances: n, Reason: err.Error()}
	}
	if n == 0 {
		return Result{Status: None}
	}
	res := Result{Status: Fail, Instances: n}
	seals := make([]dkim.Tags, n+1)
	for i := 1; i <= n; i++ {
		t, err := sealTags(sets[i].as)
		if err != nil {
			res.Reason = fmt.Sprintf("seal %d: %v", i, err)
			return res
		}
		seals[i] = t
	}
	res.Domain = strings.ToLower(seals[n]["d"])
	// §5.2 step 2: the newest seal's cv; fail ends validation.
	for i := 1; i <= n; i++ {
		cv := strings.ToLower(seals[i]["cv"])
		want := Pass
		if i == 1 {
			want = None
		}
		if cv == Fail {
			res.Reason = fmt.Sprintf("instance %d says cv=fail", i)
			return res
		}
		if cv != want {
			res.Reason = fmt.Sprintf("instance %d has cv=%s", i, cv)
			return res
		}
	}
	// §5.2 step 3: the newest AMS verifies like a DKIM signature.
	ams, err := dkim.ParseSig(sets[n].ams)
	if err != nil {
		res.Reason = fmt.Sprintf("message signature %d: %v", n, err)
		return res
	}
	if containsFold(ams.Headers, "ARC-Seal") {
		res.Reason = "message signature covers ARC-Seal"
		return res
	}
	if _, _, err := ams.Check(ctx, r, raw, nil); err != nil {
		res.Reason = fmt.Sprintf("message signature %d: %v", n, err)
		if errors.Is(err, dkim.ErrKeyUnavailable) {
			res.Reason += " (temporary)"
		}
		return res
	}
	// §5.2 step 4: every seal, newest first, over the sets up to it.
	for i := n; i >= 1; i-- {
		if err := checkSeal(ctx, r, sets, seals[i], i); err != nil {
			res.Reason = fmt.Sprintf("seal %d: %v", i, err)
			return res
		}
	}
	res.Status, res.Reason = Pass, ""
	return res
}

// collect finds the ARC sets of raw, indexed by instance (§4.2.1): every
// instance from 1 to the highest has exactly one field of each kind.
func collect(raw []byte) ([]set, int, error) {
	byI := map[int]*set{}
	highest := 0
	var err error
	message.ScanFields(raw, func(f message.RawField) bool {
		var slot func(*set) *[]byte
		switch {
		case f.Is("ARC-Authentication-Results"):
			slot = func(s *set) *[]byte { return &s.aar }
		case f.Is("ARC-Message-Signature"):
			slot = func(s *set) *[]byte { return &s.ams }
		case f.Is("ARC-Seal"):
			slot = func(s *set) *[]byte { return &s.as }
		default:
			return true
		}
		i, ok := instance(f.Unfolded())
		if !ok {
			err = fmt.Errorf("%s without a valid i=", f.Name)
			return false
		}
		s := byI[i]
		if s == nil {
			s = &set{}
			byI[i] = s
		}
		p := slot(s)
		if *p != nil {
			err = fmt.Errorf("two %s fields of instance %d", f.Name, i)
			return false
		}
		*p = raw[f.Start:f.End]
		highest = max(highest, i)
		return true
	})
	if err != nil {
		return nil, highest, err
	}
	if highest > MaxInstances {
		return nil, highest, fmt.Errorf("%d instances, more than %d", highest, MaxInstances)
	}
	sets := make([]set, highest+1)
	for i := 1; i <= highest; i++ {
		s := byI[i]
		if s == nil || s.aar == nil || s.ams == nil || s.as == nil {
			return nil, highest, fmt.Errorf("instance %d incomplete", i)
		}
		sets[i] = *s
	}
	return sets, highest, nil
}

// instance reads the i= tag that starts every ARC field's value (§4.2.1;
// in ARC-Authentication-Results it precedes the authserv-id).
func instance(v string) (int, bool) {
	v = strings.TrimSpace(v)
	k, rest, ok := strings.Cut(v, "=")
	if !ok || strings.TrimSpace(k) != "i" {
		return 0, false
	}
	num, _, _ := strings.Cut(rest, ";")
	n, err := strconv.Atoi(strings.TrimSpace(num))
	if err != nil || n < 1 || n > 1024 {
		return 0, false
	}
	return n, true
}

// sealTags parses an ARC-Seal (§4.1.3): i, a, b, cv, d, s required; h=
// not allowed.
func sealTags(field []byte) (dkim.Tags, error) {
	colon := bytes.IndexByte(field, ':')
	t, err := dkim.ParseTags(string(field[colon+1:]))
	if err != nil {
		return nil, err
	}
	for _, k := range []string{"i", "a", "b", "cv", "d", "s"} {
		if _, ok := t[k]; !ok {
			return nil, fmt.Errorf("no %s= tag", k)
		}
	}
	if _, ok := t["h"]; ok {
		return nil, errors.New("h= in a seal")
	}
	return t, nil
}

// checkSeal verifies the seal of instance i: a signature over the sets
// 1…i, each as ARC-Authentication-Results, ARC-Message-Signature,
// ARC-Seal, relaxed (§5.1.1), the seal itself last with b= empty.
func checkSeal(ctx context.Context, r dkim.TXTResolver, sets []set, t dkim.Tags, i int) error {
	if strings.ToLower(t["a"]) != "rsa-sha256" && strings.ToLower(t["a"]) != "ed25519-sha256" {
		return fmt.Errorf("algorithm %q", t["a"])
	}
	domain, ok := message.ASCIIDomain(t["d"])
	if !ok {
		return errors.New("bad d=")
	}
	key, err := dkim.LookupKey(ctx, r, t["s"], domain)
	if err != nil {
		return err
	}
	if (key.Algorithm == "rsa") != (strings.ToLower(t["a"]) == "rsa-sha256") {
		return errors.New("key and algorithm differ")
	}
	sig, err := decodeB64(t["b"])
	if err != nil {
		return err
	}
	if err := dkim.VerifyHash(key.Key, sealHash(sets, 1, i), sig); err != nil {
		return fmt.Errorf("%w: %v", dkim.ErrFail, err)
	}
	return nil
}

// sealHash is the hash a seal of instance i signs: the sets from…i
// (from is 1, or i for a seal with cv=fail, which covers its own set
// only).
func sealHash(sets []set, from, i int) []byte {
	h := sha256.New()
	for k := from; k <= i; k++ {
		s := sets[k]
		h.Write(dkim.CanonHeader(s.aar, true))
		h.Write(dkim.CanonHeader(s.ams, true))
		if k < i {
			h.Write(dkim.CanonHeader(s.as, true))
		} else {
			h.Write(bytes.TrimSuffix(dkim.CanonHeader(dkim.WithoutB(s.as), true), []byte("\r\n")))
		}
	}
	return h.Sum(nil)
}

func containsFold(list []string, s string) bool {
	for _, x := range list {
		if strings.EqualFold(x, s) {
			return true
		}
	}
	return false
}

// decodeB64 decodes a base64 tag value, ignoring white space (RFC 6376
// §3.5).
func decodeB64(s string) ([]byte, error) {
	s = strings.Map(func(r rune) rune {
		if r == ' ' || r == '\t' || r == '\r' || r == '\n' {
			return -1
		}
		return r
	}, s)
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil || len(b) == 0 {
		return nil, errors.New("b= is not base64")
	}
	return b, nil
}
