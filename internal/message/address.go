package message

import "strings"

// maxAddresses bounds the addresses kept from one header field.
const maxAddresses = 1000

// tokKind classifies address-list tokens (RFC 5322 §3.2).
type tokKind uint8

const (
	tokAtom    tokKind = iota // atom or dot-atom (obs-phrase allows dots)
	tokQuoted                 // quoted-string, content unquoted
	tokLiteral                // domain-literal "[...]", brackets kept
	tokSpecial                // one of < > : ; , @
)

type addrToken struct {
	kind tokKind
	text string
	c    byte // for tokSpecial
}

// tokenizeAddresses splits an address-list into tokens; comments and white
// space are dropped. Unterminated quotes, comments and literals run to the
// end of the value.
func tokenizeAddresses(s string) []addrToken {
	var toks []addrToken
	i := 0
	for i < len(s) {
		i = skipCFWS(s, i)
		if i >= len(s) {
			break
		}
		c := s[i]
		switch c {
		case '<', '>', ':', ';', ',', '@':
			toks = append(toks, addrToken{kind: tokSpecial, c: c})
			i++
		case '"':
			var q string
			q, i = readQuoted(s, i)
			toks = append(toks, addrToken{kind: tokQuoted, text: q})
		case '[':
			j := strings.IndexByte(s[i:], ']')
			if j < 0 {
				j = len(s) - i - 1
			}
			toks = append(toks, addrToken{kind: tokLiteral, text: s[i : i+j+1]})
			i += j + 1
		case ')', ']', '\\':
			i++ // stray closing bracket or backslash
		default:
			j := i
			for j < len(s) && !isAddrDelim(s[j]) {
				j++
			}
			toks = append(toks, addrToken{kind: tokAtom, text: s[i:j]})
			i = j
		}
	}
	return toks
}

func isAddrDelim(c byte) bool {
	switch c {
	case ' ', '\t', '\r', '\n', '(', ')', '<', '>', '[', ']', ':', ';', '@', '\\', ',', '"':
		return true
	}
	return false
}

// ParseAddressList parses an RFC 5322 §3.4 address-list leniently: what
// can be recognised is kept, broken entries give what they have (a display
// name without an address, an address without a domain). Groups produce a
// start marker (Group set) and an end marker (End set). Display names and
// local parts keep encoded words as written.
func ParseAddressList(s string) []Address {
	toks := tokenizeAddresses(s)
	var out []Address
	var cur []addrToken
	inGroup, inAngle := false, false
	groupKept := false // whether the open group's start marker was kept
	flush := func() {
		if a, ok := entryAddress(cur); ok && len(out) < maxAddresses {
			out = append(out, a)
		}
		cur = cur[:0]
	}
	for _, t := range toks {
		if t.kind != tokSpecial {
			cur = append(cur, t)
			continue
		}
		switch t.c {
		case '<':
			inAngle = true
			cur = append(cur, t)
		case '>':
			inAngle = false
			cur = append(cur, t)
		case ',':
			if inAngle {
				cur = append(cur, t) // obs-route "@a,@b:"
				continue
			}
			flush()
		case ':':
			if inAngle || inGroup || hasSpecial(cur, '@') || hasSpecial(cur, '<') {
				cur = append(cur, t)
				continue
			}
			// group = display-name ":" [group-list] ";" (RFC 5322 §3.4)
			groupKept = len(out) < maxAddresses
			if groupKept {
				out = append(out, Address{Group: phrase(cur)})
			}
			cur = cur[:0]
			inGroup = true
		case ';':
			if inAngle {
				cur = append(cur, t)
				continue
			}
			flush()
			inAngle = false
			if inGroup && groupKept {
				out = append(out, Address{End: true})
			}
			inGroup = false
		default:
			cur = append(cur, t)
		}
	}
	flush()
	if inGroup && groupKept {
		out = append(out, Address{End: true})
	}
	return out
}

func hasSpecial(toks []addrToken, c byte) bool {
	for _, t := range toks {
		if t.kind == tokSpecial && t.c == c {
			return true
		}
	}
	return false
}

