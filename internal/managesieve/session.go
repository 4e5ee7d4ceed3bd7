package managesieve

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"time"
	"unicode/utf8"

	"pimail/internal/metrics"
	"pimail/internal/sieve"
	"pimail/internal/store"
)

type session struct {
	srv      *Server
	conn     net.Conn
	r        *reader
	w        *bufio.Writer
	log      *slog.Logger
	remoteIP string
	tls      bool
	acct     *store.Account
	errors   int
	authFail int
	commands int
	cmd      string // the command being answered, for the metrics
	done     bool
}

func newSession(srv *Server, c net.Conn) *session {
	s := &session{srv: srv, conn: c, w: bufio.NewWriter(c)}
	if host, _, err := net.SplitHostPort(c.RemoteAddr().String()); err == nil {
		s.remoteIP = host
	}
	_, s.tls = c.(*tls.Conn)
	s.r = &reader{br: bufio.NewReader(c), maxLine: srv.cfg.MaxLineLength, maxLiteral: srv.cfg.MaxScriptSize}
	s.log = srv.log.With("proto", "managesieve", "remote", s.remoteIP)
	return s
}

func (s *session) run() {
	defer s.conn.Close()
	defer func() {
		if r := recover(); r != nil {
			s.log.Error("managesieve session panicked", "panic", r)
		}
	}()
	s.capabilities()
	s.ok("", s.srv.cfg.Hostname+" ManageSieve ready")
	for !s.done && s.flush() == nil {
		_ = s.conn.SetReadDeadline(time.Now().Add(s.srv.cfg.IdleTimeout))
		name, args, err := s.r.command()
		s.cmd = ""
		if errors.Is(err, errLiteralBig) {
			// RFC 5804 §2.6: a script over the limit is QUOTA/MAXSIZE.
			s.no("QUOTA/MAXSIZE", fmt.Sprintf("Scripts are limited to %d bytes", s.srv.cfg.MaxScriptSize))
			continue
		}
		if errors.Is(err, errSyntax) || errors.Is(err, errTooLong) {
			s.bad(fmt.Sprintf("%v", err))
			continue
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				s.log.Debug("managesieve read", "err", err)
			}
			return
		}
		s.dispatch(name, args)
	}
	s.flush()
}

func (s *session) flush() error {
	_ = s.conn.SetWriteDeadline(time.Now().Add(time.Minute))
	return s.w.Flush()
}

// Responses (RFC 5804 §1.3): OK, NO or BYE, a response code in
// parentheses, and a human-readable text.
func (s *session) respond(kind, code, text string) {
	s.w.WriteString(kind)
	if code != "" {
		s.w.WriteString(" (" + code + ")")
	}
	if text != "" {
		s.w.WriteString(" " + quote(text))
	}
	s.w.WriteString("\r\n")
}

func (s *session) ok(code, text string) { s.respond("OK", code, text) }
func (s *session) no(code, text string) { s.respond("NO", code, text) }

// bad answers a malformed or misplaced command; too many end the session.
func (s *session) bad(text string) {
	s.errors++
	metrics.CommandFailures.With(metrics.ProtoManageSieve, strings.ToLower(s.cmd)).Inc()
	if s.errors >= s.srv.cfg.MaxErrors {
		s.respond("BYE", "", "Too many bad commands")
		s.done = true
		return
	}
	s.no("", text)
}

// authAllowed is the project's rule for passwords: over TLS, from
// loopback, or anywhere when the administrator allows it.
func (s *session) authAllowed() bool {
	if s.tls || s.srv.cfg.AllowInsecureAuth {
		return true
	}
	ip, err := netip.ParseAddr(s.remoteIP)
	return err == nil && ip.Unmap().IsLoopback()
}

// capabilities writes the capability lines (RFC 5804 §1.7).
func (s *session) capabilities() {
	line := func(k, v string) { s.w.WriteString(quote(k) + " " + quote(v) + "\r\n") }
	line("IMPLEMENTATION", "pimail")
	if s.acct == nil {
		mechs := ""
		if s.authAllowed() {
			mechs = "PLAIN SCRAM-SHA-256"
		}
		line("SASL", mechs)
	}
	line("SIEVE", strings.Join(sieve.Extensions, " "))
	if s.srv.cfg.TLS != nil && !s.tls {
		s.w.WriteString(`"STARTTLS"` + "\r\n")
	}
	if s.srv.cfg.MaxRedirects > 0 {
		line("MAXREDIRECTS", fmt.Sprint(s.srv.cfg.MaxRedirects))
	}
	line("VERSION", "1.0")
}

type handler func(s *session, args []argument)

