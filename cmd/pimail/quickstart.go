package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"strings"

	"github.com/BurntSushi/toml"

	"pimail/internal/config"
	"pimail/internal/dkim"
	"pimail/internal/dnscheck"
	"pimail/internal/message"
	"pimail/internal/store"
)

func init() {
	register("quickstart", "set up a mail domain for production: config, account, DKIM, systemd unit, DNS records", cmdQuickstart)
}

// Markers around the DNS records quickstart prints, so that they can be cut
// out and pasted (or loaded) as a zone.
const (
	zoneBegin = "; ---- DNS records for %s: paste these into the zone ----"
	zoneEnd   = "; ---- end of DNS records ----"
)

type quickstartOpts struct {
	address, domain, hostname string
	data, configPath, binary  string
	cert, key                 string
	acme                      bool
	acmeDirectory             string
	addrs                     []netip.Addr
}

func cmdQuickstart(args []string) error {
	fs := newFlags("quickstart", "ADDRESS", `Sets up pimail for the domain of ADDRESS: writes the configuration file,
creates the domain and the account ADDRESS with a generated password
(printed once), makes postmaster@DOMAIN an alias of it, generates the DKIM
keys, writes a systemd unit beside the configuration, and prints every
DNS record the domain needs. See docs/deploy.md.`)
	var o quickstartOpts
	fs.StringVar(&o.data, "data", "/var/lib/pimail", "data directory")
	fs.StringVar(&o.configPath, "config", "/etc/pimail/pimail.toml", "configuration file to write (must not exist)")
	fs.StringVar(&o.hostname, "hostname", "", "the server's public name (default mail.DOMAIN)")
	fs.StringVar(&o.cert, "cert", "", "TLS certificate chain (PEM) for the hostname")
	fs.StringVar(&o.key, "key", "", "its private key (PEM)")
	fs.BoolVar(&o.acme, "acme", false, "get certificates from Let's Encrypt (ACME)")
	fs.StringVar(&o.acmeDirectory, "acme-directory", letsEncrypt, "with --acme: the ACME CA's directory URL (e.g. Let's Encrypt's staging CA for a first try)")
	fs.StringVar(&o.binary, "binary", "/usr/local/bin/pimail", "where the pimail binary is installed (for the systemd unit)")
	ips := fs.String("ip", "", "the server's public addresses, comma-separated (default: the global addresses of this machine's interfaces)")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("want exactly one ADDRESS (the first account, e.g. you@example.org)")
	}
	if err := o.check(pos[0], *ips); err != nil {
		return err
	}
	return quickstart(o)
}

// check validates and completes the options.
func (o *quickstartOpts) check(address, ips string) error {
	var err error
	if o.address, err = normalizeAddress(address); err != nil {
		return err
	}
	o.domain = message.DomainOf(o.address)
	if o.hostname == "" {
		o.hostname = "mail." + o.domain
	}
	if o.hostname, err = normalizeDomain(o.hostname); err != nil {
		return err
	}
	if (o.cert == "") != (o.key == "") {
		return usagef("--cert and --key go together")
	}
	if o.acme && o.cert != "" {
		return usagef("--acme and --cert exclude each other")
	}
	if !o.acme && o.acmeDirectory != letsEncrypt {
		return usagef("--acme-directory needs --acme")
	}
	if o.cert != "" {
		if _, err := tls.LoadX509KeyPair(o.cert, o.key); err != nil {
			return fmt.Errorf("load certificate: %w", err)
		}
		if o.cert, err = filepath.Abs(o.cert); err != nil {
			return err
		}
		if o.key, err = filepath.Abs(o.key); err != nil {
			return err
		}
	}
	if o.data, err = filepath.Abs(o.data); err != nil {
		return err
	}
	if o.configPath, err = filepath.Abs(o.configPath); err != nil {
		return err
	}
	if _, err := os.Stat(o.configPath); err == nil {
		return fmt.Errorf("%s exists: quickstart never overwrites a configuration; move it away or choose --config", o.configPath)
	}
	for _, s := range strings.Split(ips, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		a, err := netip.ParseAddr(s)
		if err != nil {
			return usagef("--ip: %v", err)
		}
		o.addrs = append(o.addrs, a.Unmap())
	}
	if len(o.addrs) == 0 {
		o.addrs = publicAddrs()
	}
	return nil
}

