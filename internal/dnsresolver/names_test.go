package dnsresolver

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// TestNamesWithEscapedCharacters asks for names whose labels hold octets
// that presentation format escapes (space, quote, parentheses, ";", "@",
// a backslash, UTF-8), as SPF's %{l} macro makes them from a local part.
// The reply's question comes back escaped by the server's library; the
// client must still take it as the answer to its query (issue 22: every
// such lookup was a temperror).
func TestNamesWithEscapedCharacters(t *testing.T) {
	names := []string{
		"o'brien._spf.example.test",
		"john smith._spf.example.test",
		`"quoted"._spf.example.test`,
		"a(b)c;d@e._spf.example.test",
		`back\\slash._spf.example.test`, // the label is back\slash
		"bücher._spf.example.test",
		"MiXeD.Case.example.test",
	}
	zone := map[string]bool{}
	for _, n := range names {
		c, err := CanonicalName(n)
		if err != nil {
			t.Fatalf("CanonicalName(%q): %v", n, err)
		}
		zone[strings.ToLower(c)] = true
	}
	ts := startServer(t, func(w dns.ResponseWriter, r *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(r)
		q := r.Question[0]
		if !zone[strings.ToLower(q.Name)] {
			m.Rcode = dns.RcodeNameError
		} else {
			m.Answer = append(m.Answer, &dns.TXT{Hdr: dns.RR_Header{Name: strings.ToUpper(q.Name), Rrtype: dns.TypeTXT, Class: dns.ClassINET, Ttl: 60},
				Txt: []string{"v=spf1 \\\"q\\\" \\195\\188 -all"}})
		}
		_ = w.WriteMsg(m)
	})
	c := newClient(t, Config{Servers: []string{ts.addr}, Timeout: time.Second})
	for _, n := range names {
		txt, res, err := c.LookupTXT(context.Background(), n)
		if err != nil || res.NXDomain || len(txt) != 1 {
			t.Errorf("TXT %q: %+v %+v %v", n, txt, res, err)
			continue
		}
		// The octets as sent: a quote and UTF-8, not their escapes.
		if txt[0].Text != `v=spf1 "q" ü -all` {
			t.Errorf("TXT %q text %q", n, txt[0].Text)
		}
	}
	// Names that cannot be sent fail at once, as invalid, not as a
	// server failure.
	for _, n := range []string{"a..b.test", strings.Repeat("x", 64) + ".test", strings.Repeat("abcdefghi.", 26) + "test"} {
		_, _, err := c.LookupTXT(context.Background(), n)
		if !errors.Is(err, ErrInvalidName) || errors.Is(err, ErrServerFailure) {
			t.Errorf("TXT %q: err %v, want ErrInvalidName", n, err)
		}
	}
}

func TestLookupPTR(t *testing.T) {
	ts := startServer(t, func(w dns.ResponseWriter, r *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(r)
		switch r.Question[0].Name {
		case "4.3.2.1.in-addr.arpa.":
			m.Answer = append(m.Answer, rr(t, "4.3.2.1.in-addr.arpa. 60 IN PTR mail.example.test."))
		case "1.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.8.b.d.0.1.0.0.2.ip6.arpa.":
			m.Answer = append(m.Answer, rr(t, r.Question[0].Name+" 60 IN PTR v6.example.test."))
		default:
			m.Rcode = dns.RcodeNameError
		}
		_ = w.WriteMsg(m)
	})
	c := newClient(t, Config{Servers: []string{ts.addr}, Timeout: time.Second})
	for addr, want := range map[string]string{"1.2.3.4": "mail.example.test", "::ffff:1.2.3.4": "mail.example.test", "2001:db8::1": "v6.example.test"} {
		names, _, err := c.LookupPTR(context.Background(), netip.MustParseAddr(addr))
		if err != nil || len(names) != 1 || names[0] != want {
			t.Errorf("PTR %s: %v %v", addr, names, err)
		}
	}
	names, res, err := c.LookupPTR(context.Background(), netip.MustParseAddr("192.0.2.9"))
	if err != nil || len(names) != 0 || !res.NXDomain {
		t.Errorf("PTR of an unknown address: %v %+v %v", names, res, err)
	}
}
