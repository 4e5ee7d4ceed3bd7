package sqlite

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"time"

	"pimail/internal/store"
)

// AppendBatch stores several messages into one mailbox in one write request
// (IMAP MULTIAPPEND, RFC 3502 §6.3.11: all or none). It is the delivery
// path of Append for many messages (prepareBlob, writeBlob and ensureBlob
// of a delivery): the files, if any, are written (and fsynced) first, then
// one request inserts every blob and mail row, so the whole
// batch costs one commit and one WAL fsync; any error rolls all of it back
// (the request's savepoint), leaving at most files without rows, which the
// collector removes as after a crash. UIDs are consecutive, in the order of
// msgs.
func (s *Store) AppendBatch(ctx context.Context, mailboxID int64, msgs []store.AppendMessage) ([]store.Delivered, error) {
	if len(msgs) == 0 {
		return nil, fmt.Errorf("append batch without messages: %w", store.ErrInvalid)
	}
	targets := make([]target, len(msgs))
	idates := make([]int64, len(msgs))
	now := time.Now()
	for i, m := range msgs {
		if len(m.Raw) == 0 {
			return nil, fmt.Errorf("message %d of %d: empty message: %w", i+1, len(msgs), store.ErrInvalid)
		}
		kws, err := normKeywords(m.Keywords)
		if err != nil {
			return nil, fmt.Errorf("message %d of %d: %w", i+1, len(msgs), err)
		}
		targets[i] = target{mailboxID: mailboxID, flags: m.Flags & allFlags, keywords: kws}
		idates[i] = m.InternalDate.Unix()
		if m.InternalDate.IsZero() {
			idates[i] = now.Unix()
		}
	}
	nbs, err := s.prepareBlobs(msgs)
	if err != nil {
		return nil, err
	}
	var out []store.Delivered
	for attempt := 0; ; attempt++ {
		if err := s.writeBlobs(nbs); err != nil {
			return nil, err
		}
		if testHookBlobWritten != nil {
			testHookBlobWritten()
		}
		err = s.write(ctx, func(w *wtx) error {
			out = make([]store.Delivered, 0, len(nbs))
			// As copyMail does: the mailbox looked up once, the UIDs
			// taken together, one MODSEQ for the command's messages
			// (RFC 7162 §3.1 lets one command's changes share it).
			mb, err := mailboxByID(w, mailboxID)
			if err != nil {
				return err
			}
			first, err := takeUIDs(w, mb.ID, len(nbs))
			if err != nil {
				return err
			}
			ms, err := nextModSeq(w, mb.ID)
			if err != nil {
				return err
			}
			for i, nb := range nbs {
				blobID, err := s.ensureBlob(w, nb)
				if err != nil {
					return err
				}
				t, uid := targets[i], first+uint32(i)
				if _, err := w.exec("INSERT INTO mail (mailbox_id, uid, modseq, flags, keywords, internal_date, blob_id) VALUES (?, ?, ?, ?, ?, ?, ?)",
					mb.ID, uid, ms, t.flags, joinKeywords(t.keywords), idates[i], blobID); err != nil {
					return fmt.Errorf("insert message: %w", err)
				}
				if _, err := w.exec("UPDATE blobs SET refcount = refcount + 1 WHERE id = ?", blobID); err != nil {
					return fmt.Errorf("count blob references: %w", err)
				}
				out = append(out, store.Delivered{AccountID: mb.AccountID, MailboxID: mb.ID, UIDValidity: mb.UIDValidity, UID: uid})
			}
			w.publish(mb.AccountID, mb.ID)
			return nil
		})
		if errors.Is(err, errBlobMissing) && attempt < maxBlobRetries {
			continue // the collector took a file of the same content: write it again
		}
		if err != nil {
			return nil, err
		}
		if len(nbs) > 1 {
			// A bulk load: the full-text indexer steps aside as it does
			// for concurrent deliveries (fts_indexer.go, at most
			// maxIndexLag in all); searches read what is not indexed yet.
			s.busyUntil.Store(time.Now().Add(indexYield).UnixNano())
		}
		return out, nil
	}
}

// batchWorkers bounds the goroutines that parse and write the files of one
// batch: parsing is CPU work, and the fsyncs of several files overlap.
func batchWorkers(n int) int {
	return min(n, max(2, runtime.GOMAXPROCS(0)))
}

// parallel runs fn(i) for i in [0, n) on batchWorkers goroutines and
// returns the first error.
func parallel(n int, fn func(i int) error) error {
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		next int
		errs = make([]error, n)
	)
	for range batchWorkers(n) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				mu.Lock()
				i := next
				next++
				mu.Unlock()
				if i >= n {
					return
				}
				errs[i] = fn(i)
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// prepareBlobs parses the messages (prepareBlob, as one delivery does).
func (s *Store) prepareBlobs(msgs []store.AppendMessage) ([]*newBlob, error) {
	nbs := make([]*newBlob, len(msgs))
	err := parallel(len(msgs), func(i int) error {
		nb, err := prepareBlob(msgs[i].Raw, nil)
		nbs[i] = nb
		return err
	})
	if err != nil {
		return nil, err
	}
	return nbs, nil
}

// writeBlobs writes the message files durably (writeBlob, as one delivery
// does), several at a time.
func (s *Store) writeBlobs(nbs []*newBlob) error {
	if err := parallel(len(nbs), func(i int) error { return s.writeBlob(nbs[i].sha, nbs[i].raw) }); err != nil {
		return fmt.Errorf("sqlite store: %w", err)
	}
	return nil
}
