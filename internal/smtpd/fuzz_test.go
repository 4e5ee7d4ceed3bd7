package smtpd

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"testing/iotest"
	"time"
)

// bareLineEnding is the reference rule of RFC 5321 §2.3.8, written the
// slow, obvious way: every CR must be followed by LF and every LF preceded
// by CR.
func bareLineEnding(p []byte) bool {
	for i, c := range p {
		switch c {
		case '\r':
			if i+1 >= len(p) || p[i+1] != '\n' {
				return true
			}
		case '\n':
			if i == 0 || p[i-1] != '\r' {
				return true
			}
		}
	}
	return false
}

// FuzzLineEndingChecker feeds message data in fuzzer-chosen pieces (split
// points are where SMTP smuggling hides) and compares the streaming
// checker and readMessage with the reference rule.
func FuzzLineEndingChecker(f *testing.F) {
	for _, s := range []string{
		"Subject: x\r\n\r\nbody\r\n", "a\nb", "a\rb", "a\r\n.\n", "\r", "\n", "\r\r\n", "a\r\n\r\n",
		"x\n.\r\nMAIL FROM:<evil@example.org>\r\n", "\r\n.\r", "",
	} {
		f.Add([]byte(s), uint8(1))
		f.Add([]byte(s), uint8(3))
	}
	f.Fuzz(func(t *testing.T, data []byte, step uint8) {
		n := int(step%16) + 1
		var c lineEndingChecker
		for i := 0; i < len(data); i += n {
			c.check(data[i:min(i+n, len(data))])
		}
		want := bareLineEnding(data)
		if got := !c.finish(); got != want {
			t.Fatalf("checker says bare=%v, reference %v for %q (pieces of %d)", got, want, data, n)
		}
		// readMessage: the same verdict, the bytes kept unchanged when
		// clean, the size limit honoured.
		var dst bytes.Buffer
		err := readMessage(&dst, iotest.OneByteReader(bytes.NewReader(data)), nil, time.Second, 1<<20)
		switch {
		case want && !errors.Is(err, errBareLineEnding):
			t.Fatalf("readMessage accepted bare line endings in %q: %v", data, err)
		case !want && err != nil:
			t.Fatalf("readMessage refused clean data %q: %v", data, err)
		case !want && !bytes.Equal(dst.Bytes(), data):
			t.Fatalf("readMessage changed the data: %q -> %q", data, dst.Bytes())
		}
		if len(data) > 8 {
			err := readMessage(&dst, bytes.NewReader(data), nil, time.Second, int64(len(data)/2))
			if !errors.Is(err, errTooBig) {
				t.Fatalf("readMessage over the limit: %v", err)
			}
		}
	})
}

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
			utf8: utf8, rcpts: []string{rcpt}, date: time.Unix(1700000000, 0).UTC(),
		})
		if !strings.HasPrefix(field, "Received: ") || !strings.HasSuffix(field, "\r\n") {
			t.Fatalf("not a Received field: %q", field)
		}
		if bareLineEnding([]byte(field)) {
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
