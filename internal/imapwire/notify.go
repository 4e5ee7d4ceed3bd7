package imapwire

import "errors"

// This file holds the grammar of NOTIFY (RFC 5465 §8).

// NotifyGroup is one event group: which mailboxes, which events.
type NotifyGroup struct {
	// Filter is SELECTED, SELECTED-DELAYED, INBOXES, PERSONAL,
	// SUBSCRIBED, SUBTREE or MAILBOXES (upper case).
	Filter    string
	Mailboxes []Arg // SUBTREE and MAILBOXES: the names, undecoded
	// Events are the event names as given (case kept for BADEVENT);
	// empty for NONE.
	Events []string
	// NewFetch are MessageNew's fetch attributes (SELECTED only).
	NewFetch *Arg
}

// Notify is a parsed NOTIFY command; None for NOTIFY NONE.
type Notify struct {
	None   bool
	Status bool // SET STATUS
	Groups []NotifyGroup
}

var errNotify = errors.New("invalid NOTIFY arguments")

// ParseNotify parses the arguments of NOTIFY.
func ParseNotify(args []Arg) (Notify, error) {
	var n Notify
	if len(args) == 0 || args[0].Kind != KindAtom {
		return n, errNotify
	}
	switch upper(args[0].Str) {
	case "NONE":
		if len(args) != 1 {
			return n, errNotify
		}
		n.None = true
		return n, nil
	case "SET":
	default:
		return n, errNotify
	}
	args = args[1:]
	if len(args) > 0 && args[0].Kind == KindAtom && upper(args[0].Str) == "STATUS" {
		n.Status = true
		args = args[1:]
	}
	if len(args) == 0 {
		return n, errNotify
	}
	for _, a := range args {
		g, err := parseNotifyGroup(a)
		if err != nil {
			return n, err
		}
		n.Groups = append(n.Groups, g)
	}
	return n, nil
}

func parseNotifyGroup(a Arg) (NotifyGroup, error) {
	var g NotifyGroup
	if a.Kind != KindList || len(a.List) < 2 || a.List[0].Kind != KindAtom {
		return g, errNotify
	}
	l := a.List
	g.Filter = upper(l[0].Str)
	switch g.Filter {
	case "SELECTED", "SELECTED-DELAYED", "INBOXES", "PERSONAL", "SUBSCRIBED":
		l = l[1:]
	case "SUBTREE", "MAILBOXES":
		if len(l) < 3 {
			return g, errNotify
		}
		if l[1].Kind == KindList {
			if len(l[1].List) == 0 {
				return g, errNotify
			}
			g.Mailboxes = l[1].List
		} else {
			g.Mailboxes = []Arg{l[1]}
		}
		for _, m := range g.Mailboxes {
			if _, ok := m.AString(); !ok {
				return g, errNotify
			}
		}
		l = l[2:]
	default:
		return g, errNotify
	}
	if len(l) != 1 {
		return g, errNotify
	}
	ev := l[0]
	if ev.Kind == KindAtom && upper(ev.Str) == "NONE" {
		return g, nil
	}
	if ev.Kind != KindList || len(ev.List) == 0 {
		return g, errNotify
	}
	for i := 0; i < len(ev.List); i++ {
		e := ev.List[i]
		if e.Kind != KindAtom {
			return g, errNotify
		}
		g.Events = append(g.Events, e.Str)
		if upper(e.Str) == "MESSAGENEW" && i+1 < len(ev.List) && ev.List[i+1].Kind == KindList {
			f := ev.List[i+1]
			g.NewFetch = &f
			i++
		}
	}
	return g, nil
}
