package autoconfig

import (
	"encoding/xml"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
)

func testConfig() Config {
	return Config{
		Hostname: "mail.example.org",
		Domains:  func() []string { return []string{"example.org", "example.net"} },
		IMAPS:    993, IMAP: 143, POP3S: 995, POP3: 110, Submissions: 465, Submission: 587,
		ManageSieve: 4190,
	}
}

// tbConfig is the client side of Thunderbird's format.
type tbConfig struct {
	XMLName  xml.Name `xml:"clientConfig"`
	Version  string   `xml:"version,attr"`
	Provider struct {
		ID       string     `xml:"id,attr"`
		Domains  []string   `xml:"domain"`
		Incoming []tbServer `xml:"incomingServer"`
		Outgoing []tbServer `xml:"outgoingServer"`
	} `xml:"emailProvider"`
	Setup []tbServer `xml:"setupServer"`
}

type tbServer struct {
	Type     string `xml:"type,attr"`
	Hostname string `xml:"hostname"`
	Port     int    `xml:"port"`
	Socket   string `xml:"socketType"`
	Username string `xml:"username"`
	Auth     string `xml:"authentication"`
}

func get(t *testing.T, c *http.Client, u string, host string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	if host != "" {
		req.Host = host
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, body
}

func TestThunderbirdAutoconfig(t *testing.T) {
	srv := httptest.NewServer(New(testConfig()))
	defer srv.Close()
	c := srv.Client()

	for _, u := range []string{
		srv.URL + "/mail/config-v1.1.xml?emailaddress=" + url.QueryEscape("Bob@Example.ORG"),
		srv.URL + "/.well-known/autoconfig/mail/config-v1.1.xml?emailaddress=bob%40example.org",
	} {
		resp, body := get(t, c, u, "")
		if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/xml") {
			t.Fatalf("%s: %d %s", u, resp.StatusCode, resp.Header.Get("Content-Type"))
		}
		var cfg tbConfig
		if err := xml.Unmarshal(body, &cfg); err != nil {
			t.Fatalf("parse: %v\n%s", err, body)
		}
		if cfg.Version != "1.1" || cfg.Provider.ID != "example.org" || len(cfg.Provider.Domains) != 1 {
			t.Errorf("provider %+v", cfg.Provider)
		}
		want := []tbServer{
			{"imap", "mail.example.org", 993, "SSL", "%EMAILADDRESS%", "password-cleartext"},
			{"imap", "mail.example.org", 143, "STARTTLS", "%EMAILADDRESS%", "password-cleartext"},
			{"pop3", "mail.example.org", 995, "SSL", "%EMAILADDRESS%", "password-cleartext"},
			{"pop3", "mail.example.org", 110, "STARTTLS", "%EMAILADDRESS%", "password-cleartext"},
		}
		if len(cfg.Provider.Incoming) != len(want) {
			t.Fatalf("incoming %+v", cfg.Provider.Incoming)
		}
		for i := range want {
			if cfg.Provider.Incoming[i] != want[i] {
				t.Errorf("incoming %d = %+v, want %+v", i, cfg.Provider.Incoming[i], want[i])
			}
		}
		if len(cfg.Provider.Outgoing) != 2 || cfg.Provider.Outgoing[0].Port != 465 || cfg.Provider.Outgoing[0].Socket != "SSL" ||
			cfg.Provider.Outgoing[1].Port != 587 || cfg.Provider.Outgoing[1].Socket != "STARTTLS" || cfg.Provider.Outgoing[1].Type != "smtp" {
			t.Errorf("outgoing %+v", cfg.Provider.Outgoing)
		}
		// ManageSieve, as draft-ietf-mailmaint-autoconfig lists it.
		if want := (tbServer{"managesieve", "mail.example.org", 4190, "STARTTLS", "%EMAILADDRESS%", "password-cleartext"}); len(cfg.Setup) != 1 || cfg.Setup[0] != want {
			t.Errorf("setupServer %+v, want %+v", cfg.Setup, want)
		}
	}

	// Without emailaddress the domain comes from the Host autoconfig.<domain>.
	resp, body := get(t, c, srv.URL+"/mail/config-v1.1.xml", "autoconfig.example.net:8080")
	if resp.StatusCode != 200 || !strings.Contains(string(body), "<domain>example.net</domain>") {
		t.Errorf("by host: %d %s", resp.StatusCode, body)
	}
	// Other domains and malformed addresses: 404, nothing revealed.
	for _, q := range []string{"bob@other.example", "not-an-address", "a@b@", "<x>@example.org"} {
		resp, body := get(t, c, srv.URL+"/mail/config-v1.1.xml?emailaddress="+url.QueryEscape(q), "")
		if resp.StatusCode != 404 || strings.Contains(string(body), "mail.example.org") {
			t.Errorf("%q: %d %s", q, resp.StatusCode, body)
		}
	}
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/mail/config-v1.1.xml", nil)
	if resp, err := c.Do(req); err != nil || resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST: %v %v", resp, err)
	}
}

