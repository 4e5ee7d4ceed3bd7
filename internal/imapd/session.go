package imapd

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
	"syscall"
	"time"

	"pimail/internal/imapwire"
	"pimail/internal/metrics"
	"pimail/internal/store"
)

type sessionState int

const (
	stateNotAuth sessionState = iota
	stateAuth
	stateSelected
	stateLogout
)

// session is one IMAP connection. All its fields are used by its own
// goroutine only (IDLE hands the reader to a helper goroutine and waits
// for it before going on).
type session struct {
	srv      *Server
	conn     net.Conn
	r        *imapwire.Reader
	w        *imapwire.Writer
	log      *slog.Logger
	ctx      context.Context
	remoteIP string
	tls      bool

	state  sessionState
	acct   store.Account
	events <-chan store.Event
	unsub  func()
	rev2   bool // ENABLE IMAP4rev2 (RFC 9051 §6.3.1)
	utf8   bool // ENABLE UTF8=ACCEPT (RFC 6855)
	// condstore is set by ENABLE CONDSTORE or any CONDSTORE enabling
	// command (RFC 7162 §3.1); qresync by ENABLE QRESYNC (§3.2.3).
	condstore bool
	qresync   bool
	expunged  bool           // expunges were reported and HIGHESTMODSEQ not yet sent
	deflate   *deflateWriter // COMPRESS=DEFLATE is active (RFC 4978)
	sel       *mailboxView
	notify    *notifyState // NOTIFY SET is in force (RFC 5465, notify.go)
	bad       int          // consecutive BAD responses
	preAuth   int          // commands before authentication
	failed    int          // failed authentications
}

func newSession(srv *Server, c net.Conn) *session {
	s := &session{srv: srv, conn: c, ctx: srv.ctx}
	if host, _, err := net.SplitHostPort(c.RemoteAddr().String()); err == nil {
		s.remoteIP = host
	}
	_, s.tls = c.(*tls.Conn)
	s.log = srv.log.With("remote", c.RemoteAddr().String())
	s.w = imapwire.NewWriter(bufio.NewWriterSize(c, 16*1024))
	s.r = imapwire.NewReader(bufio.NewReaderSize(c, 16*1024), s.limits(), s.sendContinue)
	return s
}

// limits returns the reader limits for the current state: small literals
// before authentication (DESIGN: nothing expensive before trust).
func (s *session) limits() imapwire.Limits {
	l := imapwire.Limits{MaxLine: s.srv.cfg.MaxLineLength, MaxLiteral: s.srv.cfg.MaxLiteralSize}
	if s.state == stateNotAuth {
		l.MaxLiteral = preAuthLiteral
		l.MaxDiscard = 4 * preAuthLiteral
		// LOGIN has two arguments; without this cap the sum of many small
		// literals in one command could reach MaxLiteralSize before
		// anyone logged in (the Cyrus CVE-2024-34055 class).
		l.MaxCommandLiterals = 2 * preAuthLiteral
	}
	return l
}

func (s *session) timeout() time.Duration {
	if s.state == stateNotAuth {
		return min(s.srv.cfg.IdleTimeout, preAuthTimeout)
	}
	return s.srv.cfg.IdleTimeout
}

// sendContinue answers a synchronising literal (RFC 9051 §7.5).
func (s *session) sendContinue(int64) error {
	s.w.Continue("Ready for literal data")
	return s.flush()
}

func (s *session) flush() error {
	_ = s.conn.SetWriteDeadline(time.Now().Add(writeTimeout))
	if err := s.w.Flush(); err != nil {
		return fmt.Errorf("writing response: %w", err)
	}
	if s.deflate != nil {
		if err := s.deflate.Flush(); err != nil {
			return fmt.Errorf("writing compressed response: %w", err)
		}
	}
	return nil
}

