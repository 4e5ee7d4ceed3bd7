package blackbox

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/BurntSushi/toml"
)

// pebble is a running ACME test CA (Debian's pebble) with its mock DNS
// server (pebble-challtestsrv), both on loopback. The DNS server answers
// every A query with 127.0.0.1, so pebble validates challenges against the
// pimail under test: HTTP-01 on httpPort, TLS-ALPN-01 on tlsPort.
type pebble struct {
	dir    string // the ACME directory URL
	caFile string // the certificate of pebble's own HTTPS API, for SSL_CERT_FILE
	mgmt   string // pebble's management address (issuing roots)
	api    *http.Client
}

// startPebble starts pebble-challtestsrv and pebble; certificates pebble
// issues are valid for validity.
func startPebble(t *testing.T, httpPort, tlsPort string, validity time.Duration) *pebble {
	t.Helper()
	pebbleBin := requireTool(t, "pebble")
	challBin := requireTool(t, "pebble-challtestsrv")
	dir := t.TempDir()
	// pebble's own HTTPS API, at localhost: a self-signed certificate,
	// which is its own CA for the clients (pimail through SSL_CERT_FILE).
	p := &pebble{caFile: filepath.Join(dir, "api.pem")}
	writeTestCert(t, filepath.Join(dir, "api.key"), p.caFile, "localhost")
	caPEM, err := os.ReadFile(p.caFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	p.api = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}

	dns := freeAddr(t)
	startDaemon(t, "pebble-challtestsrv", nil, challBin, "-dns01", dns, "-http01", "", "-https01", "",
		"-tlsalpn01", "", "-management", freeAddr(t), "-defaultIPv4", "127.0.0.1", "-defaultIPv6", "")

	_, listenPort, _ := net.SplitHostPort(freeAddr(t))
	listen := "localhost:" + listenPort
	p.mgmt = freeAddr(t)
	hp, _ := strconv.Atoi(httpPort)
	tp, _ := strconv.Atoi(tlsPort)
	conf, _ := json.Marshal(map[string]any{"pebble": map[string]any{
		"listenAddress": listen, "managementListenAddress": p.mgmt,
		"certificate": p.caFile, "privateKey": filepath.Join(dir, "api.key"),
		"httpPort": hp, "tlsPort": tp, "ocspResponderURL": "", "externalAccountBindingRequired": false,
		"certificateValidityPeriod": int(validity.Seconds()),
	}})
	confPath := filepath.Join(dir, "pebble.json")
	if err := os.WriteFile(confPath, conf, 0o600); err != nil {
		t.Fatal(err)
	}
	// No random sleeps before validation, no rejected nonces: the test is
	// about pimail, not about the client's retries.
	startDaemon(t, "pebble", []string{"PEBBLE_VA_NOSLEEP=1", "PEBBLE_WFE_NONCEREJECT=0"},
		pebbleBin, "-config", confPath, "-dnsserver", dns)
	p.dir = "https://" + listen + "/dir"
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := p.api.Get(p.dir)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return p
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("pebble's directory %s did not answer: %v", p.dir, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// roots returns the root that pebble's issued certificates chain to (made
// anew at each start of pebble).
func (p *pebble) roots(t *testing.T) *x509.CertPool {
	t.Helper()
	_, port, _ := net.SplitHostPort(p.mgmt)
	resp, err := p.api.Get("https://localhost:" + port + "/roots/0")
	if err != nil {
		t.Fatalf("pebble root: %v", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		t.Fatalf("pebble root: no certificate in %q", clip(string(b), 200))
	}
	return pool
}

// startDaemon starts a helper process for the test's lifetime; it is
// killed (by its PID) when the test ends.
func startDaemon(t *testing.T, name string, env []string, bin string, args ...string) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	log := newLogWriter()
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("%s log (tail):\n%s", name, log.tail(6000))
		}
	})
}

// servedCert connects to addr with TLS for name, verifying the chain
// against roots, and returns the server's certificate.
func servedCert(addr, name string, roots *x509.CertPool) (*x509.Certificate, error) {
	d := &net.Dialer{Timeout: 10 * time.Second}
	// The first handshake for a name waits for the order at the CA.
	c, err := tls.DialWithDialer(d, "tcp", addr, &tls.Config{ServerName: name, RootCAs: roots})
	if err != nil {
		return nil, err
	}
	defer c.Close()
	return c.ConnectionState().PeerCertificates[0], nil
}

