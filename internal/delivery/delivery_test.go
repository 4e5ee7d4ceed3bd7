package delivery

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"pimail/internal/directory"
	"pimail/internal/message"
	"pimail/internal/store"
	"pimail/internal/store/sqlite"
)

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

type fixture struct {
	st   *sqlite.Store
	dir  *directory.View
	pipe *Pipeline
	ids  map[string]int64 // account address → ID
}

func newFixture(t testing.TB) *fixture {
	t.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(t.TempDir(), sqlite.Options{Logger: quiet(), CollectInterval: -1})
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() { st.Close() })
	f := &fixture{st: st, ids: map[string]int64{}}
	if _, err := st.AddDomain(ctx, "example.com"); err != nil {
		t.Fatal(err)
	}
	for _, a := range []string{"alice@example.com", "bob@example.com", "carol@example.com"} {
		acc, err := st.AddAccount(ctx, a, "")
		if err != nil {
			t.Fatalf("add account %s: %v", a, err)
		}
		f.ids[a] = acc.ID
	}
	if err := st.AddAlias(ctx, "team@example.com", []string{"alice@example.com", "bob@example.com"}); err != nil {
		t.Fatal(err)
	}
	if err := st.AddAlias(ctx, "fwd@example.com", []string{"someone@remote.test"}); err != nil {
		t.Fatal(err)
	}
	if err := st.AddAlias(ctx, "mixed@example.com", []string{"carol@example.com", "someone@remote.test"}); err != nil {
		t.Fatal(err)
	}
	dctx, cancel := context.WithCancel(ctx)
	t.Cleanup(cancel)
	f.dir = directory.New(st, quiet())
	if err := f.dir.Start(dctx); err != nil {
		t.Fatal(err)
	}
	f.pipe = New(st, f.dir, quiet())
	return f
}

const testMessage = "Received: from mx.remote.test ([192.0.2.1])\r\n\tby mail.example.com with ESMTP id x; Mon, 2 Jan 2006 15:04:05 +0000\r\n" +
	"From: Sender <sender@remote.test>\r\nTo: team@example.com\r\nSubject: hello there\r\n" +
	"Message-ID: <m1@remote.test>\r\nDate: Mon, 2 Jan 2006 15:04:05 +0000\r\n\r\nBody line.\r\n"

// inbox returns the INBOX messages of an account.
func (f *fixture) inbox(t *testing.T, addr string) []store.MessageMeta {
	t.Helper()
	ctx := context.Background()
	mb, err := f.st.Mailbox(ctx, f.ids[addr], "INBOX")
	if err != nil {
		t.Fatalf("INBOX of %s: %v", addr, err)
	}
	msgs, err := f.st.Fetch(ctx, mb.ID, nil, store.FetchOptions{Parsed: true})
	if err != nil {
		t.Fatalf("fetch %s: %v", addr, err)
	}
	return msgs
}

func TestDeliverOneBlobManyRecipients(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	before, err := f.st.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	env := Envelope{
		MailFrom: "sender@remote.test",
		// alice three times over (direct, alias, subaddress, case): one copy.
		Recipients: []string{"alice@example.com", "team@example.com", "Carol@Example.com", "ALICE+lists@example.com"},
		RemoteIP:   "192.0.2.1",
	}
	got, err := f.pipe.Deliver(ctx, env, []byte(testMessage))
	if err != nil {
		t.Fatalf("Deliver: %v", err)
	}
	var accounts []int64
	for _, d := range got {
		accounts = append(accounts, d.AccountID)
	}
	slices.Sort(accounts)
	want := []int64{f.ids["alice@example.com"], f.ids["bob@example.com"], f.ids["carol@example.com"]}
	slices.Sort(want)
	if !slices.Equal(accounts, want) {
		t.Fatalf("delivered to %v, want %v", accounts, want)
	}
	after, err := f.st.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if after.Blobs-before.Blobs != 1 || after.Messages-before.Messages != 3 {
		t.Fatalf("stored %d blobs and %d rows, want 1 and 3", after.Blobs-before.Blobs, after.Messages-before.Messages)
	}

	for _, addr := range []string{"alice@example.com", "bob@example.com", "carol@example.com"} {
		msgs := f.inbox(t, addr)
		if len(msgs) != 1 {
			t.Fatalf("%s has %d messages, want 1", addr, len(msgs))
		}
		raw, err := f.st.ReadBlob(ctx, msgs[0].BlobID)
		if err != nil {
			t.Fatal(err)
		}
		wantRaw := "Return-Path: <sender@remote.test>\r\n" + testMessage
		if string(raw) != wantRaw {
			t.Fatalf("stored message:\n%q\nwant\n%q", raw, wantRaw)
		}
		if msgs[0].Parsed == nil || msgs[0].Parsed.Envelope.Subject != "hello there" {
			t.Fatalf("parsed description missing or wrong: %+v", msgs[0].Parsed)
		}
	}
}

func TestDeliverNullReversePath(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	if _, err := f.pipe.Deliver(ctx, Envelope{Recipients: []string{"bob@example.com"}}, []byte(testMessage)); err != nil {
		t.Fatal(err)
	}
	msgs := f.inbox(t, "bob@example.com")
	raw, err := f.st.ReadBlob(ctx, msgs[0].BlobID)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(raw, []byte("Return-Path: <>\r\nReceived:")) {
		t.Fatalf("stored message starts %q", raw[:40])
	}
}

