package sieve

import (
	"errors"
	"strings"

	"pimail/internal/message"
)

// errStop ends a run early: the stop command (RFC 5228 §3.3).
var errStop = errors.New("stop")

// command is one compiled command; test one compiled test.
type command interface {
	exec(r *run) error
}

type test interface {
	eval(r *run) (bool, error)
}

// run is the state of one execution.
type run struct {
	s   *Script
	in  *Input
	lim Limits

	steps        int
	actions      []Action
	implicitKeep bool
	redirects    int
	rejectPos    Pos // where the (last) reject ran, for checkConflicts

	vars      map[string]string // variables (RFC 5229), by lower-case name
	matchVars []string          // ${0}..${N} of the last successful :matches
	flags     []string          // imap4flags' internal variable (RFC 5232 §3)

	header map[string][]field  // lazily split header fields, by lower-case name
	addrs  map[string][]string // their addresses, parsed on first use
}

// field is one header field: its unfolded raw value and, once a header
// test needed it, the value with encoded words decoded (RFC 2047), which
// header tests compare (RFC 5228 §5.7).
type field struct {
	raw, decoded string
	isDecoded    bool
}

// decodedValue returns the decoded value, decoding it on first use.
func (f *field) decodedValue() string {
	if !f.isDecoded {
		f.decoded, f.isDecoded = message.DecodeHeaderValue(f.raw), true
	}
	return f.decoded
}

// step counts one evaluated command or test against MaxSteps.
func (r *run) step(p Pos) error {
	r.steps++
	if r.steps > r.lim.MaxSteps {
		return errorf(p, "the script ran more than %d steps", r.lim.MaxSteps)
	}
	return nil
}

func (r *run) exec(cmds []command) error {
	for _, c := range cmds {
		if err := c.exec(r); err != nil {
			return err
		}
	}
	return nil
}

// headers returns the fields named name (lower case), in order.
func (r *run) headers(name string) []field {
	if r.header == nil {
		r.header = map[string][]field{}
		end := len(r.in.Raw)
		if b := r.in.Parsed.Body; b != nil && b.BodyStart <= int64(end) {
			end = int(b.BodyStart)
		}
		for _, f := range message.HeaderFields(r.in.Raw[:end]) {
			k := lowerASCII(f.Name)
			r.header[k] = append(r.header[k], field{raw: f.Unfolded()})
		}
	}
	return r.header[lowerASCII(name)]
}

// addAction records an action, dropping exact duplicates (RFC 5228
// §2.10.3: the same fileinto or redirect twice is done once).
func (r *run) addAction(a Action) {
	for i, b := range r.actions {
		if b.Kind != a.Kind {
			continue
		}
		switch a.Kind {
		case Keep:
			r.actions[i].Flags = mergeFlags(b.Flags, a.Flags)
			return
		case FileInto:
			if b.Mailbox == a.Mailbox {
				r.actions[i].Flags = mergeFlags(b.Flags, a.Flags)
				r.actions[i].Create = b.Create || a.Create
				return
			}
		case Redirect:
			if strings.EqualFold(b.Address, a.Address) {
				return
			}
		}
	}
	r.actions = append(r.actions, a)
}

// checkConflicts applies RFC 5429 §2.1 and §2.2: reject and ereject
// cannot be combined with actions that deliver the message, with vacation
// or with each other.
func (r *run) checkConflicts() error {
	rejects, delivers := 0, false
	for _, a := range r.actions {
		switch a.Kind {
		case Reject:
			rejects++
		case Keep, FileInto, Redirect, Vacation:
			delivers = true
		}
	}
	if rejects > 1 {
		return errorf(r.rejectPos, "reject used more than once")
	}
	if rejects == 1 && delivers {
		return errorf(r.rejectPos, "reject cannot be combined with keep, fileinto, redirect or vacation")
	}
	return nil
}

// Control commands (RFC 5228 §3).

type ifCmd struct {
	branches []ifBranch // if, then each elsif
	els      []command  // nil without else
	hasElse  bool
}

type ifBranch struct {
	pos  Pos
	cond test
	body []command
}