// TestQuickstartACME: --acme writes a configuration with ACME on (no
// fallback to a self-signed certificate, as before issue 24), for the
// host, MTA-STS and autoconfig names.
func TestQuickstartACME(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "pimail.toml")
	out := string(runTool(t, 2*time.Minute, "", nil, pimailBin, "quickstart", "--acme",
		"--data", filepath.Join(dir, "data"), "--config", cfg, "--ip", "192.0.2.1", "me@acme.example"))
	var c struct {
		Hostname string
		TLS      struct {
			ACME          bool     `toml:"acme"`
			SelfSigned    bool     `toml:"self_signed"`
			ACMEEmail     string   `toml:"acme_email"`
			ACMEDirectory string   `toml:"acme_directory"`
			ACMEHosts     []string `toml:"acme_hosts"`
		}
	}
	if _, err := toml.DecodeFile(cfg, &c); err != nil {
		t.Fatalf("the configuration does not parse: %v", err)
	}
	if !c.TLS.ACME || c.TLS.SelfSigned || c.TLS.ACMEEmail != "me@acme.example" ||
		c.TLS.ACMEDirectory != "https://acme-v02.api.letsencrypt.org/directory" ||
		strings.Join(c.TLS.ACMEHosts, " ") != "mail.acme.example mta-sts.acme.example autoconfig.acme.example autodiscover.acme.example" {
		t.Errorf("[tls] of the written configuration: %+v", c.TLS)
	}
	if c.Hostname != "mail.acme.example" {
		t.Errorf("hostname %q", c.Hostname)
	}
	if strings.Contains(out, "self-signed") || !strings.Contains(out, "certificates come from the ACME CA") {
		t.Errorf("TLS advice:\n%s", between(t, out, "TLS:", "Next steps"))
	}
	// The configuration is valid: check dns loads it (and fails: no DNS here).
	res, err := runToolErr(time.Minute, "", nil, pimailBin, "check", "dns", "--config", cfg, "--dns", "127.0.0.1:1", "--timeout", "200ms", "acme.example")
	if err == nil || !strings.Contains(string(res), "WRONG   MX acme.example: got no answer") {
		t.Errorf("check dns without a DNS server: %v\n%s", err, res)
	}
	// A second run never overwrites the configuration.
	if b, err := runToolErr(time.Minute, "", nil, pimailBin, "quickstart", "--data", filepath.Join(dir, "data"), "--config", cfg, "me@acme.example"); err == nil || !strings.Contains(string(b), "never overwrites") {
		t.Errorf("second quickstart: %v\n%s", err, b)
	}
}

// TestACMEPebble runs what quickstart --acme writes against a real ACME
// CA (pebble, validating over loopback with its own DNS server): the
// certificate pebble issues is served on HTTPS, submissions, IMAPS and
// POP3S, and is renewed before it expires.
func TestACMEPebble(t *testing.T) {
	t.Parallel()
	l := withListeners(t, "http", "https", "submissions", "imaps", "pop3s")
	_, httpPort, _ := net.SplitHostPort(l.HTTP)
	_, tlsPort, _ := net.SplitHostPort(l.HTTPS)
	// Short-lived certificates, so that renewal (at two thirds of the
	// lifetime) comes within the test.
	const lifetime = 30 * time.Second
	p := startPebble(t, httpPort, tlsPort, lifetime)

	dir := t.TempDir()
	cfg, data := filepath.Join(dir, "pimail.toml"), filepath.Join(dir, "data")
	const host = "mail.acme.test"
	runTool(t, 2*time.Minute, "", nil, pimailBin, "quickstart", "--acme", "--acme-directory", p.dir,
		"--hostname", host, "--data", data, "--config", cfg, "--ip", "127.0.0.1", "me@acme.test")
	srv := &Server{t: t, Data: data, Config: cfg, SMTP: freeAddr(t), IMAP: freeAddr(t), Hostname: host,
		Env: []string{"SSL_CERT_FILE=" + p.caFile}} // pimail trusts pebble's API as it would Let's Encrypt's
	t.Cleanup(srv.cleanup)
	srv.StartWith(l)
	roots := p.roots(t)

	listeners := map[string]string{"https": l.HTTPS, "submissions": l.Submissions, "imaps": l.IMAPS, "pop3s": l.POP3S}
	serials := func() map[string]string {
		out := map[string]string{}
		for name, addr := range listeners {
			c, err := servedCert(addr, host, roots)
			if err != nil {
				t.Fatalf("%s (%s): no certificate from pebble: %v\nserver log:\n%s", name, addr, err, clip(srv.Logs(), 4000))
			}
			if err := c.VerifyHostname(host); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			out[name] = fmt.Sprintf("%x (until %s)", c.SerialNumber, c.NotAfter.Format(time.TimeOnly))
		}
		return out
	}
	first := serials()
	t.Logf("issued: %v", first)
	for name, s := range first {
		if s != first["https"] {
			t.Errorf("%s serves %s, https %s", name, s, first["https"])
		}
	}
	if _, err := os.Stat(filepath.Join(data, "tls", "acme", host)); err != nil {
		t.Errorf("the certificate is not kept in the data directory: %v", err)
	}

	deadline := time.Now().Add(2 * lifetime)
	for {
		time.Sleep(time.Second)
		c, err := servedCert(l.HTTPS, host, roots)
		if err == nil && fmt.Sprintf("%x (until %s)", c.SerialNumber, c.NotAfter.Format(time.TimeOnly)) != first["https"] {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no renewed certificate after %v (err %v)\nserver log:\n%s", 2*lifetime, err, clip(srv.Logs(), 4000))
		}
	}
	renewed := serials()
	t.Logf("renewed: %v", renewed)
	for name, s := range renewed {
		if s == first[name] {
			t.Errorf("%s still serves the first certificate %s", name, s)
		}
	}
}
