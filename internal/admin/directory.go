package admin

import (
	"crypto/rand"
	"errors"
	"net/http"
	"slices"
	"strings"

	"pimail/internal/message"
	"pimail/internal/password"
	"pimail/internal/store"
)

// ---- domains ----

type domainRow struct {
	Name              string
	Accounts, Aliases int
	Removable         bool
}

func (s *Server) domainsPage(w http.ResponseWriter, r *http.Request, sess *session) {
	s.renderDomains(w, r, sess, http.StatusOK, "")
}

func (s *Server) renderDomains(w http.ResponseWriter, r *http.Request, sess *session, code int, msg string) {
	dir, err := s.st.Directory(r.Context())
	if err != nil {
		s.httpError(w, r, http.StatusInternalServerError, "The domains could not be read.", err)
		return
	}
	var rows []domainRow
	for _, d := range dir.Domains {
		row := domainRow{Name: d.Name}
		for _, a := range dir.Accounts {
			if a.DomainID == d.ID {
				row.Accounts++
			}
		}
		for _, a := range dir.Aliases {
			if message.DomainOf(a.Address) == d.Name {
				row.Aliases++
			}
		}
		row.Removable = row.Accounts == 0 && row.Aliases == 0
		rows = append(rows, row)
	}
	slices.SortFunc(rows, func(a, b domainRow) int { return strings.Compare(a.Name, b.Name) })
	s.page(w, r, sess, code, "domains", pageData{Title: "Domains", Error: msg, Data: rows})
}

func (s *Server) domainsSubmit(w http.ResponseWriter, r *http.Request, sess *session) {
	name := strings.TrimSpace(r.PostFormValue("domain"))
	switch r.PostFormValue("action") {
	case "add":
		if _, err := s.st.AddDomain(r.Context(), name); err != nil {
			s.actionFailed(w, r, sess, err, "The domain", s.renderDomains)
			return
		}
		s.log.Info("admin: domain added", "user", sess.Address, "domain", name)
		done(w, r, "domains", "domain-added")
	case "remove":
		if err := s.st.RemoveDomain(r.Context(), name); err != nil {
			if errors.Is(err, store.ErrInvalid) {
				s.renderDomains(w, r, sess, http.StatusConflict, "Remove the domain's accounts and aliases first.")
				return
			}
			s.actionFailed(w, r, sess, err, "The domain", s.renderDomains)
			return
		}
		s.log.Info("admin: domain removed", "user", sess.Address, "domain", name)
		done(w, r, "domains", "domain-removed")
	default:
		s.httpError(w, r, http.StatusBadRequest, "Unknown action.", nil)
	}
}

// actionFailed shows a store error on the page again (a user error) or as
// a server fault.
func (s *Server) actionFailed(w http.ResponseWriter, r *http.Request, sess *session, err error, what string,
	again func(http.ResponseWriter, *http.Request, *session, int, string)) {
	if msg, ok := userError(err, what); ok {
		again(w, r, sess, http.StatusBadRequest, msg)
		return
	}
	s.httpError(w, r, http.StatusInternalServerError, "The change could not be saved.", err)
}

// ---- accounts ----

type accountRow struct {
	store.Account
	Admin, Self bool
}

type accountsData struct {
	Accounts  []accountRow
	Domains   []string
	Generated string // a password generated for the last action, shown once
	For       string
}

func (s *Server) accountsPage(w http.ResponseWriter, r *http.Request, sess *session) {
	s.renderAccounts(w, r, sess, http.StatusOK, "")
}

func (s *Server) renderAccounts(w http.ResponseWriter, r *http.Request, sess *session, code int, msg string) {
	s.renderAccountsWith(w, r, sess, code, msg, accountsData{})
}

