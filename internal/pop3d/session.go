package pop3d

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"runtime/debug"
	"strings"
	"time"

	"pimail/internal/metrics"
	"pimail/internal/store"
)

// state is a POP3 session state (RFC 1939 §3).
type state int

const (
	stateAuthorization state = iota
	stateTransaction
	stateDone // after QUIT (and UPDATE) or a fatal error
)

// session is one POP3 connection, used by its own goroutine only.
type session struct {
	srv      *Server
	conn     net.Conn
	r        *lineReader
	w        *bufio.Writer
	log      *slog.Logger
	ctx      context.Context
	remoteIP string
	tls      bool

	state    state
	user     string // from USER, until PASS
	acct     store.Account
	drop     *maildrop // the locked snapshot in the TRANSACTION state
	bad      int       // invalid commands
	failed   int       // failed logins
	commands int       // commands in the AUTHORIZATION state
	cmdName  string    // the command being answered, for metrics ("" before the first)
}

func newSession(srv *Server, c net.Conn) *session {
	s := &session{srv: srv, conn: c, ctx: srv.ctx}
	if host, _, err := net.SplitHostPort(c.RemoteAddr().String()); err == nil {
		s.remoteIP = host
	}
	_, s.tls = c.(*tls.Conn)
	s.log = srv.log.With("remote", c.RemoteAddr().String())
	s.r = newLineReader(c, srv.cfg.MaxLineLength)
	s.w = bufio.NewWriterSize(connWriter{s}, 16*1024)
	return s
}

// connWriter writes to the session's current connection (plain or, after
// STLS, TLS) with a fresh deadline per write, so that a large RETR to a
// slow reader is bounded per buffer and not in total.
type connWriter struct{ s *session }

func (w connWriter) Write(p []byte) (int, error) {
	_ = w.s.conn.SetWriteDeadline(time.Now().Add(w.s.srv.cfg.WriteTimeout))
	return w.s.conn.Write(p)
}

func (s *session) run() {
	defer func() {
		if v := recover(); v != nil {
			s.log.Error("pop3 session panic", "panic", v, "stack", string(debug.Stack()))
			metrics.InternalErrors.With(metrics.ProtoPOP3).Inc()
			s.reply("-ERR [SYS/TEMP] internal error, closing connection")
			_ = s.flush()
		}
		s.cleanup()
	}()
	if tc, ok := s.conn.(*tls.Conn); ok {
		// Implicit TLS (port 995): finish the handshake in bounded time.
		_ = tc.SetDeadline(time.Now().Add(handshakeTimeout))
		if err := tc.HandshakeContext(s.ctx); err != nil {
			s.log.Debug("pop3 tls handshake failed", "err", err)
			return
		}
		_ = tc.SetDeadline(time.Time{})
	}
	// RFC 1939 §4: the greeting is a positive response.
	s.reply("+OK " + s.srv.cfg.Hostname + " POP3 server ready")
	if err := s.flush(); err != nil {
		return
	}
	for s.state != stateDone {
		if err := s.serveOne(); err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) && s.srv.ctx.Err() == nil {
				s.log.Debug("pop3 session ended", "err", err)
			}
			return
		}
	}
}

// cleanup ends the session. A session that ends without QUIT does not
// enter the UPDATE state: its deletions are forgotten (RFC 1939 §6).
func (s *session) cleanup() {
	s.unlock()
	s.conn.Close()
}

// unlock releases the maildrop lock.
func (s *session) unlock() {
	if s.drop != nil {
		s.srv.locks.release(s.acct.ID)
		s.drop = nil
	}
}

// serveOne reads and executes one command; an error ends the session.
func (s *session) serveOne() error {
	// RFC 1939 §3: the autologout timer ends the session without a
	// response and without the UPDATE state.
	_ = s.conn.SetReadDeadline(time.Now().Add(s.srv.cfg.IdleTimeout))
	line, err := s.r.readLine()
	if errors.Is(err, errLineTooLong) {
		s.count(metrics.UnknownCommand)
		return s.invalid("-ERR command line too long")
	}
	if err != nil {
		return err
	}
	if s.state == stateAuthorization {
		s.commands++
		if s.commands > maxPreAuthCommands {
			s.reply("-ERR too many commands without authentication")
			_ = s.flush()
			return errors.New("too many commands before authentication")
		}
	}
	if err := s.dispatch(line); err != nil {
		return err
	}
	if s.failed >= maxAuthFailures {
		s.reply("-ERR [AUTH] too many failed logins, closing connection")
		_ = s.flush()
		return errors.New("too many authentication failures")
	}
	if s.state == stateDone || s.r.buffered() == 0 {
		return s.flush()
	}
	// More pipelined commands are waiting: answer them in one write
	// (RFC 2449 §6.6).
	return nil
}

