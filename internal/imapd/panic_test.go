package imapd

import (
	"context"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"

	"pimail/internal/store"
)

// panickyStore panics in Mailboxes, as a bug in a handler would.
type panickyStore struct{ store.Store }

func (panickyStore) Mailboxes(context.Context, int64) ([]store.Mailbox, error) {
	panic("boom")
}

func TestPanicEndsOnlyThatSession(t *testing.T) {
	base := newTestEnv(t, Config{})
	srv := New(Config{AllowInsecureAuth: true}, panickyStore{base.st}, testAuth{base.st}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	defer srv.Close()
	e := &testEnv{t: t, st: base.st, srv: srv, addr: ln.Addr().String(), acct: base.acct}
	a, b := e.raw(), e.raw()
	a.login()
	b.login()
	a.send("p LIST \"\" *\r\n")
	if l := a.line(); !strings.HasPrefix(l, "* BYE") {
		t.Fatalf("after panic: %q", l)
	}
	if res := b.cmd("n", "NOOP"); last(res) != "n OK NOOP completed" {
		t.Fatalf("other session affected: %q", res)
	}
	c := e.raw()
	c.login()
}
