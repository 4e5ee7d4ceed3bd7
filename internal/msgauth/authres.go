package msgauth

import (
	"fmt"
	"strings"

	"pimail/internal/arc"
	"pimail/internal/message"
)

// authResField is the header field of RFC 8601 §2.2.
const authResField = "Authentication-Results"

// formatAuthResults renders the Authentication-Results field (RFC 8601
// §2.2) for r, one method result per folded line, ending in CRLF. Every
// value that came from the message or the DNS is reduced to a safe token
// or quoted string, so nothing a sender controls can break the header.
func formatAuthResults(authservID string, r *Result) string {
	var b strings.Builder
	b.WriteString(authResField)
	b.WriteString(": ")
	b.WriteString(pvalue(authservID))
	item := func(s string) {
		b.WriteString(";\r\n\t")
		b.WriteString(s)
	}

	// spf (RFC 8601 §2.7.2): the identity checked, smtp.mailfrom for the
	// reverse-path, smtp.helo for the null reverse-path's HELO name.
	s := "spf=" + r.SPF.Result + comment(r.SPF.Reason)
	if r.SPF.Identity == "helo" {
		s += " smtp.helo=" + pvalue(r.Helo)
	} else if r.MailFrom != "" {
		s += " smtp.mailfrom=" + pvalue(r.MailFrom)
	}
	item(s)

	// dkim (§2.7.1): one result per signature; header.b (RFC 6008) tells
	// two signatures of the same domain apart.
	if len(r.DKIM) == 0 {
		item("dkim=none")
	}
	for _, d := range r.DKIM {
		s := "dkim=" + d.Result + comment(d.Reason)
		if d.Domain != "" {
			s += " header.d=" + pvalue(d.Domain)
		}
		if d.Selector != "" {
			s += " header.s=" + pvalue(d.Selector)
		}
		if d.Algorithm != "" {
			s += " header.a=" + pvalue(d.Algorithm)
		}
		if d.BPrefix != "" {
			s += " header.b=" + pvalue(d.BPrefix)
		}
		item(s)
	}

	// arc (RFC 8617 §5.2, the method registered in its §10.1): the
	// chain's status when the message has one; the highest instance and
	// its sealer as a comment.
	if r.ARC.Status != "" && r.ARC.Status != arc.None {
		s := "arc=" + r.ARC.Status
		if r.ARC.Instances > 0 {
			c := fmt.Sprintf("i=%d", r.ARC.Instances)
			if r.ARC.Domain != "" {
				c += " " + r.ARC.Domain
			}
			if r.ARC.Reason != "" {
				c += " " + r.ARC.Reason
			}
			s += comment(c)
		}
		item(s)
	}

	// dmarc (RFC 7489 §11.2): the policy applied is a comment.
	for _, d := range r.DMARC {
		s := "dmarc=" + d.Result
		var c []string
		if d.Policy != "" {
			c = append(c, "p="+d.Policy)
		}
		if d.Result == "fail" {
			c = append(c, "dis="+d.Disposition)
		}
		if d.Reason != "" {
			c = append(c, d.Reason)
		}
		s += comment(strings.Join(c, " "))
		if d.FromDomain != "" {
			s += " header.from=" + pvalue(d.FromDomain)
		}
		item(s)
	}
	if len(r.DMARC) == 0 {
		item("dmarc=none (no From domain)")
	}
	b.WriteString("\r\n")
	return b.String()
}

// pvalue formats a property value (RFC 8601 §2.2: pvalue = value /
// [ [ local-part ] "@" ] domain-name, value = token / quoted-string). A
// name or address made of letters, digits and ".-_+" is written as it
// is; anything else (a "/" or "=" in a local part or base64, a space, a
// domain literal) as a quoted-string. What common parsers refuse never
// appears: non-ASCII (Python's authres), a quoted-pair (Perl's
// Mail::AuthenticationResults) and ";" (readers that split at it) become
// "?"; control characters are dropped, and the value is bounded.
func pvalue(s string) string {
	s = clean(s, 200)
	if plainValue(s) {
		return s
	}
	return `"` + strings.Map(func(r rune) rune {
		if r == '"' || r == '\\' || r == ';' {
			return '?'
		}
		return r
	}, s) + `"`
}

// plainValue reports whether s can be written without quotes: a token
// or local-part "@" domain of letters, digits and ".-_+", no empty part.
func plainValue(s string) bool {
	if s == "" {
		return false
	}
	local, domain, hasAt := strings.Cut(s, "@")
	if hasAt && (domain == "" || strings.Contains(domain, "@")) {
		return false
	}
	for _, part := range []string{local, domain} {
		for i := 0; i < len(part); i++ {
			c := part[i]
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '-' || c == '_' || c == '+') {
				return false
			}
		}
	}
	return hasAt || local != ""
}

// comment formats an RFC 5322 comment, " (text)", or "" for no text.
// Parentheses and backslashes in text become spaces, so the comment
// cannot end early or nest, and so does ";" (see pvalue).
func comment(s string) string {
	s = strings.Map(func(r rune) rune {
		if r == '(' || r == ')' || r == '\\' || r == ';' {
			return ' '
		}
		return r
	}, clean(s, 100))
	if s == "" {
		return ""
	}
	return " (" + s + ")"
}

// clean drops control characters (CR and LF above all: no header
// injection), writes every non-ASCII character as "?" (the field stays
// US-ASCII, which every reader takes) and cuts s to at most n bytes.
func clean(s string, n int) string {
	s = strings.Map(func(r rune) rune {
		switch {
		case r < 0x20 || r == 0x7f:
			return -1
		case r >= 0x80:
			return '?'
		}
		return r
	}, s)
	if len(s) > n {
		s = s[:n]
	}
	return strings.TrimSpace(s)
}

// StripAuthResults removes every Authentication-Results field that claims
// authservID as its authentication service identifier. RFC 8601 §5: a
// receiving server MUST remove such fields that came from outside its
// trust boundary, or a sender could forge this server's verdicts. Fields
// of other authentication services are kept.
func StripAuthResults(raw []byte, authservID string) []byte {
	if authservID == "" || !message.HasField(raw, authResField) {
		return raw
	}
	return message.RemoveFields(raw, func(f message.RawField) bool {
		return f.Is(authResField) && strings.EqualFold(authservIDOf(f.Unfolded()), authservID)
	})
}

// authservIDOf reads the authserv-id at the start of a field value
// (RFC 8601 §2.2: [CFWS] authserv-id, a value: token or quoted-string),
// after skipping white space and comments.
func authservIDOf(v string) string {
	i := skipCFWS(v, 0)
	if i < len(v) && v[i] == '"' {
		var b strings.Builder
		for i++; i < len(v) && v[i] != '"'; i++ {
			if v[i] == '\\' && i+1 < len(v) {
				i++
			}
			b.WriteByte(v[i])
		}
		return b.String()
	}
	j := i
	for j < len(v) && !strings.ContainsRune(" \t;(", rune(v[j])) {
		j++
	}
	return v[i:j]
}

// skipCFWS skips folding white space and (nested) comments (RFC 5322
// §3.2.2), with bounded nesting.
func skipCFWS(v string, i int) int {
	depth := 0
	for i < len(v) {
		switch c := v[i]; {
		case c == ' ' || c == '\t' || c == '\r' || c == '\n':
		case c == '(':
			depth++
		case c == ')' && depth > 0:
			depth--
		case c == '\\' && depth > 0:
			i++
		case depth == 0:
			return i
		}
		i++
	}
	return len(v) // a backslash may have stepped past the end
}
