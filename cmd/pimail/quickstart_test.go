package main

import (
	"net/netip"
	"testing"
)

// TestPublishable: quickstart publishes no documentation, shared, private
// or reserved address as the server's (it published 192.0.2.2 from this
// machine's interface before issue 24).
func TestPublishable(t *testing.T) {
	for s, want := range map[string]bool{
		"192.0.2.2": false, "198.51.100.7": false, "203.0.113.9": false, "100.64.1.1": false,
		"10.1.2.3": false, "172.16.0.1": false, "192.168.1.1": false, "127.0.0.1": false,
		"169.254.1.1": false, "198.18.0.1": false, "255.255.255.255": false, "0.0.0.0": false,
		"2001:db8::1": false, "fe80::1": false, "fd00::1": false, "::1": false,
		"93.184.216.34": true, "81.2.69.160": true, "2a00:1450:4001:81c::200e": true,
	} {
		if got := publishable(netip.MustParseAddr(s)); got != want {
			t.Errorf("publishable(%s) = %v, want %v", s, got, want)
		}
	}
}
