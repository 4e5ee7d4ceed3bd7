// Package admin is pimail's web administration: a dashboard, domains,
// accounts, aliases and catch-alls, the outbound queue and the delivery
// log, as server-rendered pages under /admin/.
//
// Who may use it: administrator accounts only (store.AccountAdmin: every
// account flagged admin; while none is flagged, the oldest account). The
// check runs on every request, so revoking the flag or disabling the
// account ends access at once.
//
// Security (DESIGN.md, Security): every page is html/template, so every
// string that came from mail or the network (addresses, subjects, SMTP
// replies) is escaped; no page has any script (CSP script-src 'none');
// sessions are random ids kept in memory, in HttpOnly SameSite=Strict
// cookies (Secure behind TLS) scoped to /admin/; every POST needs the
// session's CSRF token and a same-origin request.
package admin

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"time"

	"pimail/internal/store"
	"pimail/internal/websession"
)

// Prefix is the path the handler serves; mount it without stripping:
// mux.Handle(admin.Prefix, admin.New(…)).
const Prefix = "/admin/"

// Authenticator checks a user name and password (internal/auth implements it).
type Authenticator interface {
	Authenticate(ctx context.Context, username, password, remoteIP string) (store.Account, error)
}

// Config configures the admin. The zero value is usable.
type Config struct {
	// Hostname is shown on the pages.
	Hostname string
	// SecureCookies marks cookies Secure (set it behind TLS).
	SecureCookies bool
	// DataDir is the data directory, shown on the dashboard.
	DataDir string
	// SessionTTL is how long an idle session lives; 0 means 1 hour.
	SessionTTL time.Duration
	// DeliveryLog, when set, is flushed before the log is read, so that
	// the pages show every entry logged so far (the logger writes in
	// batches).
	DeliveryLog interface{ Flush(context.Context) error }
	// Sieve holds the accounts' Sieve scripts (sieve.go); nil hides the
	// filters page.
	Sieve SieveStore
}

// Store is what the admin pages need of the store.
type Store interface {
	store.DirectoryReader
	store.DirectoryWriter
	store.Credentials
	store.AccountAdmin
	store.OutboundQueue
	store.BlobReader
	store.DeliveryLog
	store.Statistics
	store.Sessions
}

// Server is the admin HTTP handler.
type Server struct {
	cfg      Config
	st       Store
	authn    Authenticator
	log      *slog.Logger
	mux      *http.ServeMux
	sessions *websession.Store
	tmpl     *templates
	now      func() time.Time
}

// New returns the admin handler for paths under Prefix.
func New(cfg Config, st Store, authn Authenticator, logger *slog.Logger) *Server {
	if cfg.Hostname == "" {
		cfg.Hostname = "localhost"
	}
	if cfg.SessionTTL <= 0 {
		cfg.SessionTTL = time.Hour
	}
	if logger == nil {
		logger = slog.Default()
	}
	s := &Server{
		cfg:      cfg,
		st:       st,
		authn:    authn,
		log:      logger.With("component", "admin"),
		sessions: websession.New(st, sessionApp, cfg.SessionTTL, maxSessions),
		tmpl:     mustTemplates(),
		now:      time.Now,
	}
	s.routes()
	return s
}

func (s *Server) routes() {
	m := http.NewServeMux()
	m.Handle("GET /admin/static/", staticHandler())
	m.HandleFunc("GET /admin/login", s.loginPage)
	m.HandleFunc("POST /admin/login", s.loginSubmit)
	m.HandleFunc("POST /admin/logout", s.authed(s.logout))
	m.HandleFunc("GET /admin/{$}", s.authed(s.dashboard))
	m.HandleFunc("GET /admin/domains", s.authed(s.domainsPage))
	m.HandleFunc("POST /admin/domains", s.authed(s.domainsSubmit))
	m.HandleFunc("GET /admin/accounts", s.authed(s.accountsPage))
	m.HandleFunc("POST /admin/accounts", s.authed(s.accountsSubmit))
	m.HandleFunc("GET /admin/aliases", s.authed(s.aliasesPage))
	m.HandleFunc("POST /admin/aliases", s.authed(s.aliasesSubmit))
	m.HandleFunc("GET /admin/queue", s.authed(s.queuePage))
	m.HandleFunc("GET /admin/queue/{id}", s.authed(s.queueShow))
	m.HandleFunc("POST /admin/queue/{id}", s.authed(s.queueSubmit))
	m.HandleFunc("GET /admin/log", s.authed(s.logPage))
	m.HandleFunc("GET /admin/sieve", s.authed(s.sievePage))
	m.HandleFunc("POST /admin/sieve", s.authed(s.sieveSubmit))
	m.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		s.httpError(w, r, http.StatusNotFound, "There is no such page.", nil)
	})
	s.mux = m
}

// csp allows nothing but this origin's stylesheet and images: the admin
// has no script at all.
const csp = "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; " +
	"base-uri 'none'; frame-ancestors 'none'"

// ServeHTTP sets the security headers every response carries and dispatches.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", csp)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "same-origin") // Origin stays on same-origin POSTs; nothing leaks elsewhere
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	h.Set("Cache-Control", "no-store")
	if s.cfg.SecureCookies {
		h.Set("Strict-Transport-Security", "max-age=31536000")
	}
	s.mux.ServeHTTP(w, r)
}

// httpError answers with a plain page; err is logged for server faults and
// never shown.
func (s *Server) httpError(w http.ResponseWriter, r *http.Request, code int, msg string, err error) {
	if err != nil && code >= 500 {
		s.log.Error("admin request failed", "path", r.URL.Path, "err", err)
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(code)
	_ = s.tmpl.render(w, "error", pageData{Title: "Error", Host: s.cfg.Hostname, Error: msg, Data: code})
}

// userError turns a store error from an admin action into a message for
// the page; the second result is false for server faults, which the
// caller reports as such.
func userError(err error, what string) (string, bool) {
	switch {
	case errors.Is(err, store.ErrExists):
		return what + " already exists.", true
	case errors.Is(err, store.ErrNotFound):
		return what + " does not exist.", true
	case errors.Is(err, store.ErrInvalid):
		return what + " is not valid here.", true
	}
	return "", false
}

// flushLog writes the delivery log's buffered entries before a page reads
// the log; a failure only leaves the newest entries out.
func (s *Server) flushLog(ctx context.Context) {
	if s.cfg.DeliveryLog == nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := s.cfg.DeliveryLog.Flush(ctx); err != nil {
		s.log.Warn("flushing the delivery log", "err", err)
	}
}