func quickstart(o quickstartOpts) error {
	if err := os.MkdirAll(filepath.Dir(o.configPath), 0o755); err != nil {
		return fmt.Errorf("create configuration directory: %w", err)
	}
	if err := writeConfig(o); err != nil {
		return err
	}
	pw, err := generatePassword()
	if err != nil {
		return err
	}
	var notes []string
	var records []dkim.Record
	pwSet := false
	st, err := createStore(o.data)
	if err != nil {
		return err
	}
	notes, records, pwSet, err = setupDomain(context.Background(), st, o, pw)
	st.Close()
	if err != nil {
		return err
	}
	unit := filepath.Join(filepath.Dir(o.configPath), "pimail.service")
	if err := os.WriteFile(unit, []byte(systemdUnit(o)), 0o644); err != nil {
		return fmt.Errorf("write systemd unit: %w", err)
	}

	fmt.Printf("pimail is set up for %s.\n\n", o.domain)
	fmt.Printf("  configuration   %s\n", o.configPath)
	fmt.Printf("  data directory  %s\n", o.data)
	fmt.Printf("  systemd unit    %s\n", unit)
	fmt.Printf("  host name       %s\n", o.hostname)
	fmt.Printf("  account         %s\n", o.address)
	if pwSet {
		fmt.Printf("  password        %s   (shown only now: write it down)\n", pw)
	}
	for _, n := range notes {
		fmt.Printf("  note            %s\n", n)
	}
	fmt.Println()
	printZone(o, records)
	printAdvice(o, unit)
	return nil
}

// setupDomain creates the domain, the account with pw (pwSet is false when
// the account existed), the postmaster alias and the DKIM keys.
func setupDomain(ctx context.Context, st store.Store, o quickstartOpts, pw string) (notes []string, recs []dkim.Record, pwSet bool, err error) {
	if _, err := st.AddDomain(ctx, o.domain); err != nil && !errors.Is(err, store.ErrExists) {
		return nil, nil, false, fmt.Errorf("add domain %s: %w", o.domain, err)
	}
	pwSet = true
	if err := addAccount(ctx, st, o.address, pw); err != nil {
		if !errors.Is(err, store.ErrExists) {
			return nil, nil, false, err
		}
		notes = append(notes, o.address+" existed already; its password is unchanged")
		pwSet = false
	}
	if pm := dnscheck.Postmaster(o.domain); pm != o.address {
		// RFC 5321 §4.5.1: postmaster must exist; DMARC and TLS reports go there.
		if err := st.AddAlias(ctx, pm, []string{o.address}); err != nil {
			notes = append(notes, fmt.Sprintf("%s not made an alias: %v", pm, err))
		} else {
			notes = append(notes, pm+" is an alias of "+o.address)
		}
	}
	// RFC 8461 §3.2: the policy senders fetch; one set before (maybe
	// switched to enforce) is kept.
	switch _, err := st.MTASTSPolicy(ctx, o.domain); {
	case errors.Is(err, store.ErrNotFound):
		if err := st.SetMTASTSPolicy(ctx, o.domain, dnscheck.MTASTSPolicy(o.hostname)); err != nil {
			return nil, nil, false, fmt.Errorf("publish the MTA-STS policy: %w", err)
		}
	case err != nil:
		return nil, nil, false, err
	default:
		notes = append(notes, "the MTA-STS policy of "+o.domain+" existed already; it is unchanged")
	}
	keys, err := dkim.EnsureKeys(ctx, st, o.domain)
	if err != nil {
		return nil, nil, false, err
	}
	for _, k := range keys {
		r, err := dkim.PublicRecord(k)
		if err != nil {
			return nil, nil, false, err
		}
		recs = append(recs, r)
	}
	return notes, recs, pwSet, nil
}

// generatePassword returns about 98 bits of randomness in four groups of
// unambiguous letters and digits.
func generatePassword() (string, error) {
	const alphabet = "abcdefghjkmnpqrstuvwxyz23456789"
	var b strings.Builder
	buf := make([]byte, 1)
	for n := 0; n < 20; {
		if _, err := rand.Read(buf); err != nil {
			return "", fmt.Errorf("generate password: %w", err)
		}
		if int(buf[0]) >= 256/len(alphabet)*len(alphabet) {
			continue // rejection sampling keeps the letters uniform
		}
		if n > 0 && n%5 == 0 {
			b.WriteByte('-')
		}
		b.WriteByte(alphabet[int(buf[0])%len(alphabet)])
		n++
	}
	return b.String(), nil
}

