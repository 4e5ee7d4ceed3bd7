package smtpserver

import (
	"crypto/tls"
	"net"
	"strings"
	"time"
	"unicode/utf8"
)

// receivedInfo is what the Received trace field records.
type receivedInfo struct {
	helo     string // as the client gave it in EHLO/HELO
	remoteIP string
	hostname string // ours
	id       string
	utf8     bool   // MAIL FROM had SMTPUTF8
	esmtp    bool   // EHLO, not HELO
	user     string // the logged-in user (submission)
	tls      *tls.ConnectionState
	rcpts    []string
	date     time.Time
}

// maxHeloInField bounds the client-supplied name copied into the field.
const maxHeloInField = 255

// receivedField builds the Received trace field that this server prepends
// (RFC 5321 §4.4, syntax in §4.4 "Time-stamp-line"):
//
//	Received: from <helo> ([<ip>])
//		by <hostname> with <protocol> id <id>
//		for <rcpt>; <date>
//
// The protocol is SMTP after HELO, ESMTP after EHLO, with "S" for TLS and
// "A" for a logged-in user (RFC 3848 §2: ESMTPS, ESMTPA, ESMTPSA), or
// UTF8SMTP… for an SMTPUTF8 transaction (RFC 6531 §4.3). A submission's
// field names the user in a comment. The "for" clause is written only
// for a single recipient, so one recipient's copy does not reveal the
// others. No reverse DNS lookup is made: the address literal is the
// truth, and a lookup per message is work before trust.
func receivedField(ri receivedInfo) string {
	proto := "SMTP"
	switch {
	case ri.utf8:
		proto = "UTF8SMTP"
	case ri.esmtp:
		proto = "ESMTP"
	}
	if proto != "SMTP" { // RFC 3848 names no variants of plain SMTP
		if ri.tls != nil {
			proto += "S"
		}
		if ri.user != "" {
			proto += "A"
		}
	}
	var b strings.Builder
	b.Grow(256)
	b.WriteString("Received: from ")
	b.WriteString(fieldToken(ri.helo, "unknown"))
	b.WriteString(" (")
	b.WriteString(addressLiteral(ri.remoteIP))
	b.WriteString(")\r\n\tby ")
	b.WriteString(fieldToken(ri.hostname, "localhost"))
	if ri.tls != nil {
		// A comment, as many servers write it: protocol version and cipher.
		b.WriteString(" (")
		b.WriteString(strings.ReplaceAll(tls.VersionName(ri.tls.Version), " ", ""))
		b.WriteString(" ")
		b.WriteString(tls.CipherSuiteName(ri.tls.CipherSuite))
		b.WriteString(")")
	}
	b.WriteString(" with ")
	b.WriteString(proto)
	b.WriteString(" id ")
	b.WriteString(ri.id)
	if ri.user != "" {
		b.WriteString("\r\n\t(authenticated sender ")
		b.WriteString(fieldToken(ri.user, "unknown"))
		b.WriteString(")")
	}
	if len(ri.rcpts) == 1 {
		b.WriteString("\r\n\tfor <")
		b.WriteString(cleanAddress(ri.rcpts[0]))
		b.WriteString(">")
	}
	b.WriteString(";\r\n\t")
	b.WriteString(ri.date.Format(time.RFC1123Z)) // RFC 5322 §3.3 date-time
	b.WriteString("\r\n")
	return b.String()
}

// addressLiteral writes an IP as an RFC 5321 §4.1.3 address literal.
func addressLiteral(ip string) string {
	addr := net.ParseIP(ip)
	switch {
	case addr == nil:
		return "[unknown]"
	case addr.To4() != nil:
		return "[" + addr.String() + "]"
	default:
		return "[IPv6:" + addr.String() + "]"
	}
}

// fieldToken makes a client-supplied name safe inside a header field:
// printable ASCII only, without the characters that end a comment or the
// field's clauses, and bounded in length.
func fieldToken(s, empty string) string {
	if len(s) > maxHeloInField {
		s = s[:maxHeloInField]
	}
	s = strings.Map(func(r rune) rune {
		switch {
		case r <= ' ' || r >= 0x7f:
			return '?'
		case r == '(' || r == ')' || r == ';' || r == '\\':
			return '?'
		}
		return r
	}, s)
	if s == "" {
		return empty
	}
	return s
}

// maxAddressInField bounds the recipient copied into the field: RFC 5321
// §4.5.3.1.3 limits a path to 256 octets, and the line must stay within
// RFC 5322 §2.1.1's 998.
const maxAddressInField = 256

// cleanAddress removes what cannot appear inside <...> in a header field.
// UTF-8 is kept: a UTF8SMTP message's header may carry it (RFC 6532);
// bytes that are not UTF-8 become '?' (not U+FFFD, which would triple
// their length), and the result is cut to maxAddressInField octets on a
// character boundary.
func cleanAddress(s string) string {
	s = strings.ToValidUTF8(s, "?")
	s = strings.Map(func(r rune) rune {
		if r < ' ' || r == 0x7f || r == '<' || r == '>' {
			return -1
		}
		return r
	}, s)
	if len(s) > maxAddressInField {
		cut := maxAddressInField
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut]
	}
	return s
}
