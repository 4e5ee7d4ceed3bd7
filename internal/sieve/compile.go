package sieve

import "sort"

// compiler checks the parsed commands against what each command and test
// takes (RFC 5228 §2.6, §3–§5 and the extensions) and builds their
// executable forms.
type compiler struct {
	exts map[string]bool
}

// need fails unless the script required ext (RFC 5228 §3.2: using an
// extension without require is an error).
func (c *compiler) need(ext string, p Pos, what string) error {
	if !c.exts[ext] {
		return errorf(p, "%s needs require %q", what, ext)
	}
	return nil
}

// args are the arguments of one command or test split into tagged ones
// (RFC 5228 §2.6.2) and positional ones, in order.
type args struct {
	n    *node
	tags map[string]tagArg
	pos  []arg
}

type tagArg struct {
	pos Pos
	val arg // the value of a tag that takes one
}

// tagSpec says which tags a command takes and whether each takes a value
// (argStrings or argNumber) or none (argTag).
type tagSpec map[string]argKind

var (
	comparatorTags = tagSpec{"comparator": argStrings}
	matchTags      = tagSpec{"is": argTag, "contains": argTag, "matches": argTag, "value": argStrings, "count": argStrings}
	addrPartTags   = tagSpec{"all": argTag, "localpart": argTag, "domain": argTag, "user": argTag, "detail": argTag}
)

func specs(s ...tagSpec) tagSpec {
	out := tagSpec{}
	for _, m := range s {
		for k, v := range m {
			out[k] = v
		}
	}
	return out
}

// split reads n's arguments: tags first, each at most once, then the
// positional arguments.
func (c *compiler) split(n *node, spec tagSpec) (*args, error) {
	a := &args{n: n, tags: map[string]tagArg{}}
	for i := 0; i < len(n.args); i++ {
		x := n.args[i]
		if x.kind != argTag {
			a.pos = append(a.pos, x)
			continue
		}
		if len(a.pos) > 0 {
			return nil, errorf(x.pos, "tag :%s after a positional argument of %q", x.tag, n.name)
		}
		kind, ok := spec[x.tag]
		if !ok {
			return nil, errorf(x.pos, "%q does not take :%s", n.name, x.tag)
		}
		if _, dup := a.tags[x.tag]; dup {
			return nil, errorf(x.pos, ":%s given twice", x.tag)
		}
		t := tagArg{pos: x.pos}
		if kind != argTag {
			if i+1 >= len(n.args) || n.args[i+1].kind != kind {
				what := "a string"
				if kind == argNumber {
					what = "a number"
				}
				return nil, errorf(x.pos, ":%s must be followed by %s", x.tag, what)
			}
			i++
			t.val = n.args[i]
		}
		a.tags[x.tag] = t
	}
	return a, nil
}

func (a *args) has(tag string) bool { _, ok := a.tags[tag]; return ok }

// count checks the number of positional arguments.
func (a *args) count(min, max int) error {
	if len(a.pos) < min || len(a.pos) > max {
		switch {
		case min == max && min == 0:
			return errorf(a.n.pos, "%q takes no positional arguments", a.n.name)
		case min == max:
			return errorf(a.n.pos, "%q takes %d positional argument(s), not %d", a.n.name, min, len(a.pos))
		}
		return errorf(a.n.pos, "%q takes %d to %d positional arguments, not %d", a.n.name, min, max, len(a.pos))
	}
	return nil
}

// str checks that x is a single string and prepares it.
func (c *compiler) str(x arg, what string) (str, error) {
	if x.kind != argStrings || x.isList {
		return str{}, errorf(x.pos, "%s must be a string", what)
	}
	return c.prepare(x.strs[0], x.pos)
}

// strs prepares a string list.
func (c *compiler) strs(x arg, what string) (strList, error) {
	if x.kind != argStrings {
		return nil, errorf(x.pos, "%s must be a string list", what)
	}
	out := make(strList, len(x.strs))
	for i, s := range x.strs {
		v, err := c.prepare(s, x.pos)
		if err != nil {
			return nil, err
		}
		out[i] = v
	}
	return out, nil
}

// prepare decodes encoded characters and finds variable references, per
// the extensions the script required.
func (c *compiler) prepare(s string, p Pos) (str, error) {
	if c.exts["encoded-character"] {
		d, ok := decodeEncodedCharacters(s)
		if !ok {
			return str{}, errorf(p, "invalid Unicode code point in an encoded character")
		}
		s = d
	}
	if c.exts["variables"] {
		return parseTemplate(s), nil
	}
	return str{lit: s}, nil
}

