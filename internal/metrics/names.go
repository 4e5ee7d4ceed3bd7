package metrics

import (
	"context"
	"sync"
	"time"

	"pimail/internal/store"
)

// The server's metrics. Packages update them directly (this package
// imports nothing of pimail's but the store interface, so any package can
// import it without a cycle). Label values must come from the small fixed
// sets below, never from the network (addresses, IPs, host names).

// Protocols, the values of the "protocol" label.
const (
	ProtoSMTP        = "smtp"        // MX, port 25
	ProtoSubmission  = "submission"  // 587 and 465
	ProtoIMAP        = "imap"        // 143 and 993
	ProtoPOP3        = "pop3"        // 110 and 995
	ProtoHTTP        = "http"        // webmail, admin, autoconfig
	ProtoManageSieve = "managesieve" // reserved
)

// Reasons, the values of the "reason" label of MessagesRejected.
const (
	RejectUnknownRecipient = "unknown_recipient"
	RejectRelay            = "relay_denied"
	RejectDNSBL            = "dnsbl"
	RejectSPF              = "spf"
	RejectDMARC            = "dmarc"
	RejectSpam             = "spam"
	RejectVirus            = "virus"
	RejectPolicy           = "policy" // attachment policy, rules
	RejectSize             = "size"
	RejectRateLimit        = "rate_limit"
	RejectProtocol         = "protocol" // bare LF, syntax, too many errors
	RejectTempFail         = "temp_failure"
	RejectOther            = "other"
)

// Limits that refuse a connection, the values of the "reason" label of
// ConnectionsRefused.
const (
	RefuseTotal      = "total"       // the server's connection limit
	RefusePerAddress = "per_address" // open connections of one client
	RefuseRate       = "rate"        // new connections of one client per minute
)

// UnknownCommand is the "command" label of commands the server does not
// know, so that garbage from the network never becomes a label value.
const UnknownCommand = "unknown"

// Outcomes of an outbound delivery attempt, the values of the "result"
// label of QueueAttempts.
const (
	ResultDelivered = "delivered"
	ResultDeferred  = "deferred"
	ResultFailed    = "failed"
)

