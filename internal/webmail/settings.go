package webmail

import (
	"errors"
	"net/http"
	"strings"

	"pimail/internal/auth"
	"pimail/internal/password"
	"pimail/internal/websession"
)

type settingsData struct {
	view
	DisplayName   string
	Signature     string
	RemoteSenders []string
}

func (s *Server) settingsPage(w http.ResponseWriter, r *http.Request, sess *session) {
	v, ok := s.newView(w, r, sess, "Settings")
	if !ok {
		return
	}
	switch r.URL.Query().Get("notice") {
	case "saved":
		v.Notice = "Settings saved."
	case "password":
		v.Notice = "Password changed."
	}
	s.renderSettings(w, r, sess, v, http.StatusOK)
}

func (s *Server) renderSettings(w http.ResponseWriter, r *http.Request, sess *session, v view, code int) {
	p, err := s.prefs.get(r.Context(), sess.AccountID)
	if err != nil {
		s.httpError(w, r, http.StatusInternalServerError, "Settings could not be read.", err)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(code)
	if err := s.tmpl.render(w, "settings", settingsData{view: v, DisplayName: p.DisplayName, Signature: p.Signature, RemoteSenders: p.RemoteSenders}); err != nil {
		s.logError(r, "render settings", "err", err)
	}
}

func (s *Server) settingsSubmit(w http.ResponseWriter, r *http.Request, sess *session) {
	name := cleanHeaderText(r.PostFormValue("display_name"))
	sig := strings.ReplaceAll(r.PostFormValue("signature"), "\r\n", "\n")
	if len(name) > maxDisplayName || len(sig) > maxSignature {
		v, ok := s.newView(w, r, sess, "Settings")
		if ok {
			v.Error = "The name or signature is too long."
			s.renderSettings(w, r, sess, v, http.StatusBadRequest)
		}
		return
	}
	remove := map[string]bool{}
	for _, a := range r.PostForm["forget"] {
		remove[strings.ToLower(a)] = true
	}
	err := s.prefs.update(r.Context(), sess.AccountID, func(p *prefs) {
		p.DisplayName, p.Signature = name, sig
		kept := p.RemoteSenders[:0]
		for _, a := range p.RemoteSenders {
			if !remove[a] {
				kept = append(kept, a)
			}
		}
		p.RemoteSenders = kept
	})
	if err != nil {
		s.httpError(w, r, http.StatusInternalServerError, "Settings could not be saved.", err)
		return
	}
	http.Redirect(w, r, "/settings?notice=saved", http.StatusSeeOther)
}

// passwordSubmit changes the password after checking the old one through
// the (rate-limited) authenticator; other sessions of the account end.
func (s *Server) passwordSubmit(w http.ResponseWriter, r *http.Request, sess *session) {
	fail := func(code int, msg string) {
		v, ok := s.newView(w, r, sess, "Settings")
		if ok {
			v.Error = msg
			s.renderSettings(w, r, sess, v, code)
		}
	}
	oldPw, newPw := r.PostFormValue("old"), r.PostFormValue("new")
	if newPw != r.PostFormValue("confirm") {
		fail(http.StatusBadRequest, "The new passwords do not match.")
		return
	}
	if len(newPw) < 10 || len(newPw) > 1024 {
		fail(http.StatusBadRequest, "The new password must have at least 10 characters.")
		return
	}
	if _, err := s.authn.Authenticate(r.Context(), sess.Address, oldPw, websession.ClientIP(r)); err != nil {
		switch {
		case errors.Is(err, auth.ErrRateLimited):
			fail(http.StatusTooManyRequests, "Too many failed attempts. Please wait and try again later.")
		case errors.Is(err, auth.ErrInvalidCredentials):
			fail(http.StatusForbidden, "The current password is wrong.")
		default:
			s.httpError(w, r, http.StatusInternalServerError, "The password could not be changed.", err)
		}
		return
	}
	if err := password.Set(r.Context(), s.st, sess.Address, newPw); err != nil {
		s.httpError(w, r, http.StatusInternalServerError, "The password could not be changed.", err)
		return
	}
	if err := s.sessions.DeleteAccount(r.Context(), sess.AccountID, sess); err != nil {
		s.logError(r, "password changed, but other sessions not ended", "user", sess.Address, "err", err)
	}
	s.log.Info("webmail password changed", "user", sess.Address, "remote", websession.ClientIP(r))
	http.Redirect(w, r, "/settings?notice=password", http.StatusSeeOther)
}
