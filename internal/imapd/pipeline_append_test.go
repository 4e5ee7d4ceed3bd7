package imapd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"pimail/internal/store"
)

// countingStore counts the store's append calls, and can make AppendBatch
// fail, to see how pipelined APPENDs reach the store.
type countingStore struct {
	store.Store
	singles, batches atomic.Int32
	failBatch        atomic.Bool
}

func (c *countingStore) Append(ctx context.Context, mailboxID int64, raw []byte, flags store.Flags, kws []string, date time.Time) (store.Delivered, error) {
	c.singles.Add(1)
	return c.Store.Append(ctx, mailboxID, raw, flags, kws, date)
}

func (c *countingStore) AppendBatch(ctx context.Context, mailboxID int64, msgs []store.AppendMessage) ([]store.Delivered, error) {
	c.batches.Add(1)
	if c.failBatch.Load() {
		return nil, errors.New("injected batch failure")
	}
	return c.Store.AppendBatch(ctx, mailboxID, msgs)
}

// TestPipelinedAppends: APPENDs sent without waiting for their responses
// are stored together (one AppendBatch per run of APPENDs into one
// mailbox) and answered in order, each as if alone: its own APPENDUID, its
// own TRYCREATE, OVERQUOTA (counting the APPENDs before it) or BAD. A
// command that is not an APPEND ends the group and is answered after it.
// When the batch fails, each APPEND is stored on its own.
func TestPipelinedAppends(t *testing.T) {
	e := newTestEnv(t, Config{})
	ctx := context.Background()
	if err := e.st.SetQuota(ctx, e.acct.Address, 10*1024); err != nil {
		t.Fatal(err)
	}
	cs := &countingStore{Store: e.st}
	srv := New(Config{AllowInsecureAuth: true}, cs, testAuth{e.st}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	e.addr = ln.Addr().String()

	r := e.raw()
	r.login()
	r.cmd("s", "SELECT INBOX")
	small := "Subject: s\r\n\r\nok\r\n"
	big := "Subject: b\r\n\r\n" + strings.Repeat("x", 6000) + "\r\n"
	lit := func(m string) string { return fmt.Sprintf("{%d+}\r\n%s", len(m), m) }
	r.send("a1 APPEND INBOX " + lit(small) + "\r\n" +
		"a2 APPEND Nope " + lit(small) + "\r\n" +
		"a3 APPEND INBOX (\\Flagged) " + lit(big) + "\r\n" +
		"a4 append INBOX " + lit(big) + "\r\n" + // over the quota after a3
		"a5 APPEND INBOX\r\n" + // no message
		"a6 APPEND Archive " + lit(small) + "\r\n" +
		"a7 APPEND INBOX (\\Seen) " + lit(small) + " (\\Seen) " + lit(small) + "\r\n" +
		"a8 NOOP\r\n")
	var tagged []string
	for _, l := range r.until("a8 ") {
		if !strings.HasPrefix(l, "*") {
			tagged = append(tagged, l)
		}
	}
	inbox, err := e.st.MailboxStatus(ctx, e.acct.ID, "INBOX")
	if err != nil {
		t.Fatal(err)
	}
	archive, err := e.st.MailboxStatus(ctx, e.acct.ID, "Archive")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		fmt.Sprintf("a1 OK [APPENDUID %d 1]", inbox.UIDValidity),
		"a2 NO [TRYCREATE]",
		fmt.Sprintf("a3 OK [APPENDUID %d 2]", inbox.UIDValidity),
		"a4 NO [OVERQUOTA]",
		"a5 BAD",
		fmt.Sprintf("a6 OK [APPENDUID %d 1]", archive.UIDValidity),
		fmt.Sprintf("a7 OK [APPENDUID %d 3:4]", inbox.UIDValidity),
		"a8 OK",
	}
	if len(tagged) != len(want) {
		t.Fatalf("tagged responses %q, want %d", tagged, len(want))
	}
	for i := range want {
		if !strings.HasPrefix(tagged[i], want[i]) {
			t.Errorf("response %d: %q, want %q…", i+1, tagged[i], want[i])
		}
	}
	// a1 and a3 in one batch, a6 alone, a7 (two messages) in one batch.
	if b, s := cs.batches.Load(), cs.singles.Load(); b != 2 || s != 1 {
		t.Errorf("store calls: %d AppendBatch, %d Append; want 2 and 1", b, s)
	}
	res := r.cmd("f", "UID FETCH 1:* (FLAGS RFC822.SIZE)")
	if len(res) != 5 || !strings.Contains(res[1], fmt.Sprintf(`UID 2 FLAGS (\Flagged \Recent) RFC822.SIZE %d`, len(big))) ||
		!strings.Contains(res[3], `UID 4 FLAGS (\Seen \Recent)`) {
		t.Fatalf("INBOX after the pipelined APPENDs: %q", res)
	}

	// A failed batch: each APPEND is stored on its own.
	cs.failBatch.Store(true)
	r.send("b1 APPEND INBOX " + lit(small) + "\r\nb2 APPEND INBOX " + lit(small) + "\r\n")
	res = r.until("b2 ")
	if l := last(res); !strings.HasPrefix(l, fmt.Sprintf("b2 OK [APPENDUID %d 6]", inbox.UIDValidity)) ||
		!strings.Contains(strings.Join(res, "\n"), fmt.Sprintf("b1 OK [APPENDUID %d 5]", inbox.UIDValidity)) {
		t.Fatalf("APPENDs after a failed batch: %q", res)
	}
	if b, s := cs.batches.Load(), cs.singles.Load(); b != 3 || s != 3 {
		t.Errorf("store calls after the failed batch: %d AppendBatch, %d Append; want 3 and 3", b, s)
	}
}
