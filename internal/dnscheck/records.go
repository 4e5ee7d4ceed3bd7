// Package dnscheck knows the DNS records a pimail domain needs and checks
// that they are published: MX, the server's addresses and reverse names,
// SPF, DKIM, DMARC, MTA-STS, TLS-RPT, the SRV records of RFC 6186 and the
// client autoconfiguration names. `pimail quickstart` prints Expected;
// `pimail check dns` (and the web admin) run Checker.
package dnscheck

import (
	"fmt"
	"net/netip"
	"strings"
	"time"

	"github.com/miekg/dns"

	"pimail/internal/dkim"
)

// TTL is the time to live printed with the records.
const TTL = 3600

// Record is one DNS record to publish.
type Record struct {
	Name  string // owner, fully qualified, without the final dot
	Type  string // MX, A, AAAA, TXT, CNAME, SRV
	Value string // the data in zone-file form; for TXT the unquoted text
	Note  string // what it is for, printed as a comment above it
}

// ZoneLine formats the record as a zone-file line (RFC 1035 §5.1). TXT
// text is split into quoted character-strings of at most 255 octets
// (RFC 1035 §3.3.14), which verifiers concatenate (RFC 7208 §3.3, RFC
// 6376 §3.6.2.2).
func (r Record) ZoneLine() string {
	v := r.Value
	if r.Type == "TXT" {
		var parts []string
		for len(v) > 255 {
			parts = append(parts, quoteTXT(v[:255]))
			v = v[255:]
		}
		parts = append(parts, quoteTXT(v))
		v = strings.Join(parts, " ")
		if len(parts) > 1 {
			v = "( " + v + " )"
		}
	}
	return fmt.Sprintf("%s. %d IN %s %s", r.Name, TTL, r.Type, v)
}

func quoteTXT(s string) string {
	s = strings.ReplaceAll(s, `\`, `\\`)
	return `"` + strings.ReplaceAll(s, `"`, `\"`) + `"`
}

// Service is one SRV record of RFC 6186 (and RFC 8314 §5.1 for
// submissions): the service label and the port.
type Service struct {
	Label string // "_imaps._tcp"
	Port  uint16
}

// Services are the mail services announced with SRV records. RFC 8314
// §5.1 prefers implicit TLS; each service name has its own record set, so
// announcing both kinds is what lets clients choose. ManageSieve's record
// is RFC 5804 §1.8's.
var Services = []Service{
	{"_submissions._tcp", 465},
	{"_submission._tcp", 587},
	{"_imaps._tcp", 993},
	{"_imap._tcp", 143},
	{"_pop3s._tcp", 995},
	{"_sieve._tcp", 4190},
}

// Params describe the domain and its server.
type Params struct {
	Domain   string // the mail domain, e.g. example.org
	Hostname string // the server's name, e.g. mail.example.org
	// DKIM are the public key records of the domain's signing keys.
	DKIM []dkim.Record
	// Addrs are the server's public addresses, when known: they give A
	// and AAAA records (and the PTR advice).
	Addrs []netip.Addr
	// MTASTSID is the policy id (RFC 8461 §3.1: 1–32 letters and digits);
	// empty means one made from the current time.
	MTASTSID string
}

// Postmaster is the address reports go to (RFC 5321 §4.5.1 requires it).
func Postmaster(domain string) string { return "postmaster@" + domain }

// Expected returns the records the domain needs, in the order to publish.
func Expected(p Params) []Record {
	d, h := strings.ToLower(p.Domain), strings.ToLower(p.Hostname)
	id := p.MTASTSID
	if id == "" {
		id = time.Now().UTC().Format("20060102150405")
	}
	recs := []Record{{d, "MX", "10 " + h + ".", "mail for " + d + " goes to " + h + " (RFC 5321 §5.1)"}}
	for i, a := range p.Addrs {
		typ := "A"
		if a.Is6() && !a.Is4In6() {
			typ = "AAAA"
		}
		note := ""
		if i == 0 {
			note = "the server's public addresses"
		}
		recs = append(recs, Record{h, typ, a.Unmap().String(), note})
	}
	recs = append(recs, Record{d, "TXT", "v=spf1 mx -all", "SPF (RFC 7208): only the MX hosts send mail for " + d})
	for i, k := range p.DKIM {
		note := ""
		if i == 0 {
			note = "DKIM public keys (RFC 6376 §3.6.1, RFC 8463): outgoing mail is signed with both"
		}
		recs = append(recs, Record{strings.ToLower(k.Name), "TXT", k.Value, note})
	}
	recs = append(recs,
		Record{"_dmarc." + d, "TXT", "v=DMARC1; p=quarantine; rua=mailto:" + Postmaster(d),
			"DMARC (RFC 7489): unauthenticated mail claiming " + d + " goes to spam; daily reports to the postmaster"},
		Record{"_mta-sts." + d, "TXT", "v=STSv1; id=" + id,
			"MTA-STS (RFC 8461): senders must use TLS; change the id whenever the policy file changes"},
		Record{"mta-sts." + d, "CNAME", h + ".", "serves the MTA-STS policy file over HTTPS"},
		Record{"_smtp._tls." + d, "TXT", "v=TLSRPTv1; rua=mailto:" + Postmaster(d),
			"TLS reporting (RFC 8460): senders report TLS failures to the postmaster"},
		Record{"autoconfig." + d, "CNAME", h + ".", "client autoconfiguration (Thunderbird and others)"},
		Record{"autodiscover." + d, "CNAME", h + ".", "client autoconfiguration (Outlook)"},
	)
	for i, s := range Services {
		note := ""
		if i == 0 {
			note = "service records (RFC 6186, RFC 8314 §5.1, RFC 5804 §1.8) for mail clients"
		}
		recs = append(recs, Record{s.Label + "." + d, "SRV", fmt.Sprintf("0 1 %d %s.", s.Port, h), note})
	}
	return recs
}

// MTASTSPolicy is the policy file to serve at
// https://mta-sts.DOMAIN/.well-known/mta-sts.txt (RFC 8461 §3.2). It
// starts in "testing" mode: failures are reported (TLS-RPT) but mail is
// still delivered; switch to "enforce" once reports are clean.
func MTASTSPolicy(hostname string) string {
	return "version: STSv1\r\nmode: testing\r\nmx: " + strings.ToLower(hostname) + "\r\nmax_age: 604800\r\n"
}

// NormalizeMTASTSPolicy ends every line of a policy with CRLF, as RFC 8461
// §3.2 has it, and drops blank lines; a policy of blank lines only is "".
func NormalizeMTASTSPolicy(text string) string {
	var b strings.Builder
	for _, l := range strings.Split(text, "\n") {
		if l = strings.TrimRight(l, "\r"); strings.TrimSpace(l) != "" {
			b.WriteString(l + "\r\n")
		}
	}
	return b.String()
}

// PTRNames returns the reverse-lookup names (RFC 1035 §3.5, RFC 3596 §2.5)
// of the addresses, whose PTR record must name the server.
func PTRNames(addrs []netip.Addr) []string {
	out := make([]string, 0, len(addrs))
	for _, a := range addrs {
		r, err := dns.ReverseAddr(a.Unmap().String())
		if err == nil {
			out = append(out, strings.TrimSuffix(r, "."))
		}
	}
	return out
}
