// Package carddavd serves each account's address book over CardDAV (RFC
// 6352), so that phones, Thunderbird and vdirsyncer sync the same cards
// the webmail shows. The protocol is github.com/emersion/go-webdav's
// carddav.Handler; this package is its Backend over the store's
// Contacts role, with the cards kept through internal/contacts, plus HTTP
// Basic authentication (RFC 7617) against the accounts' passwords.
//
// Layout, under Prefix (one address book per account):
//
//	/dav/                              current-user-principal (RFC 5397)
//	/dav/ADDRESS/                      the principal
//	/dav/ADDRESS/contacts/             addressbook-home-set (RFC 6352 §7.1.1)
//	/dav/ADDRESS/contacts/default/     the address book
//	/dav/ADDRESS/contacts/default/X    a card; X is the name its client chose
//
// /.well-known/carddav redirects to /dav/ (RFC 6764 §5). A card's ETag is
// its store version, which the store never gives twice, so a client's
// If-Match (RFC 7232 §3.1) never matches a card that changed or was made
// again; a client's write over a card changed meanwhile gets 412
// (Precondition Failed), a second card with a UID 409 with
// CARDDAV:no-uid-conflict (RFC 6352 §6.3.2.1).
package carddavd

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"

	"github.com/emersion/go-vcard"
	"github.com/emersion/go-webdav"
	"github.com/emersion/go-webdav/carddav"

	"pimail/internal/auth"
	"pimail/internal/contacts"
	"pimail/internal/store"
)

// Prefix is where the address books are served; WellKnown redirects there.
const (
	Prefix    = "/dav/"
	WellKnown = "/.well-known/carddav"
)

// maxRequest bounds a request body: one card and its envelope, or a
// REPORT naming many cards.
const maxRequest = store.MaxContactSize + 1<<20

// Authenticator checks a user name and password (internal/auth).
type Authenticator interface {
	Authenticate(ctx context.Context, username, password, remoteIP string) (store.Account, error)
}

// Server is the CardDAV HTTP handler.
type Server struct {
	st    store.Contacts
	authn Authenticator
	log   *slog.Logger
	dav   *carddav.Handler
}

// New returns the CardDAV handler for Prefix and WellKnown.
func New(st store.Contacts, authn Authenticator, logger *slog.Logger) *Server {
	if logger == nil {
		logger = slog.Default()
	}
	s := &Server{st: st, authn: authn, log: logger.With("component", "carddav")}
	s.dav = &carddav.Handler{Backend: backend{s}, Prefix: strings.TrimSuffix(Prefix, "/")}
	return s
}

type acctKey struct{}

// account is the authenticated account of a request.
func account(ctx context.Context) store.Account {
	a, _ := ctx.Value(acctKey{}).(store.Account)
	return a
}

// ServeHTTP authenticates the request and serves it.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == WellKnown {
		http.Redirect(w, r, Prefix, http.StatusMovedPermanently)
		return
	}
	ip := clientIP(r)
	if r.TLS == nil && !net.ParseIP(ip).IsLoopback() {
		// Passwords only over TLS (plain text on loopback, for tests
		// and local development), as for IMAP.
		http.Error(w, "CardDAV needs HTTPS", http.StatusForbidden)
		return
	}
	user, pass, ok := r.BasicAuth()
	if !ok {
		w.Header().Set("WWW-Authenticate", `Basic realm="pimail", charset="UTF-8"`)
		http.Error(w, "log in with your mail address and password", http.StatusUnauthorized)
		return
	}
	acct, err := s.authn.Authenticate(r.Context(), user, pass, ip)
	switch {
	case errors.Is(err, auth.ErrRateLimited):
		http.Error(w, "too many failed logins; try again later", http.StatusTooManyRequests)
		return
	case errors.Is(err, auth.ErrInvalidCredentials):
		w.Header().Set("WWW-Authenticate", `Basic realm="pimail", charset="UTF-8"`)
		http.Error(w, "wrong address or password", http.StatusUnauthorized)
		return
	case err != nil:
		s.log.Error("authenticate", "err", err)
		http.Error(w, "login is not possible right now", http.StatusServiceUnavailable)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxRequest)
	s.dav.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), acctKey{}, acct)))
}