func (s *session) run() {
	defer func() {
		if v := recover(); v != nil {
			s.log.Error("imap session panic", "panic", v, "stack", string(debug.Stack()))
			metrics.InternalErrors.With(metrics.ProtoIMAP).Inc()
			s.w.Untagged("BYE [SERVERBUG] Internal error, closing connection")
			_ = s.flush()
		}
		s.cleanup()
	}()
	s.w.Raw("* OK [CAPABILITY ").Raw(s.capabilities()).Raw("] ").Raw(s.srv.cfg.Hostname).Raw(" IMAP server ready").CRLF()
	if err := s.flush(); err != nil {
		return
	}
	for s.state != stateLogout {
		if err := s.serveOne(); err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) && s.srv.ctx.Err() == nil {
				s.log.Debug("imap session ended", "err", err)
			}
			return
		}
	}
}

func (s *session) cleanup() {
	if s.unsub != nil {
		s.unsub()
	}
	s.conn.Close()
}

// serveOne reads and executes one command (with the APPENDs pipelined
// behind it, see serveAppends). A non-nil error ends the session.
func (s *session) serveOne() error {
	_ = s.conn.SetReadDeadline(time.Now().Add(s.timeout()))
	if s.notify != nil {
		if err := s.waitForCommand(); err != nil {
			return s.readFailed(err)
		}
	}
	cmd, err := s.r.ReadCommand()
	if err != nil {
		return s.readFailed(err)
	}
	if s.state == stateNotAuth {
		s.preAuth++
		if s.preAuth > maxPreAuthCommands {
			s.w.Untagged("BYE Too many commands without authentication")
			_ = s.flush()
			return errors.New("too many commands before authentication")
		}
	}
	if cmd.Name == "APPEND" && s.state != stateNotAuth && s.appendFollows() {
		return s.serveAppends(cmd)
	}
	if err := s.settle(s.dispatch(cmd)); err != nil {
		return err
	}
	return s.flush()
}

// readFailed answers a command that could not be read: a BAD or NO for
// one that could not be parsed, and the end of the session for a broken
// connection, a timeout or a fatal error.
func (s *session) readFailed(err error) error {
	var pe *imapwire.Error
	if !errors.As(err, &pe) {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			s.w.Untagged("BYE Autologout; idle for too long")
			_ = s.flush()
		}
		return err
	}
	status := "BAD"
	if pe.No {
		status = "NO"
	}
	// The command could not be parsed: its name is not trusted.
	metrics.Commands.With(metrics.ProtoIMAP, metrics.UnknownCommand).Inc()
	metrics.CommandFailures.With(metrics.ProtoIMAP, metrics.UnknownCommand).Inc()
	s.w.Tagged(pe.Tag, status, pe.Code, pe.Msg)
	if pe.Fatal {
		s.w.Untagged("BYE Too much data, closing connection")
		_ = s.flush()
		return fmt.Errorf("fatal command error: %w", pe)
	}
	if !pe.No {
		if err := s.countBad(); err != nil {
			return err
		}
	}
	return s.flush()
}

// settle does the bookkeeping after a command was answered: the counts
// of bad commands and failed logins. A non-nil error ends the session
// (with a BYE sent); otherwise the caller flushes.
func (s *session) settle(res result) error {
	if s.state == stateLogout {
		return nil // the caller flushes; run's loop ends
	}
	if res.status == "BAD" {
		return s.countBad()
	}
	s.bad = 0
	if s.failed >= maxAuthFailures {
		s.w.Untagged("BYE Too many authentication failures")
		_ = s.flush()
		return errors.New("too many authentication failures")
	}
	return nil
}

func (s *session) countBad() error {
	s.bad++
	if s.bad >= maxBadCommands {
		s.w.Untagged("BYE Too many invalid commands")
		_ = s.flush()
		return errors.New("too many invalid commands")
	}
	return nil
}

// result is the tagged response of a command.
type result struct {
	status string // OK, NO, BAD
	code   string
	text   string
}

// respError is returned by handlers for NO and BAD responses.
type respError struct{ result }

func (e *respError) Error() string { return e.status + " " + e.text }

