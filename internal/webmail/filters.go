package webmail

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"unicode/utf8"

	"pimail/internal/message"
	"pimail/internal/sieve"
	"pimail/internal/store"
)

// Filter settings: the simple rules, forwarding and the vacation reply
// (/settings/filters), which the webmail writes as a Sieve script, and an
// advanced editor for the account's scripts (/settings/sieve). Delivery
// runs the active script (internal/delivery); ManageSieve clients see the
// same scripts.

// SieveStore is the store's Sieve role as the webmail uses it.
type SieveStore interface {
	SieveScripts(ctx context.Context, accountID int64) ([]store.SieveScript, error)
	SieveScript(ctx context.Context, accountID int64, name string) (store.SieveScript, error)
	ActiveSieveScript(ctx context.Context, accountID int64) (store.SieveScript, error)
	PutSieveScript(ctx context.Context, accountID int64, name, content string) error
	SetActiveSieveScript(ctx context.Context, accountID int64, name string) error
	DeleteSieveScript(ctx context.Context, accountID int64, name string) error
}

type filtersData struct {
	view
	Settings  filterSettings
	Rules     []filterRule // the rules plus empty rows to add more
	Mailboxes []string
	// Other names an active script the forms did not write; saving
	// replaces it as the active script (it is kept).
	Other string
}

// emptyRuleRows are the blank rows the form offers for new rules.
const emptyRuleRows = 3

func (s *Server) filtersPage(w http.ResponseWriter, r *http.Request, sess *session) {
	if s.cfg.Sieve == nil {
		s.httpError(w, r, http.StatusNotFound, "Filters are not available on this server.", nil)
		return
	}
	v, ok := s.newView(w, r, sess, "Filters")
	if !ok {
		return
	}
	if r.URL.Query().Get("notice") == "saved" {
		v.Notice = "Filters saved."
	}
	f, other, err := s.currentFilters(r.Context(), sess.AccountID)
	if err != nil {
		s.httpError(w, r, http.StatusInternalServerError, "The filters could not be read.", err)
		return
	}
	s.renderFilters(w, r, sess, v, f, other, http.StatusOK)
}

// currentFilters reads the settings from the webmail's script; other
// names the active script when it is not the webmail's.
func (s *Server) currentFilters(ctx context.Context, accountID int64) (filterSettings, string, error) {
	var f filterSettings
	other := ""
	active, err := s.cfg.Sieve.ActiveSieveScript(ctx, accountID)
	switch {
	case err == nil && active.Name != filtersScript:
		other = active.Name
	case err != nil && !errors.Is(err, store.ErrNotFound):
		return f, "", err
	}
	own, err := s.cfg.Sieve.SieveScript(ctx, accountID, filtersScript)
	if err == nil {
		f, _ = readSettings(own.Content)
	} else if !errors.Is(err, store.ErrNotFound) {
		return f, "", err
	}
	return f, other, nil
}

