package directory

import (
	"strings"

	"golang.org/x/net/idna"
)

// SubaddressSeparator separates the base local part from the detail
// ("tag") in subaddressed recipients such as alice+lists@example.com
// (RFC 5233 §1 calls it the "separator").
const SubaddressSeparator = '+'

// normalize lower-cases an address and converts a non-ASCII domain to its
// A-label form, the form domains are stored in. Local parts are compared
// case-insensitively: RFC 5321 §2.4 allows case-sensitive local parts, but
// every practical mail system treats them as case-insensitive and so does
// pimail. The common all-ASCII, already lower-case address is returned
// without allocating.
func normalize(addr string) string {
	addr = strings.TrimSpace(addr)
	at := strings.LastIndexByte(addr, '@')
	if at >= 0 && !isASCII(addr[at+1:]) {
		// SMTPUTF8 (RFC 6531 §3.2) lets a client send a U-label domain;
		// the directory holds A-labels (RFC 5890).
		if a, err := idna.Lookup.ToASCII(addr[at+1:]); err == nil {
			addr = addr[:at+1] + a
		}
	}
	if isLowerASCII(addr) {
		return addr
	}
	return strings.ToLower(addr)
}

// split cuts a normalized address into local part and domain at the last
// '@' (a quoted local part may itself contain '@', RFC 5321 §4.1.2).
func split(addr string) (local, domain string, ok bool) {
	at := strings.LastIndexByte(addr, '@')
	if at < 0 {
		return addr, "", false
	}
	return addr[:at], addr[at+1:], true
}

// stripSubaddress removes a "+detail" suffix from a normalized address:
// "alice+tag@example.com" → "alice@example.com" (RFC 5233). It returns
// false when the address has no detail to strip.
func stripSubaddress(addr string) (string, bool) {
	local, domain, ok := split(addr)
	if !ok {
		return addr, false
	}
	i := strings.IndexByte(local, SubaddressSeparator)
	if i <= 0 { // no separator, or a local part that starts with it
		return addr, false
	}
	return local[:i] + "@" + domain, true
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

func isLowerASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x80 || ('A' <= c && c <= 'Z') {
			return false
		}
	}
	return true
}
