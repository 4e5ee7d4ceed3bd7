package sqlite

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"pimail/internal/store"
)

// deliverN delivers n distinct messages to the account's INBOX.
func deliverN(t *testing.T, s *Store, a store.Account, from, n int) []store.Delivered {
	t.Helper()
	var out []store.Delivered
	for i := from; i < from+n; i++ {
		ds, err := s.Deliver(context.Background(), store.Delivery{Raw: testMsg(i), Recipients: []store.Recipient{{AccountID: a.ID}}})
		if err != nil {
			t.Fatalf("Deliver: %v", err)
		}
		out = append(out, ds...)
	}
	return out
}

// expungeUIDs deletes the given messages (rows only; the collector is not run).
func expungeUIDs(t *testing.T, s *Store, mailboxID int64, uids ...uint32) {
	t.Helper()
	ctx := context.Background()
	set := store.UIDSet{}
	for _, u := range uids {
		set = append(set, store.UIDRange{Start: u, Stop: u})
	}
	if _, err := s.StoreFlags(ctx, mailboxID, set, store.FlagsAdd, store.FlagDeleted, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Expunge(ctx, mailboxID, set); err != nil {
		t.Fatal(err)
	}
}

func verifyClean(t *testing.T, dir string) VerifyReport {
	t.Helper()
	rep, err := VerifyDir(context.Background(), dir)
	if err != nil {
		t.Fatalf("VerifyDir %s: %v", dir, err)
	}
	if rep.Damaged() {
		t.Fatalf("VerifyDir %s found damage:\n%s", dir, strings.Join(rep.Problems, "\n"))
	}
	return rep
}

func TestSnapshotIsCleanCopy(t *testing.T) {
	for _, copyFiles := range []bool{false, true} {
		t.Run(map[bool]string{false: "link", true: "copy"}[copyFiles], func(t *testing.T) {
			s := openFileTest(t)
			a := mustAccount(t, s, "u@example.org")
			ds := deliverN(t, s, a, 0, 30)
			expungeUIDs(t, s, ds[0].MailboxID, ds[0].UID, ds[1].UID, ds[2].UID)

			out := filepath.Join(t.TempDir(), "snap")
			st, err := s.Snapshot(context.Background(), out, SnapshotOptions{Copy: copyFiles})
			if err != nil {
				t.Fatalf("Snapshot: %v", err)
			}
			if st.Blobs != 27 || st.Attempts != 1 || st.Locked {
				t.Errorf("stats %+v: want 27 blobs in one unlocked attempt", st)
			}
			if copyFiles && st.Copied != 27 || !copyFiles && st.Linked != 27 {
				t.Errorf("stats %+v: files not held the asked way", st)
			}
			live := verifyClean(t, s.Dir())
			if live.Pending != 3 || live.MailRows != 27 {
				t.Errorf("live store: %+v, want 3 pending blobs and 27 mail rows", live)
			}
			rep := verifyClean(t, out)
			if rep.Blobs != 27 || rep.MailRows != 27 || rep.Pending != 0 || len(rep.Orphans) != 0 {
				t.Errorf("snapshot: %+v, want 27 blobs and rows, nothing pending or orphaned", rep)
			}
			if _, err := os.Stat(filepath.Join(out, "index.db")); err == nil {
				t.Errorf("the derived full-text index was copied")
			}
			// The copy opens as a store and serves the messages.
			c, err := Open(out, testOptions())
			if err != nil {
				t.Fatalf("open snapshot: %v", err)
			}
			defer c.Close()
			ms, err := c.UIDs(context.Background(), ds[0].MailboxID)
			if err != nil || len(ms) != 27 {
				t.Fatalf("snapshot INBOX: %d messages, %v; want 27", len(ms), err)
			}
			for _, m := range ms {
				if _, err := c.ReadBlob(context.Background(), m.BlobID); err != nil {
					t.Fatalf("UID %d: %v", m.UID, err)
				}
			}
		})
	}
}

func TestSnapshotRefusesNonEmptyDir(t *testing.T) {
	s := openTest(t)
	out := t.TempDir()
	if err := os.WriteFile(filepath.Join(out, "x"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Snapshot(context.Background(), out, SnapshotOptions{}); err == nil || !strings.Contains(err.Error(), "not empty") {
		t.Fatalf("Snapshot into a non-empty directory: %v, want refusal", err)
	}
}

// TestSnapshotRetriesWhenCollected delivers a message after the first pass
// and collects it right after the database copy, so the copy references a
// file that is gone: the attempt must be repeated, and the final snapshot
// must be complete. When that happens on every unlocked attempt, the last
// one holds the write lock.
func TestSnapshotRetriesWhenCollected(t *testing.T) {
	for _, unlucky := range []int{1, 2} {
		s := openFileTest(t)
		a := mustAccount(t, s, "u@example.org")
		deliverN(t, s, a, 0, 5)
		next := 100
		var pending []store.Delivered
		unluckyLeft := unlucky
		snapshotTestHook = func(stage string, locked bool) {
			if locked || unluckyLeft == 0 {
				return
			}
			switch stage {
			case "before-copy":
				pending = deliverN(t, s, a, next, 1)
				next++
			case "after-copy":
				d := pending[0]
				expungeUIDs(t, s, d.MailboxID, d.UID)
				if err := s.collectOnce(); err != nil {
					t.Errorf("collect: %v", err)
				}
				unluckyLeft--
			}
		}
		out := filepath.Join(t.TempDir(), "snap")
		st, err := s.Snapshot(context.Background(), out, SnapshotOptions{Attempts: 2})
		snapshotTestHook = func(string, bool) {}
		if err != nil {
			t.Fatalf("Snapshot: %v", err)
		}
		if st.Attempts != unlucky+1 || st.Locked != (unlucky == 2) {
			t.Errorf("unlucky %d: stats %+v, want %d attempts, locked %v", unlucky, st, unlucky+1, unlucky == 2)
		}
		rep := verifyClean(t, out)
		if want := 5 + 1 - unlucky; rep.MailRows < want {
			t.Errorf("unlucky %d: snapshot has %d mail rows, want at least %d", unlucky, rep.MailRows, want)
		}
	}
}

// TestSnapshotDuringLoad takes snapshots while messages are delivered,
// expunged and collected concurrently: each one must verify clean.
func TestSnapshotDuringLoad(t *testing.T) {
	s := openTest(t)
	a := mustAccount(t, s, "u@example.org")
	deliverN(t, s, a, 0, 20)
	stop := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- func() error {
			ctx := context.Background()
			for i := 1000; i < 3000; i++ {
				select {
				case <-stop:
					return nil
				default:
				}
				ds, err := s.Deliver(ctx, store.Delivery{Raw: testMsg(i), Recipients: []store.Recipient{{AccountID: a.ID}}})
				if err != nil {
					return err
				}
				if i%2 == 0 {
					set := store.UIDSet{{Start: ds[0].UID, Stop: ds[0].UID}}
					if _, err := s.StoreFlags(ctx, ds[0].MailboxID, set, store.FlagsAdd, store.FlagDeleted, nil); err != nil {
						return err
					}
					if _, err := s.Expunge(ctx, ds[0].MailboxID, set); err != nil {
						return err
					}
					if err := s.collectOnce(); err != nil {
						return err
					}
				}
			}
			return nil
		}()
	}()
	for i := range 3 {
		out := filepath.Join(t.TempDir(), "snap")
		st, err := s.Snapshot(context.Background(), out, SnapshotOptions{})
		if err != nil {
			t.Fatalf("Snapshot %d: %v", i, err)
		}
		rep := verifyClean(t, out)
		t.Logf("snapshot %d: %d blobs, %d attempts; %d mail rows", i, st.Blobs, st.Attempts, rep.MailRows)
		time.Sleep(20 * time.Millisecond)
	}
	close(stop)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestVerifyFindsDamage(t *testing.T) {
	s := openFileTest(t)
	a := mustAccount(t, s, "u@example.org")
	deliverN(t, s, a, 0, 4)
	// 0: altered content, 1: missing file, 2: wrong reference count.
	if err := os.WriteFile(s.blobPath(hashRaw(testMsg(0))), []byte("tampered"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(s.blobPath(hashRaw(testMsg(1)))); err != nil {
		t.Fatal(err)
	}
	if err := s.write(context.Background(), func(w *wtx) error {
		_, err := w.exec("UPDATE blobs SET refcount = 5 WHERE sha256 = ?", hashRaw(testMsg(2)))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	orphan := hashRaw([]byte("orphan"))
	if err := os.MkdirAll(filepath.Dir(s.blobPath(orphan)), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(s.blobPath(orphan), []byte("orphan"), 0o600); err != nil {
		t.Fatal(err)
	}
	rep, err := VerifyDir(context.Background(), s.Dir())
	if err != nil {
		t.Fatal(err)
	}
	all := strings.Join(rep.Problems, "\n")
	for _, want := range []string{"content is damaged", "message file is missing", "reference count 5"} {
		if !strings.Contains(all, want) {
			t.Errorf("problems lack %q:\n%s", want, all)
		}
	}
	if len(rep.Problems) != 3 {
		t.Errorf("%d problems, want 3:\n%s", len(rep.Problems), all)
	}
	if len(rep.Orphans) != 1 || !strings.HasSuffix(rep.Orphans[0], orphan) {
		t.Errorf("orphans %v, want [%s]", rep.Orphans, orphan)
	}
	// A snapshot of a store with a missing file fails loudly.
	if _, err := s.Snapshot(context.Background(), filepath.Join(t.TempDir(), "s"), SnapshotOptions{Attempts: 1}); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Errorf("snapshot of a damaged store: %v, want an error naming the missing file", err)
	}
}