var (
	preAuth = map[string]handler{
		"AUTHENTICATE": cmdAuthenticate, "STARTTLS": cmdStartTLS,
		"CAPABILITY": cmdCapability, "LOGOUT": cmdLogout, "NOOP": cmdNoop,
	}
	postAuth = map[string]handler{
		"CAPABILITY": cmdCapability, "LOGOUT": cmdLogout, "NOOP": cmdNoop,
		"HAVESPACE": cmdHaveSpace, "PUTSCRIPT": cmdPutScript, "LISTSCRIPTS": cmdListScripts,
		"SETACTIVE": cmdSetActive, "GETSCRIPT": cmdGetScript, "DELETESCRIPT": cmdDeleteScript,
		"RENAMESCRIPT": cmdRenameScript, "CHECKSCRIPT": cmdCheckScript,
	}
)

func (s *session) dispatch(name string, args []argument) {
	s.commands++
	s.cmd = "unknown" // a bounded metrics label
	if _, known := postAuth[name]; known || preAuth[name] != nil {
		s.cmd = name
	}
	table := postAuth
	if s.acct == nil {
		table = preAuth
		if s.commands > maxPreAuthCommands {
			s.respond("BYE", "", "Too many commands without logging in")
			s.done = true
			return
		}
	}
	h, ok := table[name]
	if !ok {
		if _, known := postAuth[name]; known {
			s.bad(name + " needs a login first")
			return
		}
		s.bad("Unknown command " + name)
		return
	}
	metrics.Commands.With(metrics.ProtoManageSieve, strings.ToLower(name)).Inc()
	h(s, args)
}

// strArgs checks that args are n strings.
func (s *session) strArgs(args []argument, n int, usage string) ([]string, bool) {
	if len(args) != n {
		s.bad("Usage: " + usage)
		return nil, false
	}
	out := make([]string, n)
	for i, a := range args {
		if a.isNum {
			s.bad("Usage: " + usage)
			return nil, false
		}
		out[i] = a.s
	}
	return out, true
}

func cmdCapability(s *session, args []argument) {
	if len(args) != 0 {
		s.bad("CAPABILITY takes no arguments")
		return
	}
	s.capabilities()
	s.ok("", "Capability completed")
}

func cmdLogout(s *session, _ []argument) {
	s.ok("", "Logout completed")
	s.done = true
}

// cmdNoop answers with the client's tag, if any (RFC 5804 §2.14).
func cmdNoop(s *session, args []argument) {
	if len(args) == 1 && !args[0].isNum {
		s.ok("TAG "+quote(args[0].s), "Done")
		return
	}
	if len(args) > 0 {
		s.bad("Usage: NOOP [tag]")
		return
	}
	s.ok("", "Done")
}

// cmdStartTLS starts TLS (RFC 5804 §2.2) and sends the capabilities
// again, which may now offer SASL.
func cmdStartTLS(s *session, args []argument) {
	if len(args) != 0 || s.srv.cfg.TLS == nil || s.tls {
		s.bad("STARTTLS not available")
		return
	}
	s.ok("", "Begin TLS negotiation now")
	if s.flush() != nil {
		s.done = true
		return
	}
	tc := tls.Server(s.conn, s.srv.cfg.TLS)
	_ = tc.SetDeadline(time.Now().Add(handshakeTimeout))
	if err := tc.HandshakeContext(s.srv.ctx); err != nil {
		s.log.Info("managesieve tls handshake failed", "err", err)
		s.done = true
		return
	}
	_ = tc.SetDeadline(time.Time{})
	s.conn, s.tls = tc, true
	s.w.Reset(tc)
	s.r.br.Reset(tc) // anything sent before the handshake is dropped
	s.capabilities()
	s.ok("", "TLS negotiation successful")
}

func (s *session) storeCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(s.srv.ctx, storeTimeout)
}

// validName checks a script name (RFC 5804 §1.6): UTF-8 without control
// characters or line separators, at most 128 octets.
func validName(n string) bool {
	if n == "" || len(n) > 128 || !utf8.ValidString(n) {
		return false
	}
	for _, r := range n {
		if r < 0x20 || (r >= 0x7f && r <= 0x9f) || r == 0x2028 || r == 0x2029 {
			return false
		}
	}
	return true
}

// storeFailed answers a store error: a missing script is NONEXISTENT,
// anything else a temporary failure (logged, not shown).
func (s *session) storeFailed(err error, what string) {
	switch {
	case errors.Is(err, store.ErrNotFound):
		s.no("NONEXISTENT", "There is no script "+what)
	case errors.Is(err, store.ErrExists):
		s.no("ALREADYEXISTS", "A script "+what+" exists already")
	case errors.Is(err, store.ErrScriptActive):
		s.no("ACTIVE", "Script "+what+" is active; make another one active first")
	default:
		s.log.Error("managesieve store", "err", err)
		s.no("TRYLATER", "Temporary failure, try again later")
	}
}

// checkSpace answers whether a script of size bytes can be stored as
// name (RFC 5804 §2.5), and writes the NO when not.
func (s *session) checkSpace(name string, size int64) bool {
	if size > s.srv.cfg.MaxScriptSize {
		s.no("QUOTA/MAXSIZE", fmt.Sprintf("Scripts are limited to %d bytes", s.srv.cfg.MaxScriptSize))
		return false
	}
	ctx, cancel := s.storeCtx()
	defer cancel()
	list, err := s.srv.st.SieveScripts(ctx, s.acct.ID)
	if err != nil {
		s.storeFailed(err, "")
		return false
	}
	for _, sc := range list {
		if sc.Name == name {
			return true
		}
	}
	if len(list) >= s.srv.cfg.MaxScripts {
		s.no("QUOTA/MAXSCRIPTS", fmt.Sprintf("At most %d scripts per account", s.srv.cfg.MaxScripts))
		return false
	}
	return true
}

