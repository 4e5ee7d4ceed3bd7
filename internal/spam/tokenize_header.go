package spam

import (
	"net/netip"
	"strings"
)

// ignoredFields are header fields added by the receiving side (mail
// stores, filters, the collector of a corpus) rather than by the sender;
// they say nothing about the message and would teach the classifier where
// mail was kept instead of what it is.
var ignoredFields = map[string]bool{
	"status": true, "x-status": true, "x-keywords": true, "x-uid": true,
	"content-length": true, "lines": true, "delivered-to": true,
	"return-path": true, "x-original-to": true, "x-virus-scanned": true,
	"x-virus-status": true, "x-ham-report": true, "x-bogosity": true,
	"x-razor-id": true, "x-dspam-result": true, "x-filtered-by": true,
	"received": true, // read separately below
}

// valueFields are header fields whose (short) values are worth tokens.
var valueFields = []string{"x-priority", "x-msmail-priority", "precedence", "importance", "x-mimeole"}

// headerTokens adds features of the header written by the sender: the
// names of the fields present, a few field values, the shape of the
// Message-ID and the networks of the relays in Received.
func (t *tokenSet) headerTokens(a *analysis, list bool) {
	for name := range a.fields {
		if ignoredFields[name] || hasPrefixAny(name, receivingPrefixes) || len(name) > 40 {
			continue
		}
		if list && hasPrefixAny(name, listFieldPrefixes) {
			continue
		}
		t.add2("h:", name)
	}
	for _, name := range valueFields {
		if list && name == "precedence" {
			continue
		}
		if v := a.header(name); v != "" && len(v) < 60 {
			t.add3("hv:"+name, ":", strings.ToLower(strings.TrimSpace(v)))
		}
	}
	if mid := a.header("message-id"); mid != "" {
		t.add2("mid:", idShape(mid))
		if at := strings.LastIndexByte(mid, '@'); at >= 0 {
			h := strings.ToLower(strings.Trim(mid[at+1:], "<> "))
			if h != "" && len(h) < 80 {
				t.add2("midh:", registrable(h))
			}
		}
	}
	// The shape of the MIME boundary (RFC 2046 §5.1.1), like that of the
	// Message-ID, names the software that wrote the message.
	if b := a.parsed.Body.Param("boundary"); b != "" {
		t.add2("bnd:", idShape(b))
	}
	// Encoded words in the subject name their charset (RFC 2047 §2).
	if raw := strings.ToLower(a.header("subject")); strings.Contains(raw, "=?") {
		if i := strings.Index(raw, "=?"); i >= 0 {
			rest := raw[i+2:]
			if j := strings.IndexByte(rest, '?'); j > 0 && j < 30 {
				t.add2("subj-enc:", rest[:j])
			}
		}
	}
	// The relay that handed the message to the first server on its way
	// (origin.go): its /24 (spam comes from a few networks, ham from the
	// correspondents' providers) and the signs of a hijacked home
	// computer. The relays after it (list servers, the recipient's own
	// provider and store) say where a message went, not who sent it, and
	// are not tokens.
	t.originTokens(a.origin)
}

// idShape reduces a Message-ID to its character classes, so that
// "<20020823.ABC12@host>" becomes "<d.A@a>": mass mailers have telltale
// shapes.
func idShape(id string) string {
	var b strings.Builder
	var last byte
	for i := 0; i < len(id) && b.Len() < 40; i++ {
		c := id[i]
		var k byte
		switch {
		case c >= '0' && c <= '9':
			k = 'd'
		case c >= 'a' && c <= 'z':
			k = 'a'
		case c >= 'A' && c <= 'Z':
			k = 'A'
		default:
			k = c
		}
		if k != last || !(k == 'd' || k == 'a' || k == 'A') {
			b.WriteByte(k)
		}
		last = k
	}
	return b.String()
}

// bracketIPs returns the IP literals in a Received field: "[192.0.2.1]"
// and "(192.0.2.1)" forms, at most 4.
func bracketIPs(s string) []netip.Addr {
	var out []netip.Addr
	for i := 0; i < len(s) && len(out) < 4; i++ {
		if s[i] != '[' && s[i] != '(' {
			continue
		}
		end := strings.IndexAny(s[i+1:], "])")
		if end < 0 || end > 45 {
			continue
		}
		if ip, err := netip.ParseAddr(s[i+1 : i+1+end]); err == nil {
			out = append(out, ip)
		}
	}
	return out
}
