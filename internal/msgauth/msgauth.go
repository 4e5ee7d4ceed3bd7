// Package msgauth authenticates inbound mail: SPF (RFC 7208, package spf)
// for the envelope sender and client address, DKIM signatures (RFC 6376,
// package dkim), the ARC chain of a forwarded message (RFC 8617, package
// arc), and the From domain's DMARC policy (RFC 7489) over them, with the
// verdicts written as an Authentication-Results header field (RFC 8601).
//
// The From domains are read with the message toolkit (package message),
// the same reading IMAP and the webmail show the sender with, so the
// domain authenticated is the domain a person sees. Every domain goes to
// the DNS in A-labels. Where a limit stops the check from seeing every
// author, the message fails closed (DMARC fail with p=reject).
//
// Every DNS question goes through pimail's resolver (internal/dnsresolver)
// and the whole check runs under one deadline, so a slow or broken DNS
// turns into "temperror" results after a bounded time, never into a
// stalled delivery.
package msgauth

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/netip"
	"strings"
	"time"

	"pimail/internal/arc"
	"pimail/internal/dnsresolver"
	"pimail/internal/message"
)

// DefaultTimeout bounds the whole check of one message.
const DefaultTimeout = 5 * time.Second

// Resolver is what the checks ask the DNS: pimail's resolver with the
// reverse lookups SPF's "ptr" and %{p} need (RFC 7208 §5.5).
type Resolver interface {
	dnsresolver.Resolver
	LookupPTR(ctx context.Context, addr netip.Addr) ([]string, dnsresolver.Result, error)
}

// Config configures a Checker.
type Config struct {
	// Resolver asks the DNS. Required.
	Resolver Resolver
	// AuthservID names this server in Authentication-Results (RFC 8601
	// §2.5): its host name.
	AuthservID string
	// Timeout bounds the check of one message; default 5 s.
	Timeout time.Duration
	// MaxSignatures bounds the DKIM signatures verified per message;
	// default 5.
	MaxSignatures int
	// Sample returns a number in [0, 100) for DMARC's pct tag; default a
	// random one. Tests fix it.
	Sample func() int
	// CacheSize is how many DNS answers are kept for their TTL (see
	// Cache); 0 means DefaultCacheSize, a negative value no cache.
	CacheSize int
	// Now is the clock signatures are judged by (expiry); default
	// time.Now.
	Now func() time.Time
}

// Checker authenticates messages. It is safe for concurrent use.
type Checker struct {
	cfg Config
}

