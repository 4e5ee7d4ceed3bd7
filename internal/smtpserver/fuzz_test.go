package smtpserver

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// FuzzReceivedField builds the trace field from client-controlled HELO
// names, recipients and IDs: it must stay one well-formed header field
// (RFC 5322 §2.2: CRLF only at fold points, each followed by white space;
// lines within 998 octets) whatever the client sent, so no client can add
// a header field of its own.
func FuzzReceivedField(f *testing.F) {
	f.Add("client.example", "192.0.2.1", "alice@example.com", true)
	f.Add("evil\r\nX-Injected: yes", "::1", "bob@example.com>\r\nBcc: x", false)
	f.Add("", "not an ip", "", true)
	f.Add(strings.Repeat("a", 3000), "2001:db8::1", "\x00\r\n\t", false)
	f.Fuzz(func(t *testing.T, helo, ip, rcpt string, utf8 bool) {
		field := receivedField(receivedInfo{
			helo: helo, remoteIP: ip, hostname: "mx.example.com", id: "0123abcd",
			utf8: utf8, esmtp: true, user: helo, rcpts: []string{rcpt}, date: time.Unix(1700000000, 0).UTC(),
		})
		if !strings.HasPrefix(field, "Received: ") || !strings.HasSuffix(field, "\r\n") {
			t.Fatalf("not a Received field: %q", field)
		}
		// It must pass the framing unchanged: no bare CR or LF.
		fr := newFramer(false, 0)
		fr.feed([]byte(field))
		fr.finishChunks()
		if fr.smuggle || !bytes.Equal(fr.out, []byte(field)) {
			t.Fatalf("bare CR or LF in %q", field)
		}
		lines := strings.Split(strings.TrimSuffix(field, "\r\n"), "\r\n")
		for i, l := range lines {
			if len(l) > 998 {
				t.Fatalf("line %d is %d octets", i, len(l))
			}
			if i > 0 && (l == "" || (l[0] != ' ' && l[0] != '\t')) {
				t.Fatalf("line %d %q is not a continuation: a new header field was injected", i, l)
			}
			if strings.ContainsRune(l, 0) {
				t.Fatalf("NUL in %q", l)
			}
		}
	})
}
