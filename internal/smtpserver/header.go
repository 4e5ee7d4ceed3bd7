package smtpserver

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/mail"
	"strings"
	"time"
)

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

// missingFields returns the Date and Message-ID fields a submitted
// message lacks (RFC 6409 §8.2 and §8.3; RFC 5322 §3.6 requires Date, and
// Message-ID SHOULD be present), to go on top of it.
func missingFields(raw []byte, hostname string, now time.Time) string {
	m, err := mail.ReadMessage(bytes.NewReader(raw[:headerEnd(raw)]))
	if err != nil {
		return ""
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
	return add.String()
}
