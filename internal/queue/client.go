package queue

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/textproto"
	"strings"
	"time"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"
)

// tlsMode says what TLS a connection needs.
type tlsMode int

const (
	tlsOpportunistic tlsMode = iota // STARTTLS when offered, certificate not checked (RFC 7435)
	tlsRequired                     // STARTTLS with a valid certificate for the host, or fail
	tlsImplicit                     // TLS from the start, valid certificate (RFC 8314)
)

// target is one server to try: its name (for TLS) and address.
type target struct {
	host string // MX or smarthost name, for SNI and certificate checks
	addr string // ip:port or host:port
	mode tlsMode
	auth *Transport // credentials for AUTH, or nil
}

func (t target) key() string {
	k := fmt.Sprintf("%s|%s|%d", t.host, t.addr, t.mode)
	if t.auth != nil {
		k += "|" + t.auth.Username
	}
	return k
}

// connect returns a pooled or new session with t, ready for MAIL.
func (q *Queue) connect(ctx context.Context, t target) (*conn, error) {
	if c := q.pool.get(t.key()); c != nil {
		return c, nil
	}
	c, err := q.dial(ctx, t, false)
	if err != nil && t.mode == tlsOpportunistic && errors.Is(err, errTLSHandshake) {
		// RFC 7435 §1: opportunistic security falls back to clear
		// text rather than not delivering.
		q.log.Info("TLS handshake failed; retrying without TLS", "host", t.host, "addr", t.addr, "err", err)
		c, err = q.dial(ctx, t, true)
	}
	return c, err
}

var errTLSHandshake = errors.New("TLS handshake failed")

// dial connects, negotiates TLS as t.mode asks, says EHLO and
// authenticates when credentials are set.
func (q *Queue) dial(ctx context.Context, t target, noTLS bool) (*conn, error) {
	d := net.Dialer{Timeout: q.cfg.ConnectTimeout}
	raw, err := d.DialContext(ctx, "tcp", t.addr)
	if err != nil {
		return nil, fmt.Errorf("connect to %s (%s): %w", t.host, t.addr, err)
	}
	// Interrupt the dialog when ctx ends (shutdown).
	stop := context.AfterFunc(ctx, func() { raw.SetDeadline(time.Now()) })
	defer stop()

	var nc net.Conn = raw
	isTLS := false
	tlsCfg := q.tlsConfig(t)
	switch {
	case t.mode == tlsImplicit:
		tc := tls.Client(raw, tlsCfg)
		if err := tc.HandshakeContext(ctx); err != nil {
			raw.Close()
			return nil, fmt.Errorf("%s (%s): %w: %v", t.host, t.addr, errTLSHandshake, err)
		}
		nc, isTLS = tc, true
	default:
		offered, err := preTLS(raw, q.cfg.Hostname, q.cfg.CommandTimeout, !noTLS)
		if err != nil {
			raw.Close()
			return nil, fmt.Errorf("%s (%s): %w", t.host, t.addr, err)
		}
		if offered {
			tc := tls.Client(raw, tlsCfg)
			if err := tc.HandshakeContext(ctx); err != nil {
				raw.Close()
				return nil, fmt.Errorf("%s (%s): %w: %v", t.host, t.addr, errTLSHandshake, err)
			}
			nc, isTLS = tc, true
		} else if t.mode == tlsRequired {
			raw.Close()
			return nil, fmt.Errorf("%s (%s): STARTTLS required but not offered", t.host, t.addr)
		}
		// The greeting was read by preTLS; go-smtp's client expects one.
		nc = &greeted{Conn: nc, pre: strings.NewReader("220 " + t.host + "\r\n")}
	}
	c := smtp.NewClient(nc)
	c.CommandTimeout = q.cfg.CommandTimeout
	c.SubmissionTimeout = 2 * q.cfg.CommandTimeout
	if err := c.Hello(q.cfg.Hostname); err != nil {
		c.Close()
		return nil, fmt.Errorf("%s (%s): EHLO: %w", t.host, t.addr, err)
	}
	if t.auth != nil && t.auth.Username != "" {
		if !isTLS {
			c.Close()
			return nil, fmt.Errorf("%s (%s): refusing to send credentials without TLS", t.host, t.addr)
		}
		if err := c.Auth(sasl.NewPlainClient("", t.auth.Username, t.auth.Password)); err != nil {
			c.Close()
			return nil, fmt.Errorf("%s (%s): AUTH: %w", t.host, t.addr, err)
		}
	}
	return &conn{c: c, key: t.key(), host: t.host, tls: isTLS}, nil
}

func (q *Queue) tlsConfig(t target) *tls.Config {
	var cfg *tls.Config
	if q.cfg.TLS != nil {
		cfg = q.cfg.TLS.Clone()
	} else {
		cfg = &tls.Config{}
	}
	cfg.ServerName = t.host
	cfg.MinVersion = tls.VersionTLS12
	if t.mode == tlsOpportunistic {
		// Without MTA-STS or DANE nothing says which certificate the
		// MX should have; encryption still defeats passive listeners.
		cfg.InsecureSkipVerify = true
	}
	return cfg
}

