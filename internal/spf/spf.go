// Package spf evaluates Sender Policy Framework records (RFC 7208): is
// the client at an IP address allowed to send mail for a domain?
//
// It is check_host() of RFC 7208 §4 with everything the RFC asks of it:
// the record selection of §4.5, the whole grammar of §12 checked before
// anything is evaluated (§4.6), every mechanism of §5 including "ptr"
// (§5.5) and the %{p} macro (§7.3) with the limit of 10 address lookups
// per name, "redirect" and "exp" (§6), macros (§7), and the limits of
// §4.6.4: at most 10 terms that cause DNS queries, at most 2 void lookups.
// The openspf RFC 7208 test suite (Debian's python3-spf ships it) runs
// against it in spf_suite_test.go.
//
// Every DNS question goes through a Resolver (pimail's dnsresolver or a
// cache in front of it); names are asked in presentation format, so a
// local part with spaces, quotes or UTF-8 (%{l}) is asked as written.
package spf

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"time"

	"pimail/internal/dnsresolver"
)

// Result is an SPF result (RFC 7208 §2.6).
type Result string

// The results of §2.6.
const (
	None      Result = "none"
	Neutral   Result = "neutral"
	Pass      Result = "pass"
	Fail      Result = "fail"
	Softfail  Result = "softfail"
	Temperror Result = "temperror"
	Permerror Result = "permerror"
)

// Limits of RFC 7208 §4.6.4.
const (
	// MaxLookups bounds the terms that cause DNS queries (include, a,
	// mx, ptr, exists, redirect) in one check, includes counted.
	MaxLookups = 10
	// MaxVoidLookups bounds the lookups that find no record (NODATA or
	// NXDOMAIN).
	MaxVoidLookups = 2
	// MaxAddressLookups bounds the address lookups of one "mx"
	// mechanism (more MX records: permerror) and of one "ptr" mechanism
	// or %{p} macro (further names ignored).
	MaxAddressLookups = 10
)

// Resolver is what the check asks the DNS.
type Resolver interface {
	LookupTXT(ctx context.Context, name string) ([]dnsresolver.TXTRecord, dnsresolver.Result, error)
	LookupA(ctx context.Context, name string) ([]dnsresolver.AddrRecord, dnsresolver.Result, error)
	LookupAAAA(ctx context.Context, name string) ([]dnsresolver.AddrRecord, dnsresolver.Result, error)
	LookupMX(ctx context.Context, name string) ([]dnsresolver.MXRecord, dnsresolver.Result, error)
	LookupPTR(ctx context.Context, addr netip.Addr) ([]string, dnsresolver.Result, error)
}

// Request is what is checked.
type Request struct {
	// IP is the SMTP client's address.
	IP netip.Addr
	// Sender is the identity: the MAIL FROM address, or "postmaster@"
	// the HELO name for the HELO identity and the null reverse-path
	// (§2.4). "" means the latter.
	Sender string
	// Helo is the HELO/EHLO name (%{h}).
	Helo string
	// Receiver names this host in explanations (%{r}); "unknown" if "".
	Receiver string
	// Now is the time for %{t}; the clock when zero.
	Now time.Time
}

// Outcome is the result of one check.
type Outcome struct {
	Result Result
	// Domain is the domain whose policy was checked.
	Domain string
	// Mechanism is the directive that decided ("ip4:192.0.2.0/24",
	// "-all"), "default" when none matched; "" for none, temperror and
	// permerror.
	Mechanism string
	// Explanation is the domain's explanation of a fail (§6.2), "" when
	// it gives none.
	Explanation string
	// Reason says why for none, temperror and permerror.
	Reason string
}

// Check runs check_host() (RFC 7208 §4) for req.
func Check(ctx context.Context, r Resolver, req Request) Outcome {
	req.IP = req.IP.Unmap()
	sender := req.Sender
	if sender == "" {
		sender = "postmaster@" + req.Helo
	}
	// §4.3: a sender without a local part is postmaster at its domain.
	local, domain := localPart(sender), senderDomain(sender)
	if !strings.Contains(sender, "@") {
		local, domain = "postmaster", sender
	}
	if local == "" {
		local = "postmaster"
	}
	sender = local + "@" + domain
	domain = strings.TrimSuffix(domain, ".")
	out := Outcome{Domain: domain}
	// §4.3: a malformed or single-label domain gives none.
	if !validTarget(domain) || !strings.Contains(domain, ".") {
		out.Result, out.Reason = None, "no valid domain to check"
		return out
	}
	if !req.IP.IsValid() {
		out.Result, out.Reason = None, "no client address"
		return out
	}
	c := &checker{req: req, r: r}
	e := &evaluation{c: c, domain: domain, sender: sender}
	res, mech, err := e.checkHost(ctx)
	out.Result, out.Mechanism = res, mech
	if err != nil {
		out.Reason = reason(err)
	}
	if res == Fail {
		out.Explanation = e.explanation
	}
	return out
}

// checker is the state of one check, shared by its includes and
// redirects: the lookup counters and the client's validated name.
type checker struct {
	req     Request
	r       Resolver
	lookups int
	voids   int
	pNames  []string // validated names of the client, see validatedName
	pDone   bool
}

// evaluation is check_host() for one domain (the first, an include's or a
// redirect's target).
type evaluation struct {
	c           *checker
	domain      string
	sender      string
	depth       int
	explanation string
}