// invalid answers an invalid command and closes the session after too
// many of them.
func (s *session) invalid(resp string) error {
	s.bad++
	if s.bad >= s.srv.cfg.MaxErrors {
		s.reply("-ERR too many invalid commands, closing connection")
		_ = s.flush()
		return errors.New("too many invalid commands")
	}
	s.reply(resp)
	if s.r.buffered() == 0 {
		return s.flush()
	}
	return nil
}

// count counts a command in the metrics; name is a known keyword or
// metrics.UnknownCommand, never text from the client.
func (s *session) count(name string) {
	s.cmdName = name
	metrics.Commands.With(metrics.ProtoPOP3, name).Inc()
}

// internalError counts a failure of the server (not of the client's
// command) that the client is told about.
func (s *session) internalError() {
	metrics.InternalErrors.With(metrics.ProtoPOP3).Inc()
}

// reply queues one response line; the caller flushes. A negative
// response to a command is counted in the metrics.
func (s *session) reply(line string) {
	if s.cmdName != "" && strings.HasPrefix(line, "-ERR") {
		metrics.CommandFailures.With(metrics.ProtoPOP3, s.cmdName).Inc()
	}
	s.w.WriteString(line)
	s.w.WriteString("\r\n")
}

func (s *session) flush() error {
	if err := s.w.Flush(); err != nil {
		return fmt.Errorf("writing response: %w", err)
	}
	return nil
}

// handler runs one command with its arguments (the rest of the line after
// the keyword and one space). A returned error ends the session.
type handler func(s *session, arg string) error

type command struct {
	states []state
	run    handler
}

// commands maps the keywords of RFC 1939 §§4–6, RFC 2449 §5, RFC 2595 §4
// and RFC 5034 §4 to their handlers and the states they are valid in.
var commands map[string]command

func init() {
	auth := []state{stateAuthorization}
	trans := []state{stateTransaction}
	both := []state{stateAuthorization, stateTransaction}
	commands = map[string]command{
		"CAPA": {both, cmdCapa},
		"QUIT": {both, cmdQuit},
		"USER": {auth, cmdUser},
		"PASS": {auth, cmdPass},
		"AUTH": {auth, cmdAuth},
		"STLS": {auth, cmdStls},
		"STAT": {trans, cmdStat},
		"LIST": {trans, cmdList},
		"UIDL": {trans, cmdUidl},
		"RETR": {trans, cmdRetr},
		"TOP":  {trans, cmdTop},
		"DELE": {trans, cmdDele},
		"NOOP": {trans, cmdNoop},
		"RSET": {trans, cmdRset},
	}
}

// dispatch parses a command line: a case-insensitive keyword, then
// arguments separated by spaces (RFC 1939 §3).
func (s *session) dispatch(line string) error {
	keyword, arg, _ := strings.Cut(line, " ")
	keyword = strings.ToUpper(keyword)
	cmd, ok := commands[keyword]
	if !ok {
		s.count(metrics.UnknownCommand)
		return s.invalid("-ERR unknown command")
	}
	s.count(keyword)
	valid := false
	for _, st := range cmd.states {
		valid = valid || st == s.state
	}
	if !valid {
		return s.invalid("-ERR " + keyword + " not valid in this state")
	}
	if keyword != "PASS" && keyword != "AUTH" {
		s.log.Debug("pop3 command", "line", line)
	}
	return cmd.run(s, arg)
}

// cmdQuit ends the session; in the TRANSACTION state it first applies the
// deletions (the UPDATE state, RFC 1939 §6).
func cmdQuit(s *session, arg string) error {
	if arg != "" {
		return s.invalid("-ERR QUIT takes no arguments")
	}
	s.state = stateDone
	if s.drop == nil {
		s.reply("+OK " + s.srv.cfg.Hostname + " POP3 server signing off")
		return nil
	}
	ctx, cancel := context.WithTimeout(s.ctx, storeTimeout)
	defer cancel()
	removed, err := s.drop.commit(ctx, s.srv.st)
	if err != nil {
		// RFC 1939 §6: some deleted messages not removed gets -ERR.
		s.log.Error("pop3 update failed", "err", err)
		s.internalError()
		s.unlock()
		s.reply("-ERR [SYS/TEMP] some deleted messages not removed")
		return nil
	}
	if removed > 0 {
		s.log.Info("pop3 messages removed", "count", removed)
	}
	n, _ := s.drop.stat()
	// Unlock before answering, so that a client reconnecting right after
	// the response finds the maildrop free.
	s.unlock()
	s.reply(fmt.Sprintf("+OK %s POP3 server signing off (%d messages left)", s.srv.cfg.Hostname, n))
	return nil
}