func (s *Server) renderAccountsWith(w http.ResponseWriter, r *http.Request, sess *session, code int, msg string, d accountsData) {
	accts, err := s.st.Accounts(r.Context())
	if err != nil {
		s.httpError(w, r, http.StatusInternalServerError, "The accounts could not be read.", err)
		return
	}
	admins, err := s.st.Admins(r.Context())
	if err != nil {
		s.httpError(w, r, http.StatusInternalServerError, "The accounts could not be read.", err)
		return
	}
	doms, err := s.st.Domains(r.Context())
	if err != nil {
		s.httpError(w, r, http.StatusInternalServerError, "The domains could not be read.", err)
		return
	}
	for _, a := range accts {
		d.Accounts = append(d.Accounts, accountRow{Account: a, Admin: slices.Contains(admins, a.Address), Self: a.ID == sess.AccountID})
	}
	for _, dm := range doms {
		d.Domains = append(d.Domains, dm.Name)
	}
	slices.Sort(d.Domains)
	notice := ""
	if d.Generated != "" {
		notice = "Done. The new password of " + d.For + " is shown below, once."
	}
	s.page(w, r, sess, code, "accounts", pageData{Title: "Accounts", Error: msg, Notice: notice, Data: d})
}

// Password bounds, as for the webmail's password change.
const minPassword, maxPassword = 10, 1024

// generatePassword returns 20 random characters from an unambiguous set.
func generatePassword() string {
	const set = "abcdefghijkmnpqrstuvwxyzABCDEFGHJKLMNPQRSTUVWXYZ23456789"
	b := make([]byte, 20)
	if _, err := rand.Read(b); err != nil {
		panic("admin: crypto/rand: " + err.Error())
	}
	for i := range b {
		b[i] = set[int(b[i])%len(set)]
	}
	return string(b)
}

func (s *Server) accountsSubmit(w http.ResponseWriter, r *http.Request, sess *session) {
	ctx := r.Context()
	addr := strings.ToLower(strings.TrimSpace(r.PostFormValue("address")))
	if local := strings.TrimSpace(r.PostFormValue("local")); local != "" {
		addr = strings.ToLower(local + "@" + r.PostFormValue("domain"))
	}
	action := r.PostFormValue("action")
	if addr == "" {
		s.renderAccounts(w, r, sess, http.StatusBadRequest, "Give an address.")
		return
	}
	self := false
	if acct, err := s.st.Account(ctx, addr); err == nil && acct.ID == sess.AccountID {
		self = true
	}
	if self && (action == "remove" || action == "disable" || action == "unadmin") {
		s.renderAccounts(w, r, sess, http.StatusBadRequest, "You cannot remove, disable or demote your own account here.")
		return
	}
	var err error
	key := ""
	switch action {
	case "add", "password":
		pw := r.PostFormValue("password")
		generated := pw == ""
		if generated {
			pw = generatePassword()
		}
		if len(pw) < minPassword || len(pw) > maxPassword {
			s.renderAccounts(w, r, sess, http.StatusBadRequest, "A password needs at least 10 characters (or leave it empty to generate one).")
			return
		}
		if err = s.setPassword(r, addr, pw, action == "add"); err != nil {
			break
		}
		s.log.Info("admin: account "+action, "user", sess.Address, "account", addr)
		if generated {
			s.renderAccountsWith(w, r, sess, http.StatusOK, "", accountsData{Generated: pw, For: addr})
			return
		}
		key = map[string]string{"add": "account-added", "password": "password-set"}[action]
	case "disable", "enable":
		err = s.st.SetAccountDisabled(ctx, addr, action == "disable")
		key = "account-" + action + "d"
	case "admin", "unadmin":
		err = s.st.SetAdmin(ctx, addr, action == "admin")
		key = map[string]string{"admin": "admin-set", "unadmin": "admin-unset"}[action]
	case "remove":
		if r.PostFormValue("confirm") != "yes" {
			s.renderAccounts(w, r, sess, http.StatusBadRequest, "Tick the box to confirm that the account and all its mail go.")
			return
		}
		err = s.st.RemoveAccount(ctx, addr)
		key = "account-removed"
	default:
		s.httpError(w, r, http.StatusBadRequest, "Unknown action.", nil)
		return
	}
	if err != nil {
		if action == "add" && errors.Is(err, store.ErrNotFound) {
			s.renderAccounts(w, r, sess, http.StatusBadRequest, "The domain does not exist: add it first.")
			return
		}
		if action == "unadmin" && errors.Is(err, store.ErrInvalid) {
			s.renderAccounts(w, r, sess, http.StatusBadRequest, "The last administrator cannot be demoted.")
			return
		}
		s.actionFailed(w, r, sess, err, "The account", s.renderAccounts)
		return
	}
	if action != "add" && action != "password" {
		s.log.Info("admin: account "+action, "user", sess.Address, "account", addr)
	}
	done(w, r, "accounts", key)
}