// phrase joins words with single spaces (RFC 5322 §3.2.5); specials that
// ended up in a broken display name are kept without spaces.
func phrase(toks []addrToken) string {
	var b strings.Builder
	prevWord := false
	for _, t := range toks {
		switch t.kind {
		case tokSpecial:
			b.WriteByte(t.c)
			prevWord = false
		default:
			if prevWord {
				b.WriteByte(' ')
			}
			b.WriteString(t.text)
			prevWord = true
		}
	}
	return b.String()
}

// entryAddress turns the tokens of one mailbox into an Address.
func entryAddress(toks []addrToken) (Address, bool) {
	if len(toks) == 0 {
		return Address{}, false
	}
	var a Address
	lt := -1
	for i, t := range toks {
		if t.kind == tokSpecial && t.c == '<' {
			lt = i
			break
		}
	}
	if lt >= 0 {
		// name-addr = [display-name] angle-addr (RFC 5322 §3.4)
		a.Name = phrase(toks[:lt])
		spec := toks[lt+1:]
		for i, t := range spec {
			if t.kind == tokSpecial && t.c == '>' {
				spec = spec[:i]
				break
			}
		}
		// Drop an obsolete route (RFC 5322 §4.4): everything up to the last ':'.
		for i := len(spec) - 1; i >= 0; i-- {
			if spec[i].kind == tokSpecial && spec[i].c == ':' {
				spec = spec[i+1:]
				break
			}
		}
		a.Mailbox, a.Host = addrSpec(spec)
	} else {
		// A bare addr-spec; lenient with "Display Name user@host" too.
		at := -1
		for i := len(toks) - 1; i >= 0; i-- {
			if toks[i].kind == tokSpecial && toks[i].c == '@' {
				at = i
				break
			}
		}
		switch {
		case at < 0:
			a.Mailbox = phrase(toks)
		case at == 0:
			a.Host = joinTokens(toks[1:])
		default:
			a.Name = phrase(toks[:at-1])
			a.Mailbox = toks[at-1].text
			if at+1 < len(toks) {
				a.Host = toks[at+1].text
			}
		}
	}
	if a.Name == "" && a.Mailbox == "" && a.Host == "" {
		return Address{}, false
	}
	return a, true
}

// addrSpec splits local-part "@" domain at the last '@'.
func addrSpec(toks []addrToken) (local, host string) {
	at := -1
	for i := len(toks) - 1; i >= 0; i-- {
		if toks[i].kind == tokSpecial && toks[i].c == '@' {
			at = i
			break
		}
	}
	if at < 0 {
		return joinTokens(toks), ""
	}
	return joinTokens(toks[:at]), joinTokens(toks[at+1:])
}

// joinTokens concatenates tokens without separators.
func joinTokens(toks []addrToken) string {
	if len(toks) == 1 && toks[0].kind != tokSpecial {
		return toks[0].text
	}
	var b strings.Builder
	for _, t := range toks {
		if t.kind == tokSpecial {
			b.WriteByte(t.c)
		} else {
			b.WriteString(t.text)
		}
	}
	return b.String()
}

// Addr returns "mailbox@host" (or the part that exists).
func (a Address) Addr() string {
	switch {
	case a.Host == "":
		return a.Mailbox
	case a.Mailbox == "":
		return "@" + a.Host
	}
	return a.Mailbox + "@" + a.Host
}

// formatAddresses renders addresses for search and display: display names
// decoded from RFC 2047, "Name <a@b>, c@d"; group markers become "group:"
// and ";".
func formatAddresses(list []Address, fallback string) string {
	if len(list) == 0 {
		return ""
	}
	var b strings.Builder
	first := true
	for _, a := range list {
		if a.End {
			b.WriteByte(';')
			continue
		}
		if !first {
			b.WriteString(", ")
		}
		first = false
		if a.Group != "" || (a.Mailbox == "" && a.Host == "" && a.Name == "") {
			b.WriteString(decodeHeader(a.Group, fallback))
			b.WriteByte(':')
			first = true
			b.WriteByte(' ')
			continue
		}
		addr := a.Addr()
		if a.Name != "" {
			b.WriteString(decodeHeader(a.Name, fallback))
			if addr != "" {
				b.WriteString(" <")
				b.WriteString(rawToUTF8(addr, fallback))
				b.WriteByte('>')
			}
			continue
		}
		b.WriteString(rawToUTF8(addr, fallback))
	}
	return strings.TrimSpace(b.String())
}