// literal returns the value of a string known at compile time.
func (s str) literal() (string, bool) { return s.lit, s.parts == nil }

// matcher reads the comparator and match type tags (RFC 5228 §2.7,
// RFC 5231) and the keys.
func (c *compiler) matcher(a *args, keys arg) (matcher, error) {
	m := matcher{cmp: cmpCasemap, typ: matchIs}
	n := 0
	for tag, typ := range map[string]matchType{"is": matchIs, "contains": matchContains, "matches": matchMatches, "value": matchValue, "count": matchCount} {
		t, ok := a.tags[tag]
		if !ok {
			continue
		}
		n++
		m.typ = typ
		if typ == matchValue || typ == matchCount {
			if err := c.need("relational", t.pos, ":"+tag); err != nil {
				return m, err
			}
			op, err := c.str(t.val, "the relational operator")
			if err != nil {
				return m, err
			}
			v, _ := op.literal()
			m.rel = lowerASCII(v)
			if !relOps[m.rel] {
				return m, errorf(t.val.pos, "unknown relational operator %q (want gt, ge, lt, le, eq or ne)", v)
			}
		}
	}
	if n > 1 {
		return m, errorf(a.n.pos, "more than one match type given")
	}
	if t, ok := a.tags["comparator"]; ok {
		s, err := c.str(t.val, "the comparator")
		if err != nil {
			return m, err
		}
		name, _ := s.literal()
		cmp, known := comparators[lowerASCII(name)]
		if !known {
			return m, errorf(t.val.pos, "unknown comparator %q", name)
		}
		if cmp == cmpNumeric {
			if err := c.need("comparator-i;ascii-numeric", t.val.pos, "comparator i;ascii-numeric"); err != nil {
				return m, err
			}
			if m.typ == matchContains || m.typ == matchMatches {
				// RFC 4790 §9.1: equality and ordering only.
				return m, errorf(t.val.pos, "i;ascii-numeric cannot be used with :contains or :matches")
			}
		}
		m.cmp = cmp
	}
	k, err := c.strs(keys, "the key list")
	if err != nil {
		return m, err
	}
	m.keys = k
	m.literal = k.literals()
	return m, nil
}

// addressPart reads the address part tags (RFC 5228 §2.7.4, RFC 5233).
func (c *compiler) addressPart(a *args) (addressPart, error) {
	part, n := partAll, 0
	for tag, p := range map[string]addressPart{"all": partAll, "localpart": partLocal, "domain": partDomain, "user": partUser, "detail": partDetail} {
		t, ok := a.tags[tag]
		if !ok {
			continue
		}
		if p == partUser || p == partDetail {
			if err := c.need("subaddress", t.pos, ":"+tag); err != nil {
				return 0, err
			}
		}
		part = p
		n++
	}
	if n > 1 {
		return 0, errorf(a.n.pos, "more than one address part given")
	}
	return part, nil
}

// commands compiles a list of commands. top is true for the script's
// top level, where require may appear before any other command.
func (c *compiler) commands(nodes []*node, top bool) ([]command, error) {
	var out []command
	requireOK := top
	var lastIf *ifCmd
	for _, n := range nodes {
		if n.name == "require" {
			if !requireOK {
				return nil, errorf(n.pos, "require must come before any other command")
			}
			if err := c.require(n); err != nil {
				return nil, err
			}
			continue
		}
		requireOK = false
		switch n.name {
		case "if", "elsif", "else":
			if n.name != "if" && lastIf == nil {
				return nil, errorf(n.pos, "%s without a preceding if", n.name)
			}
			body, err := c.controlBlock(n)
			if err != nil {
				return nil, err
			}
			if n.name == "else" {
				if len(n.tests) > 0 {
					return nil, errorf(n.pos, "else takes no test")
				}
				lastIf.els, lastIf.hasElse = body, true
				lastIf = nil
				continue
			}
			if len(n.tests) != 1 {
				return nil, errorf(n.pos, "%s takes exactly one test", n.name)
			}
			cond, err := c.test(n.tests[0])
			if err != nil {
				return nil, err
			}
			br := ifBranch{pos: n.pos, cond: cond, body: body}
			if n.name == "if" {
				lastIf = &ifCmd{branches: []ifBranch{br}}
				out = append(out, lastIf)
			} else {
				lastIf.branches = append(lastIf.branches, br)
			}
			continue
		}
		lastIf = nil
		if n.hasBlock {
			return nil, errorf(n.pos, "%q takes no block", n.name)
		}
		if len(n.tests) > 0 && n.name != "if" {
			return nil, errorf(n.tests[0].pos, "expected \";\" after the arguments of %q, found %q", n.name, n.tests[0].name)
		}
		cmd, err := c.command(n)
		if err != nil {
			return nil, err
		}
		out = append(out, cmd)
	}
	return out, nil
}

