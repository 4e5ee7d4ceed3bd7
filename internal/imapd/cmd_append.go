package imapd

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"time"

	"pimail/internal/imapwire"
	"pimail/internal/metrics"
	"pimail/internal/store"
)

// cmdAppend implements APPEND (RFC 9051 §6.3.12) with APPENDUID (RFC 4315
// §3), literal8 (RFC 3516 §4.4), the UTF8 form (RFC 6855 §4) and
// MULTIAPPEND (RFC 3502): several messages in one command, stored in one
// store transaction, all or none (RFC 3502 §6.3.11), the APPENDUID
// response listing the UID set (RFC 4315 §3). APPENDs a client pipelined
// are stored together (serveAppends).
func cmdAppend(s *session, cmd *command) (string, string, error) {
	r := s.prepareAppend(cmd, nil)
	s.storeAppends([]*appendReq{r})
	return appended(r)
}

// appendReq is one APPEND command on its way: parsed and checked, then
// stored, or failed at some step (err).
type appendReq struct {
	cmd   *command
	mb    store.Mailbox
	msgs  []store.AppendMessage
	total int64 // octets of msgs
	ds    []store.Delivered
	err   error
}

// prepareAppend parses an APPEND command and finds its mailbox (in known
// when it was looked up for an APPEND before it, else in the store, adding
// it to known when not nil). The whole command is checked before anything
// is stored: a refused message refuses all (RFC 3502 §6.3.11).
func (s *session) prepareAppend(cmd *command, known map[string]store.Mailbox) *appendReq {
	r := &appendReq{cmd: cmd}
	args := cmd.args
	if len(args) < 2 {
		r.err = bad("APPEND needs a mailbox and a message")
		return r
	}
	name, err := s.decodeName(args[0])
	if err != nil {
		r.err = err
		return r
	}
	var cats [][]catenatePart // CATENATE parts by message, resolved once the mailbox is known
	for args = args[1:]; len(args) > 0; {
		var m store.AppendMessage
		var cat []catenatePart
		if m, cat, args, r.err = parseAppendMessage(args); r.err != nil {
			return r
		}
		if len(m.Raw) == 0 && cat == nil {
			r.err = no("CANNOT", "empty message")
			return r
		}
		r.msgs = append(r.msgs, m)
		cats = append(cats, cat)
	}
	if mb, ok := known[name]; ok {
		r.mb = mb
	} else if r.mb, err = s.srv.st.Mailbox(s.ctx, s.acct.ID, name); err != nil {
		r.err = fmt.Errorf("append: %w", err)
		if errors.Is(err, store.ErrNotFound) {
			r.err = no("TRYCREATE", "mailbox does not exist")
		}
		return r
	} else if known != nil {
		known[name] = r.mb
	}
	for i, cat := range cats {
		if cat != nil {
			if r.msgs[i].Raw, r.err = s.catenate(cat); r.err != nil {
				return r
			}
			if len(r.msgs[i].Raw) == 0 {
				r.err = no("CANNOT", "empty message")
				return r
			}
		}
		r.total += int64(len(r.msgs[i].Raw))
	}
	return r
}

// storeAppends stores the prepared APPENDs that have not failed, in
// order: the quota is checked as if each ran after the ones before it
// (quota.go), then each run of APPENDs into one mailbox is stored in one
// AppendBatch, one commit. When that fails, its APPENDs are stored one by
// one, so that each meets only its own error. The selected mailbox is
// marked for the sync before the next response when it got messages.
func (s *session) storeAppends(reqs []*appendReq) {
	s.checkAppendQuota(reqs)
	var ok []*appendReq
	for _, r := range reqs {
		if r.err == nil {
			ok = append(ok, r)
		}
	}
	for len(ok) > 0 {
		n := 1
		for n < len(ok) && ok[n].mb.ID == ok[0].mb.ID {
			n++
		}
		s.storeRun(ok[:n])
		ok = ok[n:]
	}
	for _, r := range reqs {
		if r.err == nil && s.sel != nil && s.sel.mb.ID == r.mb.ID {
			s.sel.dirty = true
		}
	}
}

