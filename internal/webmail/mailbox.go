package webmail

import (
	"context"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"pimail/internal/message"
	"pimail/internal/store"
)

// folder is one mailbox in the sidebar.
type folder struct {
	ID       int64
	Name     string // full name
	Label    string // last level
	Depth    int
	Special  string
	Messages int
	Unseen   int
	// UIDValidity and HighestModSeq as of this request's mailbox list:
	// the read path's cache checks them.
	UIDValidity   uint32
	UIDNext       uint32
	HighestModSeq uint64
}

// view is what every logged-in page shows around its content.
type view struct {
	Title   string
	User    string
	CSRF    string
	Folders []folder
	Current int64 // mailbox shown, 0 for none
	Error   string
	Notice  string
	Query   string // the search box's text
}

// L returns the view itself, for templates: a field reached through the
// page data's embedded view costs html/template a reflective search that
// allocates on every use, a field of *view does not.
func (v view) L() *view { return &v }

// specialOrder puts the default mailboxes first, in their usual order.
func specialOrder(f folder) int {
	for i, d := range store.DefaultMailboxes {
		if strings.EqualFold(d.Name, f.Name) && (d.SpecialUse == f.Special || i == 0) {
			return i
		}
	}
	return len(store.DefaultMailboxes)
}

// folders lists the account's mailboxes with their counters. The slice is
// shared with the cache and with other requests: read it, never change it.
func (s *Server) folders(ctx context.Context, accountID int64) ([]folder, error) {
	boxes, err := s.st.Mailboxes(ctx, accountID)
	if err != nil {
		return nil, fmt.Errorf("list mailboxes: %w", err)
	}
	// Counters are cached per account and reused while no mailbox's
	// UIDNEXT or HIGHESTMODSEQ moved (every append, flag change and
	// expunge moves one); on a change one query counts them all.
	key := make([]byte, 0, 64*len(boxes))
	for _, b := range boxes {
		key = strconv.AppendInt(key, b.ID, 10)
		key = append(key, '/')
		key = append(key, b.Name...)
		key = append(key, '/')
		key = strconv.AppendUint(key, uint64(b.UIDNext), 10)
		key = append(key, '/')
		key = strconv.AppendUint(key, b.HighestModSeq, 10)
		key = append(key, 0)
	}
	s.folderCache.mu.Lock()
	c, ok := s.folderCache.m[accountID]
	s.folderCache.mu.Unlock()
	if ok && c.key == string(key) {
		return c.folders, nil // the key holds every mailbox's HIGHESTMODSEQ; callers only read it
	}
	state := make(map[int64]store.Mailbox, len(boxes))
	for _, b := range boxes {
		state[b.ID] = b
	}
	counts, err := s.st.MailboxCounts(ctx, accountID)
	if err != nil {
		return nil, fmt.Errorf("mailbox counts: %w", err)
	}
	out := make([]folder, 0, len(counts))
	for _, c := range counts {
		depth := strings.Count(c.Name, store.HierarchySeparator)
		label := c.Name[strings.LastIndex(c.Name, store.HierarchySeparator)+1:]
		// The mailbox list read above is the one the cache key was made
		// from: its UIDVALIDITY and HIGHESTMODSEQ go with the counters.
		b := state[c.ID]
		out = append(out, folder{ID: c.ID, Name: c.Name, Label: label, Depth: depth,
			Special: c.SpecialUse, Messages: c.Messages, Unseen: c.Unseen,
			UIDValidity: b.UIDValidity, UIDNext: b.UIDNext, HighestModSeq: b.HighestModSeq})
	}
	slices.SortStableFunc(out, func(a, b folder) int {
		if oa, ob := specialOrder(a), specialOrder(b); oa != ob {
			return oa - ob
		}
		return strings.Compare(a.Name, b.Name)
	})
	s.folderCache.mu.Lock()
	if len(s.folderCache.m) > 10000 {
		clear(s.folderCache.m)
	}
	s.folderCache.m[accountID] = folderEntry{key: string(key), folders: out}
	s.folderCache.mu.Unlock()
	return out, nil
}

