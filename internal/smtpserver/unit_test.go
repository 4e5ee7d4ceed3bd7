package smtpserver

import (
	"crypto/tls"
	"strings"
	"testing"
	"time"
)

func TestReceivedField(t *testing.T) {
	date := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	got := receivedField(receivedInfo{
		helo: "evil\r\n(x); host", remoteIP: "2001:db8::1", hostname: "mx.example.com",
		id: "abc", utf8: true, esmtp: true, tls: &tls.ConnectionState{Version: tls.VersionTLS12, CipherSuite: tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256},
		rcpts: []string{"a<b>\r\n@example.com"}, date: date,
	})
	want := "Received: from evil???x???host ([IPv6:2001:db8::1])\r\n" +
		"\tby mx.example.com (TLS1.2 TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256) with UTF8SMTPS id abc\r\n" +
		"\tfor <ab@example.com>;\r\n" +
		"\tFri, 02 Jan 2026 03:04:05 +0000\r\n"
	if got != want {
		t.Fatalf("got\n%q\nwant\n%q", got, want)
	}
	got = receivedField(receivedInfo{remoteIP: "192.0.2.7", hostname: "mx", id: "i", esmtp: true, rcpts: []string{"a@x", "b@x"}, date: date})
	want = "Received: from unknown ([192.0.2.7])\r\n\tby mx with ESMTP id i;\r\n\tFri, 02 Jan 2026 03:04:05 +0000\r\n"
	if got != want {
		t.Fatalf("got\n%q\nwant\n%q", got, want)
	}
	// HELO: plain SMTP, whatever else (RFC 3848 names no variants of it).
	got = receivedField(receivedInfo{helo: "h", remoteIP: "192.0.2.7", hostname: "mx", id: "i", tls: &tls.ConnectionState{}, date: date})
	if !strings.Contains(got, " with SMTP id i;") {
		t.Fatalf("HELO: %q", got)
	}
	// Submission: ESMTPSA and the user, and no "for" clause.
	got = receivedField(receivedInfo{helo: "h", remoteIP: "192.0.2.7", hostname: "mx", id: "i", esmtp: true, tls: &tls.ConnectionState{},
		user: "alice@example.org", date: date})
	if !strings.Contains(got, " with ESMTPSA id i\r\n\t(authenticated sender alice@example.org);") {
		t.Fatalf("submission: %q", got)
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