func TestDeliverRecipientErrors(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	msg := []byte(testMessage)
	if _, err := f.pipe.Deliver(ctx, Envelope{Recipients: []string{"nobody@example.com", "x@remote.test"}}, msg); !errors.Is(err, ErrNoRecipients) {
		t.Fatalf("unknown recipients: err = %v, want ErrNoRecipients", err)
	}
	if _, err := f.pipe.Deliver(ctx, Envelope{Recipients: []string{"fwd@example.com"}}, msg); !errors.Is(err, ErrForwardingUnavailable) {
		t.Fatalf("remote-only alias: err = %v, want ErrForwardingUnavailable", err)
	}
	// A vanished recipient beside a valid one: the valid one gets it.
	got, err := f.pipe.Deliver(ctx, Envelope{Recipients: []string{"nobody@example.com", "mixed@example.com"}}, msg)
	if err != nil || len(got) != 1 || got[0].AccountID != f.ids["carol@example.com"] {
		t.Fatalf("partial: %v %v", got, err)
	}
	st, err := f.st.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Messages != 1 {
		t.Fatalf("%d messages stored, want 1", st.Messages)
	}
}

// failingStore makes Deliver fail, as a full disk would.
type failingStore struct{ *sqlite.Store }

func (failingStore) Deliver(context.Context, store.Delivery) ([]store.Delivered, error) {
	return nil, errors.New("disk I/O error")
}

func TestDeliverStoreError(t *testing.T) {
	f := newFixture(t)
	p := New(failingStore{f.st}, f.dir, quiet())
	_, err := p.Deliver(context.Background(), Envelope{ID: "abc", Recipients: []string{"bob@example.com"}}, []byte(testMessage))
	if err == nil || errors.Is(err, ErrNoRecipients) || !strings.Contains(err.Error(), "disk I/O error") {
		t.Fatalf("err = %v, want the wrapped store error", err)
	}
}

func TestNewID(t *testing.T) {
	seen := map[string]bool{}
	prev := ""
	for i := 0; i < 1000; i++ {
		id := NewID()
		if len(id) != 16 || strings.Trim(id, "0123456789abcdefghijklmnopqrstuv") != "" {
			t.Fatalf("bad id %q", id)
		}
		if seen[id] {
			t.Fatalf("duplicate id %q", id)
		}
		if id[:9] < prev {
			t.Fatalf("ids not in time order: %q after %q", id, prev)
		}
		prev = id[:9]
		seen[id] = true
	}
}

func TestPrependReturnPathSanitises(t *testing.T) {
	got := string(prependReturnPath("a\r\nX-Evil: 1<>@b", []byte("X: y\r\n\r\n"), 0))
	if got != "Return-Path: <aX-Evil: 1@b>\r\nX: y\r\n\r\n" {
		t.Fatalf("got %q", got)
	}
}

// TestInsertHeaders inserts fields after Return-Path in place (with room)
// and by a copy (without), and checks that the moved offsets are those of
// the result parsed afresh, down to the parts of an enclosed message.
func TestInsertHeaders(t *testing.T) {
	raw := []byte("Received: by x\r\nSubject: s\r\nContent-Type: multipart/mixed; boundary=b\r\n\r\n" +
		"--b\r\nContent-Type: text/plain\r\n\r\nhello\r\n--b\r\nContent-Type: message/rfc822\r\n\r\n" +
		"Subject: inner\r\nContent-Type: multipart/alternative; boundary=c\r\n\r\n" +
		"--c\r\nContent-Type: text/plain\r\n\r\ninner text\r\n--c--\r\n--b--\r\n")
	fields := "X-Spam-Status: No\r\nX-Virus-Status: Clean\r\n"
	want := "Return-Path: <a@b>\r\n" + fields + string(raw)
	for _, room := range []int{0, len(fields), filterRoom} {
		full := prependReturnPath("a@b", raw, room)
		before := &full[0]
		parsed := message.Parse(full)
		got := insertHeaders(full, parsed, fields)
		if string(got) != want {
			t.Fatalf("room %d: got %q", room, got)
		}
		if inPlace := &got[0] == before; inPlace != (room >= len(fields)) {
			t.Errorf("room %d: in place %v", room, inPlace)
		}
		gotJSON, _ := json.Marshal(parsed.Body)
		wantJSON, _ := json.Marshal(message.Parse(got).Body)
		if !bytes.Equal(gotJSON, wantJSON) {
			t.Errorf("room %d: offsets\n%s\nwant\n%s", room, gotJSON, wantJSON)
		}
	}
}

func TestMinimalParsed(t *testing.T) {
	raw := []byte("A: b\r\n\r\nline1\r\nline2\r\n")
	p := minimalParsed(raw)
	if p.Body.BodyStart != 8 || p.Body.End != int64(len(raw)) || p.Body.Lines != 2 || p.Body.Size != 14 {
		t.Fatalf("got %+v", p.Body)
	}
	p = minimalParsed([]byte("no header end"))
	if p.Body.BodyStart != 13 || p.Body.Size != 0 {
		t.Fatalf("got %+v", p.Body)
	}
}
