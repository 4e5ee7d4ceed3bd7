// Package config holds pimail's configuration: a TOML file in which every key
// is optional and has a safe default, plus command-line overrides.
//
// Unknown keys are an error, so a typo never silently falls back to a
// default. docs/admin.md ("Configuration") lists every key; Example() prints a
// complete file with the defaults.
package config

import (
	"bytes"
	"fmt"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/BurntSushi/toml"
)

// Config is the whole configuration.
type Config struct {
	// Hostname is the server's public name: the SMTP banner and EHLO name,
	// the Received: "by" clause, the TLS certificate name.
	Hostname string `toml:"hostname"`
	// Data is the data directory: the database and the message blobs
	// (SQLite), or only the files beside a PostgreSQL database (TLS
	// certificates, import journals).
	Data string `toml:"data"`
	// Database is where the store is: "" for SQLite in the data
	// directory, or a PostgreSQL URL (postgres://user:pass@host/db), which
	// several pimail nodes may share (docs/deploy.md).
	Database string `toml:"database"`
	// DatabaseFeed is how nodes on a PostgreSQL database learn of each
	// other's changes: "notify" (LISTEN/NOTIFY) or "poll" (for
	// PostgreSQL-compatible engines without LISTEN/NOTIFY, docs/scale.md).
	DatabaseFeed string `toml:"database_feed"`
	// MemoryLimitMB is a soft limit on the Go runtime's memory in MiB
	// (runtime/debug.SetMemoryLimit): above it the garbage collector runs
	// more often instead of letting the heap grow. 0 leaves the runtime's
	// default (no limit, or the GOMEMLIMIT environment variable).
	MemoryLimitMB int `toml:"memory_limit_mb"`

	Listen     Listen     `toml:"listen"`
	TLS        TLS        `toml:"tls"`
	SMTP       SMTP       `toml:"smtp"`
	IMAP       IMAP       `toml:"imap"`
	POP3       POP3       `toml:"pop3"`
	DNS        DNS        `toml:"dns"`
	DNSBL      DNSBL      `toml:"dnsbl"`
	Spam       Spam       `toml:"spam"`
	Submission Submission `toml:"submission"`
	HTTP       HTTP       `toml:"http"`
	Login      Login      `toml:"login"`
	Queue      Queue      `toml:"queue"`
	Auth       Auth       `toml:"auth"`
	Quota      Quota      `toml:"quota"`
	AV         AV         `toml:"av"`
	Sieve      Sieve      `toml:"sieve"`
	Log        Log        `toml:"log"`
}

// Listen holds the listener addresses; an empty address turns a listener off.
type Listen struct {
	SMTP        string `toml:"smtp"`        // inbound MX (port 25)
	Submission  string `toml:"submission"`  // message submission, STARTTLS (587)
	Submissions string `toml:"submissions"` // message submission, implicit TLS (465)
	IMAP        string `toml:"imap"`        // IMAP, STARTTLS (143)
	IMAPS       string `toml:"imaps"`       // IMAP, implicit TLS (993)
	POP3        string `toml:"pop3"`        // POP3, STLS (110)
	POP3S       string `toml:"pop3s"`       // POP3, implicit TLS (995)
	HTTP        string `toml:"http"`        // webmail and admin, plain HTTP (80)
	HTTPS       string `toml:"https"`       // webmail and admin (443)
	ManageSieve string `toml:"managesieve"` // ManageSieve, STARTTLS (4190, RFC 5804)
}

