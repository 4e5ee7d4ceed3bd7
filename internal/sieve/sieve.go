// Package sieve is pimail's interpreter of the Sieve mail filtering
// language (RFC 5228) with the extensions users and their clients
// (Thunderbird's and Roundcube's filter editors) rely on:
//
//	fileinto, reject, envelope, encoded-character  RFC 5228 §4.1, §4.2, §5.4, §2.4.2.4
//	ereject and reject                             RFC 5429
//	mailbox (fileinto :create, mailboxexists)      RFC 5490 §3
//	imap4flags                                     RFC 5232
//	variables                                      RFC 5229
//	relational, comparator-i;ascii-numeric         RFC 5231, RFC 4790 §9.1
//	subaddress                                     RFC 5233
//	copy                                           RFC 3894
//	body                                           RFC 5173
//	date                                           RFC 5260 §4, §5
//	vacation                                       RFC 5230
//	spamtest, spamtestplus                         RFC 5235
//
// Parse reads and checks a script once: its syntax, the extensions it
// requires, and each command's arguments, reporting the first problem with
// its line and column. Run executes a parsed script against one message
// for one recipient and returns the actions it asks for; it does no I/O,
// so the caller (internal/delivery) decides how each action is carried
// out. A script that fails at run time (a limit reached, an invalid
// address made by a variable) yields the implicit keep alone, so a broken
// script never loses mail (RFC 5228 §2.10.6).
package sieve

import (
	"strings"
	"time"

	"pimail/internal/message"
)

// Extensions are the capability strings this implementation supports, in
// the order ManageSieve's SIEVE capability lists them (RFC 5804 §1.7).
var Extensions = []string{
	"fileinto", "reject", "ereject", "envelope", "encoded-character",
	"imap4flags", "variables", "relational", "comparator-i;ascii-numeric",
	"subaddress", "copy", "body", "date", "vacation", "spamtest", "spamtestplus",
	"mailbox",
}

var supported = func() map[string]bool {
	m := map[string]bool{"comparator-i;octet": true, "comparator-i;ascii-casemap": true}
	for _, e := range Extensions {
		m[e] = true
	}
	return m
}()

// Limits bound what one run of a script may do. Zero fields take the
// defaults below.
type Limits struct {
	// MaxSteps bounds the commands and tests evaluated in one run.
	MaxSteps int
	// MaxRedirects bounds the redirect actions of one run (RFC 5228 §4.2
	// asks implementations to limit them); more is a run-time error.
	MaxRedirects int
}

// Defaults of Limits.
const (
	DefaultMaxSteps     = 10000
	DefaultMaxRedirects = 4
)

func (l Limits) withDefaults() Limits {
	if l.MaxSteps <= 0 {
		l.MaxSteps = DefaultMaxSteps
	}
	if l.MaxRedirects <= 0 {
		l.MaxRedirects = DefaultMaxRedirects
	}
	return l
}

// Spam is the spam filter's verdict on the message as spamtest sees it
// (RFC 5235 §3.1, §3.2).
type Spam struct {
	// Tested is false when no spam check ran; spamtest then sees "0".
	Tested bool
	// Value is the score on spamtest's scale, 1 (certainly not spam)
	// to 10 (certainly spam).
	Value int
	// Percent is the score as a percentage for spamtest :percent
	// (spamtestplus): 0 certainly not spam, 100 certainly spam.
	Percent int
}

// Input is one message for one recipient.
type Input struct {
	// Raw is the whole message as it will be stored.
	Raw []byte
	// Parsed describes Raw; nil makes Run parse it.
	Parsed *message.Parsed
	// From is the envelope sender (RFC 5321 MAIL FROM), "" for the
	// null reverse-path; To the envelope recipient that reached this
	// account (as given at RCPT, so with its subaddress).
	From, To string
	// Addresses are the recipient's own addresses (the account's
	// address, and To), which vacation needs in To/Cc before replying
	// (RFC 5230 §4.5).
	Addresses []string
	// Spam feeds spamtest.
	Spam Spam
	// Now is the time of delivery, for currentdate; zero means
	// time.Now. Zone is the local time zone of the date tests (RFC
	// 5260 §4.1); nil means time.Local.
	Now  time.Time
	Zone *time.Location
	// MailboxExists answers mailboxexists (RFC 5490 §3.1); nil answers
	// false.
	MailboxExists func(name string) bool
}

