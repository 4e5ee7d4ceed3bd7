package msgauth

import (
	"bytes"
	"strings"
	"testing"
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
		if !bytes.HasSuffix(raw, out[len(out)-min(len(out), bodyLen(raw)):]) {
			t.Fatalf("stripping changed the body")
		}
		if !hasFieldLine(raw, authResField) {
			for _, fld := range headerFields(raw) {
				if strings.EqualFold(fld.name, authResField) {
					t.Fatalf("hasFieldLine missed the field %q", fld.name)
				}
			}
		}
		for _, fld := range headerFields(out) {
			if strings.EqualFold(fld.name, authResField) && strings.EqualFold(authservIDOf(fld.value), "mx.b.test") {
				t.Fatalf("a field naming us survived: %q", fld.value)
			}
		}
		r := &Result{SPF: SPFResult{Result: "none", Identity: "mailfrom"}, MailFrom: string(raw[:min(len(raw), 64)])}
		for _, d := range fromDomains(raw) {
			r.DMARC = append(r.DMARC, DMARCResult{Result: "none", FromDomain: d})
		}
		r.DKIM = signatureFields(raw, DefaultMaxSignatures)
		for i := range r.DKIM {
			r.DKIM[i].Result = "permerror"
		}
		h := formatAuthResults("mx.b.test", r)
		body := strings.TrimSuffix(h, "\r\n")
		if strings.ContainsAny(strings.ReplaceAll(body, "\r\n\t", ""), "\r\n") || !strings.HasSuffix(h, "\r\n") {
			t.Fatalf("broken header: %q", h)
		}
		if fs := headerFields([]byte(h + "\r\n")); len(fs) != 1 || authservIDOf(fs[0].value) != "mx.b.test" {
			t.Fatalf("header reads back as %d fields: %q", len(fs), h)
		}
	})
}

// bodyLen is the length of raw after its header (0 when there is no
// empty line).
func bodyLen(raw []byte) int {
	fs := headerFields(raw)
	if len(fs) == 0 {
		return 0
	}
	end := fs[len(fs)-1].end
	return len(raw) - end
}
