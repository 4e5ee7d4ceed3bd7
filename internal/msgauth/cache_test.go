package msgauth

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/miekg/dns"
)

func TestCacheTTLAndBound(t *testing.T) {
	z := newZone(t,
		"short.test. 30 IN TXT \"v=spf1 -all\"",
		"long.test. 86400 IN TXT \"v=spf1 -all\"",
	)
	z.failing("down.test")
	now := time.Unix(1_000_000, 0)
	c := NewCache(z.resolver(t), 3)
	c.now = func() time.Time { return now }
	ctx := context.Background()
	ask := func(name string) {
		t.Helper()
		_, _, _ = c.LookupTXT(ctx, name)
	}

	ask("short.test")
	ask("Short.Test.") // same name
	ask("long.test")
	ask("down.test")
	failed := z.count("down.test", dns.TypeTXT)
	ask("down.test") // failures are not kept
	if n := z.count("short.test", dns.TypeTXT); n != 1 {
		t.Fatalf("short.test asked %d times", n)
	}
	if n := z.count("down.test", dns.TypeTXT); failed == 0 || n != 2*failed {
		t.Fatalf("failing down.test: %d queries for the first lookup, %d for both; a failure was kept", failed, n)
	}

	now = now.Add(31 * time.Second) // past short.test's TTL
	ask("short.test")
	if n := z.count("short.test", dns.TypeTXT); n != 2 {
		t.Fatalf("expired short.test asked %d times, want 2", n)
	}
	now = now.Add(2 * time.Hour) // past the one-hour cap, below the TTL
	ask("long.test")
	if n := z.count("long.test", dns.TypeTXT); n != 2 {
		t.Fatalf("long.test asked %d times after the cap, want 2", n)
	}

	for i := range 10 {
		ask(fmt.Sprintf("n%d.test", i)) // negative answers, each kept
	}
	c.mu.Lock()
	size := len(c.entries)
	c.mu.Unlock()
	if size > 3 {
		t.Fatalf("cache holds %d entries, bound 3", size)
	}
}
