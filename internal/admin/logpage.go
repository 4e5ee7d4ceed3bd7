package admin

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"pimail/internal/message"
	"pimail/internal/store"
)

// logPageSize is the number of delivery log rows per page.
const logPageSize = 100

type logData struct {
	Query   string
	Result  string
	Results []store.DeliveryResult
	Entries []store.DeliveryLogEntry
	Next    string // URL of the next (older) page; "" on the last
}

var allResults = []store.DeliveryResult{store.ResultAccepted, store.ResultJunk, store.ResultRejected,
	store.ResultDelivered, store.ResultDeferred, store.ResultBounced}

func (s *Server) logPage(w http.ResponseWriter, r *http.Request, sess *session) {
	q := r.URL.Query()
	text := strings.TrimSpace(q.Get("q"))
	if len(text) > 512 {
		text = text[:512]
	}
	res := store.DeliveryResult(q.Get("result"))
	valid := res == ""
	for _, x := range allResults {
		valid = valid || x == res
	}
	if !valid {
		res = ""
	}
	before, _ := strconv.ParseInt(q.Get("before"), 10, 64)
	query := store.DeliveryLogQuery{Text: text, Result: res, Limit: logPageSize, Before: before}
	if days, err := strconv.Atoi(q.Get("days")); err == nil && days > 0 {
		query.Since = s.now().Add(-time.Duration(days) * 24 * time.Hour)
	}
	s.flushLog(r.Context())
	entries, err := s.st.SearchDeliveryLog(r.Context(), query)
	if err != nil {
		s.httpError(w, r, http.StatusInternalServerError, "The delivery log could not be searched.", err)
		return
	}
	// Subjects, addresses and reasons came with mail: shown through
	// message.Visible, so no control or bidi character reaches the page.
	for i := range entries {
		e := &entries[i]
		e.Subject, e.From, e.To = message.Visible(e.Subject), message.Visible(e.From), message.Visible(e.To)
		e.Reason, e.MessageID = message.Visible(e.Reason), message.Visible(e.MessageID)
	}
	d := logData{Query: text, Result: string(res), Results: allResults, Entries: entries}
	if len(entries) == logPageSize {
		v := url.Values{}
		v.Set("q", text)
		v.Set("result", string(res))
		v.Set("days", q.Get("days"))
		v.Set("before", strconv.FormatInt(entries[len(entries)-1].ID, 10))
		d.Next = Prefix + "log?" + v.Encode()
	}
	s.page(w, r, sess, http.StatusOK, "log", pageData{Title: "Delivery log", Data: d})
}
