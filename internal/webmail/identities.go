package webmail

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"pimail/internal/directory"
	"pimail/internal/message"
	"pimail/internal/store"
)

// Identities: the addresses an account sends as (its own and the aliases
// that deliver to it, directory.SendsAs), each with a display name and a
// signature. A reply goes out from the identity the original was sent to.

// identities returns the account's identities, its own address first.
// Until the own address is stored as one, it is made from the display
// name and signature of the preferences (where older versions kept
// them).
func (s *Server) identities(ctx context.Context, sess *session) ([]store.Identity, error) {
	ids, err := s.st.Identities(ctx, sess.AccountID)
	if err != nil {
		return nil, fmt.Errorf("identities: %w", err)
	}
	i := slices.IndexFunc(ids, func(id store.Identity) bool { return strings.EqualFold(id.Address, sess.Address) })
	if i < 0 {
		p, err := s.prefs.get(ctx, sess.AccountID)
		if err != nil {
			return nil, err
		}
		return append([]store.Identity{{Address: sess.Address, Name: p.DisplayName, Signature: p.Signature}}, ids...), nil
	}
	own := ids[i]
	return append([]store.Identity{own}, slices.Delete(ids, i, i+1)...), nil
}

// aliases lists the directory's aliases.
func (s *Server) aliases(ctx context.Context) ([]store.Alias, error) {
	al, err := s.st.Aliases(ctx)
	if err != nil {
		return nil, fmt.Errorf("aliases: %w", err)
	}
	return al, nil
}

// sendersFor finds the identity a message to the account came through:
// the first of its To and Cc addresses that is one of ids (a +detail of
// one counts); 0, the own address, when none is.
func sendersFor(ids []store.Identity, env *message.Envelope) int {
	for _, list := range [][]message.Address{env.To, env.Cc} {
		for _, a := range list {
			addr := strings.ToLower(a.Addr())
			local, domain, _ := strings.Cut(addr, "@")
			if i := strings.IndexByte(local, '+'); i > 0 {
				addr = local[:i] + "@" + domain
			}
			if i := slices.IndexFunc(ids, func(id store.Identity) bool { return strings.EqualFold(id.Address, addr) }); i >= 0 {
				return i
			}
		}
	}
	return 0
}

// identityOption is an identity in the compose form's From menu.
type identityOption struct {
	store.Identity
	Selected bool
}

// Label is how the menu shows it.
func (o identityOption) Label() string {
	if o.Name == "" {
		return o.Address
	}
	return o.Name + " <" + o.Address + ">"
}

// SignatureBlock is the signature as the body carries it ("-- " line
// first, RFC 3676 §4.3), "" for none.
func (o identityOption) SignatureBlock() string { return signatureBlock(o.Signature) }

func signatureBlock(sig string) string {
	if sig == "" {
		return ""
	}
	return "-- \n" + sig
}

type identityRow struct {
	store.Identity
	Own bool
}

// identitySubmit saves an identity of the settings page: a new one (id
// 0) for an address the account may send as, or the name and signature
// of an existing one.
func (s *Server) identitySubmit(w http.ResponseWriter, r *http.Request, sess *session) {
	ctx := r.Context()
	fail := func(code int, msg string) {
		if v, ok := s.newView(w, r, sess, "Settings"); ok {
			v.Error = msg
			s.renderSettings(w, r, sess, v, code)
		}
	}
	id, _ := strconv.ParseInt(r.PostFormValue("id"), 10, 64)
	name := cleanHeaderText(r.PostFormValue("name"))
	sig := strings.ReplaceAll(r.PostFormValue("signature"), "\r\n", "\n")
	if len(name) > maxDisplayName || len(sig) > maxSignature {
		fail(http.StatusBadRequest, "The name or signature is too long.")
		return
	}
	ids, err := s.identities(ctx, sess)
	if err != nil {
		s.httpError(w, r, http.StatusInternalServerError, "The identities could not be read.", err)
		return
	}
	ident := store.Identity{ID: id, Name: name, Signature: sig}
	if id != 0 {
		i := slices.IndexFunc(ids, func(x store.Identity) bool { return x.ID == id })
		if i < 0 {
			fail(http.StatusNotFound, "That identity is gone.")
			return
		}
		ident.Address = ids[i].Address
	} else {
		ident.Address = strings.ToLower(strings.TrimSpace(r.PostFormValue("address")))
		aliases, err := s.aliases(ctx)
		if err != nil {
			s.httpError(w, r, http.StatusInternalServerError, "The identity could not be saved.", err)
			return
		}
		if !directory.SendsAs(sess.Address, ident.Address, aliases) {
			fail(http.StatusBadRequest, "You can send as your own address and the aliases that deliver to you only.")
			return
		}
	}
	_, err = s.st.PutIdentity(ctx, sess.AccountID, ident)
	switch {
	case errors.Is(err, store.ErrExists):
		fail(http.StatusConflict, "You have an identity with that address already.")
		return
	case err != nil:
		s.httpError(w, r, http.StatusInternalServerError, "The identity could not be saved.", err)
		return
	}
	if strings.EqualFold(ident.Address, sess.Address) {
		// The own address is stored now: the preferences' copy goes.
		if err := s.prefs.update(ctx, sess.AccountID, func(p *prefs) { p.DisplayName, p.Signature = "", "" }); err != nil {
			s.log.Warn("clear the old signature", "err", err)
		}
	}
	http.Redirect(w, r, "/settings?notice=identity#identities", http.StatusSeeOther)
}

// identityDelete removes an identity (not the own address's).
func (s *Server) identityDelete(w http.ResponseWriter, r *http.Request, sess *session) {
	id, _ := strconv.ParseInt(r.PostFormValue("id"), 10, 64)
	ids, err := s.st.Identities(r.Context(), sess.AccountID)
	if err == nil {
		for _, x := range ids {
			if x.ID == id && !strings.EqualFold(x.Address, sess.Address) {
				err = s.st.DeleteIdentity(r.Context(), sess.AccountID, id)
			}
		}
	}
	if err != nil {
		s.httpError(w, r, http.StatusInternalServerError, "The identity could not be deleted.", err)
		return
	}
	http.Redirect(w, r, "/settings?notice=identity#identities", http.StatusSeeOther)
}
