package imapd

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"pimail/internal/imapwire"
	"pimail/internal/store"
)

// This file implements NOTIFY (RFC 5465): a client names the mailboxes it
// watches and the events it wants, and the session reports them as they
// happen, also between commands, so that one connection can follow many
// mailboxes without an IDLE connection each. Events of mailboxes other
// than the selected one come as STATUS responses (message events), LIST
// responses (MailboxName, SubscriptionChange); the selected mailbox's
// come as the usual EXISTS, EXPUNGE and FETCH responses, at once when the
// SELECTED (or SELECTED-DELAYED: expunges wait for a command) filter asks
// for them, and at the next command otherwise.

// notifyEvents is a set of the events pimail reports.
type notifyEvents uint8

const (
	evNew notifyEvents = 1 << iota
	evExpunge
	evFlags
	evName
	evSubscription
)

// notifyEventName is an event's name in NOTIFY (RFC 5465 §5).
type notifyEventName struct {
	name string
	ev   notifyEvents
}

var notifyEventNames = []notifyEventName{
	{"MessageNew", evNew}, {"MessageExpunge", evExpunge}, {"FlagChange", evFlags},
	{"MailboxName", evName}, {"SubscriptionChange", evSubscription},
}

// notifyGroup is one event group of NOTIFY SET.
type notifyGroup struct {
	filter   string
	names    []string // SUBTREE, MAILBOXES
	events   notifyEvents
	newFetch []imapwire.FetchAtt // MessageNew's attributes (SELECTED)
}

// notifyState is what a session watches, with what it last reported.
type notifyState struct {
	groups   []notifyGroup
	selected *notifyGroup // SELECTED or SELECTED-DELAYED
	status   map[int64]store.MailboxStatus
	names    map[int64]string // mailbox ID → name, for MailboxName
	subs     map[string]bool  // subscriptions, for SubscriptionChange
	changed  map[int64]bool   // mailboxes with events not yet reported
	list     bool             // the mailbox list or subscriptions changed
}

// cmdNotify implements NOTIFY SET and NOTIFY NONE (RFC 5465 §3).
func cmdNotify(s *session, cmd *command) (string, string, error) {
	n, err := imapwire.ParseNotify(cmd.args)
	if err != nil {
		return "", "", bad("%s", err.Error())
	}
	if n.None {
		s.notify = nil
		return "", "", nil
	}
	st := &notifyState{changed: map[int64]bool{}}
	for _, g := range n.Groups {
		ng := notifyGroup{filter: g.Filter}
		for _, e := range g.Events {
			i := slices.IndexFunc(notifyEventNames, func(x notifyEventName) bool { return strings.EqualFold(x.name, e) })
			if i < 0 {
				// RFC 5465 §6: the events this server supports.
				return "", "", no("BADEVENT (MessageNew MessageExpunge FlagChange MailboxName SubscriptionChange)",
					"unsupported event %s", e)
			}
			ng.events |= notifyEventNames[i].ev
		}
		for _, m := range g.Mailboxes {
			name, err := s.decodeName(m)
			if err != nil {
				return "", "", err
			}
			ng.names = append(ng.names, name)
		}
		if g.Filter == "SELECTED" || g.Filter == "SELECTED-DELAYED" {
			// RFC 5465 §5.2: for the selected mailbox MessageNew and
			// MessageExpunge go together.
			if (ng.events&evNew != 0) != (ng.events&evExpunge != 0) {
				return "", "", bad("MessageNew and MessageExpunge go together for the selected mailbox")
			}
			if g.NewFetch != nil {
				if ng.newFetch, err = imapwire.ParseFetchAtts(*g.NewFetch); err != nil {
					return "", "", bad("invalid MessageNew fetch attributes")
				}
			}
		}
		st.groups = append(st.groups, ng)
	}
	for i := range st.groups {
		if f := st.groups[i].filter; (f == "SELECTED" || f == "SELECTED-DELAYED") && st.selected == nil {
			st.selected = &st.groups[i]
		}
	}
	if err := s.snapshotNotify(st); err != nil {
		return "", "", err
	}
	s.notify = st
	if n.Status {
		// RFC 5465 §3.1: STATUS of every watched mailbox now.
		for _, id := range st.ids() {
			name := st.names[id]
			if s.sel != nil && s.sel.mb.ID == id {
				continue
			}
			if items := st.statusItems(name); len(items) > 0 {
				if err := s.writeStatusOf(st.status[id], items); err != nil {
					return "", "", err
				}
			}
		}
	}
	return "", "", nil
}

