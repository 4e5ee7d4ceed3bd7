package imapd

import (
	"errors"
	"fmt"
	"time"

	"pimail/internal/imapwire"
	"pimail/internal/store"
)

// cmdAppend implements APPEND (RFC 9051 §6.3.12) with APPENDUID (RFC 4315
// §3), literal8 (RFC 3516 §4.4), the UTF8 form (RFC 6855 §4) and
// MULTIAPPEND (RFC 3502): several messages in one command, stored in one
// store transaction, all or none (RFC 3502 §6.3.11), the APPENDUID
// response listing the UID set (RFC 4315 §3).
func cmdAppend(s *session, cmd *command) (string, string, error) {
	args := cmd.args
	if len(args) < 2 {
		return "", "", bad("APPEND needs a mailbox and a message")
	}
	name, err := s.decodeName(args[0])
	if err != nil {
		return "", "", err
	}
	var msgs []store.AppendMessage
	var total int64
	for args = args[1:]; len(args) > 0; {
		var m store.AppendMessage
		if m, args, err = parseAppendMessage(args); err != nil {
			return "", "", err
		}
		msgs = append(msgs, m)
		total += int64(len(m.Raw))
	}
	// The whole command is checked before anything is stored: a refused
	// message refuses all (RFC 3502 §6.3.11).
	for _, m := range msgs {
		if len(m.Raw) == 0 {
			return "", "", no("CANNOT", "empty message")
		}
	}
	mb, err := s.srv.st.Mailbox(s.ctx, s.acct.ID, name)
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return "", "", no("TRYCREATE", "mailbox does not exist")
		}
		return "", "", fmt.Errorf("append: %w", err)
	}
	if err := s.checkAppendQuota(total); err != nil { // quota.go
		return "", "", err
	}
	var ds []store.Delivered
	if len(msgs) == 1 {
		m := msgs[0]
		var d store.Delivered
		d, err = s.srv.st.Append(s.ctx, mb.ID, m.Raw, m.Flags, m.Keywords, m.InternalDate)
		ds = []store.Delivered{d}
	} else {
		ds, err = s.srv.st.AppendBatch(s.ctx, mb.ID, msgs)
	}
	if err != nil {
		if e := storeErr(err, "mailbox"); e != err {
			return "", "", e
		}
		return "", "", fmt.Errorf("append to mailbox %d: %w", mb.ID, err)
	}
	if s.sel != nil && s.sel.mb.ID == mb.ID {
		s.sel.dirty = true
	}
	uids := make([]uint32, len(ds))
	for i, d := range ds {
		uids[i] = d.UID
	}
	return fmt.Sprintf("APPENDUID %d %s", ds[0].UIDValidity, imapwire.FormatUIDs(uids)), "APPEND completed", nil
}

// parseAppendMessage parses one message of APPEND: [flag-list]
// [date-time] (literal / "UTF8" "(" literal8 ")"), and returns the
// arguments after it (RFC 9051 §9 append, RFC 3502 §7 append-message,
// RFC 6855 §4). A missing date-time is now.
func parseAppendMessage(args []imapwire.Arg) (store.AppendMessage, []imapwire.Arg, error) {
	var m store.AppendMessage
	var err error
	if len(args) > 0 && args[0].Kind == imapwire.KindList {
		if m.Flags, m.Keywords, err = parseFlagList(args[:1]); err != nil {
			return m, nil, err
		}
		args = args[1:]
	}
	if len(args) > 1 && args[0].Kind == imapwire.KindQuoted {
		if m.InternalDate, err = imapwire.ParseDateTime(args[0].Str); err != nil {
			return m, nil, bad("invalid date-time")
		}
		args = args[1:]
	}
	switch {
	case len(args) > 0 && args[0].Kind == imapwire.KindLiteral:
		m.Raw = args[0].Lit
		args = args[1:]
	case len(args) > 1 && args[0].Kind == imapwire.KindAtom && upperASCII(args[0].Str) == "UTF8" &&
		args[1].Kind == imapwire.KindList && len(args[1].List) == 1 && args[1].List[0].Kind == imapwire.KindLiteral:
		m.Raw = args[1].List[0].Lit
		args = args[2:]
	default:
		return m, nil, bad("APPEND needs the message as a literal")
	}
	return m, args, nil
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
			if s.sel == nil || ev.MailboxID != s.sel.mb.ID {
				continue
			}
			s.sel.dirty = true
			if err := s.syncMailbox(true, false); err != nil {
				s.log.Error("imap idle sync", "err", err)
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
