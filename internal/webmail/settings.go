package webmail

import (
	"errors"
	"net/http"
	"slices"
	"strings"

	"pimail/internal/auth"
	"pimail/internal/directory"
	"pimail/internal/message"
	"pimail/internal/password"
	"pimail/internal/store"
	"pimail/internal/websession"
)

type settingsData struct {
	view
	RemoteSenders []string
	Pane          string
	ComposeHTML   bool
	Identities    []identityRow
	NewAddresses  []string // addresses the account may send as without an identity yet
	Sessions      []sessionRow
}

// sessionRow is a logged-in browser in the settings' list.
type sessionRow struct {
	Key, Client, Created, LastSeen string
	Current                        bool
}

// Panes are the reading pane's places.
func (settingsData) Panes() any { return panes }

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
	case "identity":
		v.Notice = "Identities saved."
	case "ended":
		v.Notice = "That session is logged out."
	}
	s.renderSettings(w, r, sess, v, http.StatusOK)
}

func (s *Server) renderSettings(w http.ResponseWriter, r *http.Request, sess *session, v view, code int) {
	p, err := s.prefs.get(r.Context(), sess.AccountID)
	if err != nil {
		s.httpError(w, r, http.StatusInternalServerError, "Settings could not be read.", err)
		return
	}
	d := settingsData{view: v, RemoteSenders: p.RemoteSenders, Pane: p.pane(), ComposeHTML: p.ComposeHTML}
	ids, err := s.identities(r.Context(), sess)
	if err != nil {
		s.httpError(w, r, http.StatusInternalServerError, "Settings could not be read.", err)
		return
	}
	aliases, err := s.aliases(r.Context())
	if err != nil {
		s.httpError(w, r, http.StatusInternalServerError, "Settings could not be read.", err)
		return
	}
	for _, id := range ids {
		d.Identities = append(d.Identities, identityRow{Identity: id, Own: strings.EqualFold(id.Address, sess.Address)})
	}
	for _, a := range directory.SenderAddresses(sess.Address, aliases) {
		if !slices.ContainsFunc(ids, func(id store.Identity) bool { return strings.EqualFold(id.Address, a) }) {
			d.NewAddresses = append(d.NewAddresses, a)
		}
	}
	list, err := s.sessions.List(r.Context(), sess, s.now())
	if err != nil {
		s.httpError(w, r, http.StatusInternalServerError, "Settings could not be read.", err)
		return
	}
	for _, l := range list {
		d.Sessions = append(d.Sessions, sessionRow{Key: l.Key, Client: message.Visible(l.Client), Current: l.Current,
			Created: l.Created.Local().Format("2 Jan 2006 15:04"), LastSeen: formatDate(l.LastSeen, s.now())})
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(code)
	if err := s.tmpl.render(w, "settings", d); err != nil {
		s.logError(r, "render settings", "err", err)
	}
}

func (s *Server) settingsSubmit(w http.ResponseWriter, r *http.Request, sess *session) {
	remove := map[string]bool{}
	for _, a := range r.PostForm["forget"] {
		remove[strings.ToLower(a)] = true
	}
	pane := r.PostFormValue("pane")
	if pane != "below" && pane != "off" {
		pane = "" // right, the default
	}
	err := s.prefs.update(r.Context(), sess.AccountID, func(p *prefs) {
		p.Pane, p.ComposeHTML = pane, r.PostFormValue("compose_html") == "1"
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

// sessionEnd logs out one of the account's other browsers (key from the
// list), or with all=1 every one of them, this one too.
func (s *Server) sessionEnd(w http.ResponseWriter, r *http.Request, sess *session) {
	if r.PostFormValue("all") == "1" {
		if err := s.sessions.DeleteAccount(r.Context(), sess.AccountID, nil); err != nil {
			s.httpError(w, r, http.StatusInternalServerError, "Logging out failed; please try again.", err)
			return
		}
		s.log.Info("webmail: logged out everywhere", "user", sess.Address, "remote", websession.ClientIP(r))
		s.setCookie(w, s.sessionCookie(), "", -1)
		http.Redirect(w, r, "/login", http.StatusSeeOther)
		return
	}
	if err := s.sessions.End(r.Context(), sess, r.PostFormValue("key"), s.now()); err != nil {
		s.httpError(w, r, http.StatusInternalServerError, "Logging out failed; please try again.", err)
		return
	}
	http.Redirect(w, r, "/settings?notice=ended#sessions", http.StatusSeeOther)
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
