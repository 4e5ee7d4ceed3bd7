// Package config holds pimail's configuration: a TOML file in which every key
// is optional and has a safe default, plus command-line overrides.
//
// Unknown keys are an error, so a typo never silently falls back to a
// default. docs/configuration.md lists every key; Example() prints a complete
// file with the defaults.
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
	// Data is the data directory: the database and the message blobs.
	Data string `toml:"data"`

	Listen Listen `toml:"listen"`
	TLS    TLS    `toml:"tls"`
	SMTP   SMTP   `toml:"smtp"`
	IMAP   IMAP   `toml:"imap"`
	POP3   POP3   `toml:"pop3"`
	Log    Log    `toml:"log"`
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
}

// SMTP limits (RFC 5321 §4.5.3 for sizes, §4.5.3.2 for timeouts).
type SMTP struct {
	MaxMessageSize int64    `toml:"max_message_size"` // bytes; larger mail gets 552 5.3.4
	MaxRecipients  int      `toml:"max_recipients"`   // per transaction; more get 452 4.5.3
	MaxErrors      int      `toml:"max_errors"`       // per session, then 421 and close
	CommandTimeout Duration `toml:"command_timeout"`  // waiting for a command
	DataTimeout    Duration `toml:"data_timeout"`     // waiting for message data
}

// IMAP limits.
type IMAP struct {
	MaxLiteralSize int64 `toml:"max_literal_size"` // bytes; APPENDLIMIT
	MaxLineLength  int   `toml:"max_line_length"`  // bytes of one command line
	// AllowInsecureAuth lets clients log in without TLS from any address.
	// Logins over loopback are always allowed without TLS.
	AllowInsecureAuth bool     `toml:"allow_insecure_auth"`
	IdleTimeout       Duration `toml:"idle_timeout"` // RFC 9051 §5.4: at least 30 minutes
}

// POP3 limits.
type POP3 struct {
	// AllowInsecureAuth lets clients log in without TLS from any address.
	// Logins over loopback are always allowed without TLS.
	AllowInsecureAuth bool     `toml:"allow_insecure_auth"`
	MaxLineLength     int      `toml:"max_line_length"` // bytes of one command line
	IdleTimeout       Duration `toml:"idle_timeout"`    // RFC 1939 §3: at least 10 minutes
	MaxErrors         int      `toml:"max_errors"`      // invalid commands before the session is closed
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
		},
		TLS: TLS{SelfSigned: true},
		SMTP: SMTP{
			MaxMessageSize: 50 << 20,
			MaxRecipients:  100,
			MaxErrors:      20,
			CommandTimeout: Duration{5 * time.Minute},
			DataTimeout:    Duration{10 * time.Minute},
		},
		IMAP: IMAP{
			MaxLiteralSize: 50 << 20,
			MaxLineLength:  64 << 10,
			IdleTimeout:    Duration{30 * time.Minute},
		},
		POP3: POP3{
			MaxLineLength: 4096,
			IdleTimeout:   Duration{10 * time.Minute},
			MaxErrors:     10,
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

// Example returns a complete configuration file holding the defaults.
func Example() string {
	var b bytes.Buffer
	b.WriteString("# pimail configuration. Every key is optional; these are the defaults.\n")
	b.WriteString("# An empty listen address turns that listener off.\n\n")
	if err := toml.NewEncoder(&b).Encode(Default()); err != nil {
		panic(err) // Default() always encodes
	}
	return b.String()
}
