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
	"path/filepath"
	"strings"
	"time"

	"pimail/internal/auth"
	"pimail/internal/av"
	"pimail/internal/certs"
	"pimail/internal/config"
	"pimail/internal/delivery"
	"pimail/internal/directory"
	"pimail/internal/dnsbl"
	"pimail/internal/dnsresolver"
	"pimail/internal/imapd"
	"pimail/internal/pop3d"
	"pimail/internal/smtpd"
	"pimail/internal/spam"
	"pimail/internal/store"
)

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
	name    string
	addr    string
	tls     bool // implicit TLS
	srv     protocol
	ln      net.Listener
	serving chan error
}

// Run serves until ctx is cancelled, then shuts everything down. It reports
// the first listener that fails to bind, before announcing readiness.
func Run(ctx context.Context, cfg config.Config, st store.Store, logger *slog.Logger, ready func(addrs map[string]string)) error {
	tlsConf, err := certs.Load(cfg.TLS.CertFile, cfg.TLS.KeyFile, cfg.TLS.SelfSigned, cfg.Hostname, cfg.Data)
	if err != nil {
		return err
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	dir := directory.New(st, logger)
	if err := dir.Start(ctx); err != nil {
		return fmt.Errorf("directory: %w", err)
	}
	filters, err := newFilters(cfg, logger)
	if err != nil {
		return err
	}
	pipe := delivery.New(st, dir, logger).WithFilters(filters)
	checker, err := newDNSBL(cfg, logger)
	if err != nil {
		return err
	}

	smtpSrv := smtpd.New(smtpd.Config{
		Hostname:        cfg.Hostname,
		MaxMessageBytes: cfg.SMTP.MaxMessageSize,
		MaxRecipients:   cfg.SMTP.MaxRecipients,
		MaxErrors:       cfg.SMTP.MaxErrors,
		ReadTimeout:     cfg.SMTP.CommandTimeout.Duration,
		DataTimeout:     cfg.SMTP.DataTimeout.Duration,
		TLS:             tlsConf,

		MaxConnections:      cfg.SMTP.MaxConnections,
		MaxConnectionsPerIP: cfg.SMTP.MaxConnectionsPerIP,
		ConnectionRate:      cfg.SMTP.ConnectionRate,
		PregreetWait:        orOff(cfg.SMTP.PregreetWait.Duration),
		DNSBL:               checker,
		DNSBLThreshold:      cfg.DNSBL.Threshold,
	}, dir, pipe, logger.With("proto", "smtp"))
	imapCfg := imapd.Config{
		Hostname:          cfg.Hostname,
		TLS:               tlsConf,
		AllowInsecureAuth: cfg.IMAP.AllowInsecureAuth,
		AllowLoopbackAuth: true, // DESIGN: plain-text login is fine where nothing crosses a network
		MaxLineLength:     cfg.IMAP.MaxLineLength,
		MaxLiteralSize:    cfg.IMAP.MaxLiteralSize,
		IdleTimeout:       cfg.IMAP.IdleTimeout.Duration,
	}
	authn := auth.New(st, logger) // one instance: failed logins count across protocols
	imapSrv := imapd.New(imapCfg, st, authn, logger.With("proto", "imap"))
	pop3Srv := pop3d.New(pop3d.Config{
		Hostname:          cfg.Hostname,
		TLS:               tlsConf,
		AllowInsecureAuth: cfg.POP3.AllowInsecureAuth,
		MaxLineLength:     cfg.POP3.MaxLineLength,
		IdleTimeout:       cfg.POP3.IdleTimeout.Duration,
		MaxErrors:         cfg.POP3.MaxErrors,
	}, st, authn, logger.With("proto", "pop3"))

	lns := []*listener{
		{name: "smtp", addr: cfg.Listen.SMTP, srv: smtpSrv},
		{name: "imap", addr: cfg.Listen.IMAP, srv: imapSrv},
		{name: "imaps", addr: cfg.Listen.IMAPS, srv: imapSrv, tls: true},
		{name: "pop3", addr: cfg.Listen.POP3, srv: pop3Srv},
		{name: "pop3s", addr: cfg.Listen.POP3S, srv: pop3Srv, tls: true},
	}
	for _, name := range notYet(cfg.Listen) {
		logger.Info("listener not available in this version, ignored", "listener", name)
	}

	defer func() {
		for _, l := range lns {
			if l.ln != nil {
				l.ln.Close()
			}
		}
		smtpSrv.Close()
		imapSrv.Close()
		pop3Srv.Close()
	}()
	addrs := map[string]string{}
	for _, l := range lns {
		if l.addr == "" {
			continue
		}
		if l.tls && tlsConf == nil {
			return fmt.Errorf("listener %s: implicit TLS needs a certificate (tls.cert_file or tls.self_signed)", l.name)
		}
		ln, err := net.Listen("tcp", l.addr)
		if err != nil {
			return fmt.Errorf("listener %s: %w", l.name, err)
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
			if ctx.Err() == nil && err != nil && !errors.Is(err, net.ErrClosed) {
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

// newFilters builds the content filters of the delivery pipeline.
func newFilters(cfg config.Config, logger *slog.Logger) (delivery.Filters, error) {
	var f delivery.Filters
	if cfg.Spam.Enabled {
		sf, err := spam.New(spam.Config{
			Dir:             filepath.Join(cfg.Data, "spam"),
			JunkThreshold:   cfg.Spam.JunkThreshold,
			RejectThreshold: cfg.Spam.RejectThreshold,
			NoReject:        cfg.Spam.NoReject,
			Logger:          logger.With("component", "spam"),
		})
		if err != nil {
			return f, fmt.Errorf("spam filter: %w", err)
		}
		f.Spam = sf
	}
	avc := av.Config{
		NoPolicy:  !cfg.AV.AttachmentPolicy,
		Policy:    av.PolicyConfig{AllowMacros: cfg.AV.AllowMacros},
		ClamdDown: cfg.AV.ClamdDown,
		Logger:    logger.With("component", "av"),
	}
	if network, addr, ok := strings.Cut(cfg.AV.Clamd, ":"); ok {
		avc.Clamd = &av.Clamd{Network: network, Address: addr, Timeout: cfg.AV.ClamdTimeout.Duration}
	}
	if !avc.NoPolicy || avc.Clamd != nil {
		f.AV = av.NewScanner(avc)
	}
	return f, nil
}

// newDNSBL builds the blocklist checker; nil when no zone is configured.
func newDNSBL(cfg config.Config, logger *slog.Logger) (*dnsbl.Checker, error) {
	if len(cfg.DNSBL.Zones) == 0 {
		return nil, nil
	}
	res, err := dnsresolver.New(dnsresolver.Config{Servers: cfg.DNS.Servers, Timeout: cfg.DNS.Timeout.Duration})
	if err != nil {
		return nil, fmt.Errorf("dns: %w", err)
	}
	zones := make([]dnsbl.Zone, len(cfg.DNSBL.Zones))
	for i, z := range cfg.DNSBL.Zones {
		zones[i] = dnsbl.Zone{Name: z.Name, BitmapName: z.Bitmap, Weight: z.Weight}
	}
	checker, err := dnsbl.New(dnsbl.Config{Zones: zones, Resolver: res, Logger: logger.With("component", "dnsbl")})
	if err != nil {
		return nil, fmt.Errorf("dnsbl: %w", err)
	}
	return checker, nil
}

// orOff maps the configuration's "0s means off" to smtpd's negative value.
func orOff(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}

// notYet names the configured listeners whose protocol is not built yet.
func notYet(l config.Listen) []string {
	var names []string
	for _, c := range [][2]string{
		{"submission", l.Submission}, {"submissions", l.Submissions},
		{"http", l.HTTP}, {"https", l.HTTPS},
	} {
		if strings.TrimSpace(c[1]) != "" {
			names = append(names, c[0])
		}
	}
	return names
}