// snapshotNotify reads the mailboxes, subscriptions and counters that
// later events are compared with.
func (s *session) snapshotNotify(st *notifyState) error {
	mbs, err := s.srv.st.Mailboxes(s.ctx, s.acct.ID)
	if err != nil {
		return fmt.Errorf("notify: listing mailboxes: %w", err)
	}
	subs, err := s.srv.st.Subscriptions(s.ctx, s.acct.ID)
	if err != nil {
		return fmt.Errorf("notify: listing subscriptions: %w", err)
	}
	st.names, st.subs = map[int64]string{}, map[string]bool{}
	for _, n := range subs {
		st.subs[n] = true
	}
	if st.status == nil {
		st.status = map[int64]store.MailboxStatus{}
	}
	for _, mb := range mbs {
		st.names[mb.ID] = mb.Name
		if _, ok := st.status[mb.ID]; ok || st.group(mb.Name) == nil {
			continue
		}
		ms, err := s.srv.st.MailboxStatus(s.ctx, s.acct.ID, mb.Name)
		if err != nil {
			continue // deleted meanwhile
		}
		st.status[mb.ID] = ms
	}
	return nil
}

// group returns the first group whose filter takes the mailbox (not
// counting SELECTED), or nil.
func (st *notifyState) group(name string) *notifyGroup {
	for i := range st.groups {
		g := &st.groups[i]
		switch g.filter {
		case "INBOXES":
			if name == "INBOX" {
				return g
			}
		case "PERSONAL":
			return g
		case "SUBSCRIBED":
			if st.subs[name] {
				return g
			}
		case "MAILBOXES":
			if slices.Contains(g.names, name) {
				return g
			}
		case "SUBTREE":
			for _, n := range g.names {
				if name == n || strings.HasPrefix(name, n+sep) {
					return g
				}
			}
		}
	}
	return nil
}

// statusItems are the STATUS items that report a mailbox's message
// events (RFC 5465 §5.2-5.4): MESSAGES, UIDNEXT and UIDVALIDITY for new
// messages, MESSAGES for expunges, UIDVALIDITY and HIGHESTMODSEQ for
// flag changes (as Dovecot sends them).
func (st *notifyState) statusItems(name string) []string {
	g := st.group(name)
	if g == nil {
		return nil
	}
	var items []string
	add := func(its ...string) {
		for _, it := range its {
			if !slices.Contains(items, it) {
				items = append(items, it)
			}
		}
	}
	if g.events&(evNew|evExpunge) != 0 {
		add("MESSAGES")
	}
	if g.events&evNew != 0 {
		add("UIDNEXT", "UIDVALIDITY")
	}
	if g.events&evFlags != 0 {
		add("UIDVALIDITY", "HIGHESTMODSEQ")
	}
	return items
}

// noteEvent records a change event for the notifications.
func (st *notifyState) noteEvent(ev store.Event) {
	if ev.MailboxID == 0 {
		st.list = true
	} else {
		st.changed[ev.MailboxID] = true
	}
}

// sendNotifications writes what changed since the last report: LIST for
// new, deleted and renamed mailboxes and subscription changes, STATUS
// for message events in other mailboxes, and, with the SELECTED filter,
// the selected mailbox's changes with the FETCH of new messages that
// MessageNew asked for.
func (s *session) sendNotifications() error {
	st := s.notify
	if st == nil {
		return nil
	}
	s.drainEvents()
	if st.list {
		st.list = false
		if err := s.notifyList(st); err != nil {
			return err
		}
	}
	if v := s.sel; v != nil && st.selected != nil && v.dirty {
		before := len(v.uids)
		if err := s.syncMailbox(st.selected.filter == "SELECTED", false); err != nil {
			return err
		}
		if v := s.sel; v != nil && len(st.selected.newFetch) > 0 && len(v.uids) > before {
			idx := make([]int, 0, len(v.uids)-before)
			for i := before; i < len(v.uids); i++ {
				idx = append(idx, i)
			}
			if err := s.fetchChunks(idx, planFetch(st.selected.newFetch, false, imapwire.FetchModifiers{})); err != nil {
				return err
			}
		}
	}
	ids := make([]int64, 0, len(st.changed))
	for id := range st.changed {
		ids = append(ids, id)
	}
	clear(st.changed)
	slices.Sort(ids)
	for _, id := range ids {
		name, ok := st.names[id]
		if !ok || s.sel != nil && s.sel.mb.ID == id {
			continue
		}
		items := st.statusItems(name)
		if len(items) == 0 {
			continue
		}
		ms, err := s.srv.st.MailboxStatus(s.ctx, s.acct.ID, name)
		if err != nil {
			continue // deleted: its LIST reports that
		}
		old, had := st.status[id]
		st.status[id] = ms
		g := st.group(name)
		changed := !had ||
			g.events&(evNew|evExpunge) != 0 && old.Messages != ms.Messages ||
			g.events&evNew != 0 && old.UIDNext != ms.UIDNext ||
			g.events&evFlags != 0 && old.HighestModSeq != ms.HighestModSeq
		if changed {
			if err := s.writeStatusOf(ms, items); err != nil {
				return err
			}
		}
	}
	return nil
}