type folderCache struct {
	mu sync.Mutex
	m  map[int64]folderEntry
}

type folderEntry struct {
	key     string
	folders []folder
}

// newView loads what every page shows; on failure it has answered.
func (s *Server) newView(w http.ResponseWriter, r *http.Request, sess *session, title string) (view, bool) {
	fs, err := s.folders(r.Context(), sess.AccountID)
	if err != nil {
		s.httpError(w, r, http.StatusInternalServerError, "The mailbox list could not be read.", err)
		return view{}, false
	}
	return view{Title: title, User: sess.Address, CSRF: sess.CSRF, Folders: fs}, true
}

// mailbox is the folder as the store names it (with the state the read
// cache checks).
func (f folder) mailbox() store.Mailbox {
	return store.Mailbox{ID: f.ID, Name: f.Name, SpecialUse: f.Special, UIDValidity: f.UIDValidity, UIDNext: f.UIDNext, HighestModSeq: f.HighestModSeq}
}

// folderByID finds one of the view's folders.
func (v *view) folderByID(id int64) (folder, bool) {
	for _, f := range v.Folders {
		if f.ID == id {
			return f, true
		}
	}
	return folder{}, false
}

// folderBySpecial finds the account's mailbox with a special use.
func (v *view) folderBySpecial(special string) (folder, bool) {
	for _, f := range v.Folders {
		if f.Special == special {
			return f, true
		}
	}
	return folder{}, false
}

// mailboxOf resolves a mailbox id from the URL to one of the account's
// mailboxes: ids of other accounts are simply not found.
func (s *Server) mailboxOf(ctx context.Context, accountID int64, raw string) (store.Mailbox, error) {
	id, err := strconv.ParseInt(raw, 10, 64)
	if err != nil {
		return store.Mailbox{}, fmt.Errorf("mailbox id %q: %w", raw, store.ErrNotFound)
	}
	boxes, err := s.st.Mailboxes(ctx, accountID)
	if err != nil {
		return store.Mailbox{}, fmt.Errorf("list mailboxes: %w", err)
	}
	for _, b := range boxes {
		if b.ID == id {
			return b, nil
		}
	}
	return store.Mailbox{}, fmt.Errorf("mailbox %d: %w", id, store.ErrNotFound)
}

// specialMailbox returns the account's mailbox with the given special use,
// creating it under its default name when missing.
func (s *Server) specialMailbox(ctx context.Context, accountID int64, special string) (store.Mailbox, error) {
	boxes, err := s.st.Mailboxes(ctx, accountID)
	if err != nil {
		return store.Mailbox{}, fmt.Errorf("list mailboxes: %w", err)
	}
	name := "INBOX"
	for _, b := range boxes {
		if special != store.SpecialNone && b.SpecialUse == special {
			return b, nil
		}
		if special == store.SpecialNone && strings.EqualFold(b.Name, "INBOX") {
			return b, nil
		}
	}
	for _, d := range store.DefaultMailboxes {
		if d.SpecialUse == special {
			name = d.Name
		}
	}
	m, err := s.st.CreateMailbox(ctx, accountID, name, special)
	if errors.Is(err, store.ErrExists) {
		return s.st.Mailbox(ctx, accountID, name)
	}
	if err == nil { // subscribed, as the account's special-use mailboxes are from the start
		err = s.st.SetSubscribed(ctx, accountID, name, true)
	}
	if err != nil {
		return store.Mailbox{}, fmt.Errorf("create mailbox %s: %w", name, err)
	}
	return m, nil
}

// row is one message in a list.
type row struct {
	Box        int64
	UID        uint32
	Who        string // sender, or recipients in Sent and Drafts
	WhoAddr    string
	Subject    string
	Date       string
	FullDate   string
	Size       string
	Seen       bool
	Flagged    bool
	Answered   bool
	Draft      bool
	Junk       bool
	Attachment bool
	Depth      uint8 // in a conversation (threaded lists)
}

