package pop3d

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// Commands of the TRANSACTION state (RFC 1939 §5, TOP and UIDL §7).

// msgArg answers a bad or unknown message number; ok reports success.
func (s *session) msgArg(arg string) (int, *dropMsg, bool, error) {
	n, m, err := s.drop.lookup(arg)
	switch {
	case errors.Is(err, errBadNumber):
		return 0, nil, false, s.invalid("-ERR invalid message number")
	case errors.Is(err, errNoSuchMessage):
		if n >= 1 && n <= len(s.drop.msgs) {
			s.reply("-ERR message " + arg + " already deleted")
		} else {
			s.reply("-ERR no such message")
		}
		return 0, nil, false, nil
	}
	return n, m, true, nil
}

// cmdStat answers "+OK count octets" for the messages not deleted.
func cmdStat(s *session, arg string) error {
	if arg != "" {
		return s.invalid("-ERR STAT takes no arguments")
	}
	n, size := s.drop.stat()
	s.reply(fmt.Sprintf("+OK %d %d", n, size))
	return nil
}

// cmdList gives the size of one message, or a scan listing of all
// messages not deleted.
func cmdList(s *session, arg string) error {
	if arg != "" {
		n, m, ok, err := s.msgArg(arg)
		if ok {
			s.reply(fmt.Sprintf("+OK %d %d", n, m.size))
		}
		return err
	}
	n, size := s.drop.stat()
	s.reply(fmt.Sprintf("+OK %d messages (%d octets)", n, size))
	for i, m := range s.drop.msgs {
		if !m.deleted {
			s.reply(fmt.Sprintf("%d %d", i+1, m.size))
		}
	}
	s.reply(".")
	return nil
}

// cmdUidl gives the unique-id of one message or of all messages not
// deleted (RFC 1939 §7).
func cmdUidl(s *session, arg string) error {
	if arg != "" {
		n, m, ok, err := s.msgArg(arg)
		if ok {
			s.reply(fmt.Sprintf("+OK %d %s", n, s.drop.uniqueID(m)))
		}
		return err
	}
	s.reply("+OK unique-id listing follows")
	for i := range s.drop.msgs {
		if m := &s.drop.msgs[i]; !m.deleted {
			s.reply(fmt.Sprintf("%d %s", i+1, s.drop.uniqueID(m)))
		}
	}
	s.reply(".")
	return nil
}

// cmdRetr sends a whole message.
func cmdRetr(s *session, arg string) error {
	_, m, ok, err := s.msgArg(arg)
	if !ok {
		return err
	}
	if err := s.sendMessage(m, fmt.Sprintf("+OK %d octets", m.size), allLines); err != nil {
		return err
	}
	m.retrieved = true
	return nil
}

// cmdTop sends the header and the first lines of a message's body.
func cmdTop(s *session, arg string) error {
	num, count, found := strings.Cut(arg, " ")
	lines, perr := parseNumber(count)
	if !found || perr != nil {
		return s.invalid("-ERR TOP needs a message number and a line count")
	}
	_, m, ok, err := s.msgArg(num)
	if !ok {
		return err
	}
	return s.sendMessage(m, "+OK top of message follows", lines)
}

// sendMessage streams a message's stored bytes after the positive
// response. A message that cannot be read (expunged by another client
// and collected) gets -ERR; a failure while sending ends the session, as
// the response would otherwise be incomplete.
func (s *session) sendMessage(m *dropMsg, ok string, bodyLines int) error {
	ctx, cancel := context.WithTimeout(s.ctx, storeTimeout)
	defer cancel()
	blob, _, err := s.srv.st.OpenBlob(ctx, m.blobID)
	if err != nil {
		s.log.Warn("pop3 opening message", "uid", m.uid, "err", err)
		s.internalError()
		s.reply("-ERR [SYS/TEMP] message cannot be read now")
		return nil
	}
	defer blob.Close()
	s.reply(ok)
	if err := writeMessage(s.w, blob, bodyLines); err != nil {
		return fmt.Errorf("sending message uid %d: %w", m.uid, err)
	}
	return nil
}

// cmdDele marks a message as deleted; it is removed at QUIT.
func cmdDele(s *session, arg string) error {
	n, m, ok, err := s.msgArg(arg)
	if !ok {
		return err
	}
	m.deleted = true
	s.reply(fmt.Sprintf("+OK message %d deleted", n))
	return nil
}

// cmdNoop does nothing.
func cmdNoop(s *session, arg string) error {
	if arg != "" {
		return s.invalid("-ERR NOOP takes no arguments")
	}
	s.reply("+OK")
	return nil
}

// cmdRset unmarks the messages marked as deleted.
func cmdRset(s *session, arg string) error {
	if arg != "" {
		return s.invalid("-ERR RSET takes no arguments")
	}
	s.drop.reset()
	n, size := s.drop.stat()
	s.reply(fmt.Sprintf("+OK maildrop has %d messages (%d octets)", n, size))
	return nil
}
