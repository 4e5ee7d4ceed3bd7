// Package submission is pimail's message submission server (RFC 6409) on
// port 587 with STARTTLS (RFC 3207) and port 465 with implicit TLS (RFC
// 8314). Users authenticate with SASL PLAIN, LOGIN or SCRAM-SHA-256 (RFC
// 4954, RFC 7677), only over TLS (or on loopback when configured); they
// may send only as their own address or an alias of it. Mail for local
// recipients goes through the delivery pipeline, mail for remote ones into
// the outbound queue, and a copy into the sender's Sent mailbox.
package submission

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"time"

	"github.com/emersion/go-smtp"

	"pimail/internal/auth"
	"pimail/internal/delivery"
	"pimail/internal/directory"
	"pimail/internal/store"
)

// Defaults for the zero values of Config.
const (
	DefaultMaxMessageBytes = 50 << 20
	DefaultMaxRecipients   = 100 // RFC 5321 §4.5.3.1.8
	DefaultMaxLineLength   = 64 << 10
	DefaultReadTimeout     = 5 * time.Minute // RFC 5321 §4.5.3.2.7
	DefaultWriteTimeout    = 5 * time.Minute
	DefaultDataTimeout     = 3 * time.Minute // RFC 5321 §4.5.3.2.5
	DefaultDeliverTimeout  = 5 * time.Minute
	DefaultAuthDelay       = time.Second
	DefaultAuthDelayMax    = 30 * time.Second
	DefaultMaxErrors       = 10
)

// Config is the submission server's configuration; zero fields take the
// documented defaults.
type Config struct {
	// Hostname is the server's name in the banner and Received fields,
	// and the right side of generated Message-IDs.
	Hostname string
	// TLS is required: it serves STARTTLS on Serve listeners and the
	// handshake on ServeTLS listeners.
	TLS *tls.Config
	// InsecureLoopbackAuth allows AUTH without TLS from 127.0.0.0/8 and
	// ::1 (development); never from other addresses.
	InsecureLoopbackAuth bool
	// NoSentCopy turns off the copy of submitted mail in the sender's
	// Sent mailbox (for clients that save their own copy by IMAP APPEND).
	NoSentCopy bool
	// MaxMessageBytes, MaxRecipients, MaxLineLength: as for smtpd.
	MaxMessageBytes int64
	MaxRecipients   int
	MaxLineLength   int
	ReadTimeout     time.Duration
	WriteTimeout    time.Duration
	DataTimeout     time.Duration
	DeliverTimeout  time.Duration
	// AuthDelay is the pause after the first failed login from an
	// address; each further failure within the auth window doubles it,
	// up to AuthDelayMax.
	AuthDelay, AuthDelayMax time.Duration
	// MaxErrors rejected commands close the session with 421.
	MaxErrors int
}

func (c *Config) setDefaults() {
	if c.Hostname == "" {
		c.Hostname, _ = os.Hostname()
		if c.Hostname == "" {
			c.Hostname = "localhost"
		}
	}
	if c.MaxMessageBytes <= 0 {
		c.MaxMessageBytes = DefaultMaxMessageBytes
	}
	if c.MaxRecipients <= 0 {
		c.MaxRecipients = DefaultMaxRecipients
	}
	if c.MaxLineLength <= 0 {
		c.MaxLineLength = DefaultMaxLineLength
	}
	durs := []struct {
		v *time.Duration
		d time.Duration
	}{
		{&c.ReadTimeout, DefaultReadTimeout}, {&c.WriteTimeout, DefaultWriteTimeout},
		{&c.DataTimeout, DefaultDataTimeout}, {&c.DeliverTimeout, DefaultDeliverTimeout},
		{&c.AuthDelay, DefaultAuthDelay}, {&c.AuthDelayMax, DefaultAuthDelayMax},
	}
	for _, d := range durs {
		if *d.v <= 0 {
			*d.v = d.d
		}
	}
	if c.MaxErrors <= 0 {
		c.MaxErrors = DefaultMaxErrors
	}
}

// Queue takes mail for remote recipients; *queue.Queue is one.
type Queue interface {
	Enqueue(ctx context.Context, accountID int64, from string, rcpts []string, raw []byte) (int64, error)
}