// publicAddrs returns the addresses of the machine's interfaces that can
// be published (none behind NAT: then --ip is needed).
func publicAddrs() []netip.Addr {
	ifAddrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil
	}
	var out []netip.Addr
	for _, a := range ifAddrs {
		pfx, err := netip.ParsePrefix(a.String())
		if err != nil {
			continue
		}
		if ip := pfx.Addr().Unmap(); publishable(ip) {
			out = append(out, ip)
		}
	}
	return out
}

// notPublic are the special-purpose ranges (RFC 6890 and the IANA
// registries) that netip's predicates let through as global unicast: an
// address there on an interface is no one's public address.
var notPublic = []netip.Prefix{
	netip.MustParsePrefix("100.64.0.0/10"),   // shared address space, carrier NAT (RFC 6598)
	netip.MustParsePrefix("192.0.0.0/24"),    // IETF protocol assignments (RFC 6890)
	netip.MustParsePrefix("192.0.2.0/24"),    // documentation, TEST-NET-1 (RFC 5737)
	netip.MustParsePrefix("198.18.0.0/15"),   // benchmarking (RFC 2544)
	netip.MustParsePrefix("198.51.100.0/24"), // documentation, TEST-NET-2 (RFC 5737)
	netip.MustParsePrefix("203.0.113.0/24"),  // documentation, TEST-NET-3 (RFC 5737)
	netip.MustParsePrefix("240.0.0.0/4"),     // reserved (RFC 1112)
	netip.MustParsePrefix("100::/64"),        // discard only (RFC 6666)
	netip.MustParsePrefix("2001::/23"),       // IETF protocol assignments (RFC 2928)
	netip.MustParsePrefix("2001:db8::/32"),   // documentation (RFC 3849)
}

// publishable reports whether ip may be published as the server's address
// in A/AAAA and PTR records.
func publishable(ip netip.Addr) bool {
	if !ip.IsGlobalUnicast() || ip.IsPrivate() || ip.IsLoopback() {
		return false
	}
	for _, p := range notPublic {
		if p.Contains(ip) {
			return false
		}
	}
	return true
}

// letsEncrypt is the directory of Let's Encrypt's production CA.
const letsEncrypt = "https://acme-v02.api.letsencrypt.org/directory"

// quickstartConfig is the configuration quickstart writes: the defaults,
// the host name and data directory, and TLS from --cert/--key or ACME.
func quickstartConfig(o quickstartOpts) config.Config {
	cfg := config.Default()
	cfg.Hostname, cfg.Data = o.hostname, o.data
	switch {
	case o.cert != "":
		cfg.TLS = config.TLS{CertFile: o.cert, KeyFile: o.key}
	case o.acme:
		cfg.TLS = config.TLS{ACME: true, ACMEEmail: o.address, ACMEDirectory: o.acmeDirectory,
			ACMEHosts: []string{o.hostname, "mta-sts." + o.domain, "autoconfig." + o.domain, "autodiscover." + o.domain}}
	}
	return cfg
}

// writeConfig writes the annotated configuration, after checking that it
// loads back as the same configuration.
func writeConfig(o quickstartOpts) error {
	cfg := quickstartConfig(o)
	text, err := renderConfig(cfg, o)
	if err != nil {
		return err
	}
	tmp := o.configPath + ".tmp"
	defer os.Remove(tmp)
	if err := os.WriteFile(tmp, []byte(text), 0o640); err != nil {
		return fmt.Errorf("write configuration: %w", err)
	}
	back, err := config.Load(tmp)
	if err != nil {
		return fmt.Errorf("the generated configuration does not load: %w", err)
	}
	if !reflect.DeepEqual(back.TLS, cfg.TLS) {
		return fmt.Errorf("the generated configuration loads with TLS %+v, not %+v", back.TLS, cfg.TLS)
	}
	if err := os.Rename(tmp, o.configPath); err != nil {
		return fmt.Errorf("write configuration: %w", err)
	}
	return nil
}

