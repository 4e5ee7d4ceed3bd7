// Package webmail is pimail's browser interface: server-rendered pages
// (html/template) over the store's index, a little plain JavaScript for
// keyboard shortcuts and live updates (server-sent events fed by the store's
// change feed), and a send path through the local delivery pipeline.
//
// Security model (DESIGN.md, Security): every string that came from mail is
// escaped by html/template; HTML bodies are sanitised on the server with a
// strict bluemonday policy and shown in a sandboxed iframe (no scripts) from
// a separate URL with its own Content-Security-Policy; every response carries
// a strict CSP; sessions use random ids rotated at login, HttpOnly +
// SameSite=Strict cookies (Secure behind TLS) and a CSRF token on every
// state-changing request.
package webmail

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"syscall"
	"time"

	"pimail/internal/delivery"
	"pimail/internal/store"
	"pimail/internal/websession"
)

// Authenticator checks a user name and password (internal/auth implements it).
type Authenticator interface {
	Authenticate(ctx context.Context, username, password, remoteIP string) (store.Account, error)
}

// Config configures the webmail. The zero value is usable.
type Config struct {
	// Hostname names this server in Message-IDs and Received fields, and is
	// the authserv-id whose Authentication-Results fields are trusted.
	Hostname string
	// SecureCookies marks cookies Secure (set it behind TLS); the session
	// cookie then also takes the __Host- prefix.
	SecureCookies bool
	// SessionTTL is how long an idle session lives; 0 means 12 hours.
	SessionTTL time.Duration
	// MaxUploadSize bounds a compose request (all attachments together);
	// 0 means 25 MiB.
	MaxUploadSize int64
	// PageSize is the number of messages per list page; 0 means 50.
	PageSize int
	// Outbound takes messages for recipients in other domains (the
	// outbound queue, *queue.Queue). Nil: sending to other domains is
	// refused with a clear message.
	Outbound Outbound
	// Junk learns from "mark as junk / not junk" and from moves into and
	// out of the Junk folder, as IMAP's do (internal/spam's JunkLearner,
	// shared with imapd). Nil: marking only files the message.
	Junk JunkTrainer
	// Sieve holds the account's Sieve scripts (filters.go); nil hides
	// the filter settings. MaxScriptSize bounds a script (0: 64 KiB).
	Sieve         SieveStore
	MaxScriptSize int64
}

// JunkTrainer learns an account's junk decisions: spam true for a message
// the user marked as junk, false for one taken out of Junk. Junk must not
// block (the learner queues the work).
type JunkTrainer interface {
	Junk(accountID, blobID int64, spam bool)
}

// Outbound is the outbound queue as the webmail uses it. Enqueue stores
// raw for rcpts (DKIM-signing it for local From: domains) and returns once
// it is on disk.
type Outbound interface {
	Enqueue(ctx context.Context, accountID int64, from string, rcpts []string, raw []byte) (int64, error)
}

func (c *Config) setDefaults() {
	if c.Hostname == "" {
		c.Hostname = "localhost"
	}
	if c.SessionTTL <= 0 {
		c.SessionTTL = 12 * time.Hour
	}
	if c.MaxUploadSize <= 0 {
		c.MaxUploadSize = 25 << 20
	}
	if c.PageSize <= 0 {
		c.PageSize = 50
	}
	if c.MaxScriptSize <= 0 {
		c.MaxScriptSize = 64 << 10
	}
}

// Store is what the webmail needs of the store: an account's mail (its
// lists from the index, search, the change feed for live updates), the
// directory (address suggestions), passwords, preferences and sessions.
type Store interface {
	store.DirectoryReader
	store.Credentials
	store.MailboxReader
	store.MailboxWriter
	store.MessageReader
	store.BlobReader
	store.ChangeFeed
	store.Mutator
	store.Appender
	store.Searcher
	store.Lister
	store.ListSorter
	store.Preferences
	store.Sessions
	store.Contacts
	store.Identities
}

// Server is the webmail HTTP handler.
type Server struct {
	cfg         Config
	st          Store
	authn       Authenticator
	pipe        *delivery.Pipeline
	log         *slog.Logger
	mux         *http.ServeMux
	sessions    *websession.Store
	prefs       prefsStore
	tmpl        *templates
	sanitize    *sanitizer
	corr        corrCache
	folderCache folderCache
	metas       *lru[msgKey, metaEntry]
	bodies      *lru[int64, *bodyView]
	rows        *lru[rowsKey, rowsEntry]
	orders      *lru[orderKey, *ordered]
	now         func() time.Time
}

// New returns the webmail handler. pipe may be nil, in which case sending
// fails with a clear error; authn must not be nil.
func New(cfg Config, st Store, authn Authenticator, pipe *delivery.Pipeline, logger *slog.Logger) *Server {
	cfg.setDefaults()
	if logger == nil {
		logger = slog.Default()
	}
	s := &Server{
		cfg:      cfg,
		st:       st,
		authn:    authn,
		pipe:     pipe,
		log:      logger.With("component", "webmail"),
		sessions: websession.New(st, sessionApp, cfg.SessionTTL, maxSessions),
		prefs:    prefsStore{st},
		tmpl:     mustTemplates(),
		sanitize: newSanitizer(),
		metas:    newLRU[msgKey, metaEntry](metaCacheEntries),
		bodies:   newLRU[int64, *bodyView](bodyCacheBytes),
		rows:     newLRU[rowsKey, rowsEntry](rowsCacheBytes),
		orders:   newLRU[orderKey, *ordered](orderCacheBytes),
		now:      time.Now,
	}
	s.corr.entries = map[int64]corrEntry{}
	s.folderCache.m = map[int64]folderEntry{}
	s.routes()
	return s
}