// notifyList reports mailboxes created, deleted and renamed (MailboxName,
// RFC 5465 §5.4) and subscription changes (SubscriptionChange, §5.5) by
// comparing with the last snapshot. A renamed mailbox keeps its ID.
func (s *session) notifyList(st *notifyState) error {
	oldNames, oldSubs := st.names, st.subs
	if err := s.snapshotNotify(st); err != nil {
		return err
	}
	wants := func(name string, ev notifyEvents) bool {
		g := st.group(name)
		return g != nil && g.events&ev != 0
	}
	w := s.w
	// list writes a LIST response, with OLDNAME (RFC 5258 §3.5 extended
	// data, RFC 5465 §5.4) when old is not empty.
	list := func(attrs, name, old string) {
		w.Raw("* LIST (").Raw(attrs).Raw(`) "/" `)
		s.writeName(name)
		if old != "" {
			if !s.utf8Names() {
				old = imapwire.EncodeMUTF7(old)
			}
			w.Raw(` ("OLDNAME" (`).String(old).Raw("))")
		}
		w.CRLF()
	}
	for _, id := range st.ids() {
		name := st.names[id]
		old, had := oldNames[id]
		switch {
		case !had && wants(name, evName):
			list("", name, "")
		case had && old != name && wants(name, evName):
			list("", name, old)
		}
	}
	for _, id := range sortedKeys(oldNames) {
		if old := oldNames[id]; st.names[id] == "" && wants(old, evName) {
			list(`\NonExistent`, old, "")
		}
	}
	for _, n := range sortedKeys(st.subs) {
		if !oldSubs[n] && wants(n, evSubscription) {
			list(`\Subscribed`, n, "")
		}
	}
	for _, n := range sortedKeys(oldSubs) {
		if !st.subs[n] && wants(n, evSubscription) {
			list("", n, "")
		}
	}
	return nil
}

// ids returns the IDs of the mailboxes in the snapshot, in order.
func (st *notifyState) ids() []int64 { return sortedKeys(st.names) }

// sortedKeys returns a map's keys in order, for responses in a stable order.
func sortedKeys[K cmp.Ordered, V any](m map[K]V) []K {
	out := make([]K, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// waitForCommand waits for the next command while NOTIFY is in force,
// reporting events as they come (RFC 5465 §3: notifications are sent
// while no command is in progress too). A helper goroutine only peeks
// at the input, so that the command itself, with its literals and their
// continuation requests, is read by the session's goroutine as always.
func (s *session) waitForCommand() error {
	if s.r.Buffered() > 0 {
		return nil
	}
	ready := make(chan error, 1)
	go func() {
		_, err := s.r.BufReader().Peek(1)
		ready <- err
	}()
	for {
		select {
		case err := <-ready:
			return err
		case ev, ok := <-s.events:
			if !ok {
				s.events = nil
				continue
			}
			s.noteEvent(ev)
			if err := s.sendNotifications(); err != nil {
				s.log.Error("imap notifications", "err", err)
			}
			if err := s.flush(); err != nil {
				s.conn.Close() // ends the peek
				<-ready
				return err
			}
		case <-s.ctx.Done():
			s.conn.Close()
			<-ready
			return s.ctx.Err()
		}
	}
}
