package smtpd

import (
	"bytes"
	"crypto/tls"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
	"time"
)

func TestLineEndingChecker(t *testing.T) {
	tests := []struct {
		data string
		ok   bool
	}{
		{"", true},
		{"a\r\nb\r\n", true},
		{"\r\n\r\n", true},
		{"a\nb", false},
		{"a\rb", false},
		{"a\r\r\n", false},
		{"a\r", false}, // dangling CR at the end
		{"\n", false},
		{"a\r\n\n", false},
	}
	for _, tc := range tests {
		// Whole, and split at every position (the CR/LF pair may straddle reads).
		for cut := 0; cut <= len(tc.data); cut++ {
			var c lineEndingChecker
			c.check([]byte(tc.data[:cut]))
			c.check([]byte(tc.data[cut:]))
			if got := c.finish(); got != tc.ok {
				t.Errorf("%q cut at %d: ok = %v, want %v", tc.data, cut, got, tc.ok)
			}
		}
	}
}

func TestReadMessage(t *testing.T) {
	msg := strings.Repeat("line of text\r\n", 1000)
	var buf bytes.Buffer
	buf.WriteString("Received: x\r\n")
	if err := readMessage(&buf, iotest.OneByteReader(strings.NewReader(msg)), nil, time.Minute, int64(len(msg))); err != nil {
		t.Fatal(err)
	}
	if buf.String() != "Received: x\r\n"+msg {
		t.Fatal("message altered")
	}
	buf.Reset()
	if err := readMessage(&buf, strings.NewReader(msg), nil, time.Minute, int64(len(msg)-1)); !errors.Is(err, errTooBig) {
		t.Fatalf("over the limit: %v", err)
	}
	buf.Reset()
	err := readMessage(&buf, strings.NewReader("a\nb\r\n"+msg), nil, time.Minute, 1<<20)
	if !errors.Is(err, errBareLineEnding) {
		t.Fatalf("bare LF: %v", err)
	}
	if buf.Len() != 0 {
		t.Fatalf("refused data was kept: %d bytes", buf.Len())
	}
	buf.Reset()
	if err := readMessage(&buf, iotest.ErrReader(io.ErrUnexpectedEOF), nil, time.Minute, 10); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("broken connection: %v", err)
	}
}

func TestReceivedField(t *testing.T) {
	date := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	got := receivedField(receivedInfo{
		helo: "evil\r\n(x); host", remoteIP: "2001:db8::1", hostname: "mx.example.com",
		id: "abc", utf8: true, tls: &tls.ConnectionState{Version: tls.VersionTLS12, CipherSuite: tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256},
		rcpts: []string{"a<b>\r\n@example.com"}, date: date,
	})
	want := "Received: from evil???x???host ([IPv6:2001:db8::1])\r\n" +
		"\tby mx.example.com (TLS1.2 TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256) with UTF8SMTPS id abc\r\n" +
		"\tfor <ab@example.com>;\r\n" +
		"\tFri, 02 Jan 2026 03:04:05 +0000\r\n"
	if got != want {
		t.Fatalf("got\n%q\nwant\n%q", got, want)
	}
	got = receivedField(receivedInfo{remoteIP: "192.0.2.7", hostname: "mx", id: "i", rcpts: []string{"a@x", "b@x"}, date: date})
	want = "Received: from unknown ([192.0.2.7])\r\n\tby mx with ESMTP id i;\r\n\tFri, 02 Jan 2026 03:04:05 +0000\r\n"
	if got != want {
		t.Fatalf("got\n%q\nwant\n%q", got, want)
	}
	if got := addressLiteral("not an ip"); got != "[unknown]" {
		t.Fatalf("addressLiteral = %q", got)
	}
}

func TestConfigDefaults(t *testing.T) {
	var c Config
	c.setDefaults()
	if c.Hostname == "" || c.MaxMessageBytes != 50<<20 || c.MaxRecipients != 100 ||
		c.MaxLineLength != DefaultMaxLineLength || c.ReadTimeout != 5*time.Minute ||
		c.DataTimeout != 3*time.Minute || c.WriteTimeout <= 0 || c.DeliverTimeout <= 0 ||
		c.DeliverTimeout >= 10*time.Minute || c.MaxErrors <= 0 {
		t.Fatalf("defaults: %+v", c)
	}
}

func TestGateDefaults(t *testing.T) {
	var c Config
	c.setDefaults()
	if c.MaxConnections != DefaultMaxConnections || c.MaxConnectionsPerIP != DefaultMaxConnectionsPerIP ||
		c.ConnectionRate != DefaultConnectionRate || c.ConnectionRateWindow != time.Minute ||
		c.PregreetWait != DefaultPregreetWait || c.DNSBLThreshold != 1 || c.LimitLoopback {
		t.Fatalf("defaults: %+v", c)
	}
	// Negative means "off" and survives the defaults.
	c = Config{MaxConnections: -1, MaxConnectionsPerIP: -1, ConnectionRate: -1, PregreetWait: -1}
	c.setDefaults()
	if c.MaxConnections != -1 || c.MaxConnectionsPerIP != -1 || c.ConnectionRate != -1 || c.PregreetWait != -1 {
		t.Fatalf("disabled limits: %+v", c)
	}
}
