package spf

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// errSyntax marks a record that does not follow the grammar of RFC 7208
// §12: the check is then "permerror" (§4.6), whatever the record says.
var errSyntax = errors.New("spf: syntax error")

func syntaxError(format string, args ...any) error {
	return fmt.Errorf("%w: %s", errSyntax, fmt.Sprintf(format, args...))
}

// mechanism is one directive of a record (RFC 7208 §4.6.1, §5).
type mechanism struct {
	qualifier  Result // pass, fail, softfail or neutral
	name       string // lower case: all, include, a, mx, ptr, ip4, ip6, exists
	domainSpec string // unexpanded macro-string, "" when absent
	prefix     netip.Prefix
	cidr4      int // for a and mx: the IPv4 prefix length, 32 when absent
	cidr6      int // for a and mx: the IPv6 prefix length, 128 when absent
	text       string
}

// record is a parsed SPF record: its mechanisms in order and the two
// modifiers that mean something (§6).
type record struct {
	mechs    []mechanism
	redirect string // unexpanded domain-spec, "" when absent
	exp      string
	hasExp   bool
}

// isSPFRecord reports whether a TXT record is an SPF record (§4.5): it
// starts with "v=spf1" followed by a space or nothing.
func isSPFRecord(txt string) bool {
	if len(txt) < 6 || !strings.EqualFold(txt[:6], "v=spf1") {
		return false
	}
	return len(txt) == 6 || txt[6] == ' '
}

// parseRecord reads a whole record before anything is evaluated: a syntax
// error anywhere makes the check "permerror" (§4.6).
func parseRecord(txt string) (*record, error) {
	rec := &record{}
	// terms = *( 1*SP ( directive / modifier ) ); only SP separates them
	// (§4.6.1, §12: any other character in a term is a syntax error).
	for _, term := range strings.Split(txt[6:], " ") {
		if term == "" {
			continue
		}
		for i := 0; i < len(term); i++ {
			if c := term[i]; c < 0x21 || c > 0x7e {
				return nil, syntaxError("character %#x in %q", c, term)
			}
		}
		if name, value, ok := modifierParts(term); ok {
			if err := rec.addModifier(name, value); err != nil {
				return nil, err
			}
			continue
		}
		m, err := parseMechanism(term)
		if err != nil {
			return nil, err
		}
		rec.mechs = append(rec.mechs, m)
	}
	return rec, nil
}

// modifierParts splits a modifier, name "=" macro-string with name =
// ALPHA *( ALPHA / DIGIT / "-" / "_" / "." ) (§12).
func modifierParts(term string) (name, value string, ok bool) {
	eq := strings.IndexByte(term, '=')
	if eq <= 0 || !isAlpha(term[0]) {
		return "", "", false
	}
	for i := 1; i < eq; i++ {
		c := term[i]
		if !isAlpha(c) && !isDigit(c) && c != '-' && c != '_' && c != '.' {
			return "", "", false
		}
	}
	return strings.ToLower(term[:eq]), term[eq+1:], true
}

func (rec *record) addModifier(name, value string) error {
	switch name {
	case "redirect", "exp":
		// §6: each at most once; the value is a domain-spec.
		if (name == "redirect" && rec.redirect != "") || (name == "exp" && rec.hasExp) {
			return syntaxError("%s twice", name)
		}
		if err := checkDomainSpec(value); err != nil {
			return err
		}
		if name == "redirect" {
			rec.redirect = value
		} else {
			rec.exp, rec.hasExp = value, true
		}
	default:
		// §6: unknown modifiers are ignored, but must be well formed.
		if err := checkMacroString(value, false); err != nil {
			return err
		}
	}
	return nil
}

// parseMechanism reads one directive: [qualifier] mechanism (§4.6.2, §5).
func parseMechanism(term string) (mechanism, error) {
	m := mechanism{qualifier: Pass, text: term, cidr4: 32, cidr6: 128}
	switch term[0] {
	case '+':
		term = term[1:]
	case '-':
		m.qualifier, term = Fail, term[1:]
	case '~':
		m.qualifier, term = Softfail, term[1:]
	case '?':
		m.qualifier, term = Neutral, term[1:]
	}
	name, arg := term, ""
	hasArg := false
	if i := strings.IndexAny(term, ":/"); i >= 0 {
		name, arg = term[:i], term[i:]
		hasArg = true
	}
	m.name = strings.ToLower(name)
	switch m.name {
	case "all":
		if hasArg {
			return m, syntaxError("all takes no argument: %q", m.text)
		}
	case "include", "exists":
		if !strings.HasPrefix(arg, ":") || len(arg) == 1 {
			return m, syntaxError("%s needs a domain: %q", m.name, m.text)
		}
		m.domainSpec = arg[1:]
		return m, checkDomainSpec(m.domainSpec)
	case "a", "mx":
		spec, c4, c6, err := splitDualCIDR(arg)
		if err != nil {
			return m, err
		}
		m.cidr4, m.cidr6 = c4, c6
		if spec != "" {
			if !strings.HasPrefix(spec, ":") || len(spec) == 1 {
				return m, syntaxError("bad %s argument: %q", m.name, m.text)
			}
			m.domainSpec = spec[1:]
			return m, checkDomainSpec(m.domainSpec)
		}
	case "ptr":
		if hasArg {
			if !strings.HasPrefix(arg, ":") || len(arg) == 1 {
				return m, syntaxError("bad ptr argument: %q", m.text)
			}
			m.domainSpec = arg[1:]
			return m, checkDomainSpec(m.domainSpec)
		}
	case "ip4", "ip6":
		if !strings.HasPrefix(arg, ":") {
			return m, syntaxError("%s needs a network: %q", m.name, m.text)
		}
		p, err := parseNetwork(arg[1:], m.name == "ip6")
		if err != nil {
			return m, err
		}
		m.prefix = p
	default:
		return m, syntaxError("unknown mechanism %q", m.text)
	}
	return m, nil
}

