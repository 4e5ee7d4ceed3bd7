package webmail

import (
	"errors"
	"net/http"
	"strings"

	"pimail/internal/auth"
	"pimail/internal/websession"
)

// handler is a request handler that runs with a valid session.
type handler func(w http.ResponseWriter, r *http.Request, sess *session)

func (s *Server) sessionCookie() string {
	if s.cfg.SecureCookies {
		return "__Host-pimail"
	}
	return "pimail"
}

func (s *Server) loginCookie() string {
	if s.cfg.SecureCookies {
		return "__Host-pimail-login"
	}
	return "pimail-login"
}

func (s *Server) setCookie(w http.ResponseWriter, name, value string, maxAge int) {
	http.SetCookie(w, &http.Cookie{
		Name:     name,
		Value:    value,
		Path:     "/",
		MaxAge:   maxAge,
		HttpOnly: true,
		Secure:   s.cfg.SecureCookies,
		SameSite: http.SameSiteStrictMode,
	})
}

// currentSession returns the request's live session, nil if none.
func (s *Server) currentSession(r *http.Request) (*session, error) {
	c, err := r.Cookie(s.sessionCookie())
	if err != nil {
		return nil, nil
	}
	return s.sessions.Get(r.Context(), c.Value, s.now())
}

// authed wraps h: it requires a live session and, for every method but GET
// and HEAD, a CSRF token (form field "csrf" or header X-CSRF-Token) and a
// same-origin request. Request bodies are bounded by MaxUploadSize.
func (s *Server) authed(h handler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		sess, err := s.currentSession(r)
		if err != nil {
			s.httpError(w, r, http.StatusInternalServerError, "The server could not check your login.", err)
			return
		}
		if sess == nil {
			if r.Method == http.MethodGet && r.Header.Get("Accept") != "text/event-stream" && r.Header.Get("X-Requested-With") == "" {
				http.Redirect(w, r, "/login", http.StatusSeeOther)
				return
			}
			s.httpError(w, r, http.StatusUnauthorized, "Your session has expired. Please log in again.", nil)
			return
		}
		w.Header().Set("Cache-Control", "no-store")
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			if websession.CrossOrigin(r, true) { // Origin is null under Referrer-Policy: no-referrer
				s.httpError(w, r, http.StatusForbidden, "Cross-site request refused.", nil)
				return
			}
			r.Body = http.MaxBytesReader(w, r.Body, s.cfg.MaxUploadSize+1<<20)
			if strings.HasPrefix(r.Header.Get("Content-Type"), "multipart/form-data") {
				err = r.ParseMultipartForm(8 << 20)
				if r.MultipartForm != nil {
					defer r.MultipartForm.RemoveAll()
				}
			} else {
				err = r.ParseForm()
			}
			if err != nil {
				var mbe *http.MaxBytesError
				if errors.As(err, &mbe) {
					s.httpError(w, r, http.StatusRequestEntityTooLarge, "The upload is too large.", nil)
					return
				}
				s.httpError(w, r, http.StatusBadRequest, "The form could not be read.", nil)
				return
			}
			tok := r.PostFormValue("csrf")
			if tok == "" {
				tok = r.Header.Get("X-CSRF-Token")
			}
			if !websession.TokenEqual(tok, sess.CSRF) {
				s.log.Warn("CSRF token mismatch", "remote", websession.ClientIP(r), "user", sess.Address, "path", r.URL.Path)
				s.httpError(w, r, http.StatusForbidden, "The form has expired. Go back, reload and try again.", nil)
				return
			}
		}
		h(w, r, sess)
	}
}

func (s *Server) loginPage(w http.ResponseWriter, r *http.Request) {
	if sess, err := s.currentSession(r); err == nil && sess != nil {
		http.Redirect(w, r, "/", http.StatusSeeOther)
		return
	}
	s.renderLogin(w, r, http.StatusOK, "")
}

// renderLogin shows the login form with a fresh login-CSRF token, sent
// both as a cookie and as a form field (double submit): a forged
// cross-site login cannot read the cookie.
func (s *Server) renderLogin(w http.ResponseWriter, r *http.Request, code int, msg string) {
	tok := websession.Token()
	s.setCookie(w, s.loginCookie(), tok, 3600)
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(code)
	if err := s.tmpl.render(w, "login", map[string]any{"CSRF": tok, "Error": msg, "Host": s.cfg.Hostname}); err != nil {
		s.logError(r, "render login", "err", err)
	}
}

func (s *Server) loginSubmit(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	if err := r.ParseForm(); err != nil {
		s.renderLogin(w, r, http.StatusBadRequest, "The form could not be read.")
		return
	}
	c, err := r.Cookie(s.loginCookie())
	if websession.CrossOrigin(r, true) || err != nil || !websession.TokenEqual(c.Value, r.PostFormValue("csrf")) {
		s.renderLogin(w, r, http.StatusForbidden, "The login form expired. Please try again.")
		return
	}
	user := strings.TrimSpace(r.PostFormValue("username"))
	acct, err := s.authn.Authenticate(r.Context(), user, r.PostFormValue("password"), websession.ClientIP(r))
	switch {
	case errors.Is(err, auth.ErrRateLimited):
		s.renderLogin(w, r, http.StatusTooManyRequests, "Too many failed logins. Please wait and try again later.")
		return
	case errors.Is(err, auth.ErrInvalidCredentials):
		s.renderLogin(w, r, http.StatusUnauthorized, "Wrong address or password.")
		return
	case err != nil:
		s.logError(r, "login", "err", err)
		s.renderLogin(w, r, http.StatusInternalServerError, "Login is not possible right now.")
		return
	}
	// No fixation: whatever session cookie came in is discarded, and a new
	// random id is issued.
	if old, err := r.Cookie(s.sessionCookie()); err == nil {
		if err := s.sessions.Delete(r.Context(), old.Value); err != nil {
			s.logError(r, "login: end the old session", "err", err)
		}
	}
	sess, err := s.sessions.Create(r.Context(), acct.ID, acct.Address, websession.Describe(r), s.now())
	if err != nil {
		s.logError(r, "login", "err", err)
		s.renderLogin(w, r, http.StatusInternalServerError, "Login is not possible right now.")
		return
	}
	s.setCookie(w, s.sessionCookie(), sess.ID, 0)
	s.setCookie(w, s.loginCookie(), "", -1)
	s.log.Info("webmail login", "user", acct.Address, "remote", websession.ClientIP(r))
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

func (s *Server) logout(w http.ResponseWriter, r *http.Request, sess *session) {
	if err := s.sessions.Delete(r.Context(), sess.ID); err != nil {
		s.httpError(w, r, http.StatusInternalServerError, "Logging out failed; please try again.", err)
		return
	}
	s.setCookie(w, s.sessionCookie(), "", -1)
	http.Redirect(w, r, "/login", http.StatusSeeOther)
}
