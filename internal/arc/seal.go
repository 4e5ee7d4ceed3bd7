package arc

import (
	"crypto"
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"pimail/internal/dkim"
)

// SealOptions describe the set a forwarder adds.
type SealOptions struct {
	// Domain and Selector name the key (d=, s=); Signer is its private
	// key (RSA, or Ed25519).
	Domain, Selector string
	Signer           crypto.Signer
	// AuthResults is this server's Authentication-Results for the
	// message, without the field name: "authserv-id; spf=…; dkim=…".
	AuthResults string
	// Chain is the validation of the chain the message arrived with.
	Chain Result
	// Time is t= of the signatures.
	Time time.Time
}

// ErrNoSeal: the message cannot get another set (its chain has the
// maximum number of instances, or is broken in structure).
var ErrNoSeal = errors.New("arc: message cannot be sealed")

// Seal returns the three fields of a new ARC set for raw (RFC 8617 §5.1),
// to be put on top of the message: ARC-Seal, ARC-Message-Signature and
// ARC-Authentication-Results, with CRLFs. The seal's cv= is the incoming
// chain's status: none for the first set, pass for a valid chain, fail
// for a broken one (§5.1.1: a failed chain is sealed as failed, and no
// validator after this one will pass it).
func Seal(raw []byte, o SealOptions) (string, error) {
	sets, n, err := collect(raw)
	if err != nil && o.Chain.Status != Fail {
		return "", fmt.Errorf("%w: %v", ErrNoSeal, err)
	}
	if o.Chain.Status == Fail {
		// The structure may be broken; number the new set after the
		// highest instance seen.
		n = o.Chain.Instances
		sets = nil
	}
	i := n + 1
	if i > MaxInstances {
		return "", fmt.Errorf("%w: %d instances", ErrNoSeal, n)
	}
	cv := o.Chain.Status
	if i == 1 {
		cv = None
	} else if cv != Pass {
		cv = Fail
	}
	alg := "rsa-sha256"
	if _, ok := o.Signer.Public().(ed25519.PublicKey); ok {
		alg = "ed25519-sha256"
	}
	aar := "ARC-Authentication-Results: i=" + strconv.Itoa(i) + "; " + strings.TrimSpace(o.AuthResults) + "\r\n"
	// The message signature signs what DKIM's policy signs, and never
	// ARC-Seal (§4.1.2).
	withAAR := append([]byte(aar), raw...)
	ams, err := dkim.SignField(withAAR, dkim.SignOptions{Domain: o.Domain, Selector: o.Selector, Signer: o.Signer,
		Headers: dkim.HeadersToSign(raw), Time: o.Time, Instance: i})
	if err != nil {
		return "", fmt.Errorf("arc: message signature: %w", err)
	}
	head := "ARC-Seal: i=" + strconv.Itoa(i) + "; a=" + alg + "; t=" + strconv.FormatInt(o.Time.Unix(), 10) +
		"; cv=" + cv + ";\r\n\td=" + o.Domain + "; s=" + o.Selector + ";\r\n\tb="
	all := make([]set, i+1)
	copy(all, sets)
	all[i] = set{aar: []byte(aar), ams: []byte(ams), as: []byte(head)}
	from := 1
	if cv == Fail {
		from = i // §5.1.1: a seal with cv=fail covers its own set only
	}
	sig, err := dkim.SignHash(o.Signer, sealHash(all, from, i))
	if err != nil {
		return "", fmt.Errorf("arc: seal: %w", err)
	}
	seal := head + fold(base64.StdEncoding.EncodeToString(sig)) + "\r\n"
	return seal + ams + aar, nil
}

// fold breaks a base64 value into lines of 72 characters.
func fold(s string) string {
	var b strings.Builder
	for len(s) > 72 {
		b.WriteString(s[:72])
		b.WriteString("\r\n\t")
		s = s[72:]
	}
	b.WriteString(s)
	return b.String()
}