// parseNetwork reads ip4-network [ip4-cidr-length] or ip6-network
// [ip6-cidr-length] (§5.6).
func parseNetwork(s string, v6 bool) (netip.Prefix, error) {
	addr, bits := s, -1
	if i := strings.IndexByte(s, '/'); i >= 0 {
		addr = s[:i]
		max := 32
		if v6 {
			max = 128
		}
		n, err := cidrLength(s[i+1:], max)
		if err != nil {
			return netip.Prefix{}, err
		}
		bits = n
	}
	ip, err := netip.ParseAddr(addr)
	if err != nil || ip.Zone() != "" {
		return netip.Prefix{}, syntaxError("bad address %q", addr)
	}
	if v6 != ip.Is6() || (!v6 && !strictIPv4(addr)) {
		return netip.Prefix{}, syntaxError("bad address %q", addr)
	}
	if bits < 0 {
		bits = ip.BitLen()
	}
	return ip.Prefix(bits)
}

// strictIPv4 checks the dotted quad of §12 (qnum: no leading zeros).
func strictIPv4(s string) bool {
	parts := strings.Split(s, ".")
	if len(parts) != 4 {
		return false
	}
	for _, p := range parts {
		if p == "" || len(p) > 3 || (len(p) > 1 && p[0] == '0') {
			return false
		}
	}
	return true
}

// splitDualCIDR takes a dual-cidr-length off the end of a or mx's
// argument: [ "/" ip4-cidr ] [ "//" ip6-cidr ] (§5.6, §12).
func splitDualCIDR(arg string) (rest string, c4, c6 int, err error) {
	// A "/" followed by anything but digits belongs to the domain-spec
	// ("a:foo:bar/baz.example.com").
	c4, c6 = 32, 128
	if i := strings.LastIndex(arg, "//"); i >= 0 && allDigits(arg[i+2:]) {
		if c6, err = cidrLength(arg[i+2:], 128); err != nil {
			return "", 0, 0, err
		}
		arg = arg[:i]
	}
	if i := strings.LastIndexByte(arg, '/'); i >= 0 && allDigits(arg[i+1:]) {
		if c4, err = cidrLength(arg[i+1:], 32); err != nil {
			return "", 0, 0, err
		}
		arg = arg[:i]
	}
	return arg, c4, c6, nil
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if !isDigit(s[i]) {
			return false
		}
	}
	return s != ""
}

// cidrLength reads a prefix length: "0" or a number without leading zeros,
// at most max (§12).
func cidrLength(s string, max int) (int, error) {
	if s == "" || len(s) > 3 || (len(s) > 1 && s[0] == '0') {
		return 0, syntaxError("bad prefix length %q", s)
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 || n > max {
		return 0, syntaxError("bad prefix length %q", s)
	}
	return n, nil
}

// checkDomainSpec checks domain-spec = macro-string domain-end, with
// domain-end = ( "." toplabel [ "." ] ) / macro-expand (§7.1, §12).
func checkDomainSpec(s string) error {
	if err := checkMacroString(s, false); err != nil {
		return err
	}
	if strings.HasSuffix(s, "}") {
		if i := strings.LastIndex(s, "%{"); i >= 0 && !strings.Contains(s[i:], "%%") {
			return nil // ends in a macro-expand
		}
	}
	if s == "%-" || s == "%_" || strings.HasSuffix(s, "%-") || strings.HasSuffix(s, "%_") {
		return syntaxError("domain-spec %q does not end in a top label", s)
	}
	t := strings.TrimSuffix(s, ".")
	i := strings.LastIndexByte(t, '.')
	if i < 0 || !isTopLabel(t[i+1:]) {
		return syntaxError("domain-spec %q does not end in a top label", s)
	}
	return nil
}

// isTopLabel: toplabel = ( *alphanum ALPHA *alphanum ) /
// ( 1*alphanum "-" *( alphanum / "-" ) alphanum ) — not all digits (§12).
func isTopLabel(l string) bool {
	if l == "" || l[0] == '-' || l[len(l)-1] == '-' {
		return false
	}
	alpha := false
	for i := 0; i < len(l); i++ {
		c := l[i]
		switch {
		case isAlpha(c):
			alpha = true
		case isDigit(c), c == '-':
		default:
			return false
		}
	}
	return alpha || strings.Contains(l, "-")
}

func isAlpha(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }
func isDigit(c byte) bool { return c >= '0' && c <= '9' }
