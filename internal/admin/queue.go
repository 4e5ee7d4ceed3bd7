package admin

import (
	"bytes"
	"errors"
	"net/http"
	"strconv"
	"time"

	"pimail/internal/store"
)

type queueRow struct {
	store.QueueEntry
	Pending, Delivered, Failed int
}

func (s *Server) queuePage(w http.ResponseWriter, r *http.Request, sess *session) {
	entries, err := s.st.QueueEntries(r.Context())
	if err != nil {
		s.httpError(w, r, http.StatusInternalServerError, "The queue could not be read.", err)
		return
	}
	rows := make([]queueRow, 0, len(entries))
	for _, e := range entries {
		row := queueRow{QueueEntry: e}
		for _, rc := range e.Recipients {
			switch rc.State {
			case store.QueuePending:
				row.Pending++
			case store.QueueDelivered:
				row.Delivered++
			case store.QueueFailed:
				row.Failed++
			}
		}
		rows = append(rows, row)
	}
	s.page(w, r, sess, http.StatusOK, "queue", pageData{Title: "Queue", Data: rows})
}

// maxHeaderShown bounds the header section shown for a queued message.
const maxHeaderShown = 16 << 10

type queueShowData struct {
	Entry  store.QueueEntry
	Header string // the message's header section, as text
}

func (s *Server) queueEntry(w http.ResponseWriter, r *http.Request) (store.QueueEntry, bool) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id <= 0 {
		s.httpError(w, r, http.StatusNotFound, "There is no such queue entry.", nil)
		return store.QueueEntry{}, false
	}
	e, err := s.st.QueueEntry(r.Context(), id)
	if errors.Is(err, store.ErrNotFound) {
		s.httpError(w, r, http.StatusNotFound, "The queue entry is gone (delivered, bounced or dropped).", nil)
		return e, false
	}
	if err != nil {
		s.httpError(w, r, http.StatusInternalServerError, "The queue could not be read.", err)
		return e, false
	}
	return e, true
}

func (s *Server) queueShow(w http.ResponseWriter, r *http.Request, sess *session) {
	e, ok := s.queueEntry(w, r)
	if !ok {
		return
	}
	d := queueShowData{Entry: e}
	if raw, err := s.st.ReadBlob(r.Context(), e.BlobID); err == nil {
		d.Header = headerSection(raw)
	} else {
		s.log.Warn("admin: reading queued message", "queue_id", e.ID, "err", err)
	}
	s.page(w, r, sess, http.StatusOK, "queueshow", pageData{Title: "Queue entry", Nav: "queue", Data: d})
}

// headerSection returns the header fields of raw (up to the empty line),
// at most maxHeaderShown bytes.
func headerSection(raw []byte) string {
	end := len(raw)
	if i := bytes.Index(raw, []byte("\r\n\r\n")); i >= 0 {
		end = i
	} else if i := bytes.Index(raw, []byte("\n\n")); i >= 0 {
		end = i
	}
	end = min(end, maxHeaderShown)
	return string(bytes.ToValidUTF8(raw[:end], []byte("\uFFFD")))
}

func (s *Server) queueSubmit(w http.ResponseWriter, r *http.Request, sess *session) {
	e, ok := s.queueEntry(w, r)
	if !ok {
		return
	}
	var err error
	key := ""
	switch r.PostFormValue("action") {
	case "retry":
		err = s.st.RetryQueueEntry(r.Context(), e.ID, s.now())
		key = "queue-retried"
	case "drop":
		err = s.st.DropQueueEntry(r.Context(), e.ID)
		key = "queue-dropped"
	default:
		s.httpError(w, r, http.StatusBadRequest, "Unknown action.", nil)
		return
	}
	if errors.Is(err, store.ErrNotFound) {
		s.httpError(w, r, http.StatusNotFound, "The queue entry is gone (delivered, bounced or dropped).", nil)
		return
	}
	if err != nil {
		s.httpError(w, r, http.StatusInternalServerError, "The change could not be saved.", err)
		return
	}
	s.log.Info("admin: queue "+r.PostFormValue("action"), "user", sess.Address, "queue_id", e.ID)
	if key == "queue-dropped" {
		done(w, r, "queue", key)
		return
	}
	http.Redirect(w, r, Prefix+"queue/"+strconv.FormatInt(e.ID, 10)+"?done="+key, http.StatusSeeOther)
}

// due tells whether a queue entry's next attempt has come.
func due(t time.Time) bool { return !t.After(time.Now()) }