// TLS says where certificates come from.
type TLS struct {
	// CertFile and KeyFile are PEM files (a full chain and its key).
	CertFile string `toml:"cert_file"`
	KeyFile  string `toml:"key_file"`
	// SelfSigned makes pimail generate and keep a self-signed certificate
	// for Hostname in DATA/tls/ when no files are given. Clients will warn;
	// it is meant for local use and first tests.
	SelfSigned bool `toml:"self_signed"`
	// ACME gets and renews certificates from an ACME CA (RFC 8555) for
	// ACMEHosts, answering TLS-ALPN-01 on the HTTPS listener and HTTP-01
	// on the HTTP listener; they are kept in DATA/tls/acme.
	ACME          bool     `toml:"acme"`
	ACMEEmail     string   `toml:"acme_email"`     // the CA's contact for expiry notices
	ACMEDirectory string   `toml:"acme_directory"` // default Let's Encrypt's production directory
	ACMEHosts     []string `toml:"acme_hosts"`     // default: hostname only
}

// SMTP limits (RFC 5321 §4.5.3 for sizes, §4.5.3.2 for timeouts).
type SMTP struct {
	MaxMessageSize int64    `toml:"max_message_size"` // bytes; larger mail gets 552 5.3.4
	MaxRecipients  int      `toml:"max_recipients"`   // per transaction; more get 452 4.5.3
	MaxErrors      int      `toml:"max_errors"`       // per session, then 421 and close
	CommandTimeout Duration `toml:"command_timeout"`  // waiting for a command
	DataTimeout    Duration `toml:"data_timeout"`     // waiting for message data

	// Cheap-before-trust connection handling (DESIGN principle 1). A
	// negative number turns a limit off. Loopback clients are exempt from
	// the per-client limits and the pregreet test.
	MaxConnections      int      `toml:"max_connections"`        // concurrent, in total
	MaxConnectionsPerIP int      `toml:"max_connections_per_ip"` // per IPv4 address or IPv6 /64
	ConnectionRate      int      `toml:"connection_rate"`        // new connections per client per minute
	PregreetWait        Duration `toml:"pregreet_wait"`          // a client talking before the banner is dropped; 0s: off

	// Memory per message (MX and submission): a message larger than
	// SpoolThreshold bytes goes to a file in DATA/spool while it arrives;
	// at most LargeDeliveries such messages are delivered (mapped,
	// parsed, scanned, stored) at once, the others wait their turn.
	SpoolThreshold  int `toml:"spool_threshold"`
	LargeDeliveries int `toml:"large_deliveries"`
}

// DNS says which recursive resolvers pimail asks (SPF, DKIM, DMARC, MX,
// DNSBL). Empty: the nameservers in /etc/resolv.conf.
type DNS struct {
	Servers []string `toml:"servers"` // "host" or "host:port"
	Timeout Duration `toml:"timeout"` // per attempt
}

// DNSBL lists the blocklists checked when a client connects (RFC 5782).
// A client whose summed weight reaches Threshold is refused at RCPT with
// 554 5.7.1. No list is configured by default.
type DNSBL struct {
	Zones     []DNSBLZone `toml:"zones"`
	Threshold float64     `toml:"threshold"`
}

// Spam configures the built-in spam filter (rules plus a Bayesian
// classifier per account over a shared base model in DATA/spam).
type Spam struct {
	Enabled         bool    `toml:"enabled"`
	JunkThreshold   float64 `toml:"junk_threshold"`   // score filing the message into Junk
	RejectThreshold float64 `toml:"reject_threshold"` // score refusing it at DATA with 550 5.7.1
	NoReject        bool    `toml:"no_reject"`        // never refuse: certain spam goes to Junk too
	// NoShippedModel: until a base model is trained here, score with the
	// rules and each account's own model only, not the base model pimail
	// ships with.
	NoShippedModel bool `toml:"no_shipped_model"`
}

