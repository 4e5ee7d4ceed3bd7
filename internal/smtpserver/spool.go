package smtpserver

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"sync"

	"pimail/internal/delivery"
	"pimail/internal/mapfile"
)

// messageRoom is the free room kept in front of every message for the
// fields added after it arrived (Received for submission, Return-Path,
// Authentication-Results, the filters' verdicts): the delivery pipeline
// writes them there instead of copying the message (delivery.Message).
const messageRoom = 8 << 10

// Message buffers: a transaction without SIZE= starts with noSizeHint and
// grows; one with SIZE= starts at that size, up to the spool threshold (a
// client announcing 50 MiB gets nothing before it sends). Buffers up to
// maxPooledBuffer go back to the pool.
const (
	noSizeHint      = 16 << 10
	maxPooledBuffer = 256 << 10
)

var dataBuffers = sync.Pool{New: func() any { b := make([]byte, 0, messageRoom+noSizeHint); return &b }}

// Errors of spool.absorb.
var (
	// errTooBigAbort: the client went on sending far past the size limit;
	// the session ends after 552 instead of reading the rest.
	errTooBigAbort = errors.New("message far beyond the size limit")
)

// spool holds the content of one message while it arrives (the framer's
// output, plus what the session writes first): in a pooled buffer up to
// the spool threshold, then in a file in the spool directory, unlinked as
// soon as it is created so that nothing is left behind by a crash. The
// memory a session holds is therefore bounded by the threshold, whatever
// the client sends; a spooled message is mapped into memory only for its
// delivery (message), in one of the server's LargeDeliveries slots.
type spool struct {
	srv  *Server
	buf  *[]byte // the pooled buffer (in memory, and the staging for the file)
	file *os.File
	size int64 // content bytes kept (not counting the room)

	tooBig    bool  // past MaxMessageBytes: the rest is read and dropped
	failed    error // the file could not be written (a full disk): likewise
	discarded int64 // bytes dropped since
}

// newSpool starts a message; its content begins with prefix. sizeHint is
// MAIL's SIZE= (or -1).
func (srv *Server) newSpool(prefix string, sizeHint int64) (*spool, []byte) {
	b := dataBuffers.Get().(*[]byte)
	hint := int(min(max(sizeHint, noSizeHint), int64(srv.cfg.SpoolThreshold)))
	out := (*b)[:messageRoom]
	if cap(out) < messageRoom+len(prefix)+hint {
		out = make([]byte, messageRoom, messageRoom+len(prefix)+hint)
	}
	out = append(out, prefix...)
	return &spool{srv: srv, buf: b}, out
}

// absorb takes what the framer produced since the last call (fr.out past
// the room, in memory; all of fr.out once spooled): it keeps it in memory,
// moves it to the file when the message outgrows the threshold, or drops
// it once the message is over the size limit.
func (sp *spool) absorb(fr *framer) error {
	cfg := &sp.srv.cfg
	if sp.tooBig || sp.failed != nil {
		sp.discarded += int64(len(fr.out))
		fr.out = fr.out[:0]
		if sp.discarded > cfg.MaxMessageBytes {
			return errTooBigAbort
		}
		return nil
	}
	if sp.file == nil {
		size := int64(len(fr.out) - messageRoom)
		switch {
		case size > cfg.MaxMessageBytes:
			sp.overflow(fr)
		case size > int64(cfg.SpoolThreshold):
			sp.spill(fr)
		}
		return nil
	}
	sp.size += int64(len(fr.out))
	if sp.size > cfg.MaxMessageBytes {
		sp.overflow(fr)
		return nil
	}
	if _, err := sp.file.Write(fr.out); err != nil {
		sp.fail(fr, err)
		return nil
	}
	fr.out = fr.out[:0]
	return nil
}

// fail gives the message up after the spool file could not be written
// (a full disk): the rest of the data is read and dropped like that of a
// message too big, so that the refusal (452 4.3.1 for ENOSPC, RFC 3463)
// answers the whole message and the session stays in step with the
// client.
func (sp *spool) fail(fr *framer, err error) {
	sp.failed = fmt.Errorf("spool message: %w", err)
	sp.closeFile()
	fr.out = fr.out[:0]
}

// overflow drops the message: the rest of the data is read (so the 552
// answers the whole message and the session stays in step) and dropped.
func (sp *spool) overflow(fr *framer) {
	sp.tooBig = true
	sp.closeFile()
	fr.out = fr.out[:0]
}

// spill moves the message to a new file: the room too, which stays free.
func (sp *spool) spill(fr *framer) {
	f, err := os.CreateTemp(sp.srv.cfg.SpoolDir, "smtp-*") // read and write, for the mapping
	if err != nil {
		sp.fail(fr, err)
		return
	}
	sp.file = f
	// Unlinked at once: the file lives as long as it is open.
	if err := os.Remove(f.Name()); err != nil {
		sp.fail(fr, err)
		return
	}
	sp.size = int64(len(fr.out) - messageRoom)
	if _, err := f.Write(fr.out); err != nil {
		sp.fail(fr, err)
		return
	}
	fr.out = fr.out[:0]
}

// message hands the complete content over for delivery, with its room in
// front. release gives everything back once the delivery is done; keep
// says the buffer may be reused (false when a delivery given up on might
// still hold it).
func (sp *spool) message(fr *framer) (m *delivery.Message, release func(keep bool), err error) {
	if sp.file == nil {
		out := fr.out
		return delivery.NewMessage(out, messageRoom), func(keep bool) {
			if keep {
				sp.putBuffer(out)
			}
		}, nil
	}
	if err := sp.absorb(fr); err != nil || sp.failed != nil {
		sp.discard(fr.out)
		return nil, nil, cmp.Or(err, sp.failed)
	}
	sp.putBuffer(fr.out)
	// One of the LargeDeliveries slots: the mapped pages of the messages
	// delivered at once are what a flood of large messages costs.
	select {
	case sp.srv.large <- struct{}{}:
	case <-sp.srv.ctx.Done():
		sp.closeFile()
		return nil, nil, sp.srv.ctx.Err()
	}
	mapped, err := mapfile.Map(sp.file, messageRoom+sp.size, true)
	if err != nil {
		<-sp.srv.large
		sp.closeFile()
		return nil, nil, err
	}
	return delivery.NewMessage(mapped, messageRoom), func(bool) {
		mapfile.Unmap(mapped)
		sp.closeFile()
		<-sp.srv.large
	}, nil
}

// discard drops the message.
func (sp *spool) discard(out []byte) {
	sp.closeFile()
	sp.putBuffer(out)
}

func (sp *spool) closeFile() {
	if sp.file != nil {
		sp.file.Close()
		sp.file = nil
	}
}

// putBuffer returns a message buffer to the pool unless it grew large.
func (sp *spool) putBuffer(b []byte) {
	if sp.buf == nil || cap(b) > maxPooledBuffer {
		return
	}
	*sp.buf = b[:0]
	dataBuffers.Put(sp.buf)
	sp.buf = nil
}
