package imapd

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"pimail/internal/store"
)

// fullStore fails every Append as a full disk does.
type fullStore struct{ store.Store }

func (fullStore) Append(context.Context, int64, []byte, store.Flags, []string, time.Time) (store.Delivered, error) {
	return store.Delivered{}, fmt.Errorf("sqlite store: write blob: %w",
		&os.PathError{Op: "write", Path: "/var/lib/pimail/blobs/tmp/x", Err: syscall.ENOSPC})
}

// TestAppendOnFullDisk: a full disk is NO [OVERQUOTA] with a clear text,
// not NO [SERVERBUG], and the session goes on.
func TestAppendOnFullDisk(t *testing.T) {
	base := newTestEnv(t, Config{})
	srv := New(Config{AllowInsecureAuth: true}, fullStore{base.st}, testAuth{base.st}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	defer srv.Close()
	e := &testEnv{t: t, st: base.st, srv: srv, addr: ln.Addr().String(), acct: base.acct}
	c := e.raw()
	c.login()
	res := c.cmd("a", "APPEND INBOX {5+}\r\nhello")
	got := last(res)
	if !strings.HasPrefix(got, "a NO [OVERQUOTA] ") || strings.Contains(got, "/var/lib") {
		t.Fatalf("APPEND on a full disk: %q; want NO [OVERQUOTA] without internal detail", got)
	}
	if res := c.cmd("n", "NOOP"); last(res) != "n OK NOOP completed" {
		t.Fatalf("session after a full disk: %q", res)
	}
}