// AV configures virus scanning: a built-in attachment policy, and clamd
// when an address is given.
type AV struct {
	AttachmentPolicy bool     `toml:"attachment_policy"` // refuse executables, scripts, double extensions, macros
	AllowMacros      bool     `toml:"allow_macros"`      // let macro-enabled Office files through the policy
	Clamd            string   `toml:"clamd"`             // "unix:/run/clamav/clamd.ctl" or "tcp:host:3310"; "" off
	ClamdTimeout     Duration `toml:"clamd_timeout"`
	ClamdDown        string   `toml:"clamd_down"` // when clamd fails: "defer" (451) or "accept" (tagged)
	// ClamdMaxSize is the most bytes sent to clamd in one stream; keep it
	// within clamd's StreamMaxLength (25 MiB by default). A larger message
	// is scanned one MIME part at a time; a single part above it follows
	// TooLarge.
	ClamdMaxSize int64 `toml:"clamd_max_size"`
	// TooLarge is what happens to a part too large for clamd: "reject"
	// (552 5.3.4, the default), "defer" (451: the sender retries, for
	// when clamd's limit is being raised) or "deliver-flagged" (delivered
	// with X-Virus-Status: Unscanned (too-large)).
	TooLarge string `toml:"too_large"`
}

// Quota says how mail for a full mailbox is refused (limits are set per
// account with `pimail account quota` or the web admin).
type Quota struct {
	// PermanentRefusal answers 552 5.2.2 instead of 452 4.2.2 (RFC 3463):
	// the sender gives up at once instead of retrying for days.
	PermanentRefusal bool `toml:"permanent_refusal"`
}

// Auth configures the authentication checks of inbound mail: SPF (RFC
// 7208), DKIM (RFC 6376) and DMARC (RFC 7489), reported in an
// Authentication-Results field (RFC 8601).
type Auth struct {
	Enabled       bool     `toml:"enabled"`
	TrustLoopback bool     `toml:"trust_loopback"`  // skip the checks for mail from 127.0.0.0/8 and ::1
	DMARCNoReject bool     `toml:"dmarc_no_reject"` // p=reject failures go to Junk instead of 550 5.7.1
	Timeout       Duration `toml:"timeout"`         // for all checks of one message; DNS trouble gives temperror
}

// Submission configures message submission (RFC 6409) on the submission
// (STARTTLS) and submissions (implicit TLS, RFC 8314) listeners.
type Submission struct {
	// NoSentCopy turns off the copy in the sender's Sent mailbox, for
	// clients that save their own with IMAP APPEND.
	NoSentCopy bool `toml:"no_sent_copy"`
	// AllowLoopbackAuth allows AUTH without TLS from loopback addresses.
	AllowLoopbackAuth bool `toml:"allow_loopback_auth"`
	// Open connections in total and per client (IPv4 address or IPv6
	// /64), and new connections per client per minute, as for smtp; a
	// negative value turns a limit off. Loopback is held only to the
	// total.
	MaxConnections      int `toml:"max_connections"`
	MaxConnectionsPerIP int `toml:"max_connections_per_ip"`
	ConnectionRate      int `toml:"connection_rate"`
}

// HTTP limits, for each of the http and https listeners (webmail, admin,
// autoconfig). When the https listener is on, the plain http listener only
// redirects to it (and answers ACME challenges and autoconfig); without
// it, logins over plain http are refused except from loopback (a local
// reverse proxy that terminates TLS).
type HTTP struct {
	MaxConnections      int `toml:"max_connections"`
	MaxConnectionsPerIP int `toml:"max_connections_per_ip"`
	ConnectionRate      int `toml:"connection_rate"`
}

// Login configures the throttle on failed logins, shared by every
// protocol (IMAP, POP3, submission, webmail, admin), and the cache of
// successful password checks. Failures are counted per client address
// (IPv4, or IPv6 /64), per account and address, and per account; each
// count leaks away over its window.
type Login struct {
	MaxFailures     int      `toml:"max_failures"`     // one account from one address, per window
	SourceFailures  int      `toml:"source_failures"`  // one address, all accounts, per window
	Window          Duration `toml:"window"`           // for the two above
	AccountFailures int      `toml:"account_failures"` // one account, all addresses, per account_window; then only its known addresses
	AccountWindow   Duration `toml:"account_window"`   //
	// After the first 3 failures of an account from an address, each
	// attempt waits Delay, doubled per failure, up to MaxDelay.
	Delay    Duration `toml:"delay"`
	MaxDelay Duration `toml:"max_delay"`
	CacheTTL Duration `toml:"cache_ttl"` // remember a successful password check; 0s: never
}

