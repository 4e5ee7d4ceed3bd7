package sieve

// Compiling tests (RFC 5228 §5 and the extensions' tests).

func (c *compiler) test(n *node) (test, error) {
	if n.hasBlock {
		return nil, errorf(n.pos, "a test takes no block")
	}
	switch n.name {
	case "true", "false":
		if len(n.args) > 0 || len(n.tests) > 0 {
			return nil, errorf(n.pos, "%s takes no arguments", n.name)
		}
		return boolTest{pos: n.pos, val: n.name == "true"}, nil
	case "not":
		if len(n.args) > 0 || len(n.tests) != 1 {
			return nil, errorf(n.pos, "not takes exactly one test")
		}
		t, err := c.test(n.tests[0])
		return &notTest{pos: n.pos, t: t}, err
	case "allof", "anyof":
		if len(n.args) > 0 || len(n.tests) == 0 {
			return nil, errorf(n.pos, "%s takes a list of tests", n.name)
		}
		lt := &listTest{pos: n.pos, all: n.name == "allof"}
		for _, x := range n.tests {
			t, err := c.test(x)
			if err != nil {
				return nil, err
			}
			lt.tests = append(lt.tests, t)
		}
		return lt, nil
	}
	if len(n.tests) > 0 {
		return nil, errorf(n.tests[0].pos, "%q takes no test", n.name)
	}
	switch n.name {
	case "exists":
		a, err := c.split(n, nil)
		if err != nil {
			return nil, err
		}
		if err := a.count(1, 1); err != nil {
			return nil, err
		}
		names, err := c.strs(a.pos[0], "the header names")
		return &existsTest{pos: n.pos, names: names}, err
	case "size":
		a, err := c.split(n, tagSpec{"over": argTag, "under": argTag})
		if err != nil {
			return nil, err
		}
		if err := a.count(1, 1); err != nil {
			return nil, err
		}
		if a.has("over") == a.has("under") {
			return nil, errorf(n.pos, "size takes either :over or :under")
		}
		if a.pos[0].kind != argNumber {
			return nil, errorf(a.pos[0].pos, "size takes a number")
		}
		return &sizeTest{pos: n.pos, over: a.has("over"), limit: a.pos[0].num}, nil
	case "header":
		a, m, err := c.matchArgs(n, nil, 2)
		if err != nil {
			return nil, err
		}
		names, err := c.strs(a.pos[0], "the header names")
		return &headerTest{pos: n.pos, names: names, lits: names.literals(), m: m}, err
	case "address", "envelope":
		return c.addressTest(n)
	case "body":
		return c.bodyTest(n)
	case "date", "currentdate":
		return c.dateTest(n)
	case "string":
		if err := c.need("variables", n.pos, "string"); err != nil {
			return nil, err
		}
		a, m, err := c.matchArgs(n, nil, 2)
		if err != nil {
			return nil, err
		}
		src, err := c.strs(a.pos[0], "the source strings")
		return &stringTest{pos: n.pos, source: src, m: m}, err
	case "hasflag":
		return c.hasflag(n)
	case "mailboxexists":
		if err := c.need("mailbox", n.pos, "mailboxexists"); err != nil {
			return nil, err
		}
		a, err := c.split(n, nil)
		if err != nil {
			return nil, err
		}
		if err := a.count(1, 1); err != nil {
			return nil, err
		}
		names, err := c.strs(a.pos[0], "the mailbox names")
		return &mailboxExistsTest{pos: n.pos, names: names}, err
	case "spamtest":
		if !c.exts["spamtest"] && !c.exts["spamtestplus"] {
			return nil, errorf(n.pos, "spamtest needs require \"spamtest\"")
		}
		a, m, err := c.matchArgs(n, tagSpec{"percent": argTag}, 1)
		if err != nil {
			return nil, err
		}
		if a.has("percent") {
			if err := c.need("spamtestplus", a.tags["percent"].pos, ":percent"); err != nil {
				return nil, err
			}
		}
		if a.pos[0].isList {
			return nil, errorf(a.pos[0].pos, "spamtest takes one value, not a list")
		}
		return &spamTest{pos: n.pos, percent: a.has("percent"), m: m}, nil
	}
	return nil, errorf(n.pos, "unknown test %q", n.name)
}

// matchArgs splits the arguments of a test that takes a comparator and a
// match type (plus extra tags) and npos positional arguments, the last
// one being the keys.
func (c *compiler) matchArgs(n *node, extra tagSpec, npos int) (*args, matcher, error) {
	a, err := c.split(n, specs(comparatorTags, matchTags, extra))
	if err != nil {
		return nil, matcher{}, err
	}
	if err := a.count(npos, npos); err != nil {
		return nil, matcher{}, err
	}
	m, err := c.matcher(a, a.pos[npos-1])
	return a, m, err
}

