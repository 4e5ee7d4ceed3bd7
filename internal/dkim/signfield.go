package dkim

import (
	"crypto"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// SignOptions describe one signature.
type SignOptions struct {
	Domain, Selector string
	Signer           crypto.Signer // *rsa.PrivateKey or ed25519.PrivateKey
	Headers          []string      // h=, see HeadersToSign
	Time             time.Time     // t=; the zero time leaves t= out
	// Instance, when not 0, makes an ARC-Message-Signature of that
	// instance instead (RFC 8617 §4.1.2: the DKIM format with i= the
	// instance and no v=).
	Instance int
}

// SignField signs raw and returns the signature field with its CRLF,
// relaxed/relaxed, folded at 78 characters (RFC 5322 §2.1.1).
func SignField(raw []byte, o SignOptions) (string, error) {
	alg := "rsa-sha256"
	if _, ok := o.Signer.Public().(ed25519.PublicKey); ok {
		alg = "ed25519-sha256"
	}
	bh := sha256.New()
	hashBody(bh, NewBodyCache(raw).body, true, -1)
	name, first := "DKIM-Signature", "v=1"
	if o.Instance > 0 {
		name, first = "ARC-Message-Signature", "i="+strconv.Itoa(o.Instance)
	}
	tags := []string{first, "a=" + alg, "c=relaxed/relaxed", "d=" + o.Domain, "s=" + o.Selector}
	if !o.Time.IsZero() {
		tags = append(tags, "t="+strconv.FormatInt(o.Time.Unix(), 10))
	}
	tags = append(tags, "h="+strings.Join(o.Headers, ":"), "bh="+base64.StdEncoding.EncodeToString(bh.Sum(nil)))
	head := fold(name+": ", tags) + ";\r\n\tb="

	h := sha256.New()
	for _, f := range pickFields(raw, o.Headers) {
		if f != nil {
			h.Write(CanonHeader(f, true))
		}
	}
	c := CanonHeader([]byte(head), true)
	h.Write(c[:len(c)-2])
	sig, err := SignHash(o.Signer, h.Sum(nil))
	if err != nil {
		return "", fmt.Errorf("sign: %w", err)
	}
	return head + foldBase64(base64.StdEncoding.EncodeToString(sig), len("\tb=")) + "\r\n", nil
}

// fold joins tags with "; " and breaks lines before a tag that would pass
// 78 characters; long tags (h=) break at their colons.
func fold(start string, tags []string) string {
	var b strings.Builder
	b.WriteString(start)
	col := len(start)
	for i, t := range tags {
		sep := ""
		if i > 0 {
			sep = "; "
			b.WriteByte(';')
			col++
		}
		if i > 0 && col+len(t)+1 > 78 {
			b.WriteString("\r\n\t")
			col = 1
		} else if i > 0 {
			b.WriteString(sep[1:])
			col++
		}
		for len(t) > 0 {
			if col+len(t) <= 78 || !strings.Contains(t, ":") {
				b.WriteString(t)
				col += len(t)
				break
			}
			// Break a colon list after the last colon that fits.
			cut := strings.LastIndex(t[:max(78-col, 1)], ":")
			if cut <= 0 {
				cut = strings.IndexByte(t, ':')
			}
			b.WriteString(t[:cut+1])
			b.WriteString("\r\n\t")
			t = t[cut+1:]
			col = 1
		}
	}
	return b.String()
}

// foldBase64 breaks a base64 value into lines of at most 78 characters;
// white space in it is ignored by verifiers (RFC 6376 §3.5).
func foldBase64(s string, col int) string {
	var b strings.Builder
	for len(s) > 0 {
		n := min(78-col, len(s))
		b.WriteString(s[:n])
		s = s[n:]
		if len(s) > 0 {
			b.WriteString("\r\n\t")
			col = 1
		}
	}
	return b.String()
}
