package delivery

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"pimail/internal/directory"
	"pimail/internal/store/sqlite"
)

// queued is one message handed to the recording forwarder.
type queued struct {
	from  string
	rcpts []string
	raw   []byte
}

// recorder is a Forwarder that keeps what it is given; fail makes it
// refuse.
type recorder struct {
	mu   sync.Mutex
	got  []queued
	fail error
}

func (r *recorder) Forward(_ context.Context, from string, rcpts []string, raw []byte) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fail != nil {
		return r.fail
	}
	r.got = append(r.got, queued{from, append([]string(nil), rcpts...), append([]byte(nil), raw...)})
	return nil
}

func testSRS(t *testing.T) *SRS {
	t.Helper()
	s, err := NewSRS([]byte("0123456789abcdef0123456789abcdef"), 0)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestSRSRoundTrip(t *testing.T) {
	s := testSRS(t)
	for _, sender := range []string{"user@remote.test", "First.Last+tag@Sub.Remote.TEST", "a=b=c@remote.test"} {
		addr := s.Forward(sender, "example.com")
		if !strings.HasPrefix(addr, "SRS0=") || !strings.HasSuffix(addr, "@example.com") {
			t.Fatalf("Forward(%q) = %q", sender, addr)
		}
		for _, variant := range []string{addr, strings.ToLower(addr), strings.ToUpper(addr[:strings.LastIndexByte(addr, '@')]) + "@example.com"} {
			got, err := s.Reverse(variant)
			if err != nil {
				t.Fatalf("Reverse(%q): %v", variant, err)
			}
			if !strings.EqualFold(got, sender) {
				t.Fatalf("Reverse(%q) = %q, want %q", variant, got, sender)
			}
		}
	}
	for _, kept := range []string{"", `"john doe"@remote.test`, "postmaster"} {
		if got := s.Forward(kept, "example.com"); got != kept {
			t.Fatalf("%q became %q", kept, got)
		}
	}
}

func TestSRSRefusals(t *testing.T) {
	s := testSRS(t)
	addr := s.Forward("user@remote.test", "example.com")
	local := addr[:strings.LastIndexByte(addr, '@')]
	parts := strings.SplitN(local, "=", 5) // SRS0, hash, tt, domain, local

	other, err := NewSRS([]byte("another secret of 32 bytes......"), 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.Reverse(addr); !errors.Is(err, ErrSRSHash) {
		t.Errorf("other secret: err = %v, want ErrSRSHash", err)
	}
	tampered := "SRS0=" + parts[1] + "=" + parts[2] + "=evil.test=" + parts[4] + "@example.com"
	if _, err := s.Reverse(tampered); !errors.Is(err, ErrSRSHash) {
		t.Errorf("changed domain: err = %v, want ErrSRSHash", err)
	}
	for _, bad := range []string{"user@example.com", "SRS0=abc@example.com", "SRS0=a=b=c@example.com", "SRS0=" + parts[1] + "=" + parts[2] + "=remote.test=@example.com"} {
		if _, err := s.Reverse(bad); err == nil {
			t.Errorf("Reverse(%q) succeeded", bad)
		}
	}

	// Age: 21 days is the limit; the day stamp wraps at 1024 days.
	made := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	s.now = func() time.Time { return made }
	addr = s.Forward("user@remote.test", "example.com")
	for _, c := range []struct {
		after time.Duration
		ok    bool
	}{{0, true}, {20 * 24 * time.Hour, true}, {22 * 24 * time.Hour, false}, {1000 * 24 * time.Hour, false}, {1024 * 24 * time.Hour, true}} {
		s.now = func() time.Time { return made.Add(c.after) }
		_, err := s.Reverse(addr)
		if c.ok && err != nil || !c.ok && !errors.Is(err, ErrSRSExpired) {
			t.Errorf("after %v: err = %v, want ok=%v", c.after, err, c.ok)
		}
	}
}

// TestLoadSRSSecret: the secret is made once and then the store's, also
// for a store opened again (a restart).
func TestLoadSRSSecret(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	st, err := sqlite.Open(dir, sqlite.Options{Logger: quiet(), CollectInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	a, err := LoadSRSSecret(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	b, err := LoadSRSSecret(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	if len(a) != 32 || !bytes.Equal(a, b) {
		t.Fatalf("secret %d bytes, stable=%v", len(a), bytes.Equal(a, b))
	}
	st, err = sqlite.Open(dir, sqlite.Options{Logger: quiet(), CollectInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if c, err := LoadSRSSecret(ctx, st); err != nil || !bytes.Equal(a, c) {
		t.Fatalf("after reopening: %x, %v; want %x", c, err, a)
	}
}

// TestDeliverForwards: an alias with remote targets hands the message, as
// received, to the forwarder with an SRS sender; local targets are stored
// as before; a bounce to the SRS address goes back to the original sender.
func TestDeliverForwards(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	rec := &recorder{}
	srs := testSRS(t)
	f.pipe.WithForwarding(rec, srs)
	msg := []byte(testMessage)

	// Remote only.
	got, err := f.pipe.Deliver(ctx, Envelope{MailFrom: "sender@remote.test", Recipients: []string{"fwd@example.com"}}, msg)
	if err != nil || len(got) != 0 {
		t.Fatalf("remote-only alias: %v %v", got, err)
	}
	if len(rec.got) != 1 {
		t.Fatalf("%d messages forwarded, want 1", len(rec.got))
	}
	q := rec.got[0]
	if !bytes.Equal(q.raw, msg) {
		t.Errorf("forwarded message differs from the one received:\n%s", q.raw)
	}
	if len(q.rcpts) != 1 || q.rcpts[0] != "someone@remote.test" {
		t.Errorf("forwarded to %v", q.rcpts)
	}
	if !strings.HasPrefix(q.from, "SRS0=") || !strings.HasSuffix(q.from, "=remote.test=sender@example.com") {
		t.Errorf("envelope sender %q is not an SRS address at example.com", q.from)
	}

	// Mixed: carol's copy is stored, the remote one forwarded.
	got, err = f.pipe.Deliver(ctx, Envelope{MailFrom: "sender@remote.test", Recipients: []string{"mixed@example.com"}}, msg)
	if err != nil || len(got) != 1 || got[0].AccountID != f.ids["carol@example.com"] || len(rec.got) != 2 {
		t.Fatalf("mixed alias: %v %v, %d forwarded", got, err, len(rec.got))
	}

	// Local and null senders are kept.
	for _, from := range []string{"alice@example.com", ""} {
		if _, err := f.pipe.Deliver(ctx, Envelope{MailFrom: from, Recipients: []string{"fwd@example.com"}}, msg); err != nil {
			t.Fatal(err)
		}
		if last := rec.got[len(rec.got)-1]; last.from != from {
			t.Errorf("sender %q forwarded as %q", from, last.from)
		}
	}

	// A bounce to the SRS address: resolved and sent on, with the null
	// sender, to the original sender.
	res, err := f.pipe.Resolve(q.from)
	if err != nil || len(res.Remote) != 1 || res.Remote[0] != "sender@remote.test" || len(res.Accounts) != 0 {
		t.Fatalf("Resolve(%q) = %+v, %v", q.from, res, err)
	}
	bounce := []byte("From: MAILER-DAEMON@remote.test\r\nSubject: Undelivered\r\n\r\nsorry\r\n")
	n := len(rec.got)
	if _, err := f.pipe.Deliver(ctx, Envelope{Recipients: []string{q.from}}, bounce); err != nil {
		t.Fatalf("bounce to the SRS address: %v", err)
	}
	if len(rec.got) != n+1 || rec.got[n].from != "" || rec.got[n].rcpts[0] != "sender@remote.test" || !bytes.Equal(rec.got[n].raw, bounce) {
		t.Fatalf("bounce forwarded as %+v", rec.got[n:])
	}

	// A forged SRS address is an unknown user.
	forged := "SRS0=aaaaaa=" + q.from[12:]
	if _, err := f.pipe.Resolve(forged); !errors.Is(err, directory.ErrUnknownUser) {
		t.Fatalf("Resolve(forged %q): err = %v, want ErrUnknownUser", forged, err)
	}

	// The forwarder failing fails the delivery, with nothing stored.
	rec.fail = errors.New("disk full")
	before := len(f.inbox(t, "carol@example.com"))
	if _, err := f.pipe.Deliver(ctx, Envelope{MailFrom: "sender@remote.test", Recipients: []string{"mixed@example.com"}}, msg); err == nil {
		t.Fatal("delivery succeeded although the forwarder failed")
	}
	if after := len(f.inbox(t, "carol@example.com")); after != before {
		t.Fatalf("carol has %d messages after a failed delivery, had %d", after, before)
	}
}

// A message to be forwarded that carries more than MaxHops Received
// fields is refused with 554 5.4.6 (a mail loop), and nothing is queued.
func TestForwardLoopRefused(t *testing.T) {
	f := newFixture(t)
	rec := &recorder{}
	f.pipe.WithForwarding(rec, testSRS(t))
	hops := strings.Repeat("Received: from a by b; Mon, 2 Jan 2006 15:04:05 +0000\r\n", MaxHops+1)
	msg := []byte(hops + "From: x@remote.test\r\nSubject: loop\r\n\r\nReceived: in the body does not count\r\n")
	_, err := f.pipe.Deliver(context.Background(), Envelope{MailFrom: "x@remote.test", Recipients: []string{"fwd@example.com"}}, msg)
	var re *RejectError
	if !errors.As(err, &re) || re.Code != 554 || re.Enhanced != [3]int{5, 4, 6} {
		t.Fatalf("looping message: err = %v, want 554 5.4.6", err)
	}
	if len(rec.got) != 0 {
		t.Fatalf("a looping message was queued")
	}
	if n := countReceived([]byte(hops[:len(hops)/(MaxHops+1)*MaxHops] + "\r\nReceived: x\r\n")); n != MaxHops {
		t.Fatalf("countReceived = %d, want %d (fields after the header do not count)", n, MaxHops)
	}
}