func (c *compiler) controlBlock(n *node) ([]command, error) {
	if !n.hasBlock {
		return nil, errorf(n.pos, "%s needs a block", n.name)
	}
	if len(n.args) > 0 {
		return nil, errorf(n.args[0].pos, "%s takes no arguments", n.name)
	}
	return c.commands(n.block, false)
}

// require records the extensions a script uses (RFC 5228 §3.2); an
// unknown one is an error.
func (c *compiler) require(n *node) error {
	if len(n.tests) > 0 || n.hasBlock || len(n.args) != 1 || n.args[0].kind != argStrings {
		return errorf(n.pos, "require takes one string list")
	}
	for _, e := range n.args[0].strs {
		if !supported[e] {
			return errorf(n.args[0].pos, "unsupported extension %q", e)
		}
		c.exts[e] = true
	}
	return nil
}

func (c *compiler) command(n *node) (command, error) {
	switch n.name {
	case "stop", "discard":
		a, err := c.split(n, nil)
		if err != nil {
			return nil, err
		}
		if err := a.count(0, 0); err != nil {
			return nil, err
		}
		if n.name == "stop" {
			return stopCmd{pos: n.pos}, nil
		}
		return discardCmd{pos: n.pos}, nil
	case "keep":
		return c.keep(n)
	case "fileinto":
		return c.fileinto(n)
	case "redirect":
		return c.redirect(n)
	case "reject", "ereject":
		return c.reject(n)
	case "vacation":
		return c.vacation(n)
	case "setflag", "addflag", "removeflag":
		return c.flagCommand(n)
	case "set":
		return c.set(n)
	}
	return nil, errorf(n.pos, "unknown command %q", n.name)
}

// flagsTag reads :flags (RFC 5232 §5) of keep and fileinto.
func (c *compiler) flagsTag(a *args) (*strList, error) {
	t, ok := a.tags["flags"]
	if !ok {
		return nil, nil
	}
	if err := c.need("imap4flags", t.pos, ":flags"); err != nil {
		return nil, err
	}
	l, err := c.strs(t.val, ":flags")
	return &l, err
}

func (c *compiler) keep(n *node) (command, error) {
	a, err := c.split(n, tagSpec{"flags": argStrings})
	if err != nil {
		return nil, err
	}
	if err := a.count(0, 0); err != nil {
		return nil, err
	}
	fl, err := c.flagsTag(a)
	return &keepCmd{pos: n.pos, flags: fl}, err
}

func (c *compiler) fileinto(n *node) (command, error) {
	if err := c.need("fileinto", n.pos, "fileinto"); err != nil {
		return nil, err
	}
	a, err := c.split(n, tagSpec{"copy": argTag, "create": argTag, "flags": argStrings})
	if err != nil {
		return nil, err
	}
	if err := a.count(1, 1); err != nil {
		return nil, err
	}
	cmd := &fileintoCmd{pos: n.pos, copy: a.has("copy"), create: a.has("create")}
	if cmd.copy {
		if err := c.need("copy", a.tags["copy"].pos, ":copy"); err != nil {
			return nil, err
		}
	}
	if cmd.create {
		if err := c.need("mailbox", a.tags["create"].pos, ":create"); err != nil {
			return nil, err
		}
	}
	if cmd.flags, err = c.flagsTag(a); err != nil {
		return nil, err
	}
	if cmd.mailbox, err = c.str(a.pos[0], "the mailbox"); err != nil {
		return nil, err
	}
	if mb, ok := cmd.mailbox.literal(); ok && !validMailboxName(mb) {
		return nil, errorf(a.pos[0].pos, "invalid mailbox name %q", mb)
	}
	return cmd, nil
}

func (c *compiler) redirect(n *node) (command, error) {
	a, err := c.split(n, tagSpec{"copy": argTag})
	if err != nil {
		return nil, err
	}
	if err := a.count(1, 1); err != nil {
		return nil, err
	}
	cmd := &redirectCmd{pos: n.pos, copy: a.has("copy")}
	if cmd.copy {
		if err := c.need("copy", a.tags["copy"].pos, ":copy"); err != nil {
			return nil, err
		}
	}
	if cmd.addr, err = c.str(a.pos[0], "the address"); err != nil {
		return nil, err
	}
	if s, ok := cmd.addr.literal(); ok {
		if _, valid := parseRedirectAddress(s); !valid {
			return nil, errorf(a.pos[0].pos, "redirect to an invalid address %q", s)
		}
	}
	return cmd, nil
}