// configNotes are comments put above sections and keys of the file.
var configNotes = map[string]string{
	"hostname":     "The server's public name: SMTP banner and EHLO, TLS certificate name, MX target.",
	"data":         "Database, message files, DKIM keys, spam models. Back it up with `pimail backup`.",
	"[listen]":     "Listen addresses; \"\" turns a listener off. Ports below 1024 need CAP_NET_BIND_SERVICE (the systemd unit grants it).",
	"[tls]":        "Certificates: cert_file/key_file (PEM, full chain), ACME, or self_signed for first tests only.",
	"acme":         "Certificates from an ACME CA (RFC 8555): TLS-ALPN-01 on the https listener, HTTP-01 on http; kept in DATA/tls/acme.",
	"acme_email":   "The CA's contact for expiry and policy notices.",
	"acme_hosts":   "The names certificates are requested for (each must resolve to this server).",
	"[smtp]":       "SMTP limits (RFC 5321 §4.5.3) and connection limits against floods.",
	"[imap]":       "IMAP limits. Logins without TLS are refused except over loopback.",
	"[pop3]":       "POP3 limits. Logins without TLS are refused except over loopback.",
	"[dns]":        "Recursive resolvers to ask (default: /etc/resolv.conf). A validating resolver on localhost is best.",
	"[dnsbl]":      "DNS blocklists checked when a client connects; none by default.",
	"[spam]":       "Built-in spam filter: scores at or above junk_threshold go to Junk, above reject_threshold are refused.",
	"[submission]": "Message submission (RFC 6409) on :587 (STARTTLS) and :465 (implicit TLS, RFC 8314).",
	"[queue]":      "Outbound queue: retries, bounces, MTA-STS (RFC 8461). Add [queue.transports] to send through a smarthost.",
	"[av]":         "Virus scanning: the attachment policy always; clamd when an address is given (unix:/run/clamav/clamd.ctl).",
	"[sieve]":      "Users' mail filters (Sieve, RFC 5228) run at delivery, and ManageSieve (RFC 5804) on listen.managesieve.",
	"[log]":        "Logs go to standard error (the journal under systemd).",
}

