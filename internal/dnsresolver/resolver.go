// Package dnsresolver is pimail's stub resolver: the one way its mail
// checks (DNSBL now; SPF, DKIM, DMARC and MX selection later) ask the DNS.
//
// The standard library's resolver hides what these checks need: the TTL of
// every answer (to cache it for as long as the zone allows), the AD bit
// (RFC 4035 §3.2.3; needed for DANE) and the difference between "the name
// does not exist" (NXDOMAIN, RFC 1035 §4.1.1 RCODE 3) and "the lookup
// failed". This package returns all three. It sends queries to configured
// recursive resolvers (by default those in /etc/resolv.conf) over UDP,
// retries over TCP when an answer is truncated (RFC 1035 §4.2.1, RFC 7766
// §6.1), and bounds every query by a timeout and a retry count.
package dnsresolver

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"time"
)

// Resolver answers the queries pimail makes. Every method returns the
// records found, a Result describing the answer as a whole, and an error.
//
// A name that does not exist (NXDOMAIN) or that has no records of the asked
// type (NODATA, RFC 2308 §2.2) is not an error: the records are empty and
// Result.NXDomain tells the two apart. An error means no usable answer
// came: timeout, network failure, SERVFAIL, REFUSED, a malformed reply.
// Errors wrap ErrTimeout or ErrServerFailure where they apply.
type Resolver interface {
	LookupA(ctx context.Context, name string) ([]AddrRecord, Result, error)
	LookupAAAA(ctx context.Context, name string) ([]AddrRecord, Result, error)
	LookupTXT(ctx context.Context, name string) ([]TXTRecord, Result, error)
	LookupMX(ctx context.Context, name string) ([]MXRecord, Result, error)
}

// Result describes an answer as a whole.
type Result struct {
	// NXDomain: the name does not exist (RCODE 3, RFC 1035 §4.1.1).
	NXDomain bool
	// Authentic is the AD bit of the reply: the recursive resolver
	// validated the answer with DNSSEC (RFC 4035 §3.2.3, RFC 6840 §5.7).
	// It is only as trustworthy as the path to that resolver.
	Authentic bool
	// TTL is how long the whole answer may be cached: the smallest TTL of
	// the answer records, or for a negative answer (NXDOMAIN or NODATA)
	// the negative TTL of RFC 2308 §5, min(SOA TTL, SOA MINIMUM). It is
	// zero when the reply carried no TTL at all (a negative answer without
	// an SOA record); callers then pick their own bound.
	TTL time.Duration
}

// AddrRecord is one A or AAAA record.
type AddrRecord struct {
	IP  netip.Addr
	TTL time.Duration
}

// TXTRecord is one TXT record: its character-strings (RFC 1035 §3.3.14)
// as sent, and Text, their concatenation (as SPF, RFC 7208 §3.3, and
// DKIM, RFC 6376 §3.6.2.2, read them).
type TXTRecord struct {
	Strings []string
	Text    string
	TTL     time.Duration
}

// MXRecord is one MX record (RFC 1035 §3.3.9). Host is a fully qualified
// name without the trailing dot; "" for a null MX (RFC 7505 §3).
type MXRecord struct {
	Preference uint16
	Host       string
	TTL        time.Duration
}

// Errors that lookups wrap.
var (
	// ErrTimeout: no server answered within the time allowed.
	ErrTimeout = errors.New("dns: timeout")
	// ErrServerFailure: the servers answered with an error RCODE
	// (SERVFAIL, REFUSED, …) or an unusable reply.
	ErrServerFailure = errors.New("dns: server failure")
	// ErrInvalidName: the name cannot be asked (an empty label, a label
	// over 63 octets, over 255 octets in all); no query was sent.
	ErrInvalidName = errors.New("dns: invalid name")
)

// Error is a failed lookup: the name and type asked and the cause.
type Error struct {
	Name  string
	Type  string
	Cause error
}

func (e *Error) Error() string {
	return fmt.Sprintf("dns lookup %s %s: %v", e.Name, e.Type, e.Cause)
}

func (e *Error) Unwrap() error { return e.Cause }
