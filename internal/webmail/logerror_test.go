package webmail

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"syscall"
	"testing"
)

// brokenPipe is a response writer whose client has gone.
type brokenPipe struct{ h http.Header }

func (b *brokenPipe) Header() http.Header {
	if b.h == nil {
		b.h = http.Header{}
	}
	return b.h
}
func (b *brokenPipe) WriteHeader(int) {}
func (b *brokenPipe) Write([]byte) (int, error) {
	return 0, &net.OpError{Op: "write", Net: "tcp", Err: os.NewSyscallError("write", syscall.EPIPE)}
}

// TestClientGoneIsNoError: a browser that leaves mid-request (the write
// fails with a broken pipe, or the request is cancelled) is not logged at
// ERROR (issue 24); a real fault still is.
func TestClientGoneIsNoError(t *testing.T) {
	f := newFixture(t)
	var logs bytes.Buffer
	f.srv.log = slog.New(slog.NewTextHandler(&logs, nil))
	r := httptest.NewRequest("GET", "/", nil)
	f.srv.page(&brokenPipe{}, r, "login", map[string]any{})
	ctx, cancel := context.WithCancel(r.Context())
	cancel()
	f.srv.httpError(httptest.NewRecorder(), r.WithContext(ctx), 500, "x", context.Canceled)
	if strings.Contains(logs.String(), "level=ERROR") {
		t.Errorf("a client that went away is logged as an error:\n%s", logs.String())
	}
	f.srv.httpError(httptest.NewRecorder(), r, 500, "x", errors.New("disk on fire"))
	if !strings.Contains(logs.String(), "level=ERROR") {
		t.Errorf("a server fault is not logged as an error:\n%s", logs.String())
	}
}