func cmdHaveSpace(s *session, args []argument) {
	if len(args) != 2 || args[0].isNum || !args[1].isNum {
		s.bad(`Usage: HAVESPACE "name" size`)
		return
	}
	if !validName(args[0].s) {
		s.bad("Invalid script name")
		return
	}
	if s.checkSpace(args[0].s, args[1].num) {
		s.ok("", "Putscript would succeed")
	}
}

// checkScript parses a script and answers NO with the place of the first
// error (RFC 5804 §2.6).
func (s *session) checkScript(content string) bool {
	if !utf8.ValidString(content) {
		s.no("", "The script is not UTF-8")
		return false
	}
	if _, err := sieve.Parse(content); err != nil {
		s.no("", err.Error())
		return false
	}
	return true
}

func cmdPutScript(s *session, args []argument) {
	a, ok := s.strArgs(args, 2, `PUTSCRIPT "name" {size+}`)
	if !ok {
		return
	}
	name, content := a[0], a[1]
	if !validName(name) {
		s.bad("Invalid script name")
		return
	}
	if !s.checkSpace(name, int64(len(content))) || !s.checkScript(content) {
		return
	}
	ctx, cancel := s.storeCtx()
	defer cancel()
	if err := s.srv.st.PutSieveScript(ctx, s.acct.ID, name, content); err != nil {
		s.storeFailed(err, quote(name))
		return
	}
	s.log.Info("sieve script stored", "script", name, "size", len(content))
	s.ok("", "Script stored")
}

func cmdCheckScript(s *session, args []argument) {
	a, ok := s.strArgs(args, 1, `CHECKSCRIPT {size+}`)
	if !ok {
		return
	}
	if s.checkScript(a[0]) {
		s.ok("", "Script is valid")
	}
}

func cmdListScripts(s *session, args []argument) {
	if len(args) != 0 {
		s.bad("LISTSCRIPTS takes no arguments")
		return
	}
	ctx, cancel := s.storeCtx()
	defer cancel()
	list, err := s.srv.st.SieveScripts(ctx, s.acct.ID)
	if err != nil {
		s.storeFailed(err, "")
		return
	}
	for _, sc := range list {
		s.w.WriteString(quote(sc.Name))
		if sc.Active {
			s.w.WriteString(" ACTIVE")
		}
		s.w.WriteString("\r\n")
	}
	s.ok("", "Listscripts completed")
}

func cmdSetActive(s *session, args []argument) {
	a, ok := s.strArgs(args, 1, `SETACTIVE "name"`)
	if !ok {
		return
	}
	ctx, cancel := s.storeCtx()
	defer cancel()
	if err := s.srv.st.SetActiveSieveScript(ctx, s.acct.ID, a[0]); err != nil {
		s.storeFailed(err, quote(a[0]))
		return
	}
	s.log.Info("sieve script activated", "script", a[0])
	s.ok("", "Active script set")
}

func cmdGetScript(s *session, args []argument) {
	a, ok := s.strArgs(args, 1, `GETSCRIPT "name"`)
	if !ok {
		return
	}
	ctx, cancel := s.storeCtx()
	defer cancel()
	sc, err := s.srv.st.SieveScript(ctx, s.acct.ID, a[0])
	if err != nil {
		s.storeFailed(err, quote(a[0]))
		return
	}
	fmt.Fprintf(s.w, "{%d}\r\n%s\r\n", len(sc.Content), sc.Content)
	s.ok("", "Getscript completed")
}

func cmdDeleteScript(s *session, args []argument) {
	a, ok := s.strArgs(args, 1, `DELETESCRIPT "name"`)
	if !ok {
		return
	}
	ctx, cancel := s.storeCtx()
	defer cancel()
	if err := s.srv.st.DeleteSieveScript(ctx, s.acct.ID, a[0]); err != nil {
		s.storeFailed(err, quote(a[0]))
		return
	}
	s.ok("", "Script deleted")
}

func cmdRenameScript(s *session, args []argument) {
	a, ok := s.strArgs(args, 2, `RENAMESCRIPT "old" "new"`)
	if !ok {
		return
	}
	if !validName(a[1]) {
		s.bad("Invalid script name")
		return
	}
	ctx, cancel := s.storeCtx()
	defer cancel()
	if err := s.srv.st.RenameSieveScript(ctx, s.acct.ID, a[0], a[1]); err != nil {
		what := quote(a[0])
		if errors.Is(err, store.ErrExists) {
			what = quote(a[1])
		}
		s.storeFailed(err, what)
		return
	}
	s.ok("", "Script renamed")
}
