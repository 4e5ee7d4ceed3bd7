package sieve

import "strings"

// imap4flags (RFC 5232): an internal variable holds a set of IMAP flags
// and keywords; setflag, addflag and removeflag change it (or, with the
// variables extension, a named variable), hasflag tests it, and keep and
// fileinto store the message with it or with their :flags argument.

// splitFlags splits flag lists at spaces into single flags (RFC 5232 §3:
// a string may hold several flags separated by spaces), dropping
// duplicates in any case.
func splitFlags(lists []string) []string {
	var out []string
	for _, l := range lists {
	next:
		for _, f := range strings.Fields(l) {
			for _, g := range out {
				if strings.EqualFold(f, g) {
					continue next
				}
			}
			out = append(out, f)
		}
	}
	return out
}

func mergeFlags(a, b []string) []string {
	if len(b) == 0 {
		return a
	}
	return splitFlags([]string{strings.Join(a, " "), strings.Join(b, " ")})
}

// flagList returns a copy of the internal flag variable.
func (r *run) flagList() []string {
	if len(r.flags) == 0 {
		return nil
	}
	return append([]string(nil), r.flags...)
}

// actionFlags are the flags of a keep or fileinto: its :flags argument
// when given (RFC 5232 §5), else the internal variable.
func (r *run) actionFlags(l *strList) []string {
	if l != nil {
		return splitFlags(r.expandList(*l))
	}
	return r.flagList()
}

// flagOp is setflag, addflag or removeflag (RFC 5232 §4).
type flagOp uint8

const (
	flagSet flagOp = iota
	flagAdd
	flagRemove
)

type flagCmd struct {
	pos   Pos
	op    flagOp
	vname string // "" for the internal variable
	flags strList
}

func (c *flagCmd) exec(r *run) error {
	if err := r.step(c.pos); err != nil {
		return err
	}
	cur := r.flags
	if c.vname != "" {
		cur = splitFlags([]string{r.vars[c.vname]})
	}
	arg := splitFlags(r.expandList(c.flags))
	switch c.op {
	case flagSet:
		cur = arg
	case flagAdd:
		cur = mergeFlags(cur, arg)
	case flagRemove:
		kept := cur[:0:0]
	keep:
		for _, f := range cur {
			for _, g := range arg {
				if strings.EqualFold(f, g) {
					continue keep
				}
			}
			kept = append(kept, f)
		}
		cur = kept
	}
	if c.vname != "" {
		r.setVar(c.vname, strings.Join(cur, " "))
	} else {
		r.flags = cur
	}
	return nil
}

// hasflagTest is "hasflag" (RFC 5232 §4): the flags of the internal
// variable (or of the named variables) against the keys.
type hasflagTest struct {
	pos  Pos
	vars []string // lower-case variable names; nil: the internal variable
	m    matcher
}

func (t *hasflagTest) eval(r *run) (bool, error) {
	if err := r.step(t.pos); err != nil {
		return false, err
	}
	vals := r.flags
	if t.vars != nil {
		var lists []string
		for _, v := range t.vars {
			lists = append(lists, r.vars[v])
		}
		vals = splitFlags(lists)
	}
	return r.match(&t.m, vals), nil
}
