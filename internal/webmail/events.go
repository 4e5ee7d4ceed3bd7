package webmail

import (
	"fmt"
	"net/http"
	"time"
)

// Event streams: one store subscription per open page, no polling.
const (
	maxStreamsPerSession = 8
	heartbeat            = 25 * time.Second
)

// events streams "change" events (data: the mailbox id, 0 for the folder
// list) to the page while the session lives.
func (s *Server) events(w http.ResponseWriter, r *http.Request, sess *session) {
	if !s.sessions.OpenStream(sess, maxStreamsPerSession) {
		s.httpError(w, r, http.StatusTooManyRequests, "Too many open windows.", nil)
		return
	}
	defer s.sessions.CloseStream(sess)
	rc := http.NewResponseController(w)
	_ = rc.SetWriteDeadline(time.Time{}) // a stream outlives the server's write timeout
	ch, stop := s.st.Subscribe(sess.AccountID)
	defer stop()
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	if _, err := fmt.Fprint(w, "retry: 5000\n\n"); err != nil {
		return
	}
	if err := rc.Flush(); err != nil {
		return
	}
	tick := time.NewTicker(heartbeat)
	defer tick.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case ev, ok := <-ch:
			if !ok {
				return
			}
			if _, err := fmt.Fprintf(w, "event: change\ndata: %d\n\n", ev.MailboxID); err != nil {
				return
			}
		case <-tick.C:
			// A store that cannot answer keeps the stream; the next
			// heartbeat asks again.
			if alive, err := s.sessions.Alive(r.Context(), sess, s.now()); err == nil && !alive {
				fmt.Fprint(w, "event: logout\ndata: 0\n\n")
				_ = rc.Flush()
				return
			}
			if _, err := fmt.Fprint(w, ": ping\n\n"); err != nil {
				return
			}
		}
		if err := rc.Flush(); err != nil {
			return
		}
	}
}
