package webmail

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"pimail/internal/store"
)

// The store has no full-text index yet, so search is a bounded scan,
// newest first: at most searchScanMax messages and searchTimeMax of work,
// matching decoded Subject/From/To/Cc and the decoded text body.
const (
	searchScanMax    = 5000
	searchTimeMax    = 3 * time.Second
	searchResultsMax = 200
)

func (s *Server) searchPage(w http.ResponseWriter, r *http.Request, sess *session) {
	v, ok := s.newView(w, r, sess, "Search")
	if !ok {
		return
	}
	q := strings.TrimSpace(r.URL.Query().Get("q"))
	d := listData{view: v, Query: q, Targets: v.Folders}
	d.Box = folder{Label: "Search"}
	var boxes []folder
	if id, err := strconv.ParseInt(r.URL.Query().Get("box"), 10, 64); err == nil {
		if f, ok := v.folderByID(id); ok {
			boxes = []folder{f}
			d.Box.ID = f.ID
		}
	}
	if boxes == nil {
		boxes = v.Folders
	}
	if q == "" || len(q) > 500 {
		s.page(w, r, "list", d)
		return
	}
	needle := strings.ToLower(q)
	deadline := s.now().Add(searchTimeMax)
	now := s.now()
scan:
	for _, b := range boxes {
		metas, err := s.st.UIDs(r.Context(), b.ID)
		if err != nil {
			s.httpError(w, r, http.StatusInternalServerError, "Search failed.", err)
			return
		}
		// Newest first, in chunks of 100 so a match list stays small.
		for hi := len(metas); hi > 0; hi -= 100 {
			lo := max(0, hi-100)
			page, err := s.st.Fetch(r.Context(), b.ID, store.UIDSet{{Start: metas[lo].UID, Stop: metas[hi-1].UID}}, store.FetchOptions{Parsed: true})
			if err != nil {
				s.httpError(w, r, http.StatusInternalServerError, "Search failed.", err)
				return
			}
			for i := len(page) - 1; i >= 0; i-- {
				m := page[i]
				if d.Scanned >= searchScanMax || len(d.Rows) >= searchResultsMax || s.now().After(deadline) || r.Context().Err() != nil {
					d.Truncated = true
					break scan
				}
				d.Scanned++
				if s.matches(r, m, needle) {
					d.Rows = append(d.Rows, s.makeRow(m, false, now))
				}
			}
		}
	}
	d.Total = len(d.Rows)
	d.Pages = 1
	s.page(w, r, "list", d)
}

func (s *Server) matches(r *http.Request, m store.MessageMeta, needle string) bool {
	p := m.Parsed
	if p == nil || p.Body == nil {
		return false
	}
	for _, f := range []string{p.Subject, p.From, p.To, p.Cc} {
		if strings.Contains(strings.ToLower(f), needle) {
			return true
		}
	}
	raw, err := s.st.ReadBlob(r.Context(), m.BlobID)
	if err != nil {
		s.log.Warn("search: read message", "err", err)
		return false
	}
	return strings.Contains(strings.ToLower(messageText(raw, p.Body)), needle)
}