// preTLS reads the greeting, says EHLO and, when the server offers it and
// wantTLS, sends STARTTLS (RFC 3207 §4). It reports whether TLS should be
// started now.
func preTLS(c net.Conn, hostname string, timeout time.Duration, wantTLS bool) (bool, error) {
	if err := c.SetDeadline(time.Now().Add(timeout)); err != nil {
		return false, err
	}
	defer c.SetDeadline(time.Time{})
	// Not closed: closing the textproto.Conn would close c.
	tp := textproto.NewConn(c)
	if _, _, err := tp.ReadResponse(220); err != nil {
		return false, fmt.Errorf("greeting: %w", err)
	}
	if !wantTLS {
		return false, nil
	}
	if err := tp.PrintfLine("EHLO %s", hostname); err != nil {
		return false, fmt.Errorf("EHLO: %w", err)
	}
	_, msg, err := tp.ReadResponse(250)
	if err != nil {
		var te *textproto.Error
		if errors.As(err, &te) {
			return false, nil // no ESMTP: no STARTTLS; go-smtp falls back to HELO
		}
		return false, fmt.Errorf("EHLO: %w", err)
	}
	offered := false
	for _, line := range strings.Split(msg, "\n")[1:] {
		if f := strings.Fields(line); len(f) > 0 && strings.EqualFold(f[0], "STARTTLS") {
			offered = true
		}
	}
	if !offered {
		return false, nil
	}
	if err := tp.PrintfLine("STARTTLS"); err != nil {
		return false, fmt.Errorf("STARTTLS: %w", err)
	}
	if _, _, err := tp.ReadResponse(220); err != nil {
		var te *textproto.Error
		if errors.As(err, &te) {
			return false, nil // refused (454): go on in clear text
		}
		return false, fmt.Errorf("STARTTLS: %w", err)
	}
	return true, nil
}

// greeted replays a greeting line before the connection's own data.
type greeted struct {
	net.Conn
	pre io.Reader
}

func (g *greeted) Read(p []byte) (int, error) {
	if g.pre != nil {
		n, err := g.pre.Read(p)
		if err == io.EOF {
			g.pre = nil
			err = nil
		}
		if n > 0 || err != nil {
			return n, err
		}
	}
	return g.Conn.Read(p)
}

// rcptResult is the outcome of one recipient in one attempt.
type rcptResult struct {
	done   bool   // delivered
	perm   bool   // permanent failure
	reply  string // the server's reply or the local error
	status string // enhanced status code for the DSN, e.g. "5.1.1"
	remote string // the server that answered
}

func smtpResult(err error, host string) rcptResult {
	var se *smtp.SMTPError
	if errors.As(err, &se) {
		st := fmt.Sprintf("%d.%d.%d", se.EnhancedCode[0], se.EnhancedCode[1], se.EnhancedCode[2])
		if se.EnhancedCode == smtp.NoEnhancedCode || se.EnhancedCode[0] == 0 {
			st = fmt.Sprintf("%d.0.0", se.Code/100)
		}
		return rcptResult{perm: se.Code/100 == 5, reply: fmt.Sprintf("%d %s %s", se.Code, st, se.Message), status: st, remote: host}
	}
	return rcptResult{reply: err.Error(), status: "4.4.1", remote: host}
}

// transaction sends one message to the recipients on c (RFC 5321 §3.3).
// It returns a result per recipient; connErr is set when the session
// broke, and then the results are temporary failures.
func (q *Queue) transaction(c *conn, from string, rcpts []string, raw []byte) (res []rcptResult, connErr error) {
	res = make([]rcptResult, len(rcpts))
	failAll := func(r rcptResult) {
		for i := range res {
			if !res[i].done && !res[i].perm && res[i].reply == "" {
				res[i] = r
			}
		}
	}
	opts := &smtp.MailOptions{Size: int64(len(raw))}
	if !isASCII(from) || !allASCII(rcpts) {
		opts.UTF8 = true // RFC 6531 §3.4
	}
	if ok, _ := c.c.Extension("8BITMIME"); ok && !isASCII(string(raw)) {
		opts.Body = smtp.Body8BitMIME // RFC 6152
	}
	if err := c.c.Mail(from, opts); err != nil {
		r := smtpResult(err, c.host)
		var se *smtp.SMTPError
		if !errors.As(err, &se) {
			failAll(r)
			return res, err
		}
		failAll(r)
		return res, nil
	}
	accepted := 0
	for i, to := range rcpts {
		if err := c.c.Rcpt(to, nil); err != nil {
			var se *smtp.SMTPError
			if !errors.As(err, &se) {
				failAll(smtpResult(err, c.host))
				return res, err
			}
			res[i] = smtpResult(err, c.host)
			continue
		}
		accepted++
	}
	if accepted == 0 {
		if err := c.c.Reset(); err != nil {
			return res, err
		}
		return res, nil
	}
	w, err := c.c.Data()
	if err != nil {
		failAll(smtpResult(err, c.host))
		var se *smtp.SMTPError
		if !errors.As(err, &se) {
			return res, err
		}
		return res, nil
	}
	if _, err := w.Write(raw); err != nil {
		failAll(smtpResult(err, c.host))
		return res, err
	}
	resp, err := w.CloseWithResponse()
	if err != nil {
		failAll(smtpResult(err, c.host))
		var se *smtp.SMTPError
		if !errors.As(err, &se) {
			return res, err
		}
		return res, nil
	}
	reply := "250 2.0.0 accepted"
	if resp != nil {
		reply = "250 " + resp.StatusText
	}
	for i := range res {
		if res[i].reply == "" {
			res[i] = rcptResult{done: true, reply: reply, status: "2.0.0", remote: c.host}
		}
	}
	return res, nil
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

func allASCII(ss []string) bool {
	for _, s := range ss {
		if !isASCII(s) {
			return false
		}
	}
	return true
}