// renderConfig encodes cfg with comments.
func renderConfig(cfg config.Config, o quickstartOpts) (string, error) {
	var enc bytes.Buffer
	if err := toml.NewEncoder(&enc).Encode(cfg); err != nil {
		return "", fmt.Errorf("encode configuration: %w", err)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# pimail configuration for %s, written by `pimail quickstart`.\n", o.domain)
	b.WriteString("# Every key is optional; the values below are the defaults except for the\n")
	b.WriteString("# host name, the data directory and TLS. `pimail config` prints the defaults.\n")
	b.WriteString("# Unknown keys are an error. Restart pimail after a change.\n\n")
	for _, line := range strings.Split(strings.TrimRight(enc.String(), "\n"), "\n") {
		key := strings.TrimSpace(line)
		if k, _, ok := strings.Cut(key, " ="); ok {
			key = k
		}
		if note, ok := configNotes[key]; ok {
			indent := line[:len(line)-len(strings.TrimLeft(line, " "))]
			b.WriteString(indent + "# " + note + "\n")
		}
		b.WriteString(line + "\n")
	}
	return b.String(), nil
}

// systemdUnit runs `pimail serve` as the pimail user with the file system
// read-only except for the data directory.
func systemdUnit(o quickstartOpts) string {
	return fmt.Sprintf(`# pimail systemd unit, written by pimail quickstart. Install it with:
#   install -m 644 %[3]s /etc/systemd/system/pimail.service
#   systemctl daemon-reload && systemctl enable --now pimail
[Unit]
Description=pimail mail server
After=network-online.target
Wants=network-online.target

[Service]
Type=simple
User=pimail
Group=pimail
ExecStart=%[1]s serve --config %[2]s
Restart=on-failure
RestartSec=5s
TimeoutStopSec=30s
# Bind ports 25, 143, 443, ... without root.
AmbientCapabilities=CAP_NET_BIND_SERVICE
CapabilityBoundingSet=CAP_NET_BIND_SERVICE
NoNewPrivileges=true
# The whole file system is read-only except the data directory.
ProtectSystem=strict
ReadWritePaths=%[4]s
ProtectHome=true
PrivateTmp=true
PrivateDevices=true
ProtectKernelTunables=true
ProtectKernelModules=true
ProtectControlGroups=true
RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6
RestrictNamespaces=true
LockPersonality=true
SystemCallArchitectures=native
UMask=0077
LimitNOFILE=65536

[Install]
WantedBy=multi-user.target
`, o.binary, o.configPath, filepath.Join(filepath.Dir(o.configPath), "pimail.service"), o.data)
}

// printZone prints the records as zone-file lines between the markers.
func printZone(o quickstartOpts, dkimRecs []dkim.Record) {
	fmt.Printf(zoneBegin+"\n", o.domain)
	recs := dnscheck.Expected(dnscheck.Params{Domain: o.domain, Hostname: o.hostname, DKIM: dkimRecs, Addrs: o.addrs})
	for i, r := range recs {
		if r.Note != "" {
			fmt.Printf(";\n; %s\n", r.Note)
		}
		fmt.Println(r.ZoneLine())
		if i == 0 && len(o.addrs) == 0 {
			fmt.Printf(";\n; the server's public addresses (unknown here: run quickstart with --ip, or fill them in)\n")
			fmt.Printf("; %s. %d IN A    <public IPv4 address>\n", o.hostname, dnscheck.TTL)
			fmt.Printf("; %s. %d IN AAAA <public IPv6 address>\n", o.hostname, dnscheck.TTL)
		}
	}
	fmt.Println(zoneEnd)
	fmt.Println()
}

// printAdvice prints what the zone cannot hold and the next steps.
func printAdvice(o quickstartOpts, unit string) {
	fmt.Println("Reverse DNS (PTR): receivers distrust mail from an address whose reverse name")
	fmt.Println("does not lead back to it. Ask the provider of the server's addresses to set:")
	if len(o.addrs) == 0 {
		fmt.Printf("  <each public address> PTR %s.\n", o.hostname)
	}
	for i, n := range dnscheck.PTRNames(o.addrs) {
		fmt.Printf("  %s. PTR %s.   (%s)\n", n, o.hostname, o.addrs[i])
	}
	fmt.Println()
	fmt.Printf("MTA-STS policy: the server publishes it at https://mta-sts.%s/.well-known/mta-sts.txt,\n", o.domain)
	fmt.Printf("which needs a certificate valid for that name. It starts in testing mode; show or\n")
	fmt.Printf("change it with: pimail domain mta-sts %s [FILE]\n", o.domain)
	fmt.Println()
	fmt.Println("TLS:")
	switch {
	case o.cert != "":
		fmt.Printf("  certificate %s (renew it in place; pimail reads it at start)\n", o.cert)
	case o.acme:
		fmt.Printf("  certificates come from the ACME CA %s\n", o.acmeDirectory)
		fmt.Println("  when a client first asks for a name; ports 80 and 443 must be reachable")
		fmt.Println("  from the internet and the names in acme_hosts must point here.")
	default:
		fmt.Println("  self-signed certificate: clients will warn. Give --cert/--key (e.g. from certbot).")
	}
	fmt.Println()
	fmt.Println("Next steps (as root):")
	fmt.Printf("  1. install -m 755 pimail %s\n", o.binary)
	fmt.Printf("  2. useradd --system --home-dir %s --shell /usr/sbin/nologin pimail\n", o.data)
	fmt.Printf("     chown -R pimail:pimail %s && chgrp pimail %s && chmod 640 %s\n", o.data, o.configPath, o.configPath)
	fmt.Printf("  3. install -m 644 %s /etc/systemd/system/pimail.service\n", unit)
	fmt.Println("     systemctl daemon-reload && systemctl enable --now pimail")
	fmt.Println("  4. open TCP ports 25 (MX), 465 and 587 (submission), 993 and 143 (IMAP),")
	fmt.Println("     995 and 110 (POP3), 443 and 80 (webmail, MTA-STS, autoconfig),")
	fmt.Println("     4190 (ManageSieve: mail filters edited from mail clients)")
	fmt.Println("  5. publish the DNS records above, then check them:")
	fmt.Printf("     pimail check dns --config %s %s\n", o.configPath, o.domain)
	fmt.Printf("  6. log in at https://%s/ as %s\n", o.hostname, o.address)
}
