package message

import (
	"strings"

	"golang.org/x/net/idna"
	"golang.org/x/net/publicsuffix"
)

// DomainOf returns the domain of an address (an addr-spec or SMTP path,
// RFC 5321 §4.1.2): the text after the last "@", lower case (ASCII), without
// a trailing dot; "" when there is no "@".
func DomainOf(addr string) string {
	i := strings.LastIndexByte(addr, '@')
	if i < 0 {
		return ""
	}
	return lowerASCII(strings.TrimSuffix(addr[i+1:], "."))
}

// LocalPart returns the local part of an address: the text before the
// last "@" (all of addr when there is none).
func LocalPart(addr string) string {
	if i := strings.LastIndexByte(addr, '@'); i >= 0 {
		return addr[:i]
	}
	return addr
}

// idnaProfile converts U-labels to A-labels the way a lookup must (RFC
// 5891 §5, with the UTS #46 mapping that browsers and mail software use:
// case folded, full-width forms mapped, invalid labels refused).
var idnaProfile = idna.New(idna.MapForLookup(), idna.BidiRule(), idna.Transitional(false))

// ASCIIDomain returns domain as it goes to the DNS: A-labels for
// internationalized labels (RFC 5890 §2.3.2.1; RFC 8616 §3 for email
// authentication), lower case, without a trailing dot. ok is false when
// domain is not a host name (RFC 1123 §2.1 letters, digits and hyphens,
// plus the underscore that real names carry; labels of 1–63 octets, 253 in
// all), so that callers never ask the DNS about a name the sender made up
// to look like another.
func ASCIIDomain(domain string) (string, bool) {
	d := strings.TrimSuffix(domain, ".")
	if d == "" || len(d) > 1024 {
		return "", false
	}
	if !isASCII(d) || strings.Contains(d, "xn--") || strings.Contains(d, "XN--") {
		a, err := idnaProfile.ToASCII(d)
		if err != nil {
			return "", false
		}
		d = a
	}
	d = lowerASCII(d)
	if !isHostname(d) {
		return "", false
	}
	return d, true
}

// UnicodeDomain returns domain with its A-labels shown as Unicode, for
// display; domain itself when it cannot be converted.
func UnicodeDomain(domain string) string {
	if !strings.Contains(lowerASCII(domain), "xn--") {
		return domain
	}
	u, err := idnaProfile.ToUnicode(domain)
	if err != nil {
		return domain
	}
	return u
}

// OrgDomain is the organizational domain of an ASCII domain (RFC 7489
// §3.2): its public suffix plus one label, from the Public Suffix List
// compiled into golang.org/x/net/publicsuffix. A name that is itself a
// public suffix is its own organizational domain.
func OrgDomain(domain string) string {
	d := lowerASCII(strings.TrimSuffix(domain, "."))
	org, err := publicsuffix.EffectiveTLDPlusOne(d)
	if err != nil {
		return d
	}
	return org
}

// isHostname checks an ASCII, lower-case name: 1–63 octet labels of
// letters, digits, "-" and "_", not starting or ending with "-", 253
// octets at most.
func isHostname(d string) bool {
	if len(d) == 0 || len(d) > 253 {
		return false
	}
	label := 0
	for i := 0; i < len(d); i++ {
		c := d[i]
		switch {
		case c == '.':
			if label == 0 || d[i-1] == '-' {
				return false
			}
			label = 0
			continue
		case c == '-':
			if label == 0 {
				return false
			}
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '_':
		default:
			return false
		}
		label++
		if label > 63 {
			return false
		}
	}
	return label > 0 && d[len(d)-1] != '-'
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

// lowerASCII lower-cases ASCII letters, leaving other bytes alone (a
// domain's UTF-8 must not be case-mapped by Unicode rules here).
func lowerASCII(s string) string {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c >= 'A' && c <= 'Z' {
			b := []byte(s)
			for j := i; j < len(b); j++ {
				if b[j] >= 'A' && b[j] <= 'Z' {
					b[j] += 'a' - 'A'
				}
			}
			return string(b)
		}
	}
	return s
}