// New returns a Checker.
func New(cfg Config) (*Checker, error) {
	if cfg.Resolver == nil {
		return nil, fmt.Errorf("msgauth: no resolver")
	}
	if cfg.AuthservID == "" {
		return nil, fmt.Errorf("msgauth: no authserv-id (host name)")
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.MaxSignatures <= 0 {
		cfg.MaxSignatures = DefaultMaxSignatures
	}
	if cfg.CacheSize >= 0 {
		cfg.Resolver = NewCache(cfg.Resolver, cfg.CacheSize)
	}
	if cfg.Sample == nil {
		cfg.Sample = func() int { return rand.IntN(100) }
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Checker{cfg: cfg}, nil
}

func (c *Checker) now() time.Time { return c.cfg.Now() }

// AuthservID is the identifier this checker writes and strips.
func (c *Checker) AuthservID() string { return c.cfg.AuthservID }

// Input is one received message with its SMTP envelope.
type Input struct {
	Raw      []byte // the message as received
	RemoteIP string // the SMTP client's address
	Helo     string // the EHLO/HELO name
	MailFrom string // the reverse-path, "" for the null one
}

// Result is the authentication of one message.
type Result struct {
	SPF  SPFResult
	DKIM []DKIMResult
	// ARC is the validation of the message's ARC chain (RFC 8617): it
	// is reported, and sealed on when the message is forwarded; it does
	// not change the DMARC verdict.
	ARC arc.Result
	// DMARC has one evaluation per distinct From domain, normally one.
	DMARC []DMARCResult
	// Header is the Authentication-Results field to prepend, with CRLF.
	Header string
	// MailFrom and Helo are the identities checked, as given.
	MailFrom, Helo string
	Elapsed        time.Duration
}

// DKIMSummary is one word for all signatures: pass when one passes, else
// fail when one fails, else the first one's result; "none" without any.
func (r *Result) DKIMSummary() string { return aggregateDKIM(r.DKIM) }

// DMARCVerdict is the evaluation that decides the message's fate: the
// first failing one with the strongest disposition, else the first one.
// ok is false when no From domain could be evaluated.
func (r *Result) DMARCVerdict() (v DMARCResult, ok bool) {
	if len(r.DMARC) == 0 {
		return DMARCResult{Result: "none", Disposition: PolicyNone}, false
	}
	v = r.DMARC[0]
	for _, d := range r.DMARC {
		if d.Result == "fail" && (v.Result != "fail" || rank(d.Disposition) > rank(v.Disposition)) {
			v = d
		}
	}
	return v, true
}

func rank(disposition string) int {
	switch disposition {
	case PolicyReject:
		return 2
	case PolicyQuarantine:
		return 1
	}
	return 0
}

// Check runs SPF, DKIM and DMARC for one message. It never fails: DNS
// trouble becomes temperror results. SPF and DKIM run concurrently, DMARC
// after both.
func (c *Checker) Check(ctx context.Context, in Input) *Result {
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	r := &Result{MailFrom: in.MailFrom, Helo: in.Helo}

	spfDone := make(chan SPFResult, 1)
	go func() {
		res := SPFResult{Result: "permerror", Reason: "check failed"}
		defer func() { spfDone <- res }()
		defer recoverPanic("spf")
		res = c.checkSPF(ctx, clientIP(in.RemoteIP), in.Helo, in.MailFrom)
	}()
	func() {
		defer recoverPanic("dkim")
		r.DKIM = c.verifyDKIM(ctx, in.Raw)
	}()
	r.ARC = arc.Result{Status: arc.None}
	if message.HasField(in.Raw, "ARC-Seal") {
		func() {
			r.ARC = arc.Result{Status: arc.Fail, Reason: "check failed"}
			defer recoverPanic("arc")
			r.ARC = arc.Verify(ctx, c.cfg.Resolver, in.Raw)
		}()
	}
	r.SPF = <-spfDone

	domains, invalid, limit := authorDomains(in.Raw)
	if limit != "" {
		// Fail closed: a message whose authors cannot all be checked is
		// treated as failing a p=reject policy.
		r.DMARC = append(r.DMARC, DMARCResult{Result: "fail", Policy: PolicyReject, Disposition: PolicyReject, Reason: limit})
	}
	for _, d := range invalid {
		r.DMARC = append(r.DMARC, DMARCResult{Result: "none", FromDomain: d, Disposition: PolicyNone, Reason: "invalid From domain"})
	}
	for _, d := range domains {
		r.DMARC = append(r.DMARC, evaluateDMARC(ctx, c.cfg.Resolver, d, r.SPF, r.DKIM, c.cfg.Sample))
	}
	r.Header = formatAuthResults(c.cfg.AuthservID, r)
	r.Elapsed = time.Since(start)
	return r
}

// recoverPanic keeps a panic in a check (in a library, on hostile input)
// from taking the server down: the check then has no result (SPF
// permerror, DKIM none), and the panic is logged.
func recoverPanic(check string) {
	if v := recover(); v != nil {
		slog.Error("msgauth: check panicked; result dropped", "check", check, "panic", v)
	}
}

// clientIP parses the envelope's client address, with or without a port
// or IPv6 zone; the zero Addr when there is none.
func clientIP(s string) netip.Addr {
	if host, _, err := net.SplitHostPort(s); err == nil {
		s = host
	}
	s = strings.Trim(s, "[]")
	if i := strings.IndexByte(s, '%'); i >= 0 {
		s = s[:i]
	}
	ip, _ := netip.ParseAddr(s)
	return ip.Unmap()
}

// LogArgs are the results as slog attributes for the delivery log line.
func (r *Result) LogArgs() []any {
	v, _ := r.DMARCVerdict()
	return []any{"spf", r.SPF.Result, "dkim", r.DKIMSummary(), "dmarc", v.Result,
		"dmarc_policy", v.Policy, "dmarc_domain", v.FromDomain, "auth_ms", r.Elapsed.Milliseconds()}
}