func (c *ifCmd) exec(r *run) error {
	for _, b := range c.branches {
		if err := r.step(b.pos); err != nil {
			return err
		}
		ok, err := b.cond.eval(r)
		if err != nil {
			return err
		}
		if ok {
			return r.exec(b.body)
		}
	}
	if c.hasElse {
		return r.exec(c.els)
	}
	return nil
}

type stopCmd struct{ pos Pos }

func (c stopCmd) exec(r *run) error {
	if err := r.step(c.pos); err != nil {
		return err
	}
	return errStop
}

// Actions (RFC 5228 §4, RFC 3894, RFC 5232, RFC 5490, RFC 5429).

type keepCmd struct {
	pos   Pos
	flags *strList // nil: the internal flag variable
}

func (c *keepCmd) exec(r *run) error {
	if err := r.step(c.pos); err != nil {
		return err
	}
	r.implicitKeep = false
	r.addAction(Action{Kind: Keep, Flags: r.actionFlags(c.flags)})
	return nil
}

type discardCmd struct{ pos Pos }

func (c discardCmd) exec(r *run) error {
	if err := r.step(c.pos); err != nil {
		return err
	}
	r.implicitKeep = false
	return nil
}

type fileintoCmd struct {
	pos     Pos
	mailbox str
	copy    bool
	create  bool
	flags   *strList
}

func (c *fileintoCmd) exec(r *run) error {
	if err := r.step(c.pos); err != nil {
		return err
	}
	mb := r.expand(c.mailbox)
	if !validMailboxName(mb) {
		return errorf(c.pos, "invalid mailbox name %q", mb)
	}
	if !c.copy {
		r.implicitKeep = false
	}
	r.addAction(Action{Kind: FileInto, Mailbox: mb, Create: c.create, Flags: r.actionFlags(c.flags)})
	return nil
}

type redirectCmd struct {
	pos  Pos
	addr str
	copy bool
}

func (c *redirectCmd) exec(r *run) error {
	if err := r.step(c.pos); err != nil {
		return err
	}
	a := r.expand(c.addr)
	addr, ok := parseRedirectAddress(a)
	if !ok {
		return errorf(c.pos, "redirect to an invalid address %q", a)
	}
	if !c.copy {
		r.implicitKeep = false
	}
	for _, b := range r.actions {
		if b.Kind == Redirect && strings.EqualFold(b.Address, addr) {
			return nil // RFC 5228 §2.10.3: once
		}
	}
	r.redirects++
	if r.redirects > r.lim.MaxRedirects {
		return errorf(c.pos, "more than %d redirects", r.lim.MaxRedirects)
	}
	r.addAction(Action{Kind: Redirect, Address: addr})
	return nil
}

// parseRedirectAddress checks that s is one address (RFC 5228 §4.2: an
// RFC 5322 address; a display name and angle brackets are allowed) and
// returns its addr-spec.
func parseRedirectAddress(s string) (string, bool) {
	list := message.ParseAddressList(s)
	if len(list) != 1 || list[0].Group != "" || list[0].End {
		return "", false
	}
	a := list[0]
	if a.Mailbox == "" || a.Host == "" || strings.ContainsAny(a.Mailbox+a.Host, " \t\r\n<>,;") {
		return "", false
	}
	return a.Addr(), true
}

// validMailboxName refuses names a store must not get: empty, control
// characters, or empty hierarchy levels.
func validMailboxName(s string) bool {
	if s == "" || len(s) > 1000 || strings.HasPrefix(s, "/") || strings.HasSuffix(s, "/") || strings.Contains(s, "//") {
		return false
	}
	for _, c := range s {
		if c < 0x20 || c == 0x7f {
			return false
		}
	}
	return true
}

type rejectCmd struct {
	pos      Pos
	reason   str
	extended bool
}

func (c *rejectCmd) exec(r *run) error {
	if err := r.step(c.pos); err != nil {
		return err
	}
	r.implicitKeep = false
	r.rejectPos = c.pos
	r.actions = append(r.actions, Action{Kind: Reject, Reason: r.expand(c.reason), Extended: c.extended})
	return nil
}
