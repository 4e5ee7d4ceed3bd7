package server

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"pimail/internal/admin"
	"pimail/internal/arc"
	"pimail/internal/auth"
	"pimail/internal/autoconfig"
	"pimail/internal/av"
	"pimail/internal/carddavd"
	"pimail/internal/config"
	"pimail/internal/delivery"
	"pimail/internal/deliverylog"
	"pimail/internal/directory"
	"pimail/internal/dkim"
	"pimail/internal/dnsbl"
	"pimail/internal/dnsresolver"
	"pimail/internal/imapd"
	"pimail/internal/managesieve"
	"pimail/internal/metrics"
	"pimail/internal/msgauth"
	"pimail/internal/pop3d"
	"pimail/internal/queue"
	"pimail/internal/sieve"
	"pimail/internal/smtpserver"
	"pimail/internal/spam"
	"pimail/internal/store"
	"pimail/internal/webmail"
)

// parts are the running components behind the listeners.
type parts struct {
	smtp        *smtpserver.Server
	submission  *smtpserver.Server // nil without TLS
	queue       *queue.Queue
	imap        *imapd.Server
	pop3        *pop3d.Server
	managesieve *managesieve.Server
	http, https *webServer
	dlog        *deliverylog.Logger
	auth        *auth.Authenticator
	junk        *spam.JunkLearner // nil without the spam filter
	reputation  *spam.Reputation  // nil without the spam filter
}

// close stops the servers first, so nothing new reaches the queue, then
// the queue.
func (p *parts) close() {
	p.smtp.Close()
	if p.submission != nil {
		p.submission.Close()
	}
	p.imap.Close()
	p.pop3.Close()
	p.managesieve.Close()
	p.http.Close()
	p.https.Close()
	p.queue.Close()
	p.auth.Close()
	if p.junk != nil {
		p.junk.Close()
	}
	if p.reputation != nil {
		p.reputation.Close()
	}
	p.dlog.Close()
}

