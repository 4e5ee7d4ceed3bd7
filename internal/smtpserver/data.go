package smtpserver

import (
	"bytes"
	"errors"
	"io"
	"strconv"

	"pimail/internal/delivery"
	"pimail/internal/metrics"
)

// data runs DATA (RFC 5321 §4.1.1.4): 354, the message up to its end
// marker (framing.go), then the delivery and its reply.
func (s *session) data(args []byte) {
	switch {
	case len(args) > 0:
		s.fail(replySyntax)
		return
	case !s.inMail:
		s.fail(replyMailFirst)
		return
	case s.bdat != nil:
		s.fail(replyBDATMixed)
		return
	case len(s.rcpts)+len(s.remote) == 0: // RFC 5321 §3.3: 554 with no valid recipients
		s.fail(replyNoValidRcpts)
		return
	}
	if !s.srv.beginDelivery() {
		s.c.reply(replyShuttingDown)
		s.quit = true
		return
	}
	defer s.srv.endDelivery()
	s.c.reply(replyData)
	cfg := &s.srv.cfg
	id := delivery.NewID()
	sp, out := s.srv.newSpool(s.srv.role.dataPrefix(s, id), s.params.size)
	fr := newFramer(true, cfg.MaxLineLength)
	fr.out = out
	err := s.c.readData(&fr, -1, cfg.DataTimeout, func() error { return sp.absorb(&fr) })
	s.finishMessage(id, sp, &fr, err)
}

// finishMessage answers a message whose data has ended (or failed to
// arrive): the refusals of the framing and the size limit, or the role's
// delivery.
func (s *session) finishMessage(id string, sp *spool, fr *framer, err error) {
	defer s.reset()
	refuse := func(r *reply, reason, why string) {
		sp.discard(fr.out)
		s.srv.log.Info("message refused: "+why, "ip", s.ip, "id", id, "from", s.from)
		s.srv.role.refused(s, reason, r, "", "", s.recipients()...)
	}
	switch {
	case errors.Is(err, errTooBigAbort) || err == nil && sp.tooBig:
		refuse(replyTooBig, metrics.RejectSize, "too big")
		s.fail(replyTooBig)
		s.quit = s.quit || err != nil
	case err == nil && sp.failed != nil:
		r := deliveryError(sp.failed)
		refuse(r, metrics.RejectTempFail, sp.failed.Error())
		s.fail(r)
	case err != nil:
		// The connection broke or timed out mid-message, or the spool
		// could not be written: nothing stored, nothing acknowledged. The
		// stream cannot be brought back in step with the client, so the
		// session ends after this reply.
		sp.discard(fr.out)
		s.srv.log.Info("message data not received", "ip", s.ip, "id", id, "err", err)
		if !errors.Is(err, io.ErrUnexpectedEOF) {
			s.c.reply(replyDataUnreadable)
		}
		s.quit = true
	case fr.tooLong:
		// A permanent refusal (RFC 5321 §4.5.3.1.6, §4.2.5): a retry
		// would send the same line. The rest of it is not read, so the
		// session cannot continue in step with the client.
		refuse(replyLineTooLong, metrics.RejectProtocol, "line too long")
		s.c.reply(replyLineTooLong)
		s.quit = true
	case fr.smuggle:
		refuse(replySmuggling, metrics.RejectProtocol, "a dot line between bare CR or LF (possible SMTP smuggling)")
		s.fail(replySmuggling)
	default:
		s.answer(s.srv.role.deliver(s, id, sp, fr))
	}
}

// recipients are the transaction's accepted recipients.
func (s *session) recipients() []string {
	if len(s.remote) == 0 {
		return s.rcpts
	}
	return append(append([]string(nil), s.rcpts...), s.remote...)
}

// bdatState is a BDAT transaction between its chunks (RFC 3030).
type bdatState struct {
	id string
	sp *spool
	fr framer
}

// bdatCommand runs BDAT size [LAST] (RFC 3030 §2): exactly size octets of
// message data follow the command, whatever the state of the session, so
// they are read even when the command is refused (§3: the server must stay
// in step); after LAST the message is delivered.
func (s *session) bdatCommand(args []byte) {
	f := bytes.Fields(args)
	var n int64
	var err error
	if len(f) >= 1 {
		n, err = strconv.ParseInt(string(f[0]), 10, 64)
	}
	last := len(f) == 2 && bytes.EqualFold(f[1], []byte("LAST"))
	if len(f) < 1 || len(f) > 2 || err != nil || n < 0 || len(f) == 2 && !last {
		// Without a size the chunk cannot be skipped: the session ends.
		s.c.reply(replySyntax)
		s.quit = true
		return
	}
	cfg := &s.srv.cfg
	var refusal *reply
	switch {
	case !s.inMail:
		refusal = replyMailFirst
	case len(s.rcpts)+len(s.remote) == 0:
		refusal = replyNoValidRcpts
	}
	if refusal != nil {
		skip := newFramer(false, 0)
		if err := s.c.readData(&skip, n, cfg.DataTimeout, func() error { skip.out = skip.out[:0]; return nil }); err != nil {
			s.quit = true
			return
		}
		s.fail(refusal)
		return
	}
	if s.bdat == nil {
		id := delivery.NewID()
		sp, out := s.srv.newSpool(s.srv.role.dataPrefix(s, id), s.params.size)
		s.bdat = &bdatState{id: id, sp: sp, fr: newFramer(false, cfg.MaxLineLength)}
		s.bdat.fr.out = out
	}
	b := s.bdat
	err = s.c.readData(&b.fr, n, cfg.DataTimeout, func() error { return b.sp.absorb(&b.fr) })
	switch {
	case err != nil || b.fr.tooLong || b.sp.tooBig || b.sp.failed != nil:
		// RFC 3030 §2: after a refused chunk the client sends no more.
		s.finishMessage(b.id, b.sp, &b.fr, err)
		return
	case !last:
		s.c.reply(newReply(250, [3]int{2, 0, 0}, strconv.FormatInt(n, 10)+" octets received"))
		return
	}
	if !s.srv.beginDelivery() {
		b.sp.discard(b.fr.out)
		s.reset()
		s.c.reply(replyShuttingDown)
		s.quit = true
		return
	}
	defer s.srv.endDelivery()
	b.fr.finishChunks()
	err = b.sp.absorb(&b.fr)
	s.finishMessage(b.id, b.sp, &b.fr, err)
}
