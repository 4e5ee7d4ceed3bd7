package msgauth

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"strings"
	"sync"
	"testing"

	"github.com/miekg/dns"

	"pimail/internal/dnsresolver"
)

// zone is an in-process authoritative DNS zone served to a real
// dnsresolver.Client through its HandlerTransport: the tests exercise the
// same client code the server uses, without sockets.
type zone struct {
	mu       sync.Mutex
	rrs      map[string][]dns.RR // by lower-case FQDN
	servfail map[string]bool
	queries  map[string]int // "name TYPE" -> count
}

func newZone(t *testing.T, records ...string) *zone {
	t.Helper()
	z := &zone{rrs: map[string][]dns.RR{}, servfail: map[string]bool{}, queries: map[string]int{}}
	for _, s := range records {
		z.add(t, s)
	}
	return z
}

func (z *zone) add(t *testing.T, s string) {
	t.Helper()
	rr, err := dns.NewRR(s)
	if err != nil {
		t.Fatalf("bad test record %q: %v", s, err)
	}
	z.mu.Lock()
	defer z.mu.Unlock()
	name := strings.ToLower(rr.Header().Name)
	z.rrs[name] = append(z.rrs[name], rr)
}

// failing makes every query for name (a domain, no trailing dot) SERVFAIL.
func (z *zone) failing(name string) {
	z.mu.Lock()
	defer z.mu.Unlock()
	z.servfail[dns.Fqdn(strings.ToLower(name))] = true
}

func (z *zone) count(name string, qtype uint16) int {
	z.mu.Lock()
	defer z.mu.Unlock()
	return z.queries[dns.Fqdn(strings.ToLower(name))+" "+dns.TypeToString[qtype]]
}

func (z *zone) ServeDNS(w dns.ResponseWriter, r *dns.Msg) {
	m := new(dns.Msg)
	m.SetReply(r)
	q := r.Question[0]
	name := strings.ToLower(q.Name)
	z.mu.Lock()
	z.queries[name+" "+dns.TypeToString[q.Qtype]]++
	switch {
	case z.servfail[name]:
		m.Rcode = dns.RcodeServerFailure
	case len(z.rrs[name]) == 0 && !z.hasBelow(name):
		m.Rcode = dns.RcodeNameError
	default:
		for _, rr := range z.rrs[name] {
			if rr.Header().Rrtype == q.Qtype {
				m.Answer = append(m.Answer, rr)
			}
		}
	}
	z.mu.Unlock()
	_ = w.WriteMsg(m)
}

// hasBelow reports an empty non-terminal: a name with records below it
// exists (RFC 8020), so it answers NODATA rather than NXDOMAIN.
func (z *zone) hasBelow(name string) bool {
	for n := range z.rrs {
		if strings.HasSuffix(n, "."+name) {
			return true
		}
	}
	return false
}

// resolver is a dnsresolver.Client answering from the zone.
func (z *zone) resolver(t *testing.T) *dnsresolver.Client {
	t.Helper()
	c, err := dnsresolver.New(dnsresolver.Config{Servers: []string{"127.0.0.1:53"}, Transport: dnsresolver.HandlerTransport{Handler: z}})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// edKey makes an Ed25519 DKIM key and its TXT record text (RFC 8463).
func edKey(t *testing.T) (ed25519.PrivateKey, string) {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return priv, "v=DKIM1; k=ed25519; p=" + base64.StdEncoding.EncodeToString(pub)
}

// txt formats a TXT record line for the zone.
func txt(name, text string) string {
	return name + ". 300 IN TXT \"" + strings.ReplaceAll(text, `"`, `\"`) + "\""
}

// unfold removes the line breaks of a folded field body.
func unfold(b []byte) string {
	return strings.NewReplacer("\r\n", "", "\n", "").Replace(string(b))
}