// storeRun stores APPENDs into one mailbox in one AppendBatch, or each on
// its own when there is one or the batch fails.
func (s *session) storeRun(run []*appendReq) {
	if len(run) > 1 {
		var msgs []store.AppendMessage
		for _, r := range run {
			msgs = append(msgs, r.msgs...)
		}
		if ds, err := s.srv.st.AppendBatch(s.ctx, run[0].mb.ID, msgs); err == nil {
			for _, r := range run {
				r.ds, ds = ds[:len(r.msgs):len(r.msgs)], ds[len(r.msgs):]
			}
			return
		}
	}
	for _, r := range run {
		var err error
		if len(r.msgs) == 1 {
			m := r.msgs[0]
			var d store.Delivered
			d, err = s.srv.st.Append(s.ctx, r.mb.ID, m.Raw, m.Flags, m.Keywords, m.InternalDate)
			r.ds = []store.Delivered{d}
		} else {
			r.ds, err = s.srv.st.AppendBatch(s.ctx, r.mb.ID, r.msgs)
		}
		if r.err = storeErr(err, "mailbox"); r.err == err && err != nil {
			r.err = fmt.Errorf("append to mailbox %d: %w", r.mb.ID, err)
		}
	}
}

// appended is the outcome of an APPEND: APPENDUID with its UIDs, or its
// error.
func appended(r *appendReq) (string, string, error) {
	if r.err != nil {
		return "", "", r.err
	}
	uids := make([]uint32, len(r.ds))
	for i, d := range r.ds {
		uids[i] = d.UID
	}
	return fmt.Sprintf("APPENDUID %d %s", r.ds[0].UIDValidity, imapwire.FormatUIDs(uids)), "APPEND completed", nil
}

// Pipelined APPENDs stored together: at most maxAppendGroup commands, and
// no more read ahead once appendGroupBytes of messages are held.
const (
	maxAppendGroup   = 64
	appendGroupBytes = 8 << 20
)

// serveAppends answers an APPEND and those the client pipelined behind it
// (sent without waiting for the responses, as synchronisers do with
// LITERAL+, RFC 7888): the APPENDs already on the wire are read, stored
// together (storeAppends: one commit per mailbox instead of one per
// message) and answered in order, each as if it had run alone, with its
// own APPENDUID or its own NO or BAD. No response leaves before the
// commit, so OK still means the message is on disk.
func (s *session) serveAppends(first *imapwire.Command) error {
	cmds := []*imapwire.Command{first}
	size := literalSize(first.Args)
	var readErr error
	for len(cmds) < maxAppendGroup && size < appendGroupBytes && s.appendFollows() {
		c, err := s.r.ReadCommand()
		if err != nil {
			readErr = err // answered after the APPENDs before it
			break
		}
		cmds = append(cmds, c)
		size += literalSize(c.Args)
	}
	reqs := make([]*appendReq, len(cmds))
	known := map[string]store.Mailbox{}
	for i, c := range cmds {
		reqs[i] = s.prepareAppend(&command{tag: c.Tag, name: c.Name, args: c.Args}, known)
	}
	s.storeAppends(reqs) // the first response's sync reports every new message
	for _, r := range reqs {
		metrics.Commands.With(metrics.ProtoIMAP, r.cmd.label()).Inc()
		code, text, err := appended(r)
		if err := s.settle(s.complete(r.cmd, code, text, err)); err != nil {
			return err
		}
	}
	if readErr != nil {
		_ = s.flush()
		return s.readFailed(readErr)
	}
	return s.flush()
}

// appendFollows reports whether the client has already sent the start of
// another APPEND command: a tag, a space and APPEND.
func (s *session) appendFollows() bool {
	b, _ := s.r.BufReader().Peek(min(s.r.Buffered(), 64))
	sp := bytes.IndexByte(b, ' ')
	return sp > 0 && len(b) > sp+7 && strings.EqualFold(string(b[sp+1:sp+8]), "APPEND ")
}