// setPassword creates the account (add) or replaces its password.
func (s *Server) setPassword(r *http.Request, addr, pw string, add bool) error {
	if add {
		_, err := password.AddAccount(r.Context(), s.st, addr, pw)
		return err
	}
	return password.Set(r.Context(), s.st, addr, pw)
}

// ---- aliases and catch-alls ----

type aliasesData struct {
	Aliases []store.Alias
	Domains []string
}

func (s *Server) aliasesPage(w http.ResponseWriter, r *http.Request, sess *session) {
	s.renderAliases(w, r, sess, http.StatusOK, "")
}

func (s *Server) renderAliases(w http.ResponseWriter, r *http.Request, sess *session, code int, msg string) {
	al, err := s.st.Aliases(r.Context())
	if err != nil {
		s.httpError(w, r, http.StatusInternalServerError, "The aliases could not be read.", err)
		return
	}
	doms, err := s.st.Domains(r.Context())
	if err != nil {
		s.httpError(w, r, http.StatusInternalServerError, "The domains could not be read.", err)
		return
	}
	d := aliasesData{Aliases: al}
	for _, dm := range doms {
		d.Domains = append(d.Domains, dm.Name)
	}
	slices.Sort(d.Domains)
	s.page(w, r, sess, code, "aliases", pageData{Title: "Aliases", Error: msg, Data: d})
}

func (s *Server) aliasesSubmit(w http.ResponseWriter, r *http.Request, sess *session) {
	addr := strings.ToLower(strings.TrimSpace(r.PostFormValue("address")))
	switch r.PostFormValue("action") {
	case "add":
		targets := strings.FieldsFunc(r.PostFormValue("targets"), func(c rune) bool {
			return c == ',' || c == ' ' || c == '\n' || c == '\r' || c == '\t' || c == ';'
		})
		if addr == "" || len(targets) == 0 || len(targets) > 100 {
			s.renderAliases(w, r, sess, http.StatusBadRequest, "Give an address (or @domain for a catch-all) and 1 to 100 targets.")
			return
		}
		for _, t := range targets {
			if !strings.Contains(t, "@") || strings.HasPrefix(t, "@") {
				s.renderAliases(w, r, sess, http.StatusBadRequest, "Each target must be a full address.")
				return
			}
		}
		if err := s.st.AddAlias(r.Context(), addr, targets); err != nil {
			if errors.Is(err, store.ErrNotFound) {
				s.renderAliases(w, r, sess, http.StatusBadRequest, "The alias's domain does not exist: add it first.")
				return
			}
			s.actionFailed(w, r, sess, err, "The alias", s.renderAliases)
			return
		}
		s.log.Info("admin: alias added", "user", sess.Address, "alias", addr)
		done(w, r, "aliases", "alias-added")
	case "remove":
		if err := s.st.RemoveAlias(r.Context(), addr); err != nil {
			s.actionFailed(w, r, sess, err, "The alias", s.renderAliases)
			return
		}
		s.log.Info("admin: alias removed", "user", sess.Address, "alias", addr)
		done(w, r, "aliases", "alias-removed")
	default:
		s.httpError(w, r, http.StatusBadRequest, "Unknown action.", nil)
	}
}
