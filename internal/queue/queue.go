// Package queue is pimail's outbound mail queue: messages for remote
// recipients are stored in the store (so they survive restarts and
// crashes), DKIM-signed, and delivered to the recipients' MX hosts (RFC
// 5321 §5) or a configured smarthost, with opportunistic STARTTLS,
// MTA-STS (RFC 8461), per-destination connection reuse and concurrency
// limits, retries with exponential back-off, a delayed-delivery notice and
// a delivery status notification (RFC 3464) when delivery fails for good.
//
// Where mail leaves: Enqueue stores an entry; the worker loop claims due
// entries (ClaimQueue leases them, so a crash mid-delivery only delays
// them) and delivers each recipient domain in turn; UpdateQueueEntry
// records the outcome, and removes the entry once no recipient is pending.
package queue

import (
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"pimail/internal/delivery"
	"pimail/internal/deliverylog"
	"pimail/internal/directory"
	"pimail/internal/dkim"
	"pimail/internal/dnsresolver"
	"pimail/internal/store"
)

// Defaults for the zero values of Config.
const (
	DefaultPollInterval   = 15 * time.Second
	DefaultLease          = 15 * time.Minute
	DefaultRetryInitial   = 5 * time.Minute
	DefaultRetryMax       = 2 * time.Hour
	DefaultMaxAge         = 5 * 24 * time.Hour // RFC 5321 §4.5.4.1: give up after 4–5 days
	DefaultDelayNotice    = 4 * time.Hour
	DefaultWorkers        = 8
	DefaultPerDomain      = 2
	DefaultConnectTimeout = 30 * time.Second
	// DefaultCommandTimeout follows RFC 5321 §4.5.3.2: 5 minutes for
	// most replies, 10 for the one after the final dot (the client sets
	// both from this value).
	DefaultCommandTimeout = 5 * time.Minute
	DefaultIdleTimeout    = 30 * time.Second
	DefaultSMTPPort       = 25
)

// Transport overrides how mail for a domain is sent: to a smarthost (or a
// local port, in tests) instead of the domain's MX hosts.
type Transport struct {
	// Host is "host:port".
	Host string
	// Username and Password enable AUTH PLAIN (RFC 4616), which is only
	// ever sent over TLS.
	Username, Password string
	// RequireTLS: STARTTLS with a valid certificate for Host, or no
	// delivery (temporary failure).
	RequireTLS bool
	// ImplicitTLS: TLS from the first byte (port 465, RFC 8314 §3.3).
	ImplicitTLS bool
}

// Config tunes the queue. Every zero field means its documented default.
type Config struct {
	// Hostname is the name in EHLO and the DSN's Reporting-MTA.
	Hostname string
	// PollInterval is how often the store is checked for due entries (and
	// for changes made by `pimail queue retry` in another process).
	PollInterval time.Duration
	// Lease is how long a claimed entry is hidden from other workers; it
	// must exceed the longest delivery attempt. After a crash, entries
	// that were being delivered are retried when it ends.
	Lease time.Duration
	// RetryInitial is the wait after the first failed attempt; each
	// further one doubles it, up to RetryMax.
	RetryInitial, RetryMax time.Duration
	// MaxAge is how long delivery is retried before the message bounces.
	MaxAge time.Duration
	// DelayNotice is the age after which the sender is told once that
	// delivery is delayed; negative: never.
	DelayNotice time.Duration
	// Workers bounds the entries delivered at once; PerDomain the
	// concurrent deliveries (connections) to one recipient domain.
	Workers, PerDomain int
	// ConnectTimeout bounds a TCP connect, CommandTimeout each reply.
	ConnectTimeout, CommandTimeout time.Duration
	// IdleTimeout is how long an idle connection is kept for reuse.
	IdleTimeout time.Duration
	// SMTPPort is the port of MX hosts (25; tests change it).
	SMTPPort int
	// Transports maps a recipient domain (lower case) to an override;
	// the key "*" applies to every domain without its own entry.
	Transports map[string]Transport
	// DisableMTASTS turns off MTA-STS policy lookups.
	DisableMTASTS bool
	// HTTPClient fetches MTA-STS policies; nil means a client with a
	// one-minute timeout that follows no redirects (RFC 8461 §3.3).
	HTTPClient *http.Client
	// TLS is the base client TLS configuration (RootCAs, for tests);
	// nil means the system roots.
	TLS *tls.Config
}

func (c *Config) setDefaults() {
	def := func(v *time.Duration, d time.Duration) {
		if *v == 0 {
			*v = d
		}
	}
	def(&c.PollInterval, DefaultPollInterval)
	def(&c.Lease, DefaultLease)
	def(&c.RetryInitial, DefaultRetryInitial)
	def(&c.RetryMax, DefaultRetryMax)
	def(&c.MaxAge, DefaultMaxAge)
	def(&c.DelayNotice, DefaultDelayNotice)
	def(&c.ConnectTimeout, DefaultConnectTimeout)
	def(&c.CommandTimeout, DefaultCommandTimeout)
	def(&c.IdleTimeout, DefaultIdleTimeout)
	if c.Hostname == "" {
		c.Hostname = "localhost"
	}
	if c.Workers <= 0 {
		c.Workers = DefaultWorkers
	}
	if c.PerDomain <= 0 {
		c.PerDomain = DefaultPerDomain
	}
	if c.SMTPPort <= 0 {
		c.SMTPPort = DefaultSMTPPort
	}
	if c.HTTPClient == nil {
		c.HTTPClient = &http.Client{
			Timeout:       time.Minute,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		}
	}
}

