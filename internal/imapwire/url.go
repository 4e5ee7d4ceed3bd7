package imapwire

import (
	"errors"
	"net/url"
	"strconv"
	"strings"
)

// IMAPURL is an IMAP URL naming one message or part of it (RFC 5092
// §3, icommand's imessagepart), as CATENATE's URL parts give it (RFC
// 4469 §3): "/INBOX;UIDVALIDITY=785799047/;UID=113330/;SECTION=1.5", or
// the same after "imap://user@host".
type IMAPURL struct {
	Mailbox     string // percent-decoded (UTF-8)
	UIDValidity uint32 // 0 when absent
	UID         uint32
	Section     *Section // nil: the whole message
	Partial     *Partial // ;PARTIAL=offset[.length] (RFC 5092 §3)
}

var errURL = errors.New("invalid IMAP URL")

// ParseIMAPURL parses an absolute or server-relative IMAP URL of a
// message part. The server part of an absolute URL is not checked here.
func ParseIMAPURL(s string) (IMAPURL, error) {
	var u IMAPURL
	if len(s) > 7 && strings.EqualFold(s[:7], "imap://") {
		slash := strings.IndexByte(s[7:], '/')
		if slash < 0 {
			return u, errURL
		}
		s = s[7+slash:]
	}
	if !strings.HasPrefix(s, "/") {
		return u, errURL
	}
	segs := strings.Split(s[1:], "/")
	if len(segs) < 2 {
		return u, errURL
	}
	// The mailbox, with an optional ;UIDVALIDITY=.
	mbox, uv, hasUV := strings.Cut(segs[0], ";")
	name, err := url.PathUnescape(mbox)
	if err != nil || name == "" {
		return u, errURL
	}
	u.Mailbox = name
	if hasUV {
		k, v, _ := strings.Cut(uv, "=")
		n, err := strconv.ParseUint(v, 10, 32)
		if !strings.EqualFold(k, "UIDVALIDITY") || err != nil || n == 0 {
			return u, errURL
		}
		u.UIDValidity = uint32(n)
	}
	// Then ;UID=, ;SECTION=, ;PARTIAL=, each in its own segment and in
	// that order.
	seen := 0
	for _, seg := range segs[1:] {
		if !strings.HasPrefix(seg, ";") {
			return u, errURL
		}
		k, v, ok := strings.Cut(seg[1:], "=")
		if !ok {
			return u, errURL
		}
		switch strings.ToUpper(k) {
		case "UID":
			n, err := strconv.ParseUint(v, 10, 32)
			if seen != 0 || err != nil || n == 0 {
				return u, errURL
			}
			u.UID, seen = uint32(n), 1
		case "SECTION":
			if seen != 1 {
				return u, errURL
			}
			raw, err := url.PathUnescape(v)
			if err != nil {
				return u, errURL
			}
			sec, err := ParseSection(raw)
			if err != nil {
				return u, errURL
			}
			u.Section, seen = &sec, 2
		case "PARTIAL":
			if seen < 1 || seen > 2 {
				return u, errURL
			}
			off, length, hasLen := strings.Cut(v, ".")
			o, err := strconv.ParseInt(off, 10, 64)
			if err != nil || o < 0 {
				return u, errURL
			}
			p := &Partial{Origin: o}
			if hasLen {
				n, err := strconv.ParseInt(length, 10, 64)
				if err != nil || n <= 0 {
					return u, errURL
				}
				p.Count, p.HasCount = n, true
			}
			u.Partial, seen = p, 3
		default:
			return u, errURL
		}
	}
	if u.UID == 0 {
		return u, errURL
	}
	return u, nil
}