// Queue configures the outbound queue: how long and how often delivery to
// other domains is tried.
type Queue struct {
	RetryInitial Duration `toml:"retry_initial"` // wait after the first failure, doubled after each
	RetryMax     Duration `toml:"retry_max"`     // longest wait between attempts
	MaxAge       Duration `toml:"max_age"`       // then the message bounces to its sender
	DelayNotice  Duration `toml:"delay_notice"`  // tell the sender once after this long; 0s: never
	Workers      int      `toml:"workers"`       // messages delivered at once
	PerDomain    int      `toml:"per_domain"`    // connections to one destination domain
	MTASTS       bool     `toml:"mta_sts"`       // fetch and enforce MTA-STS policies (RFC 8461)
	// Transports route a recipient domain (or "*" for all) through a
	// smarthost instead of its MX, e.g. a provider's relay when port 25
	// is blocked.
	Transports map[string]Transport `toml:"transports"`
}

// Transport is a smarthost.
type Transport struct {
	Host        string `toml:"host"`         // "host:port"
	Username    string `toml:"username"`     // AUTH PLAIN, only ever over TLS
	Password    string `toml:"password"`     //
	RequireTLS  bool   `toml:"require_tls"`  // STARTTLS with a valid certificate, or no delivery
	ImplicitTLS bool   `toml:"implicit_tls"` // TLS from the first byte (port 465)
}

// DNSBLZone is one blocklist.
type DNSBLZone struct {
	Name   string  `toml:"name"`   // e.g. "zen.example.org"
	Bitmap string  `toml:"bitmap"` // optional zone answering the /25 prefix-bitmap form
	Weight float64 `toml:"weight"` // added to the score when listed; 0 means 1
}

// IMAP limits.
type IMAP struct {
	MaxLiteralSize int64 `toml:"max_literal_size"` // bytes; APPENDLIMIT
	MaxLineLength  int   `toml:"max_line_length"`  // bytes of one command line
	// AllowInsecureAuth lets clients log in without TLS from any address.
	// Logins over loopback are always allowed without TLS.
	AllowInsecureAuth bool     `toml:"allow_insecure_auth"`
	IdleTimeout       Duration `toml:"idle_timeout"` // RFC 9051 §5.4: at least 30 minutes
	// Open connections in total and per client (IPv4 address or IPv6
	// /64; loopback is held only to the total); a negative value turns
	// a limit off. Over a limit: "* BYE [UNAVAILABLE]".
	MaxConnections      int `toml:"max_connections"`
	MaxConnectionsPerIP int `toml:"max_connections_per_ip"`
	// New connections per client per minute (a burst of that many, then
	// one every minute/rate; refused attempts count too, and each refusal
	// is logged with the client's address for fail2ban); negative: off.
	ConnectionRate int `toml:"connection_rate"`
	// LimitLoopback holds loopback clients to the per-client limits too
	// (tests; a server behind a local proxy must not set it).
	LimitLoopback bool `toml:"limit_loopback"`
}

// POP3 limits.
type POP3 struct {
	// AllowInsecureAuth lets clients log in without TLS from any address.
	// Logins over loopback are always allowed without TLS.
	AllowInsecureAuth bool     `toml:"allow_insecure_auth"`
	MaxLineLength     int      `toml:"max_line_length"` // bytes of one command line
	IdleTimeout       Duration `toml:"idle_timeout"`    // RFC 1939 §3: at least 10 minutes
	MaxErrors         int      `toml:"max_errors"`      // invalid commands before the session is closed
	// Open connections in total and per client (IPv4 address or IPv6
	// /64; loopback is held only to the total); a negative value turns
	// a limit off. Over a limit: "-ERR [SYS/TEMP]".
	MaxConnections      int `toml:"max_connections"`
	MaxConnectionsPerIP int `toml:"max_connections_per_ip"`
	// New connections per client per minute (a burst of that many, then
	// one every minute/rate; refused attempts count too, and each refusal
	// is logged with the client's address for fail2ban); negative: off.
	ConnectionRate int `toml:"connection_rate"`
	// LimitLoopback holds loopback clients to the per-client limits too
	// (tests; a server behind a local proxy must not set it).
	LimitLoopback bool `toml:"limit_loopback"`
}

