package spam

import (
	"net/netip"
	"strings"
)

// origin is what the Received field of the originating relay says about
// the client that handed the message to the first server on its way:
// the relay is the oldest Received with a public IPv4 address (see
// headerTokens). Spam comes from hijacked home computers far more than
// ham does, and their signs outlast any word list: no reverse DNS, a
// reverse name made of the address (an ISP's pool), a HELO that is no
// domain name (RFC 5321 §4.1.1.1 asks for the client's FQDN or an
// address literal). These are the ideas of SpamAssassin's RDNS_NONE,
// RDNS_DYNAMIC and HELO rule families, re-expressed over this filter's
// own parse of the trace field.
type origin struct {
	ip      netip.Addr
	net24   string // "a.b.c.0"
	rdns    string // the reverse name the receiving server recorded; "" when none
	helo    string // the name the client gave, lower case
	known   bool   // a trace field with a public IPv4 client was found
	dynamic bool   // rdns looks like an ISP's address pool
	forged  bool   // the receiving server noted "may be forged"
}

// findOrigin reads the Received fields (newest first, as in the header)
// and returns the oldest with a public IPv4 client address.
func findOrigin(received []string) origin {
	var o origin
	for _, r := range received {
		for _, ip := range bracketIPs(r) {
			if !ip.Is4() || ip.IsPrivate() || ip.IsLoopback() || ip.IsLinkLocalUnicast() || ip.IsUnspecified() {
				continue
			}
			o = parseRelay(r, ip)
			break
		}
	}
	return o
}

// parseRelay reads the "from" clause of one Received field (RFC 5321
// §4.4: "from" domain, then the TCP-info the receiver added in
// parentheses) in the forms common MTAs write:
//
//	from helo.example (rdns.example [192.0.2.1])        Postfix, Sendmail
//	from helo.example (unknown [192.0.2.1])             no reverse name
//	from helo.example ([192.0.2.1])                     Sendmail, no reverse name
//	from unknown (HELO helo.example) (192.0.2.1)        qmail
//	from rdns.example ([192.0.2.1] helo=helo.example)   Exim
//	from [192.0.2.1] (helo=helo.example)                Exim, no reverse name
func parseRelay(r string, ip netip.Addr) origin {
	o := origin{ip: ip, known: true}
	b := ip.As4()
	o.net24 = netip.AddrFrom4([4]byte{b[0], b[1], b[2], 0}).String()
	lr := strings.ToLower(r)
	o.forged = strings.Contains(lr, "may be forged")
	from := ""
	if i := strings.Index(lr, "from "); i >= 0 {
		from = strings.TrimSpace(lr[i+5:])
		if j := strings.IndexAny(from, " \t\r\n("); j >= 0 {
			from = from[:j]
		}
	}
	addr := ip.String()
	// HELO: qmail's "(HELO x)" and Exim's "helo=x" name it; otherwise the
	// word after "from" is the HELO.
	switch {
	case strings.Contains(lr, "(helo "):
		o.helo = wordAfter(lr, "(helo ")
	case strings.Contains(lr, "helo="):
		o.helo = wordAfter(lr, "helo=")
	default:
		o.helo = from
	}
	o.helo = strings.Trim(o.helo, "[]()<>;")
	// The reverse name is the word before "[addr]" inside the receiver's
	// parentheses, or, in the qmail and Exim forms, the word after "from".
	if k := strings.Index(lr, "["+addr+"]"); k >= 0 {
		before := strings.TrimSpace(lr[:k])
		if p := strings.LastIndexByte(before, '('); p >= 0 {
			o.rdns = strings.TrimSpace(before[p+1:])
		}
		if strings.Contains(lr, "helo=") && !strings.HasPrefix(from, "[") {
			o.rdns = from // Exim: from rdns ([addr] helo=x)
		}
	} else if strings.Contains(lr, "(helo ") {
		o.rdns = from // qmail: from rdns (HELO x) (addr)
	}
	if strings.ContainsAny(o.rdns, " \t") || o.rdns == "unknown" || !strings.Contains(o.rdns, ".") {
		o.rdns = ""
	}
	o.dynamic = o.rdns != "" && dynamicName(o.rdns, b)
	return o
}

// wordAfter returns the run of name characters after the first marker.
func wordAfter(s, marker string) string {
	i := strings.Index(s, marker)
	if i < 0 {
		return ""
	}
	s = s[i+len(marker):]
	end := strings.IndexAny(s, " \t\r\n);")
	if end < 0 {
		end = len(s)
	}
	return s[:end]
}

// dynamicWords mark reverse names of consumer access networks.
var dynamicWords = []string{"dsl", "dial", "dyn", "pool", "cable", "ppp", "dhcp", "client", "broadband", "cust", "user", "host-", "ip-", "cpe", "adsl", "catv", "modem", "res."}

// dynamicName reports a reverse name made for an address pool: it holds
// two or more of the address' octets as numbers (in either order, with
// any separator), or a word that access providers use for such pools.
func dynamicName(name string, ip [4]byte) bool {
	first := name
	if i := strings.IndexByte(name, '.'); i > 0 {
		// Only the labels below the provider's domain carry the pool.
		first = name[:max(i, len(name)-len(registrable(name))-1)]
	}
	if containsAny(first, dynamicWords) {
		return true
	}
	octets := 0
	for _, o := range ip {
		if containsNumber(first, int(o)) {
			octets++
		}
	}
	return octets >= 2
}

// containsNumber reports whether s has n written as a whole decimal run.
func containsNumber(s string, n int) bool {
	for i := 0; i < len(s); {
		if s[i] < '0' || s[i] > '9' {
			i++
			continue
		}
		j, v := i, 0
		for j < len(s) && s[j] >= '0' && s[j] <= '9' && j-i < 4 {
			v = v*10 + int(s[j]-'0')
			j++
		}
		for j < len(s) && s[j] >= '0' && s[j] <= '9' {
			j++
		}
		if v == n && j-i <= 3 {
			return true
		}
		i = j
	}
	return false
}

// heloShape classes the HELO name: "ip" for an address literal or a bare
// address, "nodot" for a name without a dot (RFC 5321 §2.3.5 asks for a
// fully qualified one), "" otherwise.
func heloShape(h string) string {
	switch {
	case h == "":
		return ""
	case isIPHost(strings.Trim(h, "[]")):
		return "ip"
	case !strings.Contains(h, "."):
		return "nodot"
	}
	return ""
}

// originTokens are the classifier's features of the originating relay.
func (t *tokenSet) originTokens(o origin) {
	if !o.known {
		return
	}
	t.add2("rip:", o.net24)
	switch {
	case o.rdns == "":
		t.add("rdns:none")
	case o.dynamic:
		t.add("rdns:dynamic")
	default:
		t.add2("rdns:", registrable(o.rdns))
	}
	if s := heloShape(o.helo); s != "" {
		t.add2("helo:", s)
	} else if o.rdns != "" && o.helo != "" && registrable(o.helo) != registrable(o.rdns) {
		t.add("helo:other-domain")
	}
	if o.forged {
		t.add("rcvd:forged")
	}
}

func ruleRcvdNoRDNS(c *ruleCtx) bool { return c.a.origin.known && c.a.origin.rdns == "" }

func ruleRcvdDynamic(c *ruleCtx) bool { return c.a.origin.known && c.a.origin.dynamic }
