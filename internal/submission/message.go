package submission

import (
	"bytes"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/mail"
	"strings"
	"time"
)

var (
	errTooBig         = errors.New("message exceeds the size limit")
	errBareLineEnding = errors.New("bare CR or LF in message data")
)

// readMessage copies the message data into dst, each 4 KiB block within
// timeout (RFC 5321 §4.5.3.2.5), at most limit bytes, and refuses CR or LF
// that is not part of CRLF (RFC 5321 §2.3.8; SMTP smuggling).
func readMessage(dst *bytes.Buffer, r io.Reader, conn net.Conn, timeout time.Duration, limit int64) error {
	var block [4096]byte
	var total int64
	prevCR, bad := false, false
	for {
		if conn != nil {
			if err := conn.SetReadDeadline(time.Now().Add(timeout)); err != nil {
				return fmt.Errorf("set data deadline: %w", err)
			}
		}
		n, err := r.Read(block[:])
		total += int64(n)
		if total > limit {
			return errTooBig
		}
		for _, c := range block[:n] {
			switch {
			case prevCR && c != '\n':
				bad = true
			case !prevCR && c == '\n':
				bad = true
			}
			prevCR = c == '\r'
		}
		if !bad {
			dst.Write(block[:n])
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("read message data: %w", err)
		}
	}
	if bad || prevCR {
		return errBareLineEnding
	}
	return nil
}

// headerEnd returns the offset of the body (after the empty line), or
// len(raw) when the message has no body.
func headerEnd(raw []byte) int {
	if bytes.HasPrefix(raw, []byte("\r\n")) {
		return 2
	}
	if i := bytes.Index(raw, []byte("\r\n\r\n")); i >= 0 {
		return i + 4
	}
	return len(raw)
}

// headerFrom returns the addresses of the From: field (RFC 5322 §3.6.2);
// false when there is not exactly one parseable From: field.
func headerFrom(raw []byte) ([]string, bool) {
	m, err := mail.ReadMessage(bytes.NewReader(raw[:headerEnd(raw)]))
	if err != nil {
		return nil, false
	}
	if len(m.Header["From"]) != 1 {
		return nil, false
	}
	list, err := mail.ParseAddressList(m.Header.Get("From"))
	if err != nil || len(list) == 0 {
		return nil, false
	}
	out := make([]string, len(list))
	for i, a := range list {
		out[i] = a.Address
	}
	return out, true
}

// completeHeader adds Date and Message-ID when the client left them out
// (RFC 6409 §8.2 and §8.3; RFC 5322 §3.6 requires Date, and Message-ID
// SHOULD be present).
func completeHeader(raw []byte, hostname string, now time.Time) []byte {
	end := headerEnd(raw)
	m, err := mail.ReadMessage(bytes.NewReader(raw[:end]))
	if err != nil {
		return raw
	}
	var add strings.Builder
	if m.Header.Get("Date") == "" {
		fmt.Fprintf(&add, "Date: %s\r\n", now.Format(time.RFC1123Z))
	}
	if m.Header.Get("Message-Id") == "" {
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
