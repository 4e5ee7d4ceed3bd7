package admin

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"

	"pimail/internal/store"
)

// An account's Sieve scripts (the user's mail filters): the administrator
// sees them and can reset them, which deletes every script and vacation
// record of the account, so that its mail goes to INBOX again (for a user
// locked out by a script that discards or redirects everything).

// SieveStore is the store's Sieve role as the admin uses it.
type SieveStore interface {
	SieveScripts(ctx context.Context, accountID int64) ([]store.SieveScript, error)
	ResetSieve(ctx context.Context, accountID int64) error
}

type sieveData struct {
	Accounts []string
	Account  string
	Scripts  []store.SieveScript
}

func (s *Server) sievePage(w http.ResponseWriter, r *http.Request, sess *session) {
	if s.cfg.Sieve == nil {
		s.httpError(w, r, http.StatusNotFound, "Sieve is not available on this server.", nil)
		return
	}
	ctx := r.Context()
	accts, err := s.st.Accounts(ctx)
	if err != nil {
		s.httpError(w, r, http.StatusInternalServerError, "The accounts could not be read.", err)
		return
	}
	d := sieveData{Account: strings.ToLower(strings.TrimSpace(r.URL.Query().Get("account")))}
	for _, a := range accts {
		d.Accounts = append(d.Accounts, a.Address)
	}
	if d.Account != "" {
		acct, err := s.st.Account(ctx, d.Account)
		if errors.Is(err, store.ErrNotFound) {
			s.page(w, r, sess, http.StatusNotFound, "sieve", pageData{Title: "Filters", Nav: "accounts", Error: "There is no such account.", Data: d})
			return
		}
		if err == nil {
			d.Scripts, err = s.cfg.Sieve.SieveScripts(ctx, acct.ID)
		}
		if err != nil {
			s.httpError(w, r, http.StatusInternalServerError, "The scripts could not be read.", err)
			return
		}
	}
	s.page(w, r, sess, http.StatusOK, "sieve", pageData{Title: "Filters", Nav: "accounts", Data: d})
}

func (s *Server) sieveSubmit(w http.ResponseWriter, r *http.Request, sess *session) {
	if s.cfg.Sieve == nil {
		s.httpError(w, r, http.StatusNotFound, "Sieve is not available on this server.", nil)
		return
	}
	addr := strings.ToLower(strings.TrimSpace(r.PostFormValue("account")))
	acct, err := s.st.Account(r.Context(), addr)
	if err == nil {
		err = s.cfg.Sieve.ResetSieve(r.Context(), acct.ID)
	}
	if errors.Is(err, store.ErrNotFound) {
		s.httpError(w, r, http.StatusNotFound, "There is no such account.", nil)
		return
	}
	if err != nil {
		s.httpError(w, r, http.StatusInternalServerError, "The filters could not be reset.", err)
		return
	}
	s.log.Info("admin reset the account's sieve scripts", "admin", sess.Address, "account", addr)
	http.Redirect(w, r, "/admin/sieve?done=sieve-reset&account="+url.QueryEscape(addr), http.StatusSeeOther)
}
