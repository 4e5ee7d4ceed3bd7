package webmail

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/emersion/go-vcard"

	"pimail/internal/contacts"
	"pimail/internal/message"
	"pimail/internal/store"
)

// The address book: a list with groups and search, a form per card, a
// card from a message's sender, vCard import and export. The cards are
// the same the CardDAV server (internal/carddavd) serves.

// Import bounds.
const (
	maxImportBytes = 8 << 20
	maxImportCards = 5000
)

// contactRow is a card in the list.
type contactRow struct {
	Href   string
	Name   string
	Emails []string
	Phones []string
	Groups []string
}

type contactsData struct {
	view
	Rows   []contactRow
	Groups []string // every group of the book
	Group  string   // the group shown ("" all)
	Q      string
	Total  int
}

// Link is the card's page.
func (c contactRow) Link() string { return "/contacts/card?href=" + url.QueryEscape(c.Href) }

// groupsOf lists the distinct groups of a book, sorted.
func groupsOf(cs []store.Contact) []string {
	var out []string
	for _, c := range cs {
		for _, g := range c.Groups {
			if !slices.Contains(out, g) {
				out = append(out, g)
			}
		}
	}
	slices.SortFunc(out, func(a, b string) int { return strings.Compare(strings.ToLower(a), strings.ToLower(b)) })
	return out
}

// matches says whether a card has q (lower case) in its name or an address.
func matches(c *store.Contact, q string) bool {
	if strings.Contains(strings.ToLower(c.Name), q) {
		return true
	}
	return slices.ContainsFunc(c.Emails, func(e string) bool { return strings.Contains(strings.ToLower(e), q) })
}

func (s *Server) contactsPage(w http.ResponseWriter, r *http.Request, sess *session) {
	v, ok := s.newView(w, r, sess, "Contacts")
	if !ok {
		return
	}
	cs, err := s.st.Contacts(r.Context(), sess.AccountID)
	if err != nil {
		s.httpError(w, r, http.StatusInternalServerError, "The address book could not be read.", err)
		return
	}
	switch r.URL.Query().Get("notice") {
	case "deleted":
		v.Notice = "Contact deleted."
	case "imported":
		v.Notice = "Imported: " + r.URL.Query().Get("n") + " new, " + r.URL.Query().Get("u") + " updated."
	}
	d := contactsData{view: v, Groups: groupsOf(cs), Group: r.URL.Query().Get("group"), Total: len(cs),
		Q: strings.TrimSpace(r.URL.Query().Get("q"))}
	q := strings.ToLower(d.Q)
	for i := range cs {
		c := &cs[i]
		if d.Group != "" && !slices.Contains(c.Groups, d.Group) || q != "" && !matches(c, q) {
			continue
		}
		row := contactRow{Href: c.Href, Name: message.Visible(c.Name), Groups: c.Groups}
		for _, e := range c.Emails {
			row.Emails = append(row.Emails, message.Visible(e))
		}
		if card, err := contacts.Parse(*c); err == nil {
			row.Phones = contacts.FieldsOf(card).Phones
		}
		d.Rows = append(d.Rows, row)
	}
	s.page(w, r, "contacts", d)
}

type contactData struct {
	view
	Href    string
	Version int64
	contacts.Fields
}

// EmailsText and the others are the form's multi-value fields, one a line.
func (d contactData) EmailsText() string { return strings.Join(d.Emails, "\n") }
func (d contactData) PhonesText() string { return strings.Join(d.Phones, "\n") }
func (d contactData) GroupsText() string { return strings.Join(d.Groups, ", ") }

// contactPage shows a card's form: ?href= an existing card, else a new
// one (prefilled from ?name= and ?email=).
func (s *Server) contactPage(w http.ResponseWriter, r *http.Request, sess *session) {
	v, ok := s.newView(w, r, sess, "Contact")
	if !ok {
		return
	}
	q := r.URL.Query()
	d := contactData{view: v}
	if href := q.Get("href"); href != "" {
		c, err := s.st.Contact(r.Context(), sess.AccountID, href)
		if errors.Is(err, store.ErrNotFound) {
			s.httpError(w, r, http.StatusNotFound, "No such contact.", nil)
			return
		}
		if err != nil {
			s.httpError(w, r, http.StatusInternalServerError, "The contact could not be read.", err)
			return
		}
		card, err := contacts.Parse(c)
		if err != nil {
			s.httpError(w, r, http.StatusInternalServerError, "The contact could not be read.", err)
			return
		}
		d.Href, d.Version, d.Fields = c.Href, c.Version, contacts.FieldsOf(card)
		d.Name = message.Visible(d.Name)
	} else {
		d.Name = cleanHeaderText(q.Get("name"))
		if e := q.Get("email"); e != "" {
			d.Emails = []string{e}
		}
	}
	switch q.Get("notice") {
	case "saved":
		d.Notice = "Contact saved."
	case "added":
		d.Notice = "Added to your contacts."
	case "known":
		d.Notice = "This address is in your contacts already."
	}
	d.Title = d.Name
	s.page(w, r, "contact", d)
}

