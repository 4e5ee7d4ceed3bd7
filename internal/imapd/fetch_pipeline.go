package imapd

import (
	"fmt"
	"runtime/debug"

	"pimail/internal/metrics"
	"pimail/internal/store"
)

// fetchAhead is how many chunks of a FETCH are read from the store while
// an earlier one is written: one per core of a small machine.
const fetchAhead = 2

// fetchFirstChunk is the size of a FETCH's first chunk: smaller than the
// others, so that the first responses leave sooner and the formatting of
// the first chunk overlaps the reading of the next ones earlier.
const fetchFirstChunk = 64

// chunkData is what the store returned for one chunk of a FETCH.
type chunkData struct {
	metas   []store.MessageMeta
	headers [][]byte
	release func() // gives the store's buffers back; never nil
	err     error
}

// fetchChunks answers FETCH for the view indexes idx, fetchChunk
// messages at a time. Unless the FETCH changes flags, up to fetchAhead
// chunks are read from the store (each in its own read transaction)
// while the current one is formatted and sent, so that reading and
// writing use all cores. The view is only read, never changed, while
// reads are outstanding.
func (s *session) fetchChunks(idx []int, plan fetchPlan) error {
	v := s.sel
	mailboxID := v.mb.ID
	read := func(chunk []int) (cd chunkData) {
		// A read-ahead runs in its own goroutine, out of reach of the
		// session's recover: a bug here must end this FETCH, not the
		// server.
		defer func() {
			if r := recover(); r != nil {
				s.log.Error("imap fetch panic", "panic", r, "stack", string(debug.Stack()))
				metrics.InternalErrors.With(metrics.ProtoIMAP).Inc()
				cd = chunkData{release: noRelease, err: fmt.Errorf("fetch from mailbox %d: internal error", mailboxID)}
			}
		}()
		metas, headers, release, err := s.fetchMetas(mailboxID, v.uidSet(chunk), plan)
		if err != nil {
			err = fmt.Errorf("fetch from mailbox %d: %w", mailboxID, err)
		}
		return chunkData{metas, headers, release, err}
	}
	var chunks [][]int
	for start, n := 0, fetchFirstChunk; start < len(idx); start, n = start+n, fetchChunk {
		chunks = append(chunks, idx[start:min(start+n, len(idx))])
	}
	ahead := 1
	if !plan.setSeen {
		ahead = fetchAhead
	}
	if len(chunks) > 1 {
		// Write a long answer in large pieces.
		defer s.w.Grow()()
	}
	pending := make([]chan chunkData, len(chunks))
	started := 0
	startReads := func(upto int) {
		for ; started < min(upto, len(chunks)); started++ {
			ch := make(chan chunkData, 1)
			pending[started] = ch
			c := chunks[started]
			if ahead == 1 {
				ch <- read(c) // in line: this FETCH changes the view
				continue
			}
			go func() { ch <- read(c) }()
		}
	}
	drain := func(from int) {
		for i := from; i < started; i++ {
			(<-pending[i]).release() // let outstanding reads end before the session moves on
		}
	}
	for i, chunk := range chunks {
		startReads(i + ahead)
		cur := <-pending[i]
		err := cur.err
		if err == nil {
			err = s.fetchChunk(chunk, plan, cur.metas, cur.headers)
		}
		// The responses are in the output buffer or sent: nothing refers
		// to the store's buffers any more.
		cur.release()
		if err == nil {
			err = s.flush()
		}
		if err != nil {
			drain(i + 1)
			return err
		}
	}
	return nil
}