// Sieve configures the users' mail filters (RFC 5228), run at delivery
// after the spam verdict, and ManageSieve (RFC 5804), with which mail
// clients edit them.
type Sieve struct {
	Enabled       bool  `toml:"enabled"`         // run the users' active scripts at delivery
	MaxScriptSize int64 `toml:"max_script_size"` // bytes of one script
	MaxScripts    int   `toml:"max_scripts"`     // scripts per account
	MaxRedirects  int   `toml:"max_redirects"`   // redirect actions per message and account
	MaxSteps      int   `toml:"max_steps"`       // commands and tests evaluated per message and account
	// ManageSieve: logins without TLS from any address (loopback is
	// always allowed), idle time, and connection limits as for IMAP
	// (negative turns a limit off).
	AllowInsecureAuth   bool     `toml:"allow_insecure_auth"`
	IdleTimeout         Duration `toml:"idle_timeout"`
	MaxConnections      int      `toml:"max_connections"`
	MaxConnectionsPerIP int      `toml:"max_connections_per_ip"`
	ConnectionRate      int      `toml:"connection_rate"`
}

// Log settings.
type Log struct {
	Level  string `toml:"level"`  // debug, info, warn, error
	Format string `toml:"format"` // text or json
}

// Duration is a time.Duration written as "5m", "90s" in the file.
type Duration struct{ time.Duration }

// UnmarshalText implements encoding.TextUnmarshaler.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return fmt.Errorf("duration %q: %w", b, err)
	}
	d.Duration = v
	return nil
}