// LocalDeliverer delivers a message to local mailboxes; *delivery.Pipeline
// is one. The queue uses it for DSNs to local senders.
type LocalDeliverer interface {
	Deliver(ctx context.Context, env delivery.Envelope, raw []byte) ([]store.Delivered, error)
}

// Store is what the queue needs of the store: the queue itself and the
// queued messages' bytes.
type Store interface {
	store.OutboundQueue
	store.BlobReader
}

// Deps are the queue's collaborators.
type Deps struct {
	Store    Store
	Dir      *directory.View // which domains are local (DKIM signing, DSN routing)
	Local    LocalDeliverer  // delivers DSNs to local senders
	Resolver dnsresolver.Resolver
	Signer   *dkim.Signer // nil: messages are not signed
	Logger   *slog.Logger
	// DeliveryLog records each attempt's outcome per recipient; nil: none.
	DeliveryLog *deliverylog.Logger
}

// Queue is the outbound queue. It is safe for concurrent use.
type Queue struct {
	cfg   Config
	st    Store
	dir   *directory.View
	local LocalDeliverer
	dns   dnsresolver.Resolver
	dkim  *dkim.Signer
	log   *slog.Logger
	dlog  *deliverylog.Logger
	now   func() time.Time

	wake    chan struct{}
	pool    *connPool
	domains *keyLimiter
	sts     *stsCache

	mu      sync.Mutex
	cancel  context.CancelFunc
	done    chan struct{}
	started bool
}

// New returns a queue; Start runs its worker loop.
func New(cfg Config, d Deps) (*Queue, error) {
	if d.Store == nil || d.Dir == nil || d.Local == nil || d.Resolver == nil {
		return nil, errors.New("queue: Store, Dir, Local and Resolver are required")
	}
	cfg.setDefaults()
	if d.Logger == nil {
		d.Logger = slog.Default()
	}
	q := &Queue{
		cfg: cfg, st: d.Store, dir: d.Dir, local: d.Local, dns: d.Resolver, dkim: d.Signer,
		log:     d.Logger.With("component", "queue"),
		dlog:    d.DeliveryLog,
		now:     time.Now,
		wake:    make(chan struct{}, 1),
		domains: newKeyLimiter(cfg.PerDomain),
		sts:     newSTSCache(),
	}
	q.pool = newConnPool(cfg.IdleTimeout)
	return q, nil
}

// Wake makes the worker loop look for due entries now.
func (q *Queue) Wake() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// Start runs the worker loop until Close.
func (q *Queue) Start() {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.started {
		return
	}
	q.started = true
	ctx, cancel := context.WithCancel(context.Background())
	q.cancel = cancel
	q.done = make(chan struct{})
	q.watchSize()
	go q.run(ctx)
}

// Close stops the worker loop, interrupts deliveries in progress (their
// entries are retried at the next start) and closes idle connections.
func (q *Queue) Close() error {
	q.mu.Lock()
	cancel, done := q.cancel, q.done
	q.cancel = nil
	q.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
	q.pool.closeAll()
	return nil
}

// run claims due entries while workers are free and delivers them.
func (q *Queue) run(ctx context.Context) {
	defer close(q.done)
	var wg sync.WaitGroup
	defer wg.Wait()
	sem := make(chan struct{}, q.cfg.Workers)
	tick := time.NewTicker(q.cfg.PollInterval)
	defer tick.Stop()
	for {
		if free := cap(sem) - len(sem); free > 0 {
			entries, err := q.st.ClaimQueue(ctx, q.now(), q.cfg.Lease, free)
			if err != nil && ctx.Err() == nil {
				q.log.Error("claiming due queue entries", "err", err)
			}
			for _, e := range entries {
				sem <- struct{}{}
				wg.Add(1)
				go func() {
					defer wg.Done()
					q.process(ctx, e)
					<-sem
					q.Wake()
				}()
			}
			if len(entries) == free {
				// More may be due; look again once a worker is free.
				select {
				case <-ctx.Done():
					return
				default:
				}
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-q.wake:
		case <-tick.C:
		}
		q.pool.expire()
	}
}

// backoff is the wait after the n-th failed attempt: RetryInitial doubled
// per attempt, capped at RetryMax.
func (q *Queue) backoff(n int) time.Duration {
	d := q.cfg.RetryInitial
	for i := 1; i < n && d < q.cfg.RetryMax; i++ {
		d *= 2
	}
	return min(d, q.cfg.RetryMax)
}
