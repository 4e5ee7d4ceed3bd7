package msgauth

import (
	"bytes"
	"strings"
	"testing"

	"pimail/internal/dkim"
	"pimail/internal/message"
)

// FuzzHeaderParsing feeds arbitrary messages to the header readers: they
// must not panic, stripping must only remove whole fields naming us, and
// the header written from what they found must stay one well-formed field.
func FuzzHeaderParsing(f *testing.F) {
	f.Add([]byte("Authentication-Results: mx.b.test; spf=pass\r\nFrom: a@b.test\r\n\r\nbody"))
	f.Add([]byte("authentication-results:(c (nested)) \"mx.b.test\";\n\tdkim=pass\nFrom: \"x\" <a@[1.2.3.4]>, b@c.test\n\n"))
	f.Add([]byte("DKIM-Signature: v=1; d=a.test; s=x; b=abc\r\n def\r\nFrom: =?utf-8?q?x?= <@a.test>\r\n\r\n"))
	f.Add([]byte(" leading continuation\r\n:\r\nFrom:\r\n"))
	f.Fuzz(func(t *testing.T, raw []byte) {
		out := StripAuthResults(raw, "mx.b.test")
		if len(out) > len(raw) {
			t.Fatalf("stripping grew the message")
		}
		if body := raw[message.HeaderEnd(raw):]; !bytes.HasSuffix(out, body) {
			t.Fatalf("stripping changed the body")
		}
		message.ScanFields(out, func(fld message.RawField) bool {
			if fld.Is(authResField) && strings.EqualFold(authservIDOf(fld.Unfolded()), "mx.b.test") {
				t.Fatalf("a field naming us survived: %q", fld.Value)
			}
			return true
		})
		r := &Result{SPF: SPFResult{Result: "none", Identity: "mailfrom"}, MailFrom: string(raw[:min(len(raw), 64)])}
		domains, invalid, limit := authorDomains(raw)
		for _, d := range append(domains, invalid...) {
			r.DMARC = append(r.DMARC, DMARCResult{Result: "none", FromDomain: d, Reason: limit})
		}
		message.ScanFields(raw, func(fld message.RawField) bool {
			if fld.Is("DKIM-Signature") {
				s, _ := dkim.ParseSig(raw[fld.Start:fld.End])
				if s != nil {
					r.DKIM = append(r.DKIM, DKIMResult{Result: "permerror", Domain: s.Domain, Selector: s.Selector, Algorithm: s.Algorithm, BPrefix: s.BPrefix()})
				}
			}
			return true
		})
		h := formatAuthResults("mx.b.test", r)
		body := strings.TrimSuffix(h, "\r\n")
		if strings.ContainsAny(strings.ReplaceAll(body, "\r\n\t", ""), "\r\n") || !strings.HasSuffix(h, "\r\n") {
			t.Fatalf("broken header: %q", h)
		}
		for i := 0; i < len(h); i++ {
			if h[i] >= 0x80 {
				t.Fatalf("non-ASCII in the header: %q", h)
			}
		}
		n := 0
		message.ScanFields([]byte(h+"\r\n"), func(fld message.RawField) bool {
			n++
			if authservIDOf(fld.Unfolded()) != "mx.b.test" {
				t.Fatalf("header reads back with id %q: %q", authservIDOf(fld.Unfolded()), h)
			}
			return true
		})
		if n != 1 {
			t.Fatalf("header reads back as %d fields: %q", n, h)
		}
	})
}