// MarshalText implements encoding.TextMarshaler.
func (d Duration) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// Default returns the configuration used when a key is not set: the
// standard ports on all addresses, the limits documented per field.
func Default() Config {
	host, _ := os.Hostname()
	if host == "" {
		host = "localhost"
	}
	return Config{
		Hostname: host,
		Data:     "/var/lib/pimail",
		// Database "": SQLite in the data directory.
		DatabaseFeed: "notify",
		Listen: Listen{
			SMTP:        ":25",
			Submission:  ":587",
			Submissions: ":465",
			IMAP:        ":143",
			IMAPS:       ":993",
			POP3:        ":110",
			POP3S:       ":995",
			HTTP:        ":80",
			HTTPS:       ":443",
			ManageSieve: ":4190",
		},
		TLS: TLS{SelfSigned: true},
		SMTP: SMTP{
			MaxMessageSize: 50 << 20,
			MaxRecipients:  100,
			MaxErrors:      20,
			CommandTimeout: Duration{5 * time.Minute},
			DataTimeout:    Duration{10 * time.Minute},

			MaxConnections:      300,
			MaxConnectionsPerIP: 10,
			ConnectionRate:      60,
			PregreetWait:        Duration{300 * time.Millisecond},
			SpoolThreshold:      128 << 10,
			LargeDeliveries:     2,
		},
		Submission: Submission{MaxConnections: 200, MaxConnectionsPerIP: 20, ConnectionRate: 60},
		HTTP:       HTTP{MaxConnections: 500, MaxConnectionsPerIP: 50, ConnectionRate: 300},
		Login: Login{
			MaxFailures: 10, SourceFailures: 30, Window: Duration{15 * time.Minute},
			AccountFailures: 100, AccountWindow: Duration{time.Hour},
			Delay: Duration{time.Second}, MaxDelay: Duration{16 * time.Second}, CacheTTL: Duration{time.Hour},
		},
		DNS:   DNS{Timeout: Duration{2 * time.Second}},
		DNSBL: DNSBL{Threshold: 1},
		Spam:  Spam{Enabled: true, JunkThreshold: 4, RejectThreshold: 12},
		Auth:  Auth{Enabled: true, TrustLoopback: true, Timeout: Duration{5 * time.Second}},
		Queue: Queue{
			RetryInitial: Duration{5 * time.Minute},
			RetryMax:     Duration{2 * time.Hour},
			MaxAge:       Duration{5 * 24 * time.Hour},
			DelayNotice:  Duration{4 * time.Hour},
			Workers:      8,
			PerDomain:    2,
			MTASTS:       true,
		},
		AV: AV{AttachmentPolicy: true, ClamdTimeout: Duration{60 * time.Second}, ClamdDown: "defer",
			ClamdMaxSize: 25 << 20, TooLarge: "reject"},
		IMAP: IMAP{
			MaxLiteralSize: 50 << 20,
			MaxLineLength:  64 << 10,
			IdleTimeout:    Duration{30 * time.Minute},
			// Clients open several connections each (one per watched
			// mailbox).
			MaxConnections:      1000,
			MaxConnectionsPerIP: 20,
			ConnectionRate:      60,
		},
		POP3: POP3{
			MaxLineLength:       4096,
			IdleTimeout:         Duration{10 * time.Minute},
			MaxErrors:           10,
			MaxConnections:      200,
			MaxConnectionsPerIP: 10,
			ConnectionRate:      30,
		},
		Sieve: Sieve{
			Enabled:             true,
			MaxScriptSize:       64 << 10,
			MaxScripts:          20,
			MaxRedirects:        4,
			MaxSteps:            10000,
			IdleTimeout:         Duration{10 * time.Minute},
			MaxConnections:      100,
			MaxConnectionsPerIP: 5,
			ConnectionRate:      20,
		},
		Log: Log{Level: "info", Format: "text"},
	}
}

// Load reads a TOML file over the defaults. Unknown keys are an error.
func Load(path string) (Config, error) {
	cfg := Default()
	md, err := toml.DecodeFile(path, &cfg)
	if err != nil {
		return cfg, fmt.Errorf("config %s: %w", path, err)
	}
	if und := md.Undecoded(); len(und) > 0 {
		keys := make([]string, len(und))
		for i, k := range und {
			keys[i] = k.String()
		}
		sort.Strings(keys)
		return cfg, fmt.Errorf("config %s: unknown keys: %s", path, strings.Join(keys, ", "))
	}
	return cfg, cfg.Validate()
}