// Errors that decide temperror or permerror.
var (
	errTemp         = errors.New("DNS lookup failed")
	errLookupLimit  = errors.New("more than 10 DNS lookups")
	errVoidLimit    = errors.New("more than 2 void lookups")
	errMXLimit      = errors.New("more than 10 MX records")
	errMultiple     = errors.New("more than one SPF record")
	errIncludeNone  = errors.New("included domain has no SPF record")
	errRedirectNone = errors.New("redirect target has no SPF record")
	errLoop         = errors.New("include or redirect nesting too deep")
)

// reason keeps an error short and free of record contents (they are the
// sender's, and end up in a header).
func reason(err error) string {
	switch {
	case errors.Is(err, errSyntax):
		return "invalid SPF record"
	case errors.Is(err, errNoRecord):
		return "no SPF record"
	}
	return err.Error()
}

var errNoRecord = errors.New("no SPF record")

// maxDepth bounds include and redirect nesting; the lookup limit ends
// any loop first, this is a second guard.
const maxDepth = 12

// checkHost fetches the domain's record and evaluates it (§4.4–§4.7).
func (e *evaluation) checkHost(ctx context.Context) (Result, string, error) {
	if e.depth > maxDepth {
		return Permerror, "", errLoop
	}
	txt, err := e.record(ctx)
	if err != nil {
		switch {
		case errors.Is(err, errNoRecord):
			return None, "", err
		case errors.Is(err, errTemp):
			return Temperror, "", err
		}
		return Permerror, "", err
	}
	rec, err := parseRecord(txt)
	if err != nil {
		return Permerror, "", err
	}
	for _, m := range rec.mechs {
		ok, err := e.match(ctx, m)
		if err != nil {
			if errors.Is(err, errTemp) {
				return Temperror, "", err
			}
			return Permerror, "", err
		}
		if ok {
			if m.qualifier == Fail && rec.hasExp {
				e.explanation = e.explain(ctx, rec.exp)
			}
			return m.qualifier, m.text, nil
		}
	}
	if rec.redirect != "" {
		// §6.1: redirect counts as a lookup; a target without a record
		// is a permerror.
		if err := e.c.count(); err != nil {
			return Permerror, "", err
		}
		target, err := e.target(ctx, rec.redirect)
		if err != nil {
			return Permerror, "", err
		}
		if !validTarget(target) {
			return Permerror, "", errRedirectNone
		}
		sub := &evaluation{c: e.c, domain: target, sender: e.sender, depth: e.depth + 1}
		res, mech, err := sub.checkHost(ctx)
		e.explanation = sub.explanation
		if res == None {
			return Permerror, "", errRedirectNone
		}
		return res, mech, err
	}
	// §4.7: no match, no redirect.
	return Neutral, "default", nil
}

// record fetches the one SPF record of the domain (§4.4, §4.5).
func (e *evaluation) record(ctx context.Context) (string, error) {
	recs, _, err := e.c.r.LookupTXT(ctx, e.domain)
	if err != nil {
		if errors.Is(err, dnsresolver.ErrInvalidName) {
			return "", errNoRecord // §4.3: malformed names have no record
		}
		return "", errTemp
	}
	found := ""
	n := 0
	for _, t := range recs {
		if isSPFRecord(t.Text) {
			found = t.Text
			n++
		}
	}
	switch {
	case n == 0:
		return "", errNoRecord
	case n > 1:
		return "", errMultiple
	}
	return found, nil
}

// count counts one term that causes DNS queries (§4.6.4).
func (c *checker) count() error {
	c.lookups++
	if c.lookups > MaxLookups {
		return errLookupLimit
	}
	return nil
}

// void counts a lookup that found nothing (§4.6.4).
func (c *checker) void() error {
	c.voids++
	if c.voids > MaxVoidLookups {
		return errVoidLimit
	}
	return nil
}

// target expands a domain-spec into a name to ask (§7.3: too long a
// result loses labels on the left until it fits in 253 octets).
func (e *evaluation) target(ctx context.Context, spec string) (string, error) {
	t, err := expandMacros(ctx, spec, false, e)
	if err != nil {
		return "", err
	}
	t = strings.TrimSuffix(t, ".")
	for len(t) > 253 {
		i := strings.IndexByte(t, '.')
		if i < 0 {
			break
		}
		t = t[i+1:]
	}
	return escapeName(t), nil
}

// escapeName writes an expanded name in presentation format: the only
// octet that presentation format gives a meaning and that a macro value
// may carry is the backslash (RFC 1035 §5.1); dots stay label separators.
func escapeName(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	return strings.ReplaceAll(s, `\`, `\\`)
}

// validTarget reports whether a name can be asked: no empty label, no
// label over 63 octets, 253 octets at most (RFC 1035 §2.3.4). RFC 7208
// §4.3 and §4.8 treat other names as not existing.
func validTarget(name string) bool {
	name = strings.TrimSuffix(name, ".")
	if name == "" || len(name) > 253 || strings.HasPrefix(name, "[") {
		return false
	}
	_, err := dnsresolver.CanonicalName(name)
	return err == nil
}

// explain builds the explanation of a fail from the exp modifier (§6.2).
// Any trouble (DNS, no record or several, a bad macro, text that is not
// US-ASCII) means no explanation.
func (e *evaluation) explain(ctx context.Context, spec string) string {
	target, err := e.target(ctx, spec)
	if err != nil || !validTarget(target) {
		return ""
	}
	recs, _, err := e.c.r.LookupTXT(ctx, target)
	if err != nil || len(recs) != 1 {
		return ""
	}
	text := recs[0].Text
	for i := 0; i < len(text); i++ {
		if text[i] >= 0x80 {
			return ""
		}
	}
	out, err := expandMacros(ctx, text, true, e)
	if err != nil {
		return ""
	}
	return out
}
