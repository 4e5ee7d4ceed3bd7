package admin

import (
	"errors"
	"net/http"
	"strings"

	"pimail/internal/auth"
	"pimail/internal/websession"
)

// maxSessions bounds an account's admin sessions; a login beyond it ends
// the least recently used.
const maxSessions = 20

// sessionApp names the admin's sessions in the store.
const sessionApp = "admin"

// session is one logged-in administrator (internal/websession, shared
// with the webmail).
type session = websession.Session

// Cookie names: with Secure cookies the __Secure- prefix makes browsers
// refuse them over plain HTTP. Both are scoped to the admin's path.
func (s *Server) cookieName(base string) string {
	if s.cfg.SecureCookies {
		return "__Secure-" + base
	}
	return base
}

func (s *Server) setCookie(w http.ResponseWriter, base, value string, maxAge int) {
	http.SetCookie(w, &http.Cookie{
		Name: s.cookieName(base), Value: value, Path: Prefix, MaxAge: maxAge,
		HttpOnly: true, Secure: s.cfg.SecureCookies, SameSite: http.SameSiteStrictMode,
	})
}

// foreign reports a request that did not come from this origin
// (websession.CrossOrigin; the opaque origin "null", which a sandboxed page
// sends, is foreign here unless Sec-Fetch-Site says same-origin).
func foreign(r *http.Request) bool { return websession.CrossOrigin(r, false) }

// handler runs with the session of a current administrator.
type handler func(w http.ResponseWriter, r *http.Request, sess *session)

// authed requires a live session of an account that is still an enabled
// administrator, and, for POST, a same-origin request with the CSRF token.
func (s *Server) authed(h handler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var sess *session
		if c, err := r.Cookie(s.cookieName("pimail-admin")); err == nil {
			if sess, err = s.sessions.Get(r.Context(), c.Value, s.now()); err != nil {
				s.httpError(w, r, http.StatusInternalServerError, "The server could not check your login.", err)
				return
			}
		}
		if sess == nil {
			if r.Method == http.MethodGet {
				http.Redirect(w, r, Prefix+"login", http.StatusSeeOther)
				return
			}
			s.httpError(w, r, http.StatusUnauthorized, "Your session has expired. Please log in again.", nil)
			return
		}
		ok, err := s.stillAdmin(r, sess.AccountID)
		if err != nil {
			s.httpError(w, r, http.StatusInternalServerError, "The server could not check your rights.", err)
			return
		}
		if !ok {
			if err := s.sessions.Delete(r.Context(), sess.ID); err != nil {
				s.log.Error("end the session of a former administrator", "err", err)
			}
			s.httpError(w, r, http.StatusForbidden, "This account is no longer an administrator.", nil)
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			if foreign(r) {
				s.httpError(w, r, http.StatusForbidden, "Cross-site request refused.", nil)
				return
			}
			r.Body = http.MaxBytesReader(w, r.Body, 1<<20)
			if err := r.ParseForm(); err != nil {
				s.httpError(w, r, http.StatusBadRequest, "The form could not be read.", nil)
				return
			}
			if !websession.TokenEqual(r.PostFormValue("csrf"), sess.CSRF) {
				s.log.Warn("admin CSRF token mismatch", "remote", websession.ClientIP(r), "user", sess.Address, "path", r.URL.Path)
				s.httpError(w, r, http.StatusForbidden, "The form has expired. Go back, reload and try again.", nil)
				return
			}
		}
		h(w, r, sess)
	}
}

// stillAdmin re-reads the account: disabled or unflagged accounts lose access.
func (s *Server) stillAdmin(r *http.Request, id int64) (bool, error) {
	ok, err := s.st.IsAdmin(r.Context(), id)
	if err != nil || !ok {
		return false, err
	}
	acct, err := s.st.AccountByID(r.Context(), id)
	if err != nil {
		return false, nil // removed meanwhile
	}
	return !acct.Disabled, nil
}

func (s *Server) loginPage(w http.ResponseWriter, r *http.Request) {
	s.renderLogin(w, http.StatusOK, "")
}

// renderLogin shows the form with a login CSRF token sent both as a cookie
// and as a field (double submit), so a forged cross-site login fails.
func (s *Server) renderLogin(w http.ResponseWriter, code int, msg string) {
	tok := websession.Token()
	s.setCookie(w, "pimail-admin-login", tok, 3600)
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(code)
	if err := s.tmpl.render(w, "login", pageData{Title: "Log in", Host: s.cfg.Hostname, CSRF: tok, Error: msg}); err != nil {
		s.log.Error("render login", "err", err)
	}
}

func (s *Server) loginSubmit(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	if err := r.ParseForm(); err != nil {
		s.renderLogin(w, http.StatusBadRequest, "The form could not be read.")
		return
	}
	c, err := r.Cookie(s.cookieName("pimail-admin-login"))
	if foreign(r) || err != nil || !websession.TokenEqual(c.Value, r.PostFormValue("csrf")) {
		s.renderLogin(w, http.StatusForbidden, "The login form expired. Please try again.")
		return
	}
	user := strings.TrimSpace(r.PostFormValue("username"))
	acct, err := s.authn.Authenticate(r.Context(), user, r.PostFormValue("password"), websession.ClientIP(r))
	switch {
	case errors.Is(err, auth.ErrRateLimited):
		s.renderLogin(w, http.StatusTooManyRequests, "Too many failed logins. Please wait and try again later.")
		return
	case errors.Is(err, auth.ErrInvalidCredentials):
		s.renderLogin(w, http.StatusUnauthorized, "Wrong address or password.")
		return
	case err != nil:
		s.log.Error("admin login", "err", err)
		s.renderLogin(w, http.StatusInternalServerError, "Login is not possible right now.")
		return
	}
	ok, err := s.st.IsAdmin(r.Context(), acct.ID)
	if err != nil {
		s.log.Error("admin login", "err", err)
		s.renderLogin(w, http.StatusInternalServerError, "Login is not possible right now.")
		return
	}
	if !ok {
		s.log.Warn("admin login refused: not an administrator", "user", acct.Address, "remote", websession.ClientIP(r))
		s.renderLogin(w, http.StatusForbidden, "This account is not an administrator.")
		return
	}
	if old, err := r.Cookie(s.cookieName("pimail-admin")); err == nil {
		// No fixation: always a fresh id.
		if err := s.sessions.Delete(r.Context(), old.Value); err != nil {
			s.log.Error("admin login: end the old session", "err", err)
		}
	}
	sess, err := s.sessions.Create(r.Context(), acct.ID, acct.Address, websession.Describe(r), s.now())
	if err != nil {
		s.log.Error("admin login", "err", err)
		s.renderLogin(w, http.StatusInternalServerError, "Login is not possible right now.")
		return
	}
	s.setCookie(w, "pimail-admin", sess.ID, 0)
	s.setCookie(w, "pimail-admin-login", "", -1)
	s.log.Info("admin login", "user", acct.Address, "remote", websession.ClientIP(r))
	http.Redirect(w, r, Prefix, http.StatusSeeOther)
}

func (s *Server) logout(w http.ResponseWriter, r *http.Request, sess *session) {
	if err := s.sessions.Delete(r.Context(), sess.ID); err != nil {
		s.httpError(w, r, http.StatusInternalServerError, "Logging out failed; please try again.", err)
		return
	}
	s.setCookie(w, "pimail-admin", "", -1)
	http.Redirect(w, r, Prefix+"login", http.StatusSeeOther)
}
