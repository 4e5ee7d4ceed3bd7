package sieve

import (
	"strconv"
	"strings"

	"pimail/internal/message"
)

// Tests of RFC 5228 §5 and of the extensions that need no more than the
// header and the envelope.

type boolTest struct {
	pos Pos
	val bool
}

func (t boolTest) eval(r *run) (bool, error) { return t.val, r.step(t.pos) }

type notTest struct {
	pos Pos
	t   test
}

func (t *notTest) eval(r *run) (bool, error) {
	if err := r.step(t.pos); err != nil {
		return false, err
	}
	ok, err := t.t.eval(r)
	return !ok, err
}

// listTest is allof (all) or anyof; both stop at the first test that
// decides (RFC 5228 §5.2, §5.3).
type listTest struct {
	pos   Pos
	all   bool
	tests []test
}

func (t *listTest) eval(r *run) (bool, error) {
	if err := r.step(t.pos); err != nil {
		return false, err
	}
	for _, x := range t.tests {
		ok, err := x.eval(r)
		if err != nil {
			return false, err
		}
		if ok != t.all {
			return ok, nil
		}
	}
	return t.all, nil
}

type existsTest struct {
	pos   Pos
	names strList
}

func (t *existsTest) eval(r *run) (bool, error) {
	if err := r.step(t.pos); err != nil {
		return false, err
	}
	for _, n := range r.expandList(t.names) {
		if len(r.headers(n)) == 0 {
			return false, nil
		}
	}
	return true, nil
}

type sizeTest struct {
	pos   Pos
	over  bool
	limit int64
}

func (t *sizeTest) eval(r *run) (bool, error) {
	if err := r.step(t.pos); err != nil {
		return false, err
	}
	n := int64(len(r.in.Raw))
	if t.over {
		return n > t.limit, nil
	}
	return n < t.limit, nil
}

// headerTest is "header" (RFC 5228 §5.7): the decoded values of the
// named fields.
type headerTest struct {
	pos   Pos
	names strList
	lits  []string // names, when none has a variable
	m     matcher
}

func (t *headerTest) eval(r *run) (bool, error) {
	if err := r.step(t.pos); err != nil {
		return false, err
	}
	var vals []string
	names := t.lits
	if names == nil {
		names = r.expandList(t.names)
	}
	for _, n := range names {
		fs := r.headers(n)
		for i := range fs {
			vals = append(vals, fs[i].decodedValue())
		}
	}
	return r.match(&t.m, vals), nil
}

// addressPart selects a part of an address (RFC 5228 §2.7.4, RFC 5233).
type addressPart uint8

const (
	partAll addressPart = iota
	partLocal
	partDomain
	partUser
	partDetail
)

// subaddressSep separates user and detail (RFC 5233 §1; pimail's
// directory uses the same "+").
const subaddressSep = "+"

// apply returns the part of addr, and false when it does not exist
// (":detail" of an address without a separator matches nothing, RFC
// 5233 §4).
func (p addressPart) apply(addr string) (string, bool) {
	local, domain := splitAddr(addr)
	switch p {
	case partLocal:
		return local, true
	case partDomain:
		return domain, true
	case partUser:
		u, _, _ := strings.Cut(local, subaddressSep)
		return u, true
	case partDetail:
		_, d, ok := strings.Cut(local, subaddressSep)
		return d, ok
	}
	return addr, true
}

// addressHeaders are the fields the address test may read (RFC 5228
// §5.1: fields that contain addresses).
var addressHeaders = map[string]bool{
	"from": true, "sender": true, "reply-to": true, "to": true, "cc": true, "bcc": true,
	"resent-from": true, "resent-sender": true, "resent-to": true, "resent-cc": true,
	"resent-bcc": true, "resent-reply-to": true, "return-path": true, "delivered-to": true,
	"errors-to": true, "disposition-notification-to": true, "return-receipt-to": true,
	"x-original-to": true, "envelope-to": true, "mail-followup-to": true, "mail-reply-to": true,
	"original-recipient": true, "x-envelope-to": true, "x-envelope-from": true,
}

// addressTest is "address" (RFC 5228 §5.1): each address of the named
// fields, group names left out.
type addressTest struct {
	pos   Pos
	names strList
	part  addressPart
	m     matcher
}

func (t *addressTest) eval(r *run) (bool, error) {
	if err := r.step(t.pos); err != nil {
		return false, err
	}
	var vals []string
	for _, n := range r.expandList(t.names) {
		if !addressHeaders[lowerASCII(n)] {
			continue
		}
		for _, a := range r.addresses(n) {
			if v, ok := t.part.apply(a); ok {
				vals = append(vals, v)
			}
		}
	}
	return r.match(&t.m, vals), nil
}

// addresses returns the addresses of the fields named name, group names
// left out, parsing them once per run.
func (r *run) addresses(name string) []string {
	key := lowerASCII(name)
	if v, ok := r.addrs[key]; ok {
		return v
	}
	var out []string
	for _, f := range r.headers(key) {
		for _, a := range message.ParseAddressList(f.raw) {
			if a.Group == "" && !a.End {
				out = append(out, a.Addr())
			}
		}
	}
	if r.addrs == nil {
		r.addrs = map[string][]string{}
	}
	r.addrs[key] = out
	return out
}

// envelopeTest is "envelope" (RFC 5228 §5.4). The null reverse-path is
// the empty string, for every address part.
type envelopeTest struct {
	pos   Pos
	parts strList
	part  addressPart
	m     matcher
}

func (t *envelopeTest) eval(r *run) (bool, error) {
	if err := r.step(t.pos); err != nil {
		return false, err
	}
	var vals []string
	for _, p := range r.expandList(t.parts) {
		var a string
		switch lowerASCII(p) {
		case "from":
			a = r.in.From
		case "to":
			a = r.in.To
		default:
			continue
		}
		if a == "" {
			vals = append(vals, "")
			continue
		}
		if v, ok := t.part.apply(a); ok {
			vals = append(vals, v)
		}
	}
	return r.match(&t.m, vals), nil
}

// spamTest is "spamtest" (RFC 5235 §3.1, §3.2): "0" when the message was
// not tested, else the score as 1–10, or as a percentage with :percent.
type spamTest struct {
	pos     Pos
	percent bool
	m       matcher
}

func (t *spamTest) eval(r *run) (bool, error) {
	if err := r.step(t.pos); err != nil {
		return false, err
	}
	v := "0"
	if s := r.in.Spam; s.Tested {
		if t.percent {
			v = strconv.Itoa(min(max(s.Percent, 0), 100))
		} else {
			v = strconv.Itoa(min(max(s.Value, 1), 10))
		}
	}
	return r.match(&t.m, []string{v}), nil
}

// mailboxExistsTest is "mailboxexists" (RFC 5490 §3.1): true when every
// named mailbox exists.
type mailboxExistsTest struct {
	pos   Pos
	names strList
}

func (t *mailboxExistsTest) eval(r *run) (bool, error) {
	if err := r.step(t.pos); err != nil {
		return false, err
	}
	for _, n := range r.expandList(t.names) {
		if r.in.MailboxExists == nil || !r.in.MailboxExists(n) {
			return false, nil
		}
	}
	return true, nil
}
