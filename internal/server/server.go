// Package server assembles a running pimail from its parts: the store, the
// directory view, the delivery pipeline and the protocol servers, each on the
// listeners the configuration names. It is the only package that knows all
// of them; each part knows only the interfaces it is given.
package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"

	"pimail/internal/certs"
	"pimail/internal/config"
	"pimail/internal/metrics"
	"pimail/internal/netserve"
	"pimail/internal/store"
)

// httpLimits are the connection limits of one HTTP listener. Over a limit,
// plain HTTP gets a 503 (RFC 9110 §15.6.4) and HTTPS a closed connection
// (a reply would have to go through a TLS handshake first).
func httpLimits(c config.HTTP, plain bool, logger *slog.Logger) *netserve.Server {
	refusal := ""
	if plain {
		refusal = "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain\r\nContent-Length: 22\r\n" +
			"Retry-After: 60\r\nConnection: close\r\n\r\nToo many connections.\n"
	}
	return netserve.New(netserve.Config{
		Name: metrics.ProtoHTTP, MaxConnections: c.MaxConnections, MaxConnectionsPerIP: c.MaxConnectionsPerIP,
		ConnectionRate: c.ConnectionRate, Refusal: refusal, Logger: logger.With("proto", "http"),
	}, nil)
}

// Ready is written to the log output once every listener accepts
// connections; scripts and tests wait for it.
const Ready = "pimail: ready"

// protocol is one started protocol server.
type protocol interface {
	Serve(net.Listener) error
	Close() error
}

// listener is a configured address and the server behind it.
type listener struct {
	name string
	addr string
	tls  bool // implicit TLS
	srv  protocol
	ln   net.Listener
}

// Run serves until ctx is cancelled, then shuts everything down. It reports
// the first listener that fails to bind, before announcing readiness.
func Run(ctx context.Context, cfg config.Config, st store.Store, logger *slog.Logger, ready func(addrs map[string]string)) error {
	var tlsConf *tls.Config
	var acmeHTTP http.Handler // answers HTTP-01 challenges, redirects the rest to HTTPS
	var err error
	if cfg.TLS.ACME {
		hosts := cfg.TLS.ACMEHosts
		if len(hosts) == 0 {
			hosts = []string{cfg.Hostname}
		}
		tlsConf, acmeHTTP, err = certs.LoadACME(certs.ACME{
			Email: cfg.TLS.ACMEEmail, Directory: cfg.TLS.ACMEDirectory, Hosts: hosts,
			CacheDir: filepath.Join(cfg.Data, "tls", "acme"),
		}, nil)
	} else {
		tlsConf, err = certs.Load(cfg.TLS.CertFile, cfg.TLS.KeyFile, cfg.TLS.SelfSigned, cfg.Hostname, cfg.Data)
	}
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	fitConnectionLimits(&cfg, logger)
	parts, err := build(ctx, cfg, st, tlsConf, acmeHTTP, logger)
	if err != nil {
		return err
	}
	defer parts.close()

	lns := []*listener{
		{name: "smtp", addr: cfg.Listen.SMTP, srv: parts.smtp},
		{name: "submission", addr: cfg.Listen.Submission, srv: parts.submission},
		{name: "submissions", addr: cfg.Listen.Submissions, srv: parts.submission, tls: true},
		{name: "imap", addr: cfg.Listen.IMAP, srv: parts.imap},
		{name: "imaps", addr: cfg.Listen.IMAPS, srv: parts.imap, tls: true},
		{name: "pop3", addr: cfg.Listen.POP3, srv: parts.pop3},
		{name: "pop3s", addr: cfg.Listen.POP3S, srv: parts.pop3, tls: true},
		{name: "http", addr: cfg.Listen.HTTP, srv: parts.http},
		{name: "https", addr: cfg.Listen.HTTPS, srv: parts.https, tls: true},
		{name: "managesieve", addr: cfg.Listen.ManageSieve, srv: parts.managesieve},
	}
	defer func() {
		for _, l := range lns {
			if l.ln != nil {
				l.ln.Close()
			}
		}
	}()
	addrs := map[string]string{}
	for _, l := range lns {
		if l.addr == "" {
			continue
		}
		if (l.tls || l.name == "submission") && tlsConf == nil {
			return fmt.Errorf("listener %s: TLS needs a certificate (tls.cert_file or tls.self_signed)", l.name)
		}
		// SMTP sessions are short and have their own timeouts: no TCP
		// keepalive, whose setup costs system calls per connection (a
		// spam flood is mostly short refused sessions). IMAP's long idle
		// sessions keep it.
		lc := net.ListenConfig{}
		if l.name == "smtp" || l.name == "submission" || l.name == "submissions" {
			lc.KeepAlive = -1
		}
		ln, err := lc.Listen(ctx, "tcp", l.addr)
		if err != nil {
			return fmt.Errorf("listener %s: %w", l.name, err)
		}
		if l.name == "http" || l.name == "https" {
			// net/http runs its own accept loop; the limits go under TLS.
			ln = httpLimits(cfg.HTTP, l.name == "http", logger).Listener(ln)
		}
		if l.tls {
			ln = tls.NewListener(ln, tlsConf)
		}
		l.ln = ln
		addrs[l.name] = ln.Addr().String()
	}
	errc := make(chan error, len(lns))
	for _, l := range lns {
		if l.ln == nil {
			continue
		}
		go func(l *listener) {
			err := l.srv.Serve(l.ln)
			if ctx.Err() == nil && err != nil && !errors.Is(err, net.ErrClosed) && !errors.Is(err, http.ErrServerClosed) {
				errc <- fmt.Errorf("listener %s: %w", l.name, err)
			}
		}(l)
		logger.Info("listening", "listener", l.name, "addr", addrs[l.name])
	}
	if ready != nil {
		ready(addrs)
	}
	select {
	case <-ctx.Done():
		logger.Info("shutting down")
		return nil
	case err := <-errc:
		return err
	}
}
