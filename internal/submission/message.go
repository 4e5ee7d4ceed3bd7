package submission

import (
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"fmt"
	"net"
	"strings"
	"time"

	"pimail/internal/message"
)

// headerFrom returns the addresses of the From: field (RFC 5322 §3.6.2),
// read with the message toolkit (as the receiver's DMARC check and every
// reader will read them); false when there is not exactly one From:
// field or an address in it has no local part or no domain.
func headerFrom(raw []byte) ([]string, bool) {
	fields := 0
	message.ScanFields(raw, func(f message.RawField) bool {
		if f.Is("From") {
			fields++
		}
		return true
	})
	list, complete := message.Authors(raw)
	if fields != 1 || !complete || len(list) == 0 {
		return nil, false
	}
	out := make([]string, len(list))
	for i, a := range list {
		if a.Mailbox == "" || a.Host == "" {
			return nil, false
		}
		out[i] = a.Addr()
	}
	return out, true
}

// completeHeader adds Date and Message-ID when the client left them out
// (RFC 6409 §8.2 and §8.3; RFC 5322 §3.6 requires Date, and Message-ID
// SHOULD be present).
func completeHeader(raw []byte, hostname string, now time.Time) []byte {
	var add strings.Builder
	if !message.HasField(raw, "Date") {
		fmt.Fprintf(&add, "Date: %s\r\n", now.Format(time.RFC1123Z))
	}
	if !message.HasField(raw, "Message-ID") {
		b := make([]byte, 16)
		_, _ = rand.Read(b)
		fmt.Fprintf(&add, "Message-ID: <%s@%s>\r\n", hex.EncodeToString(b), hostname)
	}
	if add.Len() == 0 {
		return raw
	}
	return append([]byte(add.String()), raw...)
}

// receivedField is the trace field of RFC 5321 §4.4 with the ESMTPSA /
// ESMTPS protocol names of RFC 3848.
func receivedField(helo, ip, hostname, id, user string, isTLS bool, st tls.ConnectionState, now time.Time) string {
	proto := "ESMTPA"
	if isTLS {
		proto = "ESMTPSA"
	}
	helo = sanitize(helo)
	var tlsInfo string
	if isTLS {
		tlsInfo = fmt.Sprintf("\r\n\t(using %s with cipher %s)", tls.VersionName(st.Version), tls.CipherSuiteName(st.CipherSuite))
	}
	return fmt.Sprintf("Received: from %s ([%s])\r\n\tby %s with %s id %s%s\r\n\t(authenticated sender %s); %s\r\n",
		helo, ip, hostname, proto, id, tlsInfo, sanitize(user), now.Format(time.RFC1123Z))
}

// sanitize keeps client-given text from breaking the header.
func sanitize(s string) string {
	s = strings.Map(func(r rune) rune {
		if r < 0x21 || r == 0x7f || r == '(' || r == ')' || r == ';' {
			return -1
		}
		return r
	}, s)
	if len(s) > 255 {
		s = s[:255]
	}
	if s == "" {
		s = "unknown"
	}
	return s
}

// closeRead stops reading from the client so the session ends after the
// reply.
func closeRead(c net.Conn) {
	if tc, ok := c.(*tls.Conn); ok {
		c = tc.NetConn()
	}
	if cr, ok := c.(interface{ CloseRead() error }); ok {
		_ = cr.CloseRead()
		return
	}
	_ = c.SetReadDeadline(time.Now())
}