func (s *Server) renderFilters(w http.ResponseWriter, r *http.Request, sess *session, v view, f filterSettings, other string, code int) {
	d := filtersData{view: v, Settings: f, Other: other}
	d.Rules = append(append([]filterRule(nil), f.Rules...), make([]filterRule, emptyRuleRows)...)
	for _, fo := range v.Folders {
		d.Mailboxes = append(d.Mailboxes, fo.Name)
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(code)
	if err := s.tmpl.render(w, "filters", d); err != nil {
		s.logError(r, "render filters", "err", err)
	}
}

// filtersSubmit turns the forms into the webmail's script and makes it
// the active one.
func (s *Server) filtersSubmit(w http.ResponseWriter, r *http.Request, sess *session) {
	if s.cfg.Sieve == nil {
		s.httpError(w, r, http.StatusNotFound, "Filters are not available on this server.", nil)
		return
	}
	v, ok := s.newView(w, r, sess, "Filters")
	if !ok {
		return
	}
	f := filterSettings{
		Forward: forwardSettings{Address: strings.TrimSpace(r.PostFormValue("forward")), KeepCopy: r.PostFormValue("keep_copy") != ""},
		Vacation: vacationSettings{Enabled: r.PostFormValue("vacation") != "", Subject: strings.TrimSpace(r.PostFormValue("vacation_subject")),
			Text:  strings.ReplaceAll(r.PostFormValue("vacation_text"), "\r\n", "\n"),
			Start: r.PostFormValue("vacation_start"), End: r.PostFormValue("vacation_end")},
	}
	fields, contains, actions, targets := r.PostForm["field"], r.PostForm["contains"], r.PostForm["action"], r.PostForm["target"]
	for i := range fields {
		if i >= len(contains) || i >= len(actions) || i >= len(targets) {
			break
		}
		rule := filterRule{Field: fields[i], Contains: strings.TrimSpace(contains[i]), Action: actions[i], Target: strings.TrimSpace(targets[i])}
		if rule.Contains == "" && rule.Target == "" {
			continue // an empty row
		}
		f.Rules = append(f.Rules, rule)
	}
	mailboxes := map[string]bool{}
	for _, fo := range v.Folders {
		mailboxes[fo.Name] = true
	}
	_, other, _ := s.currentFilters(r.Context(), sess.AccountID)
	if err := f.check(validAddress, mailboxes); err != nil {
		v.Error = err.Error()
		s.renderFilters(w, r, sess, v, f, other, http.StatusBadRequest)
		return
	}
	script, err := f.generate()
	if err == nil {
		_, err = sieve.Parse(script) // never fails for a checked form; a bug must not store a broken script
	}
	if err == nil && int64(len(script)) > s.cfg.MaxScriptSize {
		v.Error = "The filters are too long."
		s.renderFilters(w, r, sess, v, f, other, http.StatusBadRequest)
		return
	}
	if err == nil {
		err = s.cfg.Sieve.PutSieveScript(r.Context(), sess.AccountID, filtersScript, script)
	}
	if err == nil {
		err = s.cfg.Sieve.SetActiveSieveScript(r.Context(), sess.AccountID, filtersScript)
	}
	if err != nil {
		s.httpError(w, r, http.StatusInternalServerError, "The filters could not be saved.", err)
		return
	}
	s.log.Info("webmail filters saved", "user", sess.Address, "rules", len(f.Rules), "forward", f.Forward.Address != "", "vacation", f.Vacation.Enabled)
	http.Redirect(w, r, "/settings/filters?notice=saved", http.StatusSeeOther)
}

// validAddress accepts one addr-spec with a domain.
func validAddress(s string) bool {
	list := message.ParseAddressList(s)
	return len(list) == 1 && list[0].Mailbox != "" && list[0].Host != "" && list[0].Addr() == s &&
		!strings.ContainsAny(s, " \t\r\n<>,;\"")
}

type sieveEditorData struct {
	view
	Scripts []store.SieveScript
	Name    string
	Content string
	Active  bool
}

// sievePage is the advanced editor: the account's scripts, and one of
// them (the active one by default) in a text area.
func (s *Server) sievePage(w http.ResponseWriter, r *http.Request, sess *session) {
	if s.cfg.Sieve == nil {
		s.httpError(w, r, http.StatusNotFound, "Filters are not available on this server.", nil)
		return
	}
	v, ok := s.newView(w, r, sess, "Sieve scripts")
	if !ok {
		return
	}
	switch r.URL.Query().Get("notice") {
	case "saved":
		v.Notice = "Script saved."
	case "deleted":
		v.Notice = "Script deleted."
	}
	d := sieveEditorData{view: v, Name: r.URL.Query().Get("name")}
	s.renderSieve(w, r, sess, d, http.StatusOK)
}

func (s *Server) renderSieve(w http.ResponseWriter, r *http.Request, sess *session, d sieveEditorData, code int) {
	list, err := s.cfg.Sieve.SieveScripts(r.Context(), sess.AccountID)
	if err != nil {
		s.httpError(w, r, http.StatusInternalServerError, "The scripts could not be read.", err)
		return
	}
	d.Scripts = list
	if d.Content == "" && code == http.StatusOK {
		for _, sc := range list {
			if (d.Name == "" && sc.Active) || (d.Name != "" && sc.Name == d.Name) {
				d.Name, d.Content, d.Active = sc.Name, sc.Content, sc.Active
			}
		}
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(code)
	if err := s.tmpl.render(w, "sieve", d); err != nil {
		s.logError(r, "render sieve editor", "err", err)
	}
}

// sieveSubmit saves (checking the script first: an error is shown with its
// line and column, and nothing is stored), activates, deactivates or
// deletes a script.
func (s *Server) sieveSubmit(w http.ResponseWriter, r *http.Request, sess *session) {
	if s.cfg.Sieve == nil {
		s.httpError(w, r, http.StatusNotFound, "Filters are not available on this server.", nil)
		return
	}
	v, ok := s.newView(w, r, sess, "Sieve scripts")
	if !ok {
		return
	}
	ctx := r.Context()
	name := strings.TrimSpace(r.PostFormValue("name"))
	content := strings.ReplaceAll(r.PostFormValue("content"), "\r\n", "\n")
	d := sieveEditorData{view: v, Name: name, Content: content, Active: r.PostFormValue("active") != ""}
	fail := func(msg string) {
		d.Error = msg
		s.renderSieve(w, r, sess, d, http.StatusBadRequest)
	}
	var err error
	notice := "saved"
	switch r.PostFormValue("op") {
	case "delete":
		err = s.cfg.Sieve.DeleteSieveScript(ctx, sess.AccountID, name)
		if errors.Is(err, store.ErrScriptActive) {
			fail("The active script cannot be deleted; deactivate it first.")
			return
		}
		notice = "deleted"
	case "deactivate":
		err = s.cfg.Sieve.SetActiveSieveScript(ctx, sess.AccountID, "")
	default:
		if name == "" || len(name) > 128 || !utf8.ValidString(name) || strings.ContainsAny(name, "\r\n\t/") {
			fail("Give the script a name (one line, at most 128 characters).")
			return
		}
		if int64(len(content)) > s.cfg.MaxScriptSize {
			fail("The script is too long.")
			return
		}
		if _, perr := sieve.Parse(content); perr != nil {
			fail("The script has an error: " + perr.Error())
			return
		}
		err = s.cfg.Sieve.PutSieveScript(ctx, sess.AccountID, name, content)
		if err == nil && d.Active {
			err = s.cfg.Sieve.SetActiveSieveScript(ctx, sess.AccountID, name)
		}
	}
	if errors.Is(err, store.ErrNotFound) {
		fail("There is no such script.")
		return
	}
	if err != nil {
		s.httpError(w, r, http.StatusInternalServerError, "The script could not be saved.", err)
		return
	}
	http.Redirect(w, r, "/settings/sieve?notice="+notice+"&name="+url.QueryEscape(name), http.StatusSeeOther)
}