func bad(format string, a ...any) error {
	return &respError{result{status: "BAD", text: fmt.Sprintf(format, a...)}}
}

func no(code, format string, a ...any) error {
	return &respError{result{status: "NO", code: code, text: fmt.Sprintf(format, a...)}}
}

// handler runs a command. It writes untagged responses and returns the
// code and text of the tagged OK, or an error (a *respError for NO/BAD).
type handler func(s *session, cmd *command) (code, text string, err error)

// command is one command with what the dispatcher knows about it.
type command struct {
	tag  string
	name string
	args []imapwire.Arg
	uid  bool // UID FETCH/SEARCH/STORE/COPY/MOVE/EXPUNGE
}

// dispatch runs one command and writes its tagged response.
func (s *session) dispatch(c *imapwire.Command) result {
	cmd := &command{tag: c.Tag, name: c.Name, args: c.Args}
	defer func() { metrics.Commands.With(metrics.ProtoIMAP, cmd.label()).Inc() }()
	if cmd.name == "UID" {
		if len(cmd.args) == 0 || cmd.args[0].Kind != imapwire.KindAtom {
			return s.finish(cmd, result{status: "BAD", text: "UID needs a command"})
		}
		cmd.uid = true
		cmd.name = upperASCII(cmd.args[0].Str)
		cmd.args = cmd.args[1:]
		switch cmd.name {
		case "FETCH", "SEARCH", "STORE", "COPY", "MOVE", "EXPUNGE", "SORT", "THREAD":
		default:
			return s.finish(cmd, result{status: "BAD", text: "unknown UID command"})
		}
	}
	spec, ok := commands[cmd.name]
	if !ok {
		return s.finish(cmd, result{status: "BAD", text: "unknown command"})
	}
	if !spec.allowed(s.state) {
		return s.finish(cmd, result{status: "BAD", text: "command not allowed in this state"})
	}
	code, text, err := spec.fn(s, cmd)
	if errors.Is(err, errAlreadyAnswered) {
		return result{status: "OK"}
	}
	return s.complete(cmd, code, text, err)
}

// complete writes the tagged response of a handler's outcome: OK with
// code and text, or the NO or BAD its error stands for.
func (s *session) complete(cmd *command, code, text string, err error) result {
	res := result{status: "OK", code: code, text: text}
	if err != nil {
		var re *respError
		if errors.As(err, &re) {
			res = re.result
		} else if errors.Is(err, syscall.ENOSPC) {
			// The disk (or the database) is full. RFC 5530 §3: OVERQUOTA
			// tells the client that storing more will not work until
			// space is freed; nothing was stored.
			s.log.Warn("imap command failed: no space left", "cmd", cmd.name, "err", err)
			res = result{status: "NO", code: "OVERQUOTA", text: "insufficient storage on the server, try again later"}
		} else if errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) {
			// The client went away mid-command (e.g. during IDLE): not
			// a server fault, and there is no one left to answer.
			s.log.Info("imap client left during a command", "cmd", cmd.name, "err", err)
			res = result{status: "NO", text: "connection closed"}
		} else {
			s.log.Error("imap command failed", "cmd", cmd.name, "err", err)
			metrics.InternalErrors.With(metrics.ProtoIMAP).Inc()
			res = result{status: "NO", code: "SERVERBUG", text: "internal error"}
		}
	}
	if res.text == "" {
		res.text = cmd.name + " completed"
	}
	return s.finish(cmd, res)
}

