package webmail

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"pimail/internal/store"
)

// maxQueryLen bounds a search string.
const maxQueryLen = 500

// hit is one search result: a message of one of the account's mailboxes.
type hit struct {
	box int64
	uid uint32
}

// searchQuery is what the search box means: the text in the decoded
// Subject, From, To or Cc, or in the message text (store.SearchBody:
// decoded body parts), as a case-insensitive substring — the same program
// IMAP "OR SUBJECT … OR FROM … BODY …" runs, answered by the store's
// index and full-text index (store.Searcher), never by reading messages.
func searchQuery(text string) store.SearchQuery {
	q := store.SearchQuery{Op: store.SearchOr}
	for _, op := range []store.SearchOp{store.SearchSubject, store.SearchFrom, store.SearchTo, store.SearchCc, store.SearchBody} {
		q.Children = append(q.Children, store.SearchQuery{Op: op, Text: text})
	}
	return q
}

// searchPage lists the messages matching ?q= in one folder (?box=) or in
// all of them, PageSize per page (?page=, from 0): newest first within a
// folder, folders in sidebar order.
func (s *Server) searchPage(w http.ResponseWriter, r *http.Request, sess *session) {
	v, ok := s.newView(w, r, sess, "Search")
	if !ok {
		return
	}
	ctx := r.Context()
	qv := r.URL.Query()
	q := strings.TrimSpace(qv.Get("q"))
	v.Query = q
	d := listData{view: v, Query: q, Targets: v.Folders, Pages: 1}
	d.Box = folder{Label: "Search"}
	boxes := v.Folders
	if id, err := strconv.ParseInt(qv.Get("box"), 10, 64); err == nil {
		if f, ok := v.folderByID(id); ok {
			boxes = []folder{f}
			d.Box.ID = f.ID
		}
	}
	if q == "" || len(q) > maxQueryLen {
		s.page(w, r, "list", d)
		return
	}
	sq := searchQuery(q)
	var hits []hit
	for _, b := range boxes {
		res, err := s.st.Search(ctx, b.ID, sq)
		if err != nil {
			s.httpError(w, r, http.StatusInternalServerError, "Search failed.", err)
			return
		}
		d.Scanned += b.Messages
		for i := len(res.UIDs) - 1; i >= 0; i-- { // ascending from the store; newest first here
			hits = append(hits, hit{box: b.ID, uid: res.UIDs[i]})
		}
	}
	size := s.cfg.PageSize
	d.Total = len(hits)
	d.Pages = max(1, (d.Total+size-1)/size)
	pg, _ := strconv.Atoi(qv.Get("page"))
	d.Page = min(max(pg, 0), d.Pages-1)
	page := hits[min(d.Page*size, len(hits)):min((d.Page+1)*size, len(hits))]

	// The page's rows: one fetch per folder that has hits on the page.
	now := s.now()
	d.Rows = make([]row, len(page))
	for start := 0; start < len(page); {
		box := page[start].box
		end := start
		var set store.UIDSet
		pos := map[uint32]int{}
		for ; end < len(page) && page[end].box == box; end++ {
			set = append(set, store.UIDRange{Start: page[end].uid, Stop: page[end].uid})
			pos[page[end].uid] = end
		}
		metas, err := s.st.Fetch(ctx, box, set, store.FetchOptions{Parsed: true})
		if err != nil {
			s.httpError(w, r, http.StatusInternalServerError, "Search failed.", err)
			return
		}
		f, _ := v.folderByID(box)
		showTo := f.Special == store.SpecialSent || f.Special == store.SpecialDrafts
		for _, m := range metas {
			if i, ok := pos[m.UID]; ok {
				d.Rows[i] = s.makeRow(m, showTo, now)
			}
		}
		start = end
	}
	// A message expunged between the search and the fetch leaves no row.
	rows := d.Rows[:0]
	for _, rw := range d.Rows {
		if rw.UID != 0 {
			rows = append(rows, rw)
		}
	}
	d.Rows = rows
	d.PageQuery = searchPageQuery(q, d.Box.ID)
	s.page(w, r, "list", d)
}

// searchPageQuery is the query string of a search result page without its
// page number.
func searchPageQuery(q string, box int64) string {
	v := url.Values{"q": {q}}
	if box != 0 {
		v.Set("box", strconv.FormatInt(box, 10))
	}
	return v.Encode()
}

// PaneOn says whether messages open beside the list (never for search
// results, which come from several folders).
func (d listData) PaneOn() bool { return d.Query == "" && (d.Pane == "right" || d.Pane == "below") }

// SortKeys are the orders the list offers.
func (d listData) SortKeys() any { return sortKeys }

// PageURL is the pager's link without the page number at its end.
func (d listData) PageURL() string {
	if d.Query != "" {
		return "/search?" + d.PageQuery + "&page="
	}
	return "/box/" + strconv.FormatInt(d.Box.ID, 10) + "?page="
}
