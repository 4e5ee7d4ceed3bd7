package dnsresolver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/miekg/dns"
)

// Defaults for the zero values of Config.
const (
	// DefaultTimeout bounds one attempt against one server.
	DefaultTimeout = 2 * time.Second
	// DefaultAttempts is how many rounds over the servers a lookup makes
	// (the first try and one retry).
	DefaultAttempts = 2
	// DefaultUDPSize is the EDNS0 buffer size advertised (RFC 6891 §6.2.5),
	// the DNS Flag Day 2020 value that avoids IP fragmentation.
	DefaultUDPSize = 1232
	// ResolvConf is where the default servers come from.
	ResolvConf = "/etc/resolv.conf"
)

// maxCNAMEChain bounds how many CNAMEs in one answer are followed.
const maxCNAMEChain = 8

// Config configures a Client. Every zero field means its default.
type Config struct {
	// Servers are the recursive resolvers asked, as "host:port" or
	// "host" (port 53), in order. Default: the nameservers in
	// /etc/resolv.conf.
	Servers []string
	// Timeout bounds one attempt against one server; default 2 s.
	Timeout time.Duration
	// Attempts is how many rounds over all servers a lookup makes before
	// it fails; default 2.
	Attempts int
	// UDPSize is the EDNS0 UDP payload size advertised; default 1232.
	UDPSize uint16
	// Transport sends the queries; default the network (UDP, and TCP
	// after a truncated reply). Tests and in-process zones replace it.
	Transport Transport
}

// Transport sends one query to one server and returns the reply. tcp asks
// for a stream transport (after a truncated UDP reply).
type Transport interface {
	Exchange(ctx context.Context, server string, query *dns.Msg, tcp bool) (*dns.Msg, error)
}

// Client is a Resolver that asks recursive resolvers with miekg/dns. It is
// safe for concurrent use and keeps no cache: callers cache what they need
// with the TTLs it returns.
type Client struct {
	servers   []string
	timeout   time.Duration
	attempts  int
	udpSize   uint16
	transport Transport
}

var _ Resolver = (*Client)(nil)

// New returns a Client. Without configured servers it reads
// /etc/resolv.conf and fails if that names none.
func New(cfg Config) (*Client, error) {
	servers := cfg.Servers
	if len(servers) == 0 {
		rc, err := dns.ClientConfigFromFile(ResolvConf)
		if err != nil {
			return nil, fmt.Errorf("dnsresolver: read %s: %w", ResolvConf, err)
		}
		for _, s := range rc.Servers {
			servers = append(servers, net.JoinHostPort(s, rc.Port))
		}
		if len(servers) == 0 {
			return nil, fmt.Errorf("dnsresolver: no nameserver in %s", ResolvConf)
		}
	}
	c := &Client{
		timeout:   cfg.Timeout,
		attempts:  cfg.Attempts,
		udpSize:   cfg.UDPSize,
		transport: cfg.Transport,
	}
	for _, s := range servers {
		addr, err := serverAddr(s)
		if err != nil {
			return nil, err
		}
		c.servers = append(c.servers, addr)
	}
	if c.timeout <= 0 {
		c.timeout = DefaultTimeout
	}
	if c.attempts <= 0 {
		c.attempts = DefaultAttempts
	}
	if c.udpSize < dns.MinMsgSize {
		c.udpSize = DefaultUDPSize
	}
	if c.transport == nil {
		c.transport = NetTransport{}
	}
	return c, nil
}

// Servers returns the servers the client asks, as host:port.
func (c *Client) Servers() []string { return append([]string(nil), c.servers...) }

// serverAddr normalises a configured server to host:port.
func serverAddr(s string) (string, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return "", errors.New("dnsresolver: empty server address")
	}
	if _, _, err := net.SplitHostPort(s); err == nil {
		return s, nil
	}
	host := strings.TrimSuffix(strings.TrimPrefix(s, "["), "]")
	if net.ParseIP(host) == nil {
		return "", fmt.Errorf("dnsresolver: server %q is not an IP address or IP:port", s)
	}
	return net.JoinHostPort(host, "53"), nil
}

// NetTransport sends queries over the network with miekg/dns.
type NetTransport struct{}

