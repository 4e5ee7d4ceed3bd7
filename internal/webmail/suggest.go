package webmail

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
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
	addr  string // lower case
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
				c = &correspondent{addr: k, label: label, key: strings.ToLower(label)}
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

// suggestion is one completion: what the list shows and what goes into
// the field.
type suggestion struct {
	Label string `json:"label"`
	Value string `json:"value"`
}

// suggest answers the compose form's address completion with a JSON
// array: the address book's cards and groups first, then correspondents.
func (s *Server) suggest(w http.ResponseWriter, r *http.Request, sess *session) {
	q := strings.ToLower(strings.TrimSpace(r.URL.Query().Get("q")))
	out := []suggestion{}
	if q != "" && len(q) <= 200 {
		book, err := s.st.Contacts(r.Context(), sess.AccountID)
		if err != nil {
			s.httpError(w, r, http.StatusInternalServerError, "No suggestions.", err)
			return
		}
		seen := map[string]bool{}
		add := func(label, value string) {
			if len(out) < maxSuggestions && !seen[value] {
				seen[value] = true
				out = append(out, suggestion{Label: label, Value: value})
			}
		}
		for i := range book {
			c := &book[i]
			if !matches(c, q) {
				continue
			}
			for _, e := range c.Emails {
				v := cardAddr(c.Name, e)
				seen[strings.ToLower(e)] = true
				add(v, v)
			}
		}
		for _, g := range groupsOf(book) {
			if !strings.Contains(strings.ToLower(g), q) {
				continue
			}
			var members []string
			for i := range book {
				if slices.Contains(book[i].Groups, g) && len(book[i].Emails) > 0 {
					members = append(members, cardAddr(book[i].Name, book[i].Emails[0]))
				}
			}
			if len(members) > 0 {
				add("Group: "+g+" ("+strconv.Itoa(len(members))+")", strings.Join(members, ", "))
			}
		}
		list, err := s.correspondents(r.Context(), sess.AccountID)
		if err != nil {
			s.httpError(w, r, http.StatusInternalServerError, "No suggestions.", err)
			return
		}
		for _, c := range list {
			if strings.Contains(c.key, q) && !seen[c.addr] {
				add(c.label, c.label)
			}
		}
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(out)
}

// cardAddr is a card's name and address as typed in a form.
func cardAddr(name, addr string) string {
	at := strings.LastIndexByte(addr, '@')
	if name == addr {
		name = ""
	}
	return formAddr(message.Address{Name: name, Mailbox: addr[:max(at, 0)], Host: addr[at+1:]})
}
