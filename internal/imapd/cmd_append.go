package imapd

import (
	"errors"
	"fmt"
	"time"

	"pimail/internal/imapwire"
	"pimail/internal/store"
)

// cmdAppend implements APPEND (RFC 9051 §6.3.12) with APPENDUID (RFC 4315
// §3), literal8 (RFC 3516 §4.4) and the UTF8 form (RFC 6855 §4).
func cmdAppend(s *session, cmd *command) (string, string, error) {
	args := cmd.args
	if len(args) < 2 {
		return "", "", bad("APPEND needs a mailbox and a message")
	}
	name, err := s.decodeName(args[0])
	if err != nil {
		return "", "", err
	}
	args = args[1:]
	var flags store.Flags
	var kws []string
	if args[0].Kind == imapwire.KindList {
		if flags, kws, err = parseFlagList(args[:1]); err != nil {
			return "", "", err
		}
		args = args[1:]
	}
	var date time.Time
	if len(args) > 1 && args[0].Kind == imapwire.KindQuoted {
		if date, err = imapwire.ParseDateTime(args[0].Str); err != nil {
			return "", "", bad("invalid date-time")
		}
		args = args[1:]
	}
	if len(args) == 2 && args[0].Kind == imapwire.KindAtom && upperASCII(args[0].Str) == "UTF8" &&
		args[1].Kind == imapwire.KindList && len(args[1].List) == 1 {
		args = args[1].List
	}
	if len(args) != 1 || args[0].Kind != imapwire.KindLiteral {
		return "", "", bad("APPEND needs the message as a literal")
	}
	raw := args[0].Lit
	if len(raw) == 0 {
		return "", "", no("CANNOT", "empty message")
	}
	mb, err := s.srv.st.Mailbox(s.ctx, s.acct.ID, name)
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return "", "", no("TRYCREATE", "mailbox does not exist")
		}
		return "", "", fmt.Errorf("append: %w", err)
	}
	if err := s.checkAppendQuota(int64(len(raw))); err != nil { // quota.go
		return "", "", err
	}
	if date.IsZero() {
		date = time.Now()
	}
	d, err := s.srv.st.Append(s.ctx, mb.ID, raw, flags, kws, date)
	if err != nil {
		if e := storeErr(err, "mailbox"); e != err {
			return "", "", e
		}
		return "", "", fmt.Errorf("append to mailbox %d: %w", mb.ID, err)
	}
	if s.sel != nil && s.sel.mb.ID == mb.ID {
		s.sel.dirty = true
	}
	return fmt.Sprintf("APPENDUID %d %d", d.UIDValidity, d.UID), "APPEND completed", nil
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
