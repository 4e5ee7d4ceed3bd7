package av

import (
	"context"
	"errors"
	"log/slog"

	"pimail/internal/message"
)

// Action is what the virus step decides for a message.
type Action int

const (
	Clean  Action = iota // deliver
	Reject               // refuse permanently: 554 5.7.1
	Defer                // refuse temporarily (clamd down): 451 4.7.1
	Tag                  // deliver unscanned, marked (clamd down, policy "accept")
)

func (a Action) String() string {
	return [...]string{"clean", "reject", "defer", "tag"}[a]
}

// When clamd cannot be reached.
const (
	DownDefer  = "defer"  // 451 4.7.1: the sender retries later (default)
	DownAccept = "accept" // deliver, with X-Virus-Status: Unscanned
)

// When a part of a message is larger than clamd takes (Clamd.MaxSize).
const (
	TooLargeReject  = "reject"          // 552 5.3.4 (default): never delivered unscanned
	TooLargeDefer   = "defer"           // 451 4.7.1: the sender retries (while clamd's limit is raised)
	TooLargeDeliver = "deliver-flagged" // delivered with X-Virus-Status: Unscanned (too-large)
)

// ReasonTooLarge is Result.Reason for a message clamd could not take.
const ReasonTooLarge = "too-large"

// Config is the virus step's configuration.
type Config struct {
	// NoPolicy turns the built-in attachment policy off.
	NoPolicy bool
	Policy   PolicyConfig
	// Clamd, when set, scans every message with clamd.
	Clamd *Clamd
	// ClamdDown is DownDefer or DownAccept; "" means DownDefer.
	ClamdDown string
	// TooLarge is TooLargeReject, TooLargeDefer or TooLargeDeliver; ""
	// means TooLargeReject.
	TooLarge string
	Logger   *slog.Logger
}

// Result is the virus step's verdict.
type Result struct {
	Action Action
	// Reason names what was found: a policy reason ("executable"), or
	// "virus"; Detail is the file or the signature name.
	Reason, Detail string
	// Scanned says clamd looked at the message.
	Scanned bool
}

// Scanner runs the attachment policy, then clamd.
type Scanner struct {
	cfg    Config
	policy *Policy
	log    *slog.Logger
}

// NewScanner returns the virus step.
func NewScanner(cfg Config) *Scanner {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	s := &Scanner{cfg: cfg, log: cfg.Logger.With("component", "av")}
	if !cfg.NoPolicy {
		s.policy = NewPolicy(cfg.Policy)
	}
	return s
}

// Scan checks one message. The policy runs first: it is cheap and its
// refusals are certain. clamd then sees the whole message (it decodes MIME
// and archives itself), or, when the message is larger than clamd takes,
// its parts in messages of their own (scanParts). A part too large for
// clamd is handled as TooLarge says: by default the message is refused,
// never delivered unscanned without the admin asking for it.
func (s *Scanner) Scan(ctx context.Context, raw []byte, parsed *message.Parsed) Result {
	if s.policy != nil {
		if f := s.policy.Check(raw, parsed); f != nil {
			return Result{Action: Reject, Reason: f.Reason, Detail: f.File}
		}
	}
	if s.cfg.Clamd == nil {
		return Result{Action: Clean}
	}
	var r ScanResult
	var err error
	if int64(len(raw)) <= s.cfg.Clamd.maxSize() {
		r, err = s.cfg.Clamd.Scan(ctx, raw)
	} else {
		if parsed == nil || parsed.Body == nil {
			parsed = message.Parse(raw)
		}
		r, err = s.scanParts(ctx, raw, parsed)
	}
	switch {
	case err == nil && r.Infected:
		return Result{Action: Reject, Reason: "virus", Detail: r.Signature, Scanned: true}
	case err == nil:
		return Result{Action: Clean, Scanned: true}
	case errors.Is(err, ErrTooLarge):
		policy := s.cfg.TooLarge
		if policy == "" {
			policy = TooLargeReject
		}
		s.log.Warn("message part too large for clamd", "size", len(raw), "policy", policy, "err", err)
		switch policy {
		case TooLargeDeliver:
			return Result{Action: Tag, Reason: ReasonTooLarge}
		case TooLargeDefer:
			return Result{Action: Defer, Reason: ReasonTooLarge}
		}
		return Result{Action: Reject, Reason: ReasonTooLarge}
	}
	s.log.Error("clamd unavailable", "err", err, "policy", s.downPolicy())
	if s.downPolicy() == DownAccept {
		return Result{Action: Tag, Reason: "scanner-unavailable"}
	}
	return Result{Action: Defer, Reason: "scanner-unavailable"}
}

func (s *Scanner) downPolicy() string {
	if s.cfg.ClamdDown == DownAccept {
		return DownAccept
	}
	return DownDefer
}