// Exchange sends query to server over UDP, or TCP when tcp is set. The
// context's deadline bounds the exchange.
func (NetTransport) Exchange(ctx context.Context, server string, query *dns.Msg, tcp bool) (*dns.Msg, error) {
	cl := &dns.Client{Net: "udp"}
	if tcp {
		cl.Net = "tcp"
	}
	if dl, ok := ctx.Deadline(); ok {
		cl.Timeout = time.Until(dl)
		if cl.Timeout <= 0 {
			return nil, context.DeadlineExceeded
		}
	}
	r, _, err := cl.ExchangeContext(ctx, query, server)
	if err != nil && r != nil && r.Truncated {
		// A truncated reply may not unpack completely; the TC bit is what
		// matters (RFC 7766 §6.1: retry over TCP).
		return r, nil
	}
	return r, err
}

// exchange asks the servers for one name and type, and returns the first
// usable reply (RCODE NOERROR or NXDOMAIN).
func (c *Client) exchange(ctx context.Context, name string, qtype uint16) (*dns.Msg, error) {
	var lastErr error
	for attempt := 0; attempt < c.attempts; attempt++ {
		for _, server := range c.servers {
			if err := ctx.Err(); err != nil {
				return nil, joinCause(lastErr, err)
			}
			r, err := c.exchangeOne(ctx, server, name, qtype)
			if err == nil {
				return r, nil
			}
			lastErr = err
		}
	}
	return nil, lastErr
}

// joinCause reports the context's end, keeping an earlier server error.
func joinCause(last, ctxErr error) error {
	if errors.Is(ctxErr, context.DeadlineExceeded) {
		ctxErr = fmt.Errorf("%w: %w", ErrTimeout, ctxErr)
	}
	if last == nil {
		return ctxErr
	}
	return fmt.Errorf("%w (last server error: %w)", ctxErr, last)
}

// exchangeOne makes one attempt against one server: UDP, then TCP when
// the UDP reply is truncated.
func (c *Client) exchangeOne(ctx context.Context, server, name string, qtype uint16) (*dns.Msg, error) {
	actx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	q := new(dns.Msg)
	q.SetQuestion(name, qtype)
	q.RecursionDesired = true
	// RFC 6840 §5.7: setting AD in a query asks a validating resolver to
	// report validation in the reply without asking for DNSSEC records.
	q.AuthenticatedData = true
	q.SetEdns0(c.udpSize, false)

	r, err := c.transport.Exchange(actx, server, q, false)
	if err == nil && r != nil && r.Truncated {
		q.Id = dns.Id()
		r, err = c.transport.Exchange(actx, server, q, true)
	}
	if err != nil {
		var ne net.Error
		if errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()) {
			return nil, fmt.Errorf("%s: %w", server, ErrTimeout)
		}
		return nil, fmt.Errorf("%s: %w", server, err)
	}
	if err := checkReply(q, r); err != nil {
		return nil, fmt.Errorf("%s: %w", server, err)
	}
	return r, nil
}

// checkReply accepts a reply only if it answers the query (RFC 1035 §4.1.1:
// same ID, QR set, same question) with NOERROR or NXDOMAIN.
func checkReply(q, r *dns.Msg) error {
	if r == nil {
		return fmt.Errorf("%w: no reply", ErrServerFailure)
	}
	if !r.Response || r.Id != q.Id || r.Opcode != dns.OpcodeQuery {
		return fmt.Errorf("%w: reply does not match the query", ErrServerFailure)
	}
	if len(r.Question) != 1 || !strings.EqualFold(r.Question[0].Name, q.Question[0].Name) ||
		r.Question[0].Qtype != q.Question[0].Qtype || r.Question[0].Qclass != q.Question[0].Qclass {
		return fmt.Errorf("%w: reply is for another question", ErrServerFailure)
	}
	if r.Truncated {
		return fmt.Errorf("%w: truncated reply", ErrServerFailure)
	}
	switch r.Rcode {
	case dns.RcodeSuccess, dns.RcodeNameError:
		return nil
	default:
		return fmt.Errorf("%w: rcode %s", ErrServerFailure, dns.RcodeToString[r.Rcode])
	}
}