func (s *Server) routes() {
	m := http.NewServeMux()
	m.Handle("GET /static/", staticHandler())
	m.HandleFunc("GET /login", s.loginPage)
	m.HandleFunc("POST /login", s.loginSubmit)
	m.HandleFunc("POST /logout", s.authed(s.logout))
	m.HandleFunc("GET /{$}", s.authed(s.home))
	m.HandleFunc("GET /box/{box}", s.authed(s.listPage))
	m.HandleFunc("GET /msg/{box}/{uid}", s.authed(s.readPage))
	m.HandleFunc("GET /msg/{box}/{uid}/body", s.authed(s.bodyFrame))
	m.HandleFunc("GET /msg/{box}/{uid}/part/{part}", s.authed(s.downloadPart))
	m.HandleFunc("GET /msg/{box}/{uid}/raw", s.authed(s.downloadRaw))
	m.HandleFunc("GET /msg/{box}/{uid}/source", s.authed(s.sourcePage))
	m.HandleFunc("POST /view", s.authed(s.viewSubmit))
	m.HandleFunc("POST /msg/{box}/{uid}/remote", s.authed(s.allowRemote))
	m.HandleFunc("POST /act", s.authed(s.action))
	m.HandleFunc("GET /compose", s.authed(s.composePage))
	m.HandleFunc("POST /compose", s.authed(s.composeSubmit))
	m.HandleFunc("GET /suggest", s.authed(s.suggest))
	m.HandleFunc("GET /search", s.authed(s.searchPage))
	m.HandleFunc("GET /events", s.authed(s.events))
	m.HandleFunc("GET /folders", s.authed(s.foldersPage))
	m.HandleFunc("POST /folders", s.authed(s.foldersSubmit))
	m.HandleFunc("GET /contacts", s.authed(s.contactsPage))
	m.HandleFunc("GET /contacts/card", s.authed(s.contactPage))
	m.HandleFunc("POST /contacts/save", s.authed(s.contactSave))
	m.HandleFunc("POST /contacts/delete", s.authed(s.contactDelete))
	m.HandleFunc("POST /contacts/add", s.authed(s.contactFromMessage))
	m.HandleFunc("POST /contacts/import", s.authed(s.contactsImport))
	m.HandleFunc("GET /contacts/export", s.authed(s.contactsExport))
	m.HandleFunc("GET /settings", s.authed(s.settingsPage))
	m.HandleFunc("POST /settings", s.authed(s.settingsSubmit))
	m.HandleFunc("POST /settings/password", s.authed(s.passwordSubmit))
	m.HandleFunc("POST /settings/identity", s.authed(s.identitySubmit))
	m.HandleFunc("POST /settings/identity/delete", s.authed(s.identityDelete))
	m.HandleFunc("POST /settings/sessions", s.authed(s.sessionEnd))
	m.HandleFunc("GET /settings/filters", s.authed(s.filtersPage))
	m.HandleFunc("POST /settings/filters", s.authed(s.filtersSubmit))
	m.HandleFunc("GET /settings/sieve", s.authed(s.sievePage))
	m.HandleFunc("POST /settings/sieve", s.authed(s.sieveSubmit))
	s.mux = m
}

// cspPage is the policy of every page except message bodies.
const cspPage = "default-src 'self'; img-src 'self' data:; script-src 'self'; style-src 'self'; " +
	"object-src 'none'; base-uri 'none'; frame-src 'self'; frame-ancestors 'none'; form-action 'self'"

// ServeHTTP sets the security headers every response carries and dispatches.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", cspPage)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	h.Set("Permissions-Policy", "camera=(), microphone=(), geolocation=()")
	if s.cfg.SecureCookies {
		h.Set("Strict-Transport-Security", "max-age=31536000")
	}
	s.mux.ServeHTTP(w, r)
}

// logError logs a request's failure at ERROR, unless the client went away
// (its request was cancelled, or writing to it failed with a broken or
// reset connection): a browser leaving a page half-loaded is no fault of
// the server, and is logged at DEBUG.
func (s *Server) logError(r *http.Request, msg string, args ...any) {
	gone := r.Context().Err() != nil
	for i := 0; i+1 < len(args); i += 2 {
		if err, ok := args[i+1].(error); ok && (errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNRESET)) {
			gone = true
		}
	}
	if gone {
		s.log.Debug(msg+" (the client went away)", args...)
		return
	}
	s.log.Error(msg, args...)
}

// httpError logs err (when it is a server fault) and answers with a plain
// page that never contains err's text.
func (s *Server) httpError(w http.ResponseWriter, r *http.Request, code int, msg string, err error) {
	if err != nil && code >= 500 {
		s.logError(r, "request failed", "path", r.URL.Path, "err", err)
	}
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(code)
	_ = s.tmpl.render(w, "error", map[string]any{"Code": code, "Message": msg})
}