var (
	// Connections counts accepted connections by protocol.
	Connections = Default.NewCounterVec("pimail_connections_total",
		"Connections accepted, by protocol.", "protocol")
	// ConnectionsActive is the number of open connections by protocol
	// (Inc when a session starts, Dec when it ends).
	ConnectionsActive = Default.NewGaugeVec("pimail_connections_active",
		"Connections open now, by protocol.", "protocol")
	// ConnectionsRefused counts connections refused before a session, by
	// protocol and the limit that refused them (the Refuse* values).
	ConnectionsRefused = Default.NewCounterVec("pimail_connections_refused_total",
		"Connections refused before a session started, by protocol and limit.", "protocol", "reason")
	// AuthFailures counts failed logins by protocol.
	AuthFailures = Default.NewCounterVec("pimail_auth_failures_total",
		"Failed authentication attempts, by protocol.", "protocol")
	// PasswordChecks counts the password checks of internal/auth by how
	// they were answered: "hash" (an argon2id verification) or "cache"
	// (a recent success with the same password).
	PasswordChecks = Default.NewCounterVec("pimail_auth_password_checks_total",
		"Password checks, by how they were answered (hash or cache).", "source")
	// AuthThrottled counts logins refused by the login throttle before
	// any check.
	AuthThrottled = Default.NewCounter("pimail_auth_throttled_total",
		"Logins refused by the login throttle without a check.")
	// Logins counts successful logins by protocol (failures are
	// AuthFailures).
	Logins = Default.NewCounterVec("pimail_logins_total",
		"Successful logins, by protocol.", "protocol")
	// Commands counts the commands of IMAP and POP3 sessions by name
	// (names the server does not know are counted as "unknown").
	Commands = Default.NewCounterVec("pimail_commands_total",
		"Commands received, by protocol and command name.", "protocol", "command")
	// CommandFailures counts commands answered with a failure (IMAP NO or
	// BAD, POP3 -ERR), by protocol and command name.
	CommandFailures = Default.NewCounterVec("pimail_command_failures_total",
		"Commands answered with NO, BAD or -ERR, by protocol and command name.", "protocol", "command")
	// InternalErrors counts server faults seen by a client (IMAP
	// [SERVERBUG], a recovered panic, POP3 [SYS/TEMP] after a store
	// error), by protocol.
	InternalErrors = Default.NewCounterVec("pimail_internal_errors_total",
		"Commands that failed because of a server fault, by protocol.", "protocol")

	// MessagesAccepted counts messages accepted (250 after DATA) by the
	// protocol they came in on (smtp or submission).
	MessagesAccepted = Default.NewCounterVec("pimail_messages_accepted_total",
		"Messages accepted, by protocol.", "protocol")
	// MessagesRejected counts refused messages or recipients by reason.
	MessagesRejected = Default.NewCounterVec("pimail_messages_rejected_total",
		"Messages or recipients refused, by reason.", "reason")
	// MessagesJunk counts accepted messages filed into Junk.
	MessagesJunk = Default.NewCounter("pimail_messages_junk_total",
		"Accepted messages filed into Junk as probable spam.")
	// DeliveryLatency is the time from the end of DATA to the message
	// being stored (visible in the mailbox), in seconds.
	DeliveryLatency = Default.NewHistogram("pimail_delivery_duration_seconds",
		"Time from the end of DATA until the message is stored, in seconds.", DefaultBuckets)

	// QueueSize is the number of messages in the outbound queue.
	QueueSize = Default.NewGauge("pimail_queue_messages",
		"Messages waiting in the outbound queue.")
	// QueueAttempts counts outbound delivery attempts per recipient by
	// result.
	QueueAttempts = Default.NewCounterVec("pimail_queue_attempts_total",
		"Outbound delivery attempts per recipient, by result.", "result")

	// DNSBLLookups counts blocklist lookups; DNSBLCacheHits those answered
	// without a DNS query; DNSBLListed those that found the address
	// listed (hits), by zone (zones come from the configuration).
	DNSBLLookups   = Default.NewCounter("pimail_dnsbl_lookups_total", "DNS blocklist lookups.")
	DNSBLCacheHits = Default.NewCounter("pimail_dnsbl_cache_hits_total", "DNS blocklist lookups answered from the cache.")
	DNSBLListed    = Default.NewCounterVec("pimail_dnsbl_listed_total",
		"DNS blocklist lookups that found the client listed, by zone.", "zone")

	// Store sizes, refreshed by WatchStore.
	StoreAccounts  = Default.NewGauge("pimail_store_accounts", "Accounts in the store.")
	StoreMessages  = Default.NewGauge("pimail_store_messages", "Messages in all mailboxes (one per mailbox copy).")
	StoreBlobs     = Default.NewGauge("pimail_store_blobs", "Distinct stored message files.")
	StoreBlobBytes = Default.NewGauge("pimail_store_blob_bytes", "Bytes of distinct stored message files.")
)

// statsSource is what WatchStore needs of a store.
type statsSource interface {
	Stats(ctx context.Context) (store.Stats, error)
}

// WatchStore makes the store size gauges follow st: they are refreshed at
// a scrape when the last refresh is older than maxAge (0 means 30 s), so
// that frequent scrapes do not count rows each time.
func WatchStore(st statsSource, maxAge time.Duration) {
	if maxAge <= 0 {
		maxAge = 30 * time.Second
	}
	var mu sync.Mutex
	var last time.Time
	Default.OnCollect(func() {
		mu.Lock()
		defer mu.Unlock()
		if time.Since(last) < maxAge {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s, err := st.Stats(ctx)
		if err != nil {
			return // keep the previous values
		}
		last = time.Now()
		StoreAccounts.Set(float64(s.Accounts))
		StoreMessages.Set(float64(s.Messages))
		StoreBlobs.Set(float64(s.Blobs))
		StoreBlobBytes.Set(float64(s.BlobBytes))
	})
}