// splitField splits a form field of several values (lines or commas).
func splitField(s string, sep string) []string {
	return strings.FieldsFunc(s, func(r rune) bool { return r == '\n' || strings.ContainsRune(sep, r) })
}

// contactSave stores the card's form: a new card without href, else the
// card at href if it is still at version.
func (s *Server) contactSave(w http.ResponseWriter, r *http.Request, sess *session) {
	f := r.PostFormValue
	fields := contacts.Fields{Name: f("name"), Emails: splitField(f("emails"), ",; "), Phones: splitField(f("phones"), ""),
		Org: f("org"), Note: f("note"), Groups: splitField(f("groups"), ",")}
	href := f("href")
	version, _ := strconv.ParseInt(f("version"), 10, 64)
	fail := func(code int, msg string) {
		v, ok := s.newView(w, r, sess, "Contact")
		if !ok {
			return
		}
		v.Error = msg
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.WriteHeader(code)
		_ = s.tmpl.render(w, "contact", contactData{view: v, Href: href, Version: version, Fields: fields})
	}
	if err := fields.Check(); err != nil {
		fail(http.StatusBadRequest, strings.TrimPrefix(err.Error(), contacts.ErrInvalid.Error()+": "))
		return
	}
	var card vcard.Card
	ifVersion := int64(0)
	if href != "" {
		old, err := s.st.Contact(r.Context(), sess.AccountID, href)
		if err != nil {
			fail(http.StatusConflict, "This contact was deleted meanwhile.")
			return
		}
		if card, err = contacts.Parse(old); err != nil {
			s.httpError(w, r, http.StatusInternalServerError, "The contact could not be read.", err)
			return
		}
		ifVersion = version
	}
	card = contacts.Apply(card, fields)
	if href == "" {
		href = contacts.HrefFor(card.Value(vcard.FieldUID))
	}
	sc, err := contacts.ToStore(card, href)
	if err == nil {
		_, err = s.st.PutContact(r.Context(), sess.AccountID, sc, ifVersion)
	}
	switch {
	case errors.Is(err, store.ErrModified):
		fail(http.StatusConflict, "This contact was changed elsewhere (on a phone?) meanwhile. Reload it and make your change again.")
		return
	case errors.Is(err, contacts.ErrInvalid), errors.Is(err, store.ErrInvalid):
		fail(http.StatusBadRequest, "The contact is too large.")
		return
	case err != nil:
		s.httpError(w, r, http.StatusInternalServerError, "The contact could not be saved.", err)
		return
	}
	http.Redirect(w, r, "/contacts/card?notice=saved&href="+url.QueryEscape(href), http.StatusSeeOther)
}

func (s *Server) contactDelete(w http.ResponseWriter, r *http.Request, sess *session) {
	version, _ := strconv.ParseInt(r.PostFormValue("version"), 10, 64)
	err := s.st.DeleteContact(r.Context(), sess.AccountID, r.PostFormValue("href"), version)
	switch {
	case errors.Is(err, store.ErrModified):
		s.httpError(w, r, http.StatusConflict, "This contact was changed elsewhere meanwhile; it was not deleted.", nil)
		return
	case err != nil && !errors.Is(err, store.ErrNotFound):
		s.httpError(w, r, http.StatusInternalServerError, "The contact could not be deleted.", err)
		return
	}
	http.Redirect(w, r, "/contacts?notice=deleted", http.StatusSeeOther)
}