// listData is the message list page.
type listData struct {
	view
	Box       folder
	Rows      []row
	Page      int
	Pages     int
	Total     int
	ShowTo    bool
	Query     string
	PageQuery string        // search: the query string of the pager's links, without page
	Scanned   int           // search: messages in the folders searched
	Targets   []folder      // for "move to"
	Spec      listSpec      // the order
	Pane      string        // where messages open (prefs.pane)
	Msg       *readData     // the message open in the reading pane
	rowsHTML  template.HTML // Rows rendered (or from the cache)
}

func hasKeyword(kws []string, k string) bool {
	for _, x := range kws {
		if strings.EqualFold(x, k) {
			return true
		}
	}
	return false
}

func hasAttachment(p *message.Part) bool {
	found := false
	p.Walk(func(q *message.Part) bool {
		if q.IsAttachment() {
			found = true
		}
		return !found
	})
	return found
}

// displayAddr returns the first address of list as a short label, both
// shown through message.Visible.
func displayAddr(list []message.Address) (label, addr string) {
	for _, a := range list {
		if a.Group != "" || a.End {
			continue
		}
		addr = message.Visible(a.Addr())
		if a.Name != "" {
			return message.Visible(message.DecodeHeaderValue(a.Name)), addr
		}
		return addr, addr
	}
	return "", ""
}

func formatDate(t, now time.Time) string {
	t = t.Local()
	switch {
	case t.IsZero():
		return ""
	case t.Year() == now.Year() && t.YearDay() == now.YearDay():
		return t.Format("15:04")
	case t.Year() == now.Year():
		return t.Format("Jan 2")
	}
	return t.Format("2006-01-02")
}

func formatSize(n int64) string {
	switch {
	case n < 1000:
		return strconv.FormatInt(n, 10) + " B"
	case n < 1000*1000:
		return strconv.FormatInt((n+500)/1000, 10) + " kB"
	}
	return strconv.FormatFloat(float64(n)/1e6, 'f', 1, 64) + " MB"
}

func (s *Server) makeRow(m store.MessageMeta, showTo bool, now time.Time) row {
	rw := row{
		Box: m.MailboxID, UID: m.UID, Size: formatSize(m.Size),
		Seen: m.Flags&store.FlagSeen != 0, Flagged: m.Flags&store.FlagFlagged != 0,
		Answered: m.Flags&store.FlagAnswered != 0, Draft: m.Flags&store.FlagDraft != 0,
		Junk: hasKeyword(m.Keywords, "$Junk"),
	}
	d := m.InternalDate
	if p := m.Parsed; p != nil {
		rw.Subject = message.Visible(p.Subject)
		if showTo {
			rw.Who, rw.WhoAddr = displayAddr(p.Envelope.To)
		} else {
			rw.Who, rw.WhoAddr = displayAddr(p.Envelope.From)
		}
		if !p.Date.IsZero() && p.Date.Before(now.Add(24*time.Hour)) {
			d = p.Date
		}
		rw.Attachment = p.Body != nil && hasAttachment(p.Body)
	}
	rw.Date = formatDate(d, now)
	rw.FullDate = d.Local().Format(time.RFC1123Z)
	return rw
}

func (s *Server) home(w http.ResponseWriter, r *http.Request, sess *session) {
	inbox, err := s.specialMailbox(r.Context(), sess.AccountID, store.SpecialNone)
	if err != nil {
		s.httpError(w, r, http.StatusInternalServerError, "The inbox could not be opened.", err)
		return
	}
	http.Redirect(w, r, "/box/"+strconv.FormatInt(inbox.ID, 10), http.StatusSeeOther)
}