// build constructs every component from the configuration: the directory
// view (started), the delivery pipeline with its filters, and the servers.
func build(ctx context.Context, cfg config.Config, st store.Store, tlsConf *tls.Config, acmeHTTP http.Handler, logger *slog.Logger) (*parts, error) {
	dir := directory.New(st, logger)
	if err := dir.Start(ctx); err != nil {
		return nil, fmt.Errorf("directory: %w", err)
	}
	filters, err := newFilters(cfg, st, logger)
	if err != nil {
		return nil, err
	}
	p := &parts{dlog: deliverylog.New(st, logger, deliverylog.Options{})}
	if filters.Spam != nil {
		// Sender reputation from each account's own mail (Sent, Junk,
		// kept mail), read in the background from the store.
		p.reputation = spam.NewReputation(st, spam.ReputationConfig{Logger: logger.With("component", "spam")})
		filters.Spam.SetReputation(p.reputation)
	}
	pipe := delivery.New(st, dir, logger).WithFilters(filters).WithDeliveryLog(p.dlog).
		WithQuotaPermanent(cfg.Quota.PermanentRefusal)
	if cfg.Sieve.Enabled {
		pipe.WithSieve(delivery.SieveConfig{Store: st, Limits: sieve.Limits{
			MaxSteps: cfg.Sieve.MaxSteps, MaxRedirects: cfg.Sieve.MaxRedirects}})
	}
	res, err := dnsresolver.New(dnsresolver.Config{Servers: cfg.DNS.Servers, Timeout: cfg.DNS.Timeout.Duration})
	if err != nil {
		return nil, fmt.Errorf("dns: %w", err)
	}
	if cfg.Auth.Enabled {
		ac, err := msgauth.New(msgauth.Config{Resolver: res, AuthservID: cfg.Hostname, Timeout: cfg.Auth.Timeout.Duration})
		if err != nil {
			return nil, fmt.Errorf("auth: %w", err)
		}
		pipe.WithAuth(delivery.Auth{Checker: ac, TrustLoopback: cfg.Auth.TrustLoopback, NoReject: cfg.Auth.DMARCNoReject})
	}
	checker, err := newDNSBL(cfg, res, logger)
	if err != nil {
		return nil, err
	}
	// One instance: failed logins count across protocols, and, through
	// the store, across nodes and restarts.
	authn := auth.NewWithLimits(st, logger, loginLimits(cfg.Login))
	if err := authn.Share(ctx, st); err != nil {
		return nil, err
	}
	p.auth = authn
	signer := dkim.NewSigner(st, logger)
	if p.queue, err = queue.New(queueConfig(cfg), queue.Deps{
		Store: st, Dir: dir, Local: pipe, Resolver: res,
		Signer: signer,
		Logger: logger, DeliveryLog: p.dlog,
	}); err != nil {
		return nil, fmt.Errorf("queue: %w", err)
	}
	// Alias forwarding to remote targets goes through the queue, with
	// SRS senders whose secret the store keeps.
	srsSecret, err := delivery.LoadSRSSecret(ctx, st)
	if err != nil {
		return nil, err
	}
	srs, err := delivery.NewSRS(srsSecret, 0)
	if err != nil {
		return nil, err
	}
	// Forwarded mail that was authenticated here is ARC-sealed with the
	// alias domain's DKIM key (RFC 8617).
	pipe.WithForwarding(p.queue, srs).WithARC(arc.NewSealer(signer))
	p.queue.Start()
	spool := filepath.Join(cfg.Data, "spool")
	if err := os.MkdirAll(spool, 0o700); err != nil {
		p.queue.Close()
		return nil, fmt.Errorf("spool directory: %w", err)
	}
	smtpCfg := func(role smtpserver.Role) smtpserver.Config {
		return smtpserver.Config{
			Role:            role,
			Hostname:        cfg.Hostname,
			MaxMessageBytes: cfg.SMTP.MaxMessageSize,
			MaxRecipients:   cfg.SMTP.MaxRecipients,
			MaxErrors:       cfg.SMTP.MaxErrors,
			ReadTimeout:     cfg.SMTP.CommandTimeout.Duration,
			DataTimeout:     cfg.SMTP.DataTimeout.Duration,
			TLS:             tlsConf,
			SpoolDir:        spool,
			SpoolThreshold:  cfg.SMTP.SpoolThreshold,
			LargeDeliveries: cfg.SMTP.LargeDeliveries,
		}
	}
	if tlsConf != nil {
		sc := smtpCfg(smtpserver.Submission)
		sc.InsecureLoopbackAuth = cfg.Submission.AllowLoopbackAuth
		sc.NoSentCopy = cfg.Submission.NoSentCopy
		sc.MaxConnections = cfg.Submission.MaxConnections
		sc.MaxConnectionsPerIP = cfg.Submission.MaxConnectionsPerIP
		sc.ConnectionRate = cfg.Submission.ConnectionRate
		if p.submission, err = smtpserver.New(sc, smtpserver.Deps{
			Pipeline: pipe, Dir: dir, Mailboxes: st, Queue: p.queue, Auth: authn,
			Logger: logger.With("proto", "submission"),
		}); err != nil {
			p.queue.Close()
			return nil, fmt.Errorf("submission: %w", err)
		}
	}
	mx := smtpCfg(smtpserver.MX)
	mx.MaxConnections = cfg.SMTP.MaxConnections
	mx.MaxConnectionsPerIP = cfg.SMTP.MaxConnectionsPerIP
	mx.ConnectionRate = cfg.SMTP.ConnectionRate
	mx.PregreetWait = orOff(cfg.SMTP.PregreetWait.Duration)
	mx.DNSBLThreshold = cfg.DNSBL.Threshold
	if p.smtp, err = smtpserver.New(mx, smtpserver.Deps{
		Pipeline: pipe, DNSBL: checker, DeliveryLog: p.dlog, Logger: logger.With("proto", "smtp"),
	}); err != nil {
		p.queue.Close()
		return nil, fmt.Errorf("smtp: %w", err)
	}
	// Moving mail into or out of Junk, over IMAP or in the webmail, trains
	// the account's model.
	var imapJunk imapd.JunkTrainer
	var webJunk webmail.JunkTrainer
	if filters.Spam != nil {
		p.junk = spam.NewJunkLearner(filters.Spam, st.ReadBlob, logger)
		imapJunk, webJunk = p.junk, p.junk
	}
	p.imap = imapd.New(imapd.Config{
		Hostname:          cfg.Hostname,
		TLS:               tlsConf,
		AllowInsecureAuth: cfg.IMAP.AllowInsecureAuth,
		AllowLoopbackAuth: true, // DESIGN: plain-text login is fine where nothing crosses a network
		MaxLineLength:     cfg.IMAP.MaxLineLength,
		MaxLiteralSize:    cfg.IMAP.MaxLiteralSize,
		IdleTimeout:       cfg.IMAP.IdleTimeout.Duration,

		MaxConnections:      cfg.IMAP.MaxConnections,
		MaxConnectionsPerIP: cfg.IMAP.MaxConnectionsPerIP,
		ConnectionRate:      cfg.IMAP.ConnectionRate,
		LimitLoopback:       cfg.IMAP.LimitLoopback,
		Junk:                imapJunk,
	}, st, authn, logger.With("proto", "imap"))
	p.pop3 = pop3d.New(pop3d.Config{
		Hostname:          cfg.Hostname,
		TLS:               tlsConf,
		AllowInsecureAuth: cfg.POP3.AllowInsecureAuth,
		MaxLineLength:     cfg.POP3.MaxLineLength,
		IdleTimeout:       cfg.POP3.IdleTimeout.Duration,
		MaxErrors:         cfg.POP3.MaxErrors,

		MaxConnections:      cfg.POP3.MaxConnections,
		MaxConnectionsPerIP: cfg.POP3.MaxConnectionsPerIP,
		ConnectionRate:      cfg.POP3.ConnectionRate,
		LimitLoopback:       cfg.POP3.LimitLoopback,
	}, st, authn, logger.With("proto", "pop3"))
	p.managesieve = managesieve.New(managesieve.Config{
		Hostname:            cfg.Hostname,
		TLS:                 tlsConf,
		AllowInsecureAuth:   cfg.Sieve.AllowInsecureAuth,
		MaxScriptSize:       cfg.Sieve.MaxScriptSize,
		MaxScripts:          cfg.Sieve.MaxScripts,
		MaxRedirects:        cfg.Sieve.MaxRedirects,
		IdleTimeout:         cfg.Sieve.IdleTimeout.Duration,
		MaxConnections:      cfg.Sieve.MaxConnections,
		MaxConnectionsPerIP: cfg.Sieve.MaxConnectionsPerIP,
		ConnectionRate:      cfg.Sieve.ConnectionRate,
	}, st, authn, logger)
	metrics.WatchStore(st, 30*time.Second)
	auto := autoconfig.New(autoconfig.Config{
		Hostname: cfg.Hostname,
		Domains: func() []string {
			ds, err := st.Domains(context.Background())
			if err != nil {
				logger.Warn("autoconfig: list domains", "err", err)
			}
			names := make([]string, len(ds))
			for i, d := range ds {
				names[i] = d.Name
			}
			return names
		},
		IMAPS: port(cfg.Listen.IMAPS), IMAP: port(cfg.Listen.IMAP),
		POP3S: port(cfg.Listen.POP3S), POP3: port(cfg.Listen.POP3),
		Submissions: port(cfg.Listen.Submissions), Submission: port(cfg.Listen.Submission),
		ManageSieve: port(cfg.Listen.ManageSieve),
	})
	web := func(secure bool) http.Handler {
		mux := http.NewServeMux()
		for _, path := range autoconfig.Paths {
			mux.Handle(path, auto)
		}
		mux.Handle("/metrics", loopbackOnly(metrics.Handler()))
		mux.Handle(admin.Prefix, admin.New(admin.Config{Hostname: cfg.Hostname, SecureCookies: secure, DataDir: cfg.Data,
			DeliveryLog: p.dlog, Sieve: st}, st, authn, logger))
		mux.Handle("/.well-known/mta-sts.txt", mtaSTSPolicy(st, logger))
		dav := carddavd.New(st, authn, logger)
		mux.Handle(carddavd.Prefix, dav)
		mux.Handle(carddavd.WellKnown, dav)
		mux.Handle("/", webmail.New(webmail.Config{
			Hostname:      cfg.Hostname,
			SecureCookies: secure,
			MaxUploadSize: cfg.SMTP.MaxMessageSize,
			Outbound:      p.queue, // built above, never nil here
			Junk:          webJunk,
			Sieve:         st,
			MaxScriptSize: cfg.Sieve.MaxScriptSize,
		}, st, authn, pipe, logger))
		return mux
	}
	p.https = newWebServer(web(true), logger)
	if cfg.Listen.HTTPS != "" {
		// HTTPS is there: plain HTTP only points to it.
		p.http = newWebServer(redirectToHTTPS(cfg.Listen.HTTPS, auto, acmeHTTP), logger)
	} else {
		p.http = newWebServer(refusePlainLogins(web(false)), logger)
	}
	return p, nil
}