// Validate checks values that have no safe interpretation.
func (c Config) Validate() error {
	switch {
	case c.Hostname == "":
		return fmt.Errorf("config: hostname is empty")
	case c.Data == "":
		return fmt.Errorf("config: data is empty")
	case c.Database != "" && !strings.HasPrefix(c.Database, "postgres://") && !strings.HasPrefix(c.Database, "postgresql://"):
		return fmt.Errorf("config: database must be empty (SQLite in the data directory) or a postgres:// URL")
	case c.DatabaseFeed != "notify" && c.DatabaseFeed != "poll":
		return fmt.Errorf("config: database_feed must be notify or poll")
	case c.MemoryLimitMB < 0:
		return fmt.Errorf("config: memory_limit_mb must not be negative")
	case c.SMTP.MaxMessageSize <= 0:
		return fmt.Errorf("config: smtp.max_message_size must be positive")
	case c.SMTP.MaxRecipients <= 0:
		return fmt.Errorf("config: smtp.max_recipients must be positive")
	case c.IMAP.MaxLiteralSize <= 0:
		return fmt.Errorf("config: imap.max_literal_size must be positive")
	case c.IMAP.MaxLineLength < 1024:
		return fmt.Errorf("config: imap.max_line_length must be at least 1024")
	case c.POP3.MaxLineLength < 512:
		return fmt.Errorf("config: pop3.max_line_length must be at least 512")
	case c.POP3.IdleTimeout.Duration < 10*time.Minute:
		return fmt.Errorf("config: pop3.idle_timeout must be at least 10m (RFC 1939 §3)")
	case (c.TLS.CertFile == "") != (c.TLS.KeyFile == ""):
		return fmt.Errorf("config: tls.cert_file and tls.key_file go together")
	case c.TLS.ACME && c.TLS.CertFile != "":
		return fmt.Errorf("config: tls.acme and tls.cert_file exclude each other")
	case c.Sieve.MaxScriptSize <= 0 || c.Sieve.MaxScripts <= 0 || c.Sieve.MaxRedirects <= 0 || c.Sieve.MaxSteps <= 0:
		return fmt.Errorf("config: sieve.max_script_size, max_scripts, max_redirects and max_steps must be positive")
	}
	if c.AV.Clamd != "" && !strings.HasPrefix(c.AV.Clamd, "unix:") && !strings.HasPrefix(c.AV.Clamd, "tcp:") {
		return fmt.Errorf("config: av.clamd %q: want unix:PATH or tcp:HOST:PORT", c.AV.Clamd)
	}
	if c.AV.ClamdDown != "defer" && c.AV.ClamdDown != "accept" {
		return fmt.Errorf("config: av.clamd_down %q: want defer or accept", c.AV.ClamdDown)
	}
	switch c.AV.TooLarge {
	case "reject", "defer", "deliver-flagged":
	default:
		return fmt.Errorf("config: av.too_large %q: want reject, defer or deliver-flagged", c.AV.TooLarge)
	}
	if c.SMTP.SpoolThreshold < 0 || c.SMTP.LargeDeliveries < 0 || c.AV.ClamdMaxSize < 0 {
		return fmt.Errorf("config: smtp.spool_threshold, smtp.large_deliveries and av.clamd_max_size must not be negative")
	}
	if c.Spam.Enabled && c.Spam.RejectThreshold <= c.Spam.JunkThreshold {
		return fmt.Errorf("config: spam.reject_threshold must be above spam.junk_threshold")
	}
	switch c.Log.Level {
	case "debug", "info", "warn", "error":
	default:
		return fmt.Errorf("config: log.level %q: want debug, info, warn or error", c.Log.Level)
	}
	switch c.Log.Format {
	case "text", "json":
	default:
		return fmt.Errorf("config: log.format %q: want text or json", c.Log.Format)
	}
	return nil
}

// exampleExtras shows, commented out, the keys that have no default value.
const exampleExtras = `
# Keys without a default, as examples:
#
# [tls]
#   acme_hosts = ["mail.example.org", "mta-sts.example.org"]  # ACME names (default: hostname)
#
# [dns]                        # resolvers to ask instead of /etc/resolv.conf
#   servers = ["127.0.0.1:53"]
#
# [[dnsbl.zones]]              # a blocklist (RFC 5782); repeat for more
#   name = "dnsbl.example.org"
#   bitmap = ""                # a zone answering the /25 prefix-bitmap form
#   weight = 1.0
#
# [queue.transports."*"]       # a smarthost for all domains (or name one domain)
#   host = "smtp.provider.example:587"
#   username = "you@provider.example"
#   password = "secret"
#   require_tls = true
#   implicit_tls = false
`

// Example returns a complete configuration file holding the defaults.
func Example() string {
	var b bytes.Buffer
	b.WriteString("# pimail configuration. Every key is optional; these are the defaults.\n")
	b.WriteString("# An empty listen address turns that listener off.\n\n")
	if err := toml.NewEncoder(&b).Encode(Default()); err != nil {
		panic(err) // Default() always encodes
	}
	b.WriteString(exampleExtras)
	return b.String()
}
