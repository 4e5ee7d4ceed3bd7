package webmail

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
)

// fakeOutbound records what the webmail queues.
type fakeOutbound struct {
	mu    sync.Mutex
	calls []queued
	err   error
}

type queued struct {
	account int64
	from    string
	rcpts   []string
	raw     string
}

func (q *fakeOutbound) Enqueue(_ context.Context, accountID int64, from string, rcpts []string, raw []byte) (int64, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.err != nil {
		return 0, q.err
	}
	q.calls = append(q.calls, queued{accountID, from, slices.Clone(rcpts), string(raw)})
	return int64(len(q.calls)), nil
}

func TestSendRemoteThroughQueue(t *testing.T) {
	f := newFixture(t)
	q := &fakeOutbound{}
	f.srv.cfg.Outbound = q
	c := f.client(t)
	c.login("alice@example.com")
	resp, body := c.post("/compose", url.Values{"to": {"bob@example.com, Some One <someone@elsewhere.test>"},
		"cc": {"x@other.test"}, "bcc": {"hidden@far.test"}, "subject": {"hello world"}, "body": {"hi"}, "action": {"send"}})
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("send: %d\n%s", resp.StatusCode, body)
	}
	if len(q.calls) != 1 {
		t.Fatalf("queued %d times, want once", len(q.calls))
	}
	got := q.calls[0]
	if got.account != f.ids["alice@example.com"] || got.from != "alice@example.com" ||
		!slices.Equal(got.rcpts, []string{"someone@elsewhere.test", "x@other.test", "hidden@far.test"}) {
		t.Fatalf("queued %+v", got)
	}
	for _, h := range []string{"Message-ID", "Date", "Received"} {
		if !hasHeader(got.raw, h) {
			t.Errorf("queued message lacks %s:\n%s", h, got.raw)
		}
	}
	if hasHeader(got.raw, "Bcc") || !strings.Contains(got.raw, "\r\nFrom: <alice@example.com>\r\n") {
		t.Errorf("queued header wrong:\n%s", got.raw)
	}
	if n := len(f.metas(t, "bob@example.com", "INBOX")); n != 1 {
		t.Errorf("local recipient got %d messages", n)
	}
	if n := len(f.metas(t, "alice@example.com", "Sent")); n != 1 {
		t.Errorf("Sent has %d copies, want 1", n)
	}

	// Only remote recipients: no local delivery, still one Sent copy.
	resp, body = c.post("/compose", url.Values{"to": {"someone@elsewhere.test"}, "subject": {"x"}, "body": {"y"}, "action": {"send"}})
	if resp.StatusCode != http.StatusSeeOther || len(q.calls) != 2 || len(f.metas(t, "alice@example.com", "Sent")) != 2 {
		t.Fatalf("remote-only send: %d, %d queued\n%s", resp.StatusCode, len(q.calls), body)
	}

	// Routing tricks are refused before anything is sent.
	resp, body = c.post("/compose", url.Values{"to": {"a%b@elsewhere.test"}, "subject": {"x"}, "body": {"y"}, "action": {"send"}})
	expectStatus(t, resp, http.StatusBadRequest, body)
	if len(q.calls) != 2 {
		t.Fatal("refused address was queued")
	}

	// A queue failure is an error and leaves no Sent copy.
	q.err = errors.New("disk full")
	resp, body = c.post("/compose", url.Values{"to": {"someone@elsewhere.test"}, "subject": {"x"}, "body": {"y"}, "action": {"send"}})
	expectStatus(t, resp, http.StatusInternalServerError, body)
	if strings.Contains(body, "disk full") || len(f.metas(t, "alice@example.com", "Sent")) != 2 {
		t.Fatal("queue failure leaked or filed a Sent copy")
	}
}