func (c *compiler) addressTest(n *node) (test, error) {
	if n.name == "envelope" {
		if err := c.need("envelope", n.pos, "envelope"); err != nil {
			return nil, err
		}
	}
	a, m, err := c.matchArgs(n, addrPartTags, 2)
	if err != nil {
		return nil, err
	}
	part, err := c.addressPart(a)
	if err != nil {
		return nil, err
	}
	names, err := c.strs(a.pos[0], "the header names")
	if err != nil {
		return nil, err
	}
	for _, s := range names {
		v, lit := s.literal()
		if !lit {
			continue
		}
		if n.name == "envelope" && lowerASCII(v) != "from" && lowerASCII(v) != "to" {
			// RFC 5228 §5.4: only "from" and "to" (this server has no "auth").
			return nil, errorf(a.pos[0].pos, "unknown envelope part %q (want \"from\" or \"to\")", v)
		}
		if n.name == "address" && !addressHeaders[lowerASCII(v)] {
			return nil, errorf(a.pos[0].pos, "%q is not a header field with addresses", v)
		}
	}
	if n.name == "envelope" {
		return &envelopeTest{pos: n.pos, parts: names, part: part, m: m}, nil
	}
	return &addressTest{pos: n.pos, names: names, part: part, m: m}, nil
}

func (c *compiler) bodyTest(n *node) (test, error) {
	if err := c.need("body", n.pos, "body"); err != nil {
		return nil, err
	}
	a, m, err := c.matchArgs(n, tagSpec{"raw": argTag, "text": argTag, "content": argStrings}, 1)
	if err != nil {
		return nil, err
	}
	t := &bodyTest{pos: n.pos, m: m}
	k := 0
	if a.has("raw") {
		t.transform, k = bodyRaw, k+1
	}
	if a.has("text") {
		t.transform, k = bodyText, k+1
	}
	if ct, ok := a.tags["content"]; ok {
		t.transform, k = bodyContent, k+1
		if t.types, err = c.strs(ct.val, ":content"); err != nil {
			return nil, err
		}
	}
	if k > 1 {
		return nil, errorf(n.pos, "body takes one of :raw, :text and :content")
	}
	return t, nil
}

func (c *compiler) dateTest(n *node) (test, error) {
	if err := c.need("date", n.pos, n.name); err != nil {
		return nil, err
	}
	extra := tagSpec{"zone": argStrings}
	npos := 2
	if n.name == "date" {
		extra["originalzone"] = argTag
		npos = 3
	}
	a, m, err := c.matchArgs(n, extra, npos)
	if err != nil {
		return nil, err
	}
	var z zoneSpec
	if t, ok := a.tags["zone"]; ok {
		if a.has("originalzone") {
			return nil, errorf(t.pos, ":zone and :originalzone exclude each other")
		}
		s, err := c.str(t.val, ":zone")
		if err != nil {
			return nil, err
		}
		if v, lit := s.literal(); lit {
			if _, ok := parseZone(v); !ok {
				return nil, errorf(t.val.pos, "invalid time zone %q (want +hhmm or -hhmm)", v)
			}
		}
		z.zone = &s
	}
	z.original = a.has("originalzone")
	part, err := c.str(a.pos[npos-2], "the date part")
	if err != nil {
		return nil, err
	}
	if v, lit := part.literal(); lit && !dateParts[lowerASCII(v)] {
		return nil, errorf(a.pos[npos-2].pos, "unknown date part %q", v)
	}
	if n.name == "currentdate" {
		return &currentDateTest{pos: n.pos, zone: z, part: part, m: m}, nil
	}
	header, err := c.str(a.pos[0], "the header name")
	return &dateTest{pos: n.pos, zone: z, header: header, part: part, m: m}, err
}

func (c *compiler) hasflag(n *node) (test, error) {
	if err := c.need("imap4flags", n.pos, "hasflag"); err != nil {
		return nil, err
	}
	a, err := c.split(n, specs(comparatorTags, matchTags))
	if err != nil {
		return nil, err
	}
	if err := a.count(1, 2); err != nil {
		return nil, err
	}
	m, err := c.matcher(a, a.pos[len(a.pos)-1])
	if err != nil {
		return nil, err
	}
	t := &hasflagTest{pos: n.pos, m: m}
	if len(a.pos) == 2 {
		if err := c.need("variables", a.pos[0].pos, "a variable list"); err != nil {
			return nil, err
		}
		if a.pos[0].kind != argStrings {
			return nil, errorf(a.pos[0].pos, "the variable list must be strings")
		}
		for _, v := range a.pos[0].strs {
			if !validIdent(v) {
				return nil, errorf(a.pos[0].pos, "invalid variable name %q", v)
			}
			t.vars = append(t.vars, lowerASCII(v))
		}
	}
	return t, nil
}
