package message

import (
	"errors"
	"fmt"
	"strings"
)

// maxAddresses bounds the addresses kept from one header field.
const maxAddresses = 1000

// tokKind classifies address-list tokens (RFC 5322 §3.2).
type tokKind uint8

const (
	tokAtom    tokKind = iota // atom or dot-atom (obs-phrase allows dots)
	tokQuoted                 // quoted-string, content unquoted
	tokLiteral                // domain-literal "[...]", brackets kept
	tokSpecial                // one of < > : ; , @
	tokComment                // comment, content without the outer parentheses
)

type addrToken struct {
	kind tokKind
	text string
	c    byte // for tokSpecial
}

// tokenizeAddresses splits an address-list into tokens; white space is
// dropped. Unterminated quotes, comments and literals run to the end of
// the value.
func tokenizeAddresses(s string) []addrToken {
	var toks []addrToken
	i := 0
	for i < len(s) {
		for i < len(s) && (s[i] == ' ' || s[i] == '\t' || s[i] == '\r' || s[i] == '\n') {
			i++
		}
		if i >= len(s) {
			break
		}
		c := s[i]
		switch c {
		case '(':
			var text string
			text, i = readComment(s, i)
			toks = append(toks, addrToken{kind: tokComment, text: text})
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

// readComment reads an RFC 5322 §3.2.2 comment starting at s[i] == '(':
// its content (nested comments kept, quoted pairs undone) and the index
// after it.
func readComment(s string, i int) (string, int) {
	var b strings.Builder
	depth := 0
	for ; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\\' && i+1 < len(s):
			i++
			b.WriteByte(s[i])
			continue
		case c == '(':
			depth++
			if depth == 1 {
				continue
			}
		case c == ')':
			depth--
			if depth == 0 {
				return strings.TrimSpace(b.String()), i + 1
			}
		}
		b.WriteByte(c)
	}
	return strings.TrimSpace(b.String()), i
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
// local parts keep encoded words as written. An obsolete route is kept in
// Route (RFC 5322 §4.4), and an addr-spec without a display name takes
// the last comment after it as its name ("a@b (Name)"), as Dovecot and
// most mail readers show it. At most maxAddresses entries are kept.
func ParseAddressList(s string) []Address {
	list, _ := parseAddressList(s)
	return list
}

// parseAddressList is ParseAddressList that also reports whether every
// entry was kept (false: the list was cut at maxAddresses).
func parseAddressList(s string) (out []Address, complete bool) {
	toks := tokenizeAddresses(s)
	complete = true
	var cur []addrToken
	inGroup, inAngle := false, false
	groupKept := false // whether the open group's start marker was kept
	flush := func() {
		if a, ok := entryAddress(cur); ok {
			if len(out) < maxAddresses {
				out = append(out, a)
			} else {
				complete = false
			}
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
			} else {
				complete = false
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
	return out, complete
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
		case tokComment:
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
func entryAddress(all []addrToken) (Address, bool) {
	// Comments carry no address; the last one may name an addr-spec.
	toks, lastComment := all, ""
	for _, t := range all {
		if t.kind == tokComment {
			toks = nil
			break
		}
	}
	if toks == nil {
		toks = make([]addrToken, 0, len(all))
		for _, t := range all {
			if t.kind == tokComment {
				lastComment = t.text
			} else {
				toks = append(toks, t)
			}
		}
	}
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
		// An obsolete route (RFC 5322 §4.4): everything up to the last
		// ':', kept apart from the address when it is one ("@a,@b").
		for i := len(spec) - 1; i >= 0; i-- {
			if spec[i].kind == tokSpecial && spec[i].c == ':' {
				if spec[0].kind == tokSpecial && spec[0].c == '@' {
					a.Route = joinTokens(spec[:i])
				}
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
		if a.Name == "" && a.Host != "" {
			a.Name = lastComment
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

// ErrBadAddress is ParseMailboxList's error for input that is not a plain
// mailbox list.
var ErrBadAddress = errors.New("message: not a mailbox list")

// ParseMailboxList parses a mailbox-list (RFC 5322 §3.4) strictly, for
// addresses a person types (the webmail's recipients): every entry is
// name-addr or addr-spec with one local part and one domain, nothing is
// left over, and there are no groups or routes. It uses the tokens of
// ParseAddressList, so what it accepts reads the same everywhere.
func ParseMailboxList(s string) ([]Address, error) {
	toks := tokenizeAddresses(s)
	var out []Address
	start := 0
	inAngle := false
	for i := 0; i <= len(toks); i++ {
		if i < len(toks) {
			t := toks[i]
			if t.kind == tokSpecial {
				switch t.c {
				case '<':
					inAngle = true
				case '>':
					inAngle = false
				case ':', ';':
					return nil, fmt.Errorf("%w: groups and routes are not allowed", ErrBadAddress)
				}
			}
			if !(t.kind == tokSpecial && t.c == ',' && !inAngle) {
				continue
			}
		}
		entry := toks[start:i]
		start = i + 1
		if len(entry) == 0 {
			continue
		}
		if !strictMailbox(entry) {
			return nil, fmt.Errorf("%w: %q", ErrBadAddress, joinTokens(entry))
		}
		a, _ := entryAddress(entry)
		out = append(out, a)
		if len(out) > maxAddresses {
			return nil, fmt.Errorf("%w: more than %d addresses", ErrBadAddress, maxAddresses)
		}
	}
	return out, nil
}

// strictMailbox checks one entry's tokens: [phrase] "<" local "@" domain
// ">" or local "@" domain, comments anywhere.
func strictMailbox(all []addrToken) bool {
	var toks []addrToken
	for _, t := range all {
		if t.kind != tokComment {
			toks = append(toks, t)
		}
	}
	spec := toks
	if n := len(toks); n > 0 && toks[n-1].kind == tokSpecial && toks[n-1].c == '>' {
		lt := -1
		for i, t := range toks {
			if t.kind == tokSpecial && t.c == '<' {
				lt = i
				break
			}
		}
		if lt < 0 {
			return false
		}
		for _, t := range toks[:lt] {
			if t.kind != tokAtom && t.kind != tokQuoted {
				return false
			}
		}
		spec = toks[lt+1 : n-1]
	}
	return len(spec) == 3 && (spec[0].kind == tokAtom || spec[0].kind == tokQuoted) &&
		spec[1].kind == tokSpecial && spec[1].c == '@' &&
		(spec[2].kind == tokAtom || spec[2].kind == tokLiteral)
}