func clientIP(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// backend is carddav.Backend over the store.
type backend struct{ s *Server }

func principal(a store.Account) string { return Prefix + a.Address + "/" }
func homeSet(a store.Account) string   { return principal(a) + "contacts/" }
func bookPath(a store.Account) string  { return homeSet(a) + "default/" }

// internalErr logs a store failure and answers 500 without its text.
func (b backend) internalErr(what string, err error) error {
	b.s.log.Error(what, "err", err)
	return webdav.NewHTTPError(http.StatusInternalServerError, errors.New("the address book cannot be read now"))
}

func (b backend) CurrentUserPrincipal(ctx context.Context) (string, error) {
	return principal(account(ctx)), nil
}

func (b backend) AddressBookHomeSetPath(ctx context.Context) (string, error) {
	return homeSet(account(ctx)), nil
}

func (b backend) book(ctx context.Context) carddav.AddressBook {
	return carddav.AddressBook{Path: bookPath(account(ctx)), Name: "Contacts", Description: "pimail address book of " + account(ctx).Address,
		MaxResourceSize: store.MaxContactSize,
		SupportedAddressData: []carddav.AddressDataType{
			{ContentType: vcard.MIMEType, Version: "3.0"}, {ContentType: vcard.MIMEType, Version: "4.0"}}}
}

func (b backend) ListAddressBooks(ctx context.Context) ([]carddav.AddressBook, error) {
	return []carddav.AddressBook{b.book(ctx)}, nil
}

// samePath compares request paths with and without a trailing slash.
func samePath(a, b string) bool { return strings.TrimSuffix(a, "/") == strings.TrimSuffix(b, "/") }

func (b backend) GetAddressBook(ctx context.Context, path string) (*carddav.AddressBook, error) {
	if !samePath(path, bookPath(account(ctx))) {
		return nil, webdav.NewHTTPError(http.StatusNotFound, errors.New("no such address book"))
	}
	ab := b.book(ctx)
	return &ab, nil
}

func (b backend) CreateAddressBook(context.Context, *carddav.AddressBook) error {
	return webdav.NewHTTPError(http.StatusForbidden, errors.New("an account has one address book"))
}

func (b backend) DeleteAddressBook(context.Context, string) error {
	return webdav.NewHTTPError(http.StatusForbidden, errors.New("an account has one address book"))
}

// href returns the card name of a card's path in the account's book.
func (b backend) href(ctx context.Context, path string) (string, error) {
	name, ok := strings.CutPrefix(path, bookPath(account(ctx)))
	if !ok || name == "" || strings.Contains(name, "/") || len(name) > 255 {
		return "", webdav.NewHTTPError(http.StatusNotFound, errors.New("no such card"))
	}
	return name, nil
}

// object is a stored card as CardDAV serves it.
func (b backend) object(ctx context.Context, c store.Contact) (carddav.AddressObject, error) {
	card, err := contacts.Parse(c)
	if err != nil {
		return carddav.AddressObject{}, b.internalErr("parse stored card", err)
	}
	return carddav.AddressObject{Path: bookPath(account(ctx)) + c.Href, ModTime: c.Modified, ContentLength: int64(len(c.Card)),
		ETag: strconv.FormatInt(c.Version, 10), Card: card}, nil
}

func (b backend) GetAddressObject(ctx context.Context, path string, _ *carddav.AddressDataRequest) (*carddav.AddressObject, error) {
	href, err := b.href(ctx, path)
	if err != nil {
		return nil, err
	}
	c, err := b.s.st.Contact(ctx, account(ctx).ID, href)
	if errors.Is(err, store.ErrNotFound) {
		return nil, webdav.NewHTTPError(http.StatusNotFound, errors.New("no such card"))
	}
	if err != nil {
		return nil, b.internalErr("read card", err)
	}
	o, err := b.object(ctx, c)
	return &o, err
}

func (b backend) ListAddressObjects(ctx context.Context, path string, _ *carddav.AddressDataRequest) ([]carddav.AddressObject, error) {
	if !samePath(path, bookPath(account(ctx))) {
		return nil, webdav.NewHTTPError(http.StatusNotFound, errors.New("no such address book"))
	}
	cs, err := b.s.st.Contacts(ctx, account(ctx).ID)
	if err != nil {
		return nil, b.internalErr("list cards", err)
	}
	out := make([]carddav.AddressObject, 0, len(cs))
	for _, c := range cs {
		o, err := b.object(ctx, c)
		if err != nil {
			return nil, err
		}
		out = append(out, o)
	}
	return out, nil
}

// QueryAddressObjects answers addressbook-query (RFC 6352 §8.6) by
// filtering the whole book: a book is small.
func (b backend) QueryAddressObjects(ctx context.Context, path string, q *carddav.AddressBookQuery) ([]carddav.AddressObject, error) {
	all, err := b.ListAddressObjects(ctx, path, &q.DataRequest)
	if err != nil {
		return nil, err
	}
	return carddav.Filter(q, all)
}

// PutAddressObject stores a card under the client's conditions: If-None-
// Match: * creates only, If-Match: ETAG replaces only that version.
func (b backend) PutAddressObject(ctx context.Context, path string, card vcard.Card, opts *carddav.PutAddressObjectOptions) (*carddav.AddressObject, error) {
	href, err := b.href(ctx, path)
	if err != nil {
		return nil, webdav.NewHTTPError(http.StatusForbidden, errors.New("cards go into the address book"))
	}
	ifVersion := int64(store.AnyVersion)
	switch {
	case opts.IfNoneMatch.IsWildcard():
		ifVersion = 0
	case opts.IfMatch.IsWildcard():
		c, err := b.s.st.Contact(ctx, account(ctx).ID, href)
		if err != nil {
			return nil, webdav.NewHTTPError(http.StatusPreconditionFailed, errors.New("no card to replace"))
		}
		ifVersion = c.Version
	case opts.IfMatch.IsSet():
		etag, err := opts.IfMatch.ETag()
		v, perr := strconv.ParseInt(etag, 10, 64)
		if err != nil || perr != nil || v <= 0 {
			return nil, webdav.NewHTTPError(http.StatusPreconditionFailed, errors.New("the card changed"))
		}
		ifVersion = v
	}
	sc, err := contacts.ToStore(card, href)
	if err != nil {
		return nil, carddav.NewPreconditionError(carddav.PreconditionValidAddressData)
	}
	stored, err := b.s.st.PutContact(ctx, account(ctx).ID, sc, ifVersion)
	switch {
	case errors.Is(err, store.ErrModified), errors.Is(err, store.ErrNotFound):
		return nil, webdav.NewHTTPError(http.StatusPreconditionFailed, errors.New("the card changed"))
	case errors.Is(err, store.ErrExists):
		return nil, carddav.NewPreconditionError(carddav.PreconditionNoUIDConflict)
	case errors.Is(err, store.ErrInvalid):
		return nil, carddav.NewPreconditionError(carddav.PreconditionMaxResourceSize)
	case err != nil:
		return nil, b.internalErr("store card", err)
	}
	o, err := b.object(ctx, stored)
	return &o, err
}

func (b backend) DeleteAddressObject(ctx context.Context, path string) error {
	href, err := b.href(ctx, path)
	if err != nil {
		return err
	}
	err = b.s.st.DeleteContact(ctx, account(ctx).ID, href, store.AnyVersion)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return webdav.NewHTTPError(http.StatusNotFound, errors.New("no such card"))
	case err != nil:
		return b.internalErr("delete card", err)
	}
	return nil
}

var _ carddav.Backend = backend{}