// ActionKind says what an action does.
type ActionKind uint8

const (
	// Keep stores the message in the default mailbox (RFC 5228 §4.3).
	Keep ActionKind = iota
	// FileInto stores it in Mailbox (RFC 5228 §4.1).
	FileInto
	// Redirect sends it on to Address (RFC 5228 §4.2).
	Redirect
	// Reject refuses it with Reason (RFC 5429 §2.1, §2.2).
	Reject
	// Vacation sends an automatic reply (RFC 5230).
	Vacation
)

func (k ActionKind) String() string {
	return [...]string{"keep", "fileinto", "redirect", "reject", "vacation"}[k]
}

// Action is one thing a script asks for.
type Action struct {
	Kind ActionKind
	// Mailbox is the FileInto target (UTF-8, "/" between levels);
	// Create asks for it to be made when missing (RFC 5490 §3.2).
	Mailbox string
	Create  bool
	// Flags are the IMAP flags and keywords to store the message with
	// (RFC 5232), for Keep and FileInto.
	Flags []string
	// Implicit marks the implicit keep (RFC 5228 §2.10.2).
	Implicit bool
	// Address is the Redirect target.
	Address string
	// Reason is the Reject text; Extended marks ereject.
	Reason   string
	Extended bool
	// Reply describes a Vacation action.
	Reply *VacationReply
}

// Result is what a run asks for, in the order the script asked. When the
// implicit keep applies it is the last action.
type Result struct {
	Actions []Action
}

// Has reports whether the result has an action of kind k.
func (r Result) Has(k ActionKind) bool {
	for _, a := range r.Actions {
		if a.Kind == k {
			return true
		}
	}
	return false
}

// keepOnly is the result of a script that failed: the implicit keep.
func keepOnly() Result {
	return Result{Actions: []Action{{Kind: Keep, Implicit: true}}}
}

// Script is a parsed and checked script, safe for concurrent runs.
type Script struct {
	cmds []command
	exts map[string]bool
}

// Requires reports whether the script requires extension ext.
func (s *Script) Requires(ext string) bool { return s.exts[ext] }

// Parse reads and checks a script. The error, a *Error, names the line and
// column of the first problem.
func Parse(src string) (*Script, error) {
	tree, err := parseTree(src)
	if err != nil {
		return nil, err
	}
	c := &compiler{exts: map[string]bool{}}
	cmds, err := c.commands(tree, true)
	if err != nil {
		return nil, err
	}
	return &Script{cmds: cmds, exts: c.exts}, nil
}

// Run executes s for one message. On a run-time error it returns the
// implicit keep alone and the error (a *Error), which the caller logs.
func (s *Script) Run(in Input, lim Limits) (Result, error) {
	lim = lim.withDefaults()
	if in.Parsed == nil {
		in.Parsed = message.Parse(in.Raw)
	}
	if in.Now.IsZero() {
		in.Now = time.Now()
	}
	if in.Zone == nil {
		in.Zone = time.Local
	}
	r := &run{s: s, in: &in, lim: lim, implicitKeep: true}
	if err := r.exec(s.cmds); err != nil && err != errStop {
		return keepOnly(), err
	}
	if err := r.checkConflicts(); err != nil {
		return keepOnly(), err
	}
	if r.implicitKeep {
		r.actions = append(r.actions, Action{Kind: Keep, Implicit: true, Flags: r.flagList()})
	}
	return Result{Actions: r.actions}, nil
}

// lowerASCII folds A-Z only, as i;ascii-casemap does (RFC 4790 §9.2).
func lowerASCII(s string) string {
	for i := 0; i < len(s); i++ {
		if c := s[i]; 'A' <= c && c <= 'Z' {
			b := []byte(s)
			for j := i; j < len(b); j++ {
				if 'A' <= b[j] && b[j] <= 'Z' {
					b[j] += 'a' - 'A'
				}
			}
			return string(b)
		}
	}
	return s
}

// splitAddr splits an address at its last "@".
func splitAddr(a string) (local, domain string) {
	i := strings.LastIndexByte(a, '@')
	if i < 0 {
		return a, ""
	}
	return a[:i], a[i+1:]
}