// listPage shows one page of a mailbox in the user's order, and with
// ?msg=UID that message in the reading pane.
func (s *Server) listPage(w http.ResponseWriter, r *http.Request, sess *session) {
	v, ok := s.newView(w, r, sess, "")
	if !ok {
		return
	}
	id, _ := strconv.ParseInt(r.PathValue("box"), 10, 64)
	box, ok := v.folderByID(id)
	if !ok {
		s.httpError(w, r, http.StatusNotFound, "No such folder.", nil)
		return
	}
	pr, err := s.prefs.get(r.Context(), sess.AccountID)
	if err != nil {
		s.logError(r, "read prefs", "err", err)
	}
	v.Title, v.Current = box.Label, box.ID
	if r.URL.Query().Get("notice") == "sent" {
		v.Notice = "Message sent."
	}
	n := box.Messages
	size := s.cfg.PageSize
	pages := max(1, (n+size-1)/size)
	pg, _ := strconv.Atoi(r.URL.Query().Get("page"))
	pg = min(max(pg, 0), pages-1)
	d := listData{view: v, Box: box, Page: pg, Pages: pages, Total: n, Spec: pr.spec(), Pane: pr.pane(),
		ShowTo: box.Special == store.SpecialSent || box.Special == store.SpecialDrafts}
	if err := s.listRows(r.Context(), &d); err != nil {
		s.httpError(w, r, http.StatusInternalServerError, "The folder could not be read.", err)
		return
	}
	d.Targets = v.Folders
	if msg := r.URL.Query().Get("msg"); msg != "" && d.Pane != "off" {
		r.SetPathValue("uid", msg)
		m, ok := s.readData(w, r, sess, v)
		if !ok {
			return
		}
		m.Next = d.PageURL() + strconv.Itoa(pg) + "&msg=" + msg
		d.Msg = &m
		d.Title = m.Title
	}
	s.page(w, r, "list", d)
}

// listRows renders the rows of the list's page, or takes them from the
// cache: they are reused while the mailbox's UIDVALIDITY and
// HIGHESTMODSEQ (read for this request) and the local hour stand (any
// delivery, flag change or expunge moves HIGHESTMODSEQ, and the hour
// covers the dates written relative to today).
func (s *Server) listRows(ctx context.Context, d *listData) error {
	now := s.now()
	box, size := d.Box, s.cfg.PageSize
	key := rowsKey{box: box.ID, offset: d.Page * size, limit: size, spec: d.Spec, pane: d.Pane != "off"}
	state := rowsState{validity: box.UIDValidity, modseq: box.HighestModSeq,
		hour: (now.Unix() + int64(zoneOffset(now))) / 3600, zone: zoneOffset(now)}
	if e, ok := s.rows.get(key); ok && box.HighestModSeq != 0 && e.state == state {
		d.rowsHTML = e.html
		return nil
	}
	var items []store.ListItem
	var depth []uint8
	if d.Spec.plain() {
		var err error
		if items, err = s.st.MailboxPage(ctx, box.ID, d.Page*size, size); err != nil {
			return err
		}
	} else {
		o, err := s.order(ctx, box, d.Spec)
		if err != nil {
			return err
		}
		lo, hi := min(d.Page*size, len(o.uids)), min((d.Page+1)*size, len(o.uids))
		uids := o.uids[lo:hi]
		if o.depth != nil {
			depth = o.depth[lo:hi]
		}
		got, err := s.st.ListItems(ctx, box.ID, slices.Sorted(slices.Values(uids)))
		if err != nil {
			return err
		}
		// Back into the order (a message expunged meanwhile leaves no row).
		at := make(map[uint32]int, len(got))
		for i := range got {
			at[got[i].UID] = i
		}
		var kept []uint8
		for i, u := range uids {
			if j, ok := at[u]; ok {
				items = append(items, got[j])
				if depth != nil {
					kept = append(kept, depth[i])
				}
			}
		}
		depth = kept
	}
	d.Rows = make([]row, len(items))
	for i := range items {
		d.Rows[i] = makeListRow(box.ID, &items[i], d.ShowTo, now)
		if depth != nil {
			d.Rows[i].Depth = depth[i]
		}
	}
	d.rowsHTML = d.RowsHTML()
	if box.HighestModSeq != 0 {
		s.rows.put(key, rowsEntry{state: state, html: d.rowsHTML}, len(d.rowsHTML))
	}
	return nil
}
