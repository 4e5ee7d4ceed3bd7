package blackbox

import (
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	_ "modernc.org/sqlite"
)

const (
	crashMessages = 200
	crashConns    = 10
	crashKillAt   = 40 // acknowledged messages before the kill
)

// TestCrashDuringDelivery kills the server with SIGKILL while 200 messages
// are being delivered over 10 connections. After a restart (which must
// need no repair) every message that got a 250 is in the mailbox, whole,
// exactly once, and the server takes new mail.
func TestCrashDuringDelivery(t *testing.T) {
	srv := NewServer(t, "[spam]\nenabled = false\n") // not about spam: every message to INBOX
	users := srv.AddAccounts("crash")
	srv.Start()

	want := make([][]byte, crashMessages)
	for i := range want {
		want[i] = generatedMessage("crash", i, 3000+37*i)
	}
	var (
		acked   [crashMessages]atomic.Bool
		nAcked  atomic.Int32
		killed  = make(chan struct{})
		killOne sync.Once
		wg      sync.WaitGroup
	)
	kill := func() {
		killOne.Do(func() {
			srv.Kill9()
			close(killed)
		})
	}
	for c := range crashConns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			crashSender(srv.SMTP, users[0], c, crashConns, want, func(i int) {
				acked[i].Store(true)
				if nAcked.Add(1) == crashKillAt {
					kill()
				}
			})
		}()
	}
	wg.Wait()
	select {
	case <-killed:
	default:
		t.Fatalf("only %d messages were acknowledged before the senders stopped; the server was not killed:\n%s", nAcked.Load(), srv.Logs())
	}
	total := int(nAcked.Load())
	t.Logf("killed with SIGKILL after %d acknowledgements; %d acknowledged in all", crashKillAt, total)
	if total == crashMessages {
		t.Errorf("all %d messages were acknowledged: the kill did not hit deliveries in flight", total)
	}

	srv.Start() // must come up on its own: no manual repair
	c := imapLogin(t, srv.IMAP, users[0], nil)
	got := fetchAll(t, c, "INBOX")
	seen := map[int]string{}
	for name, msg := range got {
		i, err := crashIndex(msg)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if prev, dup := seen[i]; dup {
			t.Errorf("message %d is in the mailbox twice (%s and %s)", i, prev, name)
		}
		seen[i] = name
		if err := checkDelivered(msg, want[i], "\r\n"); err != nil {
			t.Errorf("message %d (%s, acknowledged %v) is damaged: %v", i, name, acked[i].Load(), err)
		}
	}
	lost := 0
	for i := range want {
		if _, ok := seen[i]; acked[i].Load() && !ok {
			lost++
			if lost <= 10 {
				t.Errorf("message %d got 250 but is not in the mailbox after the crash", i)
			}
		}
	}
	if lost > 0 {
		t.Errorf("%d acknowledged messages lost", lost)
	}
	t.Logf("after restart: %d messages in INBOX, %d acknowledged before the crash", len(got), total)

	s := dialSMTP(t, srv.SMTP)
	s.send("sender@example.org", users, generatedMessage("after-crash", 1, 1000))
	if n := countBlobs(t, srv.Data); n < len(got)+1 {
		t.Errorf("%d blob files for %d distinct stored messages", n, len(got)+1)
	}
}

// crashSender sends messages first, first+stride, ... over one
// connection and calls ok(i) for each acknowledged one; it stops at the
// first error (the server was killed).
func crashSender(addr, rcpt string, first, stride int, msgs [][]byte, ok func(int)) {
	s, err := rawSMTP(addr)
	if err != nil {
		return
	}
	defer s.Close()
	for i := first; i < len(msgs); i += stride {
		if err := s.transaction("sender@example.org", []string{rcpt}, msgs[i]); err != nil {
			return
		}
		ok(i)
		if code, _, err := s.cmd("RSET"); err != nil || code != 250 {
			return
		}
	}
}

// crashIndex reads the message number from a "Subject: crash N" message.
func crashIndex(msg []byte) (int, error) {
	subj := headerValue(msg, "Subject")
	n, ok := strings.CutPrefix(subj, "crash ")
	if !ok {
		return 0, fmt.Errorf("unexpected message with Subject %q", subj)
	}
	i, err := strconv.Atoi(n)
	if err != nil || i < 0 || i >= crashMessages {
		return 0, fmt.Errorf("bad Subject %q", subj)
	}
	return i, nil
}

// countBlobs counts the stored message copies (see blobStats).
func countBlobs(t *testing.T, data string) int {
	n, _ := blobStats(t, data)
	return n
}

// blobStats returns the number and total size of the stored message
// copies: the regular files under DATA/blobs (not counting DATA/blobs/tmp)
// and the messages the database keeps itself (table blob_data).
func blobStats(t *testing.T, data string) (int, int64) {
	t.Helper()
	root := filepath.Join(data, "blobs")
	var n int
	var size int64
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			if os.IsNotExist(err) && p == root {
				return filepath.SkipAll
			}
			return err
		}
		if d.IsDir() && p == filepath.Join(root, "tmp") {
			return filepath.SkipDir
		}
		if d.Type().IsRegular() {
			fi, err := d.Info()
			if err != nil {
				return err
			}
			n++
			size += fi.Size()
		}
		return nil
	})
	if err != nil {
		t.Fatalf("walk %s: %v", root, err)
	}
	db, err := sql.Open("sqlite", filepath.Join(data, "pimail.db")+"?_pragma=query_only(1)&_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatalf("open database: %v", err)
	}
	defer db.Close()
	var rows int
	var bytes int64
	if err := db.QueryRow("SELECT count(*), coalesce(sum(length(raw)), 0) FROM blob_data").Scan(&rows, &bytes); err != nil {
		t.Fatalf("count the messages in the database: %v", err)
	}
	return n + rows, size + bytes
}
