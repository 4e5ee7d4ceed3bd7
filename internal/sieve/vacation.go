package sieve

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

	"pimail/internal/message"
)

// The vacation action (RFC 5230). Run decides whether a reply is due by
// the rules of RFC 5230 §4.5 and RFC 3834 §2, which need only the message;
// the caller keeps the response record (":days", RFC 5230 §4.1) and sends
// the reply.

// Bounds of :days (RFC 5230 §4.1: implementations may impose limits; the
// minimum must be 1).
const (
	DefaultVacationDays = 7
	MaxVacationDays     = 365
)

// VacationReply is a vacation action.
type VacationReply struct {
	// Days is the period within which the same sender gets one reply.
	Days int
	// Subject, From and MIME are :subject, :from and :mime; Reason the
	// reply's text (a whole MIME entity with MIME).
	Subject, From, Reason string
	MIME                  bool
	// Handle names the response record (RFC 5230 §4.2): :handle, or a
	// hash of the reply's text and arguments.
	Handle string
	// Recipient is who the reply goes to: the envelope sender (RFC 5230
	// §4.5).
	Recipient string
	// Skip, when not empty, says why no reply is sent (a list, an
	// automatic message, a message not addressed to the user); the
	// action is kept so that the caller can log it.
	Skip string
}

type vacationCmd struct {
	pos       Pos
	days      int
	subject   *str
	from      *str
	addresses strList
	mime      bool
	handle    *str
	reason    str
}

func (c *vacationCmd) exec(r *run) error {
	if err := r.step(c.pos); err != nil {
		return err
	}
	v := &VacationReply{Days: c.days, Reason: r.expand(c.reason), MIME: c.mime, Recipient: r.in.From}
	if c.subject != nil {
		v.Subject = r.expand(*c.subject)
	}
	if c.from != nil {
		v.From = r.expand(*c.from)
	}
	if c.handle != nil {
		v.Handle = r.expand(*c.handle)
	} else {
		h := sha256.Sum256([]byte(v.Subject + "\x00" + v.From + "\x00" + map[bool]string{true: "mime", false: ""}[v.MIME] + "\x00" + v.Reason))
		v.Handle = hex.EncodeToString(h[:12])
	}
	v.Skip = r.vacationSkip(r.expandList(c.addresses))
	for _, a := range r.actions {
		if a.Kind == Vacation {
			return errorf(c.pos, "vacation used more than once")
		}
	}
	r.actions = append(r.actions, Action{Kind: Vacation, Reply: v})
	return nil
}

// vacationSkip returns why no reply may be sent, or "".
func (r *run) vacationSkip(extra []string) string {
	from := r.in.From
	if from == "" {
		return "null sender" // RFC 5230 §4.5, RFC 3834 §2
	}
	local, _ := splitAddr(lowerASCII(from))
	switch {
	case local == "mailer-daemon" || local == "listserv" || local == "majordomo" ||
		strings.HasPrefix(local, "owner-") || strings.HasSuffix(local, "-request") ||
		strings.HasPrefix(local, "bounce") || strings.HasSuffix(local, "-bounces"):
		return "sender is a list or an automatic address" // RFC 5230 §4.5
	}
	for _, f := range r.headers("auto-submitted") {
		// RFC 3834 §2: no reply to anything but "no".
		if v := strings.TrimSpace(lowerASCII(strings.Split(f.raw, ";")[0])); v != "no" {
			return "Auto-Submitted: " + v
		}
	}
	for _, name := range []string{"list-id", "list-help", "list-unsubscribe", "list-subscribe", "list-post", "list-owner", "list-archive"} {
		if len(r.headers(name)) > 0 {
			return "mailing list (" + name + ")" // RFC 2369, RFC 2919
		}
	}
	for _, f := range r.headers("precedence") {
		switch strings.TrimSpace(lowerASCII(f.raw)) {
		case "bulk", "list", "junk":
			return "Precedence: " + f.raw
		}
	}
	if len(r.headers("x-auto-response-suppress")) > 0 {
		return "X-Auto-Response-Suppress"
	}
	// RFC 5230 §4.5: reply only when one of the user's addresses is a
	// recipient in the header, so that Bcc copies and list mail without
	// list fields get no reply.
	own := append(append([]string(nil), r.in.Addresses...), extra...)
	for _, name := range []string{"to", "cc", "bcc", "resent-to", "resent-cc", "resent-bcc"} {
		for _, f := range r.headers(name) {
			for _, a := range message.ParseAddressList(f.raw) {
				for _, o := range own {
					if addressesEqual(a.Addr(), o) {
						return ""
					}
				}
			}
		}
	}
	return "none of the user's addresses is in To or Cc"
}

// addressesEqual compares addresses with the domain in any case; the
// local part compares in any case too, as pimail's directory does, and a
// subaddress of one matches the other.
func addressesEqual(a, b string) bool {
	la, da := splitAddr(lowerASCII(a))
	lb, db := splitAddr(lowerASCII(b))
	if da != db {
		return false
	}
	if la == lb {
		return true
	}
	ua, _, _ := strings.Cut(la, subaddressSep)
	ub, _, _ := strings.Cut(lb, subaddressSep)
	return ua == ub
}