func TestAutoconfigEscapesEchoedDomain(t *testing.T) {
	cfg := testConfig()
	cfg.Domains = nil // serve any domain: the domain is echoed from the request
	cfg.POP3, cfg.POP3S = 0, 0
	srv := httptest.NewServer(New(cfg))
	defer srv.Close()
	evil := `x@a&b"'c.example`
	resp, body := get(t, srv.Client(), srv.URL+"/mail/config-v1.1.xml?emailaddress="+url.QueryEscape(evil), "")
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	if strings.Contains(string(body), `a&b"`) || !strings.Contains(string(body), "a&amp;b") {
		t.Errorf("domain not escaped: %s", body)
	}
	var c tbConfig
	if err := xml.Unmarshal(body, &c); err != nil {
		t.Fatal(err)
	}
	if c.Provider.ID != `a&b"'c.example` {
		t.Errorf("domain read back as %q", c.Provider.ID)
	}
	for _, s := range c.Provider.Incoming {
		if s.Type == "pop3" {
			t.Errorf("POP3 announced with port 0: %+v", s)
		}
	}
}

// Client side of the POX Autodiscover response.
type adReply struct {
	XMLName  xml.Name `xml:"http://schemas.microsoft.com/exchange/autodiscover/responseschema/2006 Autodiscover"`
	Response struct {
		XMLName xml.Name `xml:"http://schemas.microsoft.com/exchange/autodiscover/outlook/responseschema/2006a Response"`
		Account struct {
			AccountType string `xml:"AccountType"`
			Action      string `xml:"Action"`
			Protocols   []struct {
				Type       string `xml:"Type"`
				Server     string `xml:"Server"`
				Port       int    `xml:"Port"`
				LoginName  string `xml:"LoginName"`
				SSL        string `xml:"SSL"`
				Encryption string `xml:"Encryption"`
			} `xml:"Protocol"`
		} `xml:"Account"`
	} `xml:"Response"`
}

func adBody(addr string) string {
	var b strings.Builder
	b.WriteString(`<?xml version="1.0" encoding="utf-8"?>
<Autodiscover xmlns="http://schemas.microsoft.com/exchange/autodiscover/outlook/requestschema/2006"><Request><EMailAddress>`)
	xml.EscapeText(&b, []byte(addr))
	b.WriteString(`</EMailAddress><AcceptableResponseSchema>http://schemas.microsoft.com/exchange/autodiscover/outlook/responseschema/2006a</AcceptableResponseSchema></Request></Autodiscover>`)
	return b.String()
}

func post(t *testing.T, c *http.Client, u, body string) (*http.Response, []byte) {
	t.Helper()
	resp, err := c.Post(u, "text/xml", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, b
}

func TestAutodiscover(t *testing.T) {
	srv := httptest.NewServer(New(testConfig()))
	defer srv.Close()
	c := srv.Client()
	addr := `o'brien&co"@example.org`
	resp, body := post(t, c, srv.URL+"/autodiscover/autodiscover.xml", adBody(addr))
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	if strings.Contains(string(body), `brien&co"`) {
		t.Errorf("address echoed unescaped: %s", body)
	}
	var r adReply
	if err := xml.Unmarshal(body, &r); err != nil {
		t.Fatalf("parse: %v\n%s", err, body)
	}
	a := r.Response.Account
	if a.AccountType != "email" || a.Action != "settings" || len(a.Protocols) != 6 {
		t.Fatalf("account %+v", a)
	}
	got := ""
	for _, p := range a.Protocols {
		if p.Server != "mail.example.org" || p.LoginName != addr || p.SSL != "on" {
			t.Errorf("protocol %+v", p)
		}
		got += p.Type + ":" + p.Encryption + ":" + string(rune('0'+p.Port%10)) + " "
	}
	if got != "IMAP:SSL:3 IMAP:TLS:3 POP3:SSL:5 POP3:TLS:0 SMTP:SSL:5 SMTP:TLS:7 " {
		t.Errorf("protocols %s", got)
	}
	// The capitalised path Outlook uses works too.
	if resp, _ := post(t, c, srv.URL+"/Autodiscover/Autodiscover.xml", adBody("bob@example.net")); resp.StatusCode != 200 {
		t.Errorf("capitalised path: %d", resp.StatusCode)
	}
}

func TestAutodiscoverRejects(t *testing.T) {
	srv := httptest.NewServer(New(testConfig()))
	defer srv.Close()
	c := srv.Client()
	u := srv.URL + "/autodiscover/autodiscover.xml"
	for _, tc := range []struct {
		name, body string
		status     int
	}{
		{"other domain", adBody("bob@other.example"), 404},
		{"not xml", "hello", 400},
		{"no address", adBody(""), 400},
		{"too large", strings.Replace(adBody("bob@example.org"), "<Request>", "<Request>"+strings.Repeat(" ", MaxRequestBytes), 1), 413},
		{"oversized element", "<Autodiscover><Request><EMailAddress>" + strings.Repeat("a", MaxRequestBytes+10), 413},
	} {
		resp, body := post(t, c, u, tc.body)
		if resp.StatusCode != tc.status {
			t.Errorf("%s: status %d, want %d (%s)", tc.name, resp.StatusCode, tc.status, body)
		}
		if strings.Contains(string(body), "mail.example.org") {
			t.Errorf("%s: settings revealed", tc.name)
		}
	}
	resp, _ := get(t, c, u, "")
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("GET: %d", resp.StatusCode)
	}
}