// finish reports pending mailbox changes where allowed and writes the
// tagged response.
func (s *session) finish(cmd *command, res result) result {
	if s.sel != nil && s.state == stateSelected && cmd.name != "SELECT" && cmd.name != "EXAMINE" {
		// RFC 9051 §7.5.1: no EXPUNGE while responding to FETCH, STORE or
		// SEARCH (sequence-number forms), nor to unknown commands.
		noExpunge := !cmd.uid && (cmd.name == "FETCH" || cmd.name == "STORE" || cmd.name == "SEARCH" ||
			cmd.name == "SORT" || cmd.name == "THREAD")
		force := cmd.name == "NOOP" || cmd.name == "CHECK"
		if err := s.syncMailbox(!noExpunge && res.status != "BAD", force); err != nil {
			s.log.Error("imap mailbox sync", "err", err)
		}
	}
	if err := s.sendNotifications(); err != nil {
		s.log.Error("imap notifications", "err", err)
	}
	if res.status != "OK" {
		metrics.CommandFailures.With(metrics.ProtoIMAP, cmd.label()).Inc()
	}
	s.w.Tagged(cmd.tag, res.status, res.code, res.text)
	return res
}

// label is the command's name for metrics: a name from the commands
// table ("UID FETCH" for the UID forms), else metrics.UnknownCommand, so
// that no text from the client becomes a label value.
func (c *command) label() string {
	if _, ok := commands[c.name]; !ok {
		return metrics.UnknownCommand
	}
	if c.uid {
		switch c.name {
		case "FETCH", "SEARCH", "STORE", "COPY", "MOVE", "EXPUNGE", "SORT", "THREAD":
			return "UID " + c.name
		}
		return metrics.UnknownCommand
	}
	return c.name
}

// cmdSpec says in which states a command is allowed.
type cmdSpec struct {
	fn     handler
	states uint8 // bit set of 1<<sessionState
}

func (c cmdSpec) allowed(st sessionState) bool { return c.states&(1<<st) != 0 }

const (
	anyState    = 1<<stateNotAuth | 1<<stateAuth | 1<<stateSelected
	notAuthOnly = 1 << stateNotAuth
	authed      = 1<<stateAuth | 1<<stateSelected
	selected    = 1 << stateSelected
)

var commands map[string]cmdSpec

func init() {
	commands = map[string]cmdSpec{
		"CAPABILITY":   {cmdCapability, anyState},
		"NOOP":         {cmdNoop, anyState},
		"LOGOUT":       {cmdLogout, anyState},
		"ID":           {cmdID, anyState},
		"STARTTLS":     {cmdStartTLS, notAuthOnly},
		"LOGIN":        {cmdLogin, notAuthOnly},
		"AUTHENTICATE": {cmdAuthenticate, notAuthOnly},
		"ENABLE":       {cmdEnable, authed},
		"NAMESPACE":    {cmdNamespace, authed},
		"SELECT":       {cmdSelect, authed},
		"EXAMINE":      {cmdSelect, authed},
		"CREATE":       {cmdCreate, authed},
		"DELETE":       {cmdDelete, authed},
		"RENAME":       {cmdRename, authed},
		"SUBSCRIBE":    {cmdSubscribe, authed},
		"UNSUBSCRIBE":  {cmdSubscribe, authed},
		"LIST":         {cmdList, authed},
		"LSUB":         {cmdLsub, authed},
		"STATUS":       {cmdStatus, authed},
		"APPEND":       {cmdAppend, authed},
		"IDLE":         {cmdIdle, authed},
		"NOTIFY":       {cmdNotify, authed},
		"COMPRESS":     {cmdCompress, authed},
		"GETQUOTAROOT": {cmdGetQuotaRoot, authed},
		"GETQUOTA":     {cmdGetQuota, authed},
		"CHECK":        {cmdNoop, selected},
		"CANCELUPDATE": {cmdCancelUpdate, selected},
		"CLOSE":        {cmdClose, selected},
		"UNSELECT":     {cmdUnselect, selected},
		"EXPUNGE":      {cmdExpunge, selected},
		"SEARCH":       {cmdSearch, selected},
		"SORT":         {cmdSort, selected},
		"THREAD":       {cmdThread, selected},
		"FETCH":        {cmdFetch, selected},
		"STORE":        {cmdStore, selected},
		"COPY":         {cmdCopy, selected},
		"MOVE":         {cmdCopy, selected},
	}
}

func upperASCII(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'a' && c <= 'z' {
			b[i] = c - 32
		}
	}
	return string(b)
}