// contactFromMessage adds the sender of a message (box, uid) to the
// address book, or shows the card that has the address already.
func (s *Server) contactFromMessage(w http.ResponseWriter, r *http.Request, sess *session) {
	l, err := s.loadMessage(r.Context(), sess, r.PostFormValue("box"), r.PostFormValue("uid"))
	if _, ok := s.loadedOr404(w, r, l, err); !ok {
		return
	}
	name, addr := displayAddr(l.meta.Parsed.Envelope.From)
	if addr == "" {
		s.httpError(w, r, http.StatusBadRequest, "This message has no sender address.", nil)
		return
	}
	cs, err := s.st.Contacts(r.Context(), sess.AccountID)
	if err != nil {
		s.httpError(w, r, http.StatusInternalServerError, "The address book could not be read.", err)
		return
	}
	for _, c := range cs {
		if slices.ContainsFunc(c.Emails, func(e string) bool { return strings.EqualFold(e, addr) }) {
			http.Redirect(w, r, "/contacts/card?notice=known&href="+url.QueryEscape(c.Href), http.StatusSeeOther)
			return
		}
	}
	fields := contacts.Fields{Name: cleanHeaderText(name), Emails: []string{addr}}
	if name == addr {
		fields.Name = ""
	}
	if err := fields.Check(); err != nil {
		http.Redirect(w, r, "/contacts/card?name="+url.QueryEscape(fields.Name)+"&email="+url.QueryEscape(addr), http.StatusSeeOther)
		return
	}
	card := contacts.Apply(nil, fields)
	sc, err := contacts.ToStore(card, contacts.HrefFor(card.Value(vcard.FieldUID)))
	if err == nil {
		_, err = s.st.PutContact(r.Context(), sess.AccountID, sc, 0)
	}
	if err != nil {
		s.httpError(w, r, http.StatusInternalServerError, "The contact could not be saved.", err)
		return
	}
	http.Redirect(w, r, "/contacts/card?notice=added&href="+url.QueryEscape(sc.Href), http.StatusSeeOther)
}

// contactsImport reads a .vcf file (vCard 3 or 4): a card whose UID is
// in the book replaces it, the others are added.
func (s *Server) contactsImport(w http.ResponseWriter, r *http.Request, sess *session) {
	if r.MultipartForm == nil || len(r.MultipartForm.File["file"]) != 1 {
		s.httpError(w, r, http.StatusBadRequest, "Choose a .vcf file to import.", nil)
		return
	}
	file, err := r.MultipartForm.File["file"][0].Open()
	if err != nil {
		s.httpError(w, r, http.StatusBadRequest, "The file could not be read.", nil)
		return
	}
	defer file.Close()
	data, err := io.ReadAll(io.LimitReader(file, maxImportBytes+1))
	if err != nil || len(data) > maxImportBytes {
		s.httpError(w, r, http.StatusRequestEntityTooLarge, "The file is too large (8 MB at most).", nil)
		return
	}
	cards, err := contacts.ReadAll(bytes.NewReader(data), maxImportCards)
	if err == nil && len(cards) == 0 {
		err = errors.New("no card in it")
	}
	if err != nil {
		s.httpError(w, r, http.StatusBadRequest, "The file is not a vCard file: "+strings.TrimPrefix(err.Error(), contacts.ErrInvalid.Error()+": ")+".", nil)
		return
	}
	existing, err := s.st.Contacts(r.Context(), sess.AccountID)
	if err != nil {
		s.httpError(w, r, http.StatusInternalServerError, "The address book could not be read.", err)
		return
	}
	byUID := map[string]string{}
	for _, c := range existing {
		byUID[c.UID] = c.Href
	}
	added, updated := 0, 0
	for _, card := range cards {
		if card.Value(vcard.FieldUID) == "" {
			card.SetValue(vcard.FieldUID, contacts.NewUID())
		}
		href, known := byUID[card.Value(vcard.FieldUID)]
		if !known {
			href = contacts.HrefFor(card.Value(vcard.FieldUID))
		}
		sc, err := contacts.ToStore(card, href)
		if err != nil {
			continue // an unusable card is skipped; the count says so
		}
		if _, err := s.st.PutContact(r.Context(), sess.AccountID, sc, store.AnyVersion); err != nil {
			if errors.Is(err, store.ErrInvalid) || errors.Is(err, store.ErrExists) {
				continue
			}
			s.httpError(w, r, http.StatusInternalServerError, "The import stopped.", err)
			return
		}
		byUID[sc.UID] = href
		if known {
			updated++
		} else {
			added++
		}
	}
	http.Redirect(w, r, "/contacts?notice=imported&n="+strconv.Itoa(added)+"&u="+strconv.Itoa(updated), http.StatusSeeOther)
}

// contactsExport sends the book (or one ?group=) as a .vcf file.
func (s *Server) contactsExport(w http.ResponseWriter, r *http.Request, sess *session) {
	cs, err := s.st.Contacts(r.Context(), sess.AccountID)
	if err != nil {
		s.httpError(w, r, http.StatusInternalServerError, "The address book could not be read.", err)
		return
	}
	name := "contacts"
	if g := r.URL.Query().Get("group"); g != "" {
		cs = slices.DeleteFunc(cs, func(c store.Contact) bool { return !slices.Contains(c.Groups, g) })
		name = safeFilename(g, nil)
	}
	h := w.Header()
	h.Set("Content-Type", "text/vcard; charset=utf-8")
	h.Set("Content-Disposition", contentDisposition(name+".vcf"))
	h.Set("Content-Security-Policy", "default-src 'none'; sandbox")
	if err := contacts.WriteAll(w, cs); err != nil {
		s.log.Warn("export contacts", "err", err)
	}
}