func (c *compiler) reject(n *node) (command, error) {
	if err := c.need(n.name, n.pos, n.name); err != nil {
		return nil, err
	}
	a, err := c.split(n, nil)
	if err != nil {
		return nil, err
	}
	if err := a.count(1, 1); err != nil {
		return nil, err
	}
	reason, err := c.str(a.pos[0], "the reason")
	return &rejectCmd{pos: n.pos, reason: reason, extended: n.name == "ereject"}, err
}

func (c *compiler) vacation(n *node) (command, error) {
	if err := c.need("vacation", n.pos, "vacation"); err != nil {
		return nil, err
	}
	a, err := c.split(n, tagSpec{"days": argNumber, "subject": argStrings, "from": argStrings,
		"addresses": argStrings, "mime": argTag, "handle": argStrings})
	if err != nil {
		return nil, err
	}
	if err := a.count(1, 1); err != nil {
		return nil, err
	}
	cmd := &vacationCmd{pos: n.pos, days: DefaultVacationDays, mime: a.has("mime")}
	if t, ok := a.tags["days"]; ok {
		// RFC 5230 §4.1: at least 1; pimail also caps it.
		cmd.days = int(min(max(t.val.num, 1), MaxVacationDays))
	}
	opt := func(tag string) (*str, error) {
		t, ok := a.tags[tag]
		if !ok {
			return nil, nil
		}
		s, err := c.str(t.val, ":"+tag)
		return &s, err
	}
	if cmd.subject, err = opt("subject"); err != nil {
		return nil, err
	}
	if cmd.from, err = opt("from"); err != nil {
		return nil, err
	}
	if cmd.handle, err = opt("handle"); err != nil {
		return nil, err
	}
	if t, ok := a.tags["addresses"]; ok {
		if cmd.addresses, err = c.strs(t.val, ":addresses"); err != nil {
			return nil, err
		}
	}
	cmd.reason, err = c.str(a.pos[0], "the reason")
	return cmd, err
}

func (c *compiler) flagCommand(n *node) (command, error) {
	if err := c.need("imap4flags", n.pos, n.name); err != nil {
		return nil, err
	}
	a, err := c.split(n, nil)
	if err != nil {
		return nil, err
	}
	if err := a.count(1, 2); err != nil {
		return nil, err
	}
	cmd := &flagCmd{pos: n.pos, op: map[string]flagOp{"setflag": flagSet, "addflag": flagAdd, "removeflag": flagRemove}[n.name]}
	if len(a.pos) == 2 {
		// RFC 5232 §3: the variable form needs the variables extension.
		if cmd.vname, err = c.variableName(a.pos[0]); err != nil {
			return nil, err
		}
	}
	cmd.flags, err = c.strs(a.pos[len(a.pos)-1], "the flag list")
	return cmd, err
}

// variableName reads the name of a variable to set (RFC 5229 §3); match
// variables cannot be set.
func (c *compiler) variableName(x arg) (string, error) {
	if err := c.need("variables", x.pos, "a variable name"); err != nil {
		return "", err
	}
	if x.kind != argStrings || x.isList {
		return "", errorf(x.pos, "the variable name must be a string")
	}
	if !validIdent(x.strs[0]) {
		return "", errorf(x.pos, "invalid variable name %q", x.strs[0])
	}
	return lowerASCII(x.strs[0]), nil
}

func (c *compiler) set(n *node) (command, error) {
	if err := c.need("variables", n.pos, "set"); err != nil {
		return nil, err
	}
	a, err := c.split(n, tagSpec{"lower": argTag, "upper": argTag, "lowerfirst": argTag,
		"upperfirst": argTag, "quotewildcard": argTag, "length": argTag})
	if err != nil {
		return nil, err
	}
	if err := a.count(2, 2); err != nil {
		return nil, err
	}
	cmd := &setCmd{pos: n.pos}
	seen := map[int]string{}
	for m := range a.tags {
		p := modPrecedence[m]
		if other, dup := seen[p]; dup {
			return nil, errorf(n.pos, "modifiers :%s and :%s cannot be combined", other, m)
		}
		seen[p] = m
		cmd.mods = append(cmd.mods, m)
	}
	sort.Slice(cmd.mods, func(i, j int) bool { return modPrecedence[cmd.mods[i]] > modPrecedence[cmd.mods[j]] })
	if cmd.name, err = c.variableName(a.pos[0]); err != nil {
		return nil, err
	}
	cmd.value, err = c.str(a.pos[1], "the value")
	return cmd, err
}