// LocalDeliverer stores mail for local recipients; *delivery.Pipeline is one.
type LocalDeliverer interface {
	Deliver(ctx context.Context, env delivery.Envelope, raw []byte) ([]store.Delivered, error)
}

// Store is what submission needs of the store: aliases (which From
// addresses an account may use) and the Sent mailbox for copies.
type Store interface {
	store.DirectoryReader
	store.MailboxReader
	store.Appender
}

// Deps are the server's collaborators; all are required.
type Deps struct {
	Store  Store
	Dir    *directory.View
	Local  LocalDeliverer
	Queue  Queue
	Auth   *auth.Authenticator
	Logger *slog.Logger
}

// Server is a submission server; one Server may serve several listeners.
type Server struct {
	cfg      Config
	deps     Deps
	log      *slog.Logger
	smtp     *smtp.Server
	throttle *throttle
	ctx      context.Context
	cancel   context.CancelFunc
}

// New returns a submission server.
func New(cfg Config, d Deps) (*Server, error) {
	if cfg.TLS == nil {
		return nil, errors.New("submission: a TLS configuration is required")
	}
	if d.Store == nil || d.Dir == nil || d.Local == nil || d.Queue == nil || d.Auth == nil {
		return nil, errors.New("submission: Store, Dir, Local, Queue and Auth are required")
	}
	cfg.setDefaults()
	if d.Logger == nil {
		d.Logger = slog.Default()
	}
	s := &Server{cfg: cfg, deps: d, log: d.Logger.With("component", "submission"), throttle: newThrottle(cfg.AuthDelay, cfg.AuthDelayMax)}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	srv := smtp.NewServer(smtp.BackendFunc(s.newSession))
	srv.Domain = cfg.Hostname
	srv.MaxMessageBytes = cfg.MaxMessageBytes
	srv.MaxRecipients = cfg.MaxRecipients
	srv.MaxLineLength = cfg.MaxLineLength
	srv.ReadTimeout = cfg.ReadTimeout
	srv.WriteTimeout = cfg.WriteTimeout
	srv.EnableSMTPUTF8 = true
	srv.TLSConfig = cfg.TLS.Clone()
	// go-smtp's check is per server; the session decides per connection
	// (TLS, or loopback when allowed) in AuthMechanisms and Auth.
	srv.AllowInsecureAuth = true
	srv.ErrorLog = logAdapter{s.log}
	s.smtp = srv
	return s, nil
}

// Serve accepts plain connections that may upgrade with STARTTLS (587).
// A listener made by tls.NewListener (465) works too: its connections
// are served with implicit TLS under the server's TLS configuration.
func (s *Server) Serve(ln net.Listener) error {
	return s.serve(guardListener{Listener: ln, tls: s.cfg.TLS})
}

func (s *Server) serve(ln net.Listener) error {
	if err := s.smtp.Serve(ln); err != nil && !errors.Is(err, smtp.ErrServerClosed) && !errors.Is(err, net.ErrClosed) {
		return fmt.Errorf("submission: serve %s: %w", ln.Addr(), err)
	}
	return nil
}

// ServeTLS accepts implicit-TLS connections (465, RFC 8314 §3.3).
func (s *Server) ServeTLS(ln net.Listener) error {
	// The guard goes under TLS: go-smtp must see the *tls.Conn itself.
	return s.serve(tls.NewListener(guardListener{Listener: ln}, s.cfg.TLS.Clone()))
}

// Close stops every listener and connection.
func (s *Server) Close() error {
	err := s.smtp.Close()
	s.cancel()
	if err != nil && !errors.Is(err, smtp.ErrServerClosed) && !errors.Is(err, net.ErrClosed) {
		return fmt.Errorf("submission: close: %w", err)
	}
	return nil
}

// logAdapter sends go-smtp's log lines to slog at debug level, panics at error.
type logAdapter struct{ l *slog.Logger }

func (a logAdapter) Printf(format string, v ...any) { a.log(fmt.Sprintf(format, v...)) }
func (a logAdapter) Println(v ...any)               { a.log(strings.TrimSuffix(fmt.Sprintln(v...), "\n")) }

func (a logAdapter) log(msg string) {
	if strings.HasPrefix(msg, "panic") {
		a.l.Error("submission session panic", "detail", msg)
		return
	}
	a.l.Debug("submission connection", "detail", msg)
}
