package smtpserver

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
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

// missingFields returns the Date and Message-ID fields a submitted
// message lacks (RFC 6409 §8.2 and §8.3; RFC 5322 §3.6 requires Date, and
// Message-ID SHOULD be present), to go on top of it.
func missingFields(raw []byte, hostname string, now time.Time) string {
	var add strings.Builder
	if !message.HasField(raw, "Date") {
		fmt.Fprintf(&add, "Date: %s\r\n", now.Format(time.RFC1123Z))
	}
	if !message.HasField(raw, "Message-ID") {
		b := make([]byte, 16)
		_, _ = rand.Read(b)
		fmt.Fprintf(&add, "Message-ID: <%s@%s>\r\n", hex.EncodeToString(b), hostname)
	}
	return add.String()
}
