package webmail

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"pimail/internal/message"
	"pimail/internal/store"
)

// Correspondents come from the envelopes of the newest messages in Sent
// (To, Cc) and INBOX (From), cached per account for a short while.
const (
	correspondentScan = 500
	correspondentTTL  = time.Minute
	maxSuggestions    = 10
)

type correspondent struct {
	label string // "Name <addr>" as typed in a form
	key   string // lower-case name and address, for matching
	score int    // how often seen; sent-to counts more
}

type corrCache struct {
	mu      sync.Mutex
	entries map[int64]corrEntry
}

type corrEntry struct {
	at   time.Time
	list []correspondent
}

func (s *Server) correspondents(ctx context.Context, accountID int64) ([]correspondent, error) {
	s.corr.mu.Lock()
	if e, ok := s.corr.entries[accountID]; ok && s.now().Sub(e.at) < correspondentTTL {
		s.corr.mu.Unlock()
		return e.list, nil
	}
	s.corr.mu.Unlock()
	byAddr := map[string]*correspondent{}
	add := func(list []message.Address, weight int) {
		for _, a := range list {
			if a.Group != "" || a.End || a.Mailbox == "" || a.Host == "" {
				continue
			}
			k := strings.ToLower(a.Addr())
			c := byAddr[k]
			if c == nil {
				label := formAddr(a)
				c = &correspondent{label: label, key: strings.ToLower(label)}
				byAddr[k] = c
			}
			c.score += weight
		}
	}
	for _, src := range []struct {
		special string
		weight  int
	}{{store.SpecialSent, 3}, {store.SpecialNone, 1}} {
		box, err := s.specialMailbox(ctx, accountID, src.special)
		if err != nil {
			return nil, err
		}
		metas, err := s.st.UIDs(ctx, box.ID)
		if err != nil {
			return nil, err
		}
		if len(metas) == 0 {
			continue
		}
		lo := max(0, len(metas)-correspondentScan)
		page, err := s.st.Fetch(ctx, box.ID, store.UIDSet{{Start: metas[lo].UID, Stop: metas[len(metas)-1].UID}}, store.FetchOptions{Parsed: true})
		if err != nil {
			return nil, err
		}
		for _, m := range page {
			if m.Parsed == nil {
				continue
			}
			if src.special == store.SpecialSent {
				add(m.Parsed.Envelope.To, src.weight)
				add(m.Parsed.Envelope.Cc, src.weight)
			} else {
				add(m.Parsed.Envelope.From, src.weight)
			}
		}
	}
	list := make([]correspondent, 0, len(byAddr))
	for _, c := range byAddr {
		list = append(list, *c)
	}
	slices.SortFunc(list, func(a, b correspondent) int {
		if a.score != b.score {
			return b.score - a.score
		}
		return strings.Compare(a.key, b.key)
	})
	s.corr.mu.Lock()
	s.corr.entries[accountID] = corrEntry{at: s.now(), list: list}
	s.corr.mu.Unlock()
	return list, nil
}

// suggest answers the compose form's address completion with a JSON array.
func (s *Server) suggest(w http.ResponseWriter, r *http.Request, sess *session) {
	q := strings.ToLower(strings.TrimSpace(r.URL.Query().Get("q")))
	out := []string{}
	if q != "" && len(q) <= 200 {
		list, err := s.correspondents(r.Context(), sess.AccountID)
		if err != nil {
			s.httpError(w, r, http.StatusInternalServerError, "No suggestions.", err)
			return
		}
		for _, c := range list {
			if strings.Contains(c.key, q) {
				out = append(out, c.label)
				if len(out) == maxSuggestions {
					break
				}
			}
		}
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(out)
}
