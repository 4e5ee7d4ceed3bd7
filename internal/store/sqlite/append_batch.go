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
// (with the transaction, or the request's savepoint), leaving at most files without rows, which the
// collector removes as after a crash. UIDs are consecutive, in the order of
// msgs.
func (s *Store) AppendBatch(ctx context.Context, mailboxID int64, msgs []store.AppendMessage) ([]store.Delivered, error) {
	if len(msgs) == 0 {
		return nil, fmt.Errorf("append batch without messages: %w", store.ErrInvalid)
	}
	rows := make([]mailRow, len(msgs)) // blobID is set in the write request
	now := time.Now()
	for i, m := range msgs {
		if len(m.Raw) == 0 {
			return nil, fmt.Errorf("message %d of %d: empty message: %w", i+1, len(msgs), store.ErrInvalid)
		}
		kws, err := store.NormalizeKeywords(m.Keywords)
		if err != nil {
			return nil, fmt.Errorf("message %d of %d: %w", i+1, len(msgs), err)
		}
		rows[i] = mailRow{flags: m.Flags & store.AllFlags, keywords: kws, idate: m.InternalDate.Unix()}
		if m.InternalDate.IsZero() {
			rows[i].idate = now.Unix()
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
			mb, err := mailboxByID(w, mailboxID)
			if err != nil {
				return err
			}
			for i, nb := range nbs {
				if rows[i].blobID, err = s.ensureBlob(w, nb, 1); err != nil {
					return err
				}
			}
			// The new rows go in as a COPY does: UIDs taken together, one
			// MODSEQ for the command's messages (RFC 7162 §3.1 lets one
			// command's changes share it); ensureBlob counted the
			// references.
			res, err := insertMail(w, rows, mb)
			if err != nil {
				return err
			}
			out = make([]store.Delivered, 0, len(rows))
			for _, uid := range res.DestUIDs {
				out = append(out, store.Delivered{AccountID: mb.AccountID, MailboxID: mb.ID, UIDValidity: mb.UIDValidity, UID: uid})
			}
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