// literalSize is the number of octets in the literals of args.
func literalSize(args []imapwire.Arg) int {
	n := 0
	for _, a := range args {
		n += len(a.Lit) + literalSize(a.List)
	}
	return n
}

// parseAppendMessage parses one message of APPEND: [flag-list]
// [date-time] (literal / "UTF8" "(" literal8 ")" / "CATENATE" "(" parts
// ")"), and returns the arguments after it (RFC 9051 §9 append, RFC 3502
// §7 append-message, RFC 6855 §4, RFC 4469 §5). A missing date-time is
// now. The parts of a CATENATE are returned for the caller to resolve.
func parseAppendMessage(args []imapwire.Arg) (store.AppendMessage, []catenatePart, []imapwire.Arg, error) {
	var m store.AppendMessage
	var err error
	if len(args) > 0 && args[0].Kind == imapwire.KindList {
		if m.Flags, m.Keywords, err = parseFlagList(args[:1]); err != nil {
			return m, nil, nil, err
		}
		args = args[1:]
	}
	if len(args) > 1 && args[0].Kind == imapwire.KindQuoted {
		if m.InternalDate, err = imapwire.ParseDateTime(args[0].Str); err != nil {
			return m, nil, nil, bad("invalid date-time")
		}
		args = args[1:]
	}
	switch {
	case len(args) > 0 && args[0].Kind == imapwire.KindLiteral:
		m.Raw = args[0].Lit
		if args[0].Literal8 {
			m.Raw = binaryToBase64(m.Raw)
		}
		args = args[1:]
	case len(args) > 1 && args[0].Kind == imapwire.KindAtom && upperASCII(args[0].Str) == "UTF8" &&
		args[1].Kind == imapwire.KindList && len(args[1].List) == 1 && args[1].List[0].Kind == imapwire.KindLiteral:
		m.Raw = args[1].List[0].Lit
		args = args[2:]
	case len(args) > 1 && args[0].Kind == imapwire.KindAtom && upperASCII(args[0].Str) == "CATENATE":
		cat, err := parseCatenate(args[1])
		if err != nil {
			return m, nil, nil, err
		}
		return m, cat, args[2:], nil
	default:
		return m, nil, nil, bad("APPEND needs the message as a literal")
	}
	return m, nil, args, nil
}

// cmdIdle implements IDLE (RFC 2177, RFC 9051 §6.3.13): changes to the
// selected mailbox are reported as they happen until the client sends DONE.
func cmdIdle(s *session, cmd *command) (string, string, error) {
	if len(cmd.args) != 0 {
		return "", "", bad("IDLE takes no arguments")
	}
	if err := s.syncMailbox(true, true); err != nil {
		return "", "", err
	}
	s.w.Continue("idling")
	if err := s.flush(); err != nil {
		return "", "", err
	}
	type lineResult struct {
		line string
		err  error
	}
	done := make(chan lineResult, 1)
	_ = s.conn.SetReadDeadline(time.Now().Add(s.srv.cfg.IdleTimeout))
	go func() {
		line, err := s.r.ReadLine()
		done <- lineResult{line, err}
	}()
	for {
		select {
		case res := <-done:
			if res.err != nil {
				s.state = stateLogout
				return "", "", fmt.Errorf("reading IDLE DONE: %w", res.err)
			}
			if upperASCII(res.line) != "DONE" {
				return "", "", bad("expected DONE")
			}
			return "", "IDLE terminated", nil
		case ev, ok := <-s.events:
			if !ok {
				s.events = nil
				continue
			}
			s.noteEvent(ev)
			if s.sel != nil && s.sel.dirty {
				if err := s.syncMailbox(true, false); err != nil {
					s.log.Error("imap idle sync", "err", err)
				}
			}
			if err := s.sendNotifications(); err != nil {
				s.log.Error("imap idle notifications", "err", err)
			}
			if err := s.flush(); err != nil {
				s.conn.Close() // ends the reader goroutine
				<-done
				s.state = stateLogout
				return "", "", err
			}
		case <-s.ctx.Done():
			s.conn.Close()
			<-done
			s.state = stateLogout
			return "", "", nil
		}
	}
}