// port returns the port of a listen address, 0 when it is off or unparsable.
func port(addr string) int {
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		return 0
	}
	n, _ := strconv.Atoi(p)
	return n
}

// newFilters builds the content filters of the delivery pipeline.
func newFilters(cfg config.Config, st store.SpamModels, logger *slog.Logger) (delivery.Filters, error) {
	var f delivery.Filters
	if cfg.Spam.Enabled {
		sf, err := spam.New(spam.Config{
			Store:           st,
			JunkThreshold:   cfg.Spam.JunkThreshold,
			RejectThreshold: cfg.Spam.RejectThreshold,
			NoReject:        cfg.Spam.NoReject,
			NoShippedModel:  cfg.Spam.NoShippedModel,
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
		TooLarge:  cfg.AV.TooLarge,
		Logger:    logger,
	}
	if network, addr, ok := strings.Cut(cfg.AV.Clamd, ":"); ok {
		avc.Clamd = &av.Clamd{Network: network, Address: addr, Timeout: cfg.AV.ClamdTimeout.Duration, MaxSize: cfg.AV.ClamdMaxSize}
	}
	if !avc.NoPolicy || avc.Clamd != nil {
		f.AV = av.NewScanner(avc)
	}
	return f, nil
}

// queueConfig maps the configuration onto the outbound queue's settings.
func queueConfig(cfg config.Config) queue.Config {
	q := cfg.Queue
	qc := queue.Config{
		Hostname:      cfg.Hostname,
		RetryInitial:  q.RetryInitial.Duration,
		RetryMax:      q.RetryMax.Duration,
		MaxAge:        q.MaxAge.Duration,
		DelayNotice:   orOff(q.DelayNotice.Duration),
		Workers:       q.Workers,
		PerDomain:     q.PerDomain,
		DisableMTASTS: !q.MTASTS,
		Transports:    map[string]queue.Transport{},
	}
	for domain, t := range q.Transports {
		qc.Transports[strings.ToLower(domain)] = queue.Transport(t)
	}
	return qc
}

// newDNSBL builds the blocklist checker; nil when no zone is configured.
func newDNSBL(cfg config.Config, res dnsresolver.Resolver, logger *slog.Logger) (*dnsbl.Checker, error) {
	if len(cfg.DNSBL.Zones) == 0 {
		return nil, nil
	}
	zones := make([]dnsbl.Zone, len(cfg.DNSBL.Zones))
	for i, z := range cfg.DNSBL.Zones {
		zones[i] = dnsbl.Zone{Name: z.Name, BitmapName: z.Bitmap, Weight: z.Weight}
	}
	checker, err := dnsbl.New(dnsbl.Config{Zones: zones, Resolver: res, Logger: logger})
	if err != nil {
		return nil, fmt.Errorf("dnsbl: %w", err)
	}
	return checker, nil
}

// loginLimits maps the configuration onto the login throttle.
func loginLimits(l config.Login) auth.Limits {
	ttl := l.CacheTTL.Duration
	if ttl == 0 {
		ttl = -1 // 0s in the file: no cache
	}
	return auth.Limits{
		MaxFailures: l.MaxFailures, SourceFailures: l.SourceFailures, Window: l.Window.Duration,
		AccountFailures: l.AccountFailures, AccountWindow: l.AccountWindow.Duration,
		Delay: l.Delay.Duration, MaxDelay: l.MaxDelay.Duration, CacheTTL: ttl,
	}
}

// orOff maps the configuration's "0s means off" to the servers' negative value.
func orOff(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}
