package imapwire

import (
	"io"
	"strconv"
)

// Kind says what an argument is.
type Kind uint8

const (
	KindAtom    Kind = iota // atom, number, sequence set, flag, fetch attribute
	KindQuoted              // quoted string (RFC 9051 §4.3)
	KindLiteral             // literal {n}, {n+} or literal8 ~{n} (RFC 9051 §4.3, RFC 7888, RFC 3516)
	KindList                // parenthesised list
)

// Arg is one argument of a command. An atom that contains "[" runs to the
// matching "]" including spaces and parentheses, so BODY[HEADER.FIELDS (A B)]<0.10>
// is one atom.
type Arg struct {
	Kind     Kind
	Str      string // atom or quoted string (unescaped)
	Lit      []byte // literal data
	Literal8 bool   // ~{n}
	List     []Arg
}

// AString returns the value of an atom, quoted string or literal.
func (a Arg) AString() (string, bool) {
	switch a.Kind {
	case KindAtom, KindQuoted:
		return a.Str, true
	case KindLiteral:
		return string(a.Lit), true
	}
	return "", false
}

// IsNIL reports whether the argument is the atom NIL.
func (a Arg) IsNIL() bool { return a.Kind == KindAtom && upper(a.Str) == "NIL" }

// parser turns one command (one line plus literal continuations) into args.
type parser struct {
	r           *Reader
	line        []byte
	pos         int
	litTotal    int64
	depth       int
	nargs       int
	discarding  bool // a literal was refused; read on to the end of the command
	refused     *Error
	consumedAll bool // the command's last line (and literals) have been read
	tag         string
}

func (p *parser) errf(msg string) *Error { return &Error{Tag: p.tag, Msg: msg} }

func (p *parser) command() (*Command, *Error) {
	tagEnd := 0
	for tagEnd < len(p.line) && p.line[tagEnd] != ' ' {
		if !isTagChar(p.line[tagEnd]) {
			return nil, &Error{Tag: "*", Msg: "invalid tag"}
		}
		tagEnd++
	}
	if tagEnd == 0 {
		return nil, &Error{Tag: "*", Msg: "missing tag"}
	}
	if tagEnd >= len(p.line) {
		p.consumedAll = true
		return nil, &Error{Tag: "*", Msg: "missing command"}
	}
	p.tag = string(p.line[:tagEnd])
	p.pos = tagEnd + 1
	start := p.pos
	for p.pos < len(p.line) && p.line[p.pos] != ' ' && isAtomChar(p.line[p.pos]) {
		p.pos++
	}
	if p.pos == start {
		return nil, p.errf("missing command name")
	}
	name := upper(string(p.line[start:p.pos]))
	cmd := &Command{Tag: p.tag, Name: name}
	for {
		if p.pos >= len(p.line) {
			p.consumedAll = true
			break
		}
		if p.line[p.pos] != ' ' {
			return nil, p.errf("expected space")
		}
		p.pos++
		// Tolerate trailing spaces (some clients send them).
		if p.pos >= len(p.line) {
			p.consumedAll = true
			break
		}
		a, err := p.arg()
		if err != nil {
			return nil, err
		}
		cmd.Args = append(cmd.Args, a)
	}
	if p.refused != nil {
		return nil, p.refused
	}
	return cmd, nil
}

func (p *parser) arg() (Arg, *Error) {
	p.nargs++
	if p.nargs > DefaultMaxArgs {
		return Arg{}, p.errf("too many arguments")
	}
	c := p.line[p.pos]
	switch {
	case c == '(':
		return p.list()
	case c == '"':
		return p.quoted()
	case c == '{' || c == '~' && p.pos+1 < len(p.line) && p.line[p.pos+1] == '{':
		return p.literal()
	case isAtomChar(c):
		return p.atom()
	}
	return Arg{}, p.errf("unexpected character")
}

func (p *parser) list() (Arg, *Error) {
	p.depth++
	if p.depth > DefaultMaxListDepth {
		return Arg{}, p.errf("lists nested too deep")
	}
	p.pos++ // (
	a := Arg{Kind: KindList, List: []Arg{}}
	first := true
	for {
		if p.pos >= len(p.line) {
			return Arg{}, p.errf("unterminated list")
		}
		if p.line[p.pos] == ')' {
			p.pos++
			p.depth--
			return a, nil
		}
		if !first {
			if p.line[p.pos] != ' ' {
				return Arg{}, p.errf("expected space in list")
			}
			p.pos++
			if p.pos >= len(p.line) {
				return Arg{}, p.errf("unterminated list")
			}
		}
		first = false
		e, err := p.arg()
		if err != nil {
			return Arg{}, err
		}
		a.List = append(a.List, e)
	}
}

func (p *parser) quoted() (Arg, *Error) {
	p.pos++ // "
	var buf []byte
	for p.pos < len(p.line) {
		c := p.line[p.pos]
		p.pos++
		switch c {
		case '"':
			return Arg{Kind: KindQuoted, Str: string(buf)}, nil
		case '\\':
			if p.pos >= len(p.line) {
				return Arg{}, p.errf("unterminated quoted string")
			}
			e := p.line[p.pos]
			if e != '"' && e != '\\' {
				return Arg{}, p.errf("invalid escape in quoted string")
			}
			buf = append(buf, e)
			p.pos++
		case 0:
			return Arg{}, p.errf("NUL in quoted string")
		default:
			buf = append(buf, c)
		}
	}
	return Arg{}, p.errf("unterminated quoted string")
}

func (p *parser) atom() (Arg, *Error) {
	start := p.pos
	for p.pos < len(p.line) {
		c := p.line[p.pos]
		if c == '[' {
			// A section specification runs to the matching "]", spaces
			// and parentheses included (RFC 9051 §9 section). Without a
			// matching "]", "[" is an ordinary ATOM-CHAR, as in the
			// mailbox name foo[bar (RFC 9051 §9: only "]" is a
			// resp-special).
			if end := sectionEnd(p.line, p.pos); end > 0 {
				p.pos = end
				continue
			}
		}
		if !isAtomChar(c) {
			break
		}
		p.pos++
	}
	return Arg{Kind: KindAtom, Str: string(p.line[start:p.pos])}, nil
}

// sectionEnd returns the index after the "]" that matches the "[" at
// line[i], or 0 when there is none.
func sectionEnd(line []byte, i int) int {
	depth := 0
	for ; i < len(line); i++ {
		switch line[i] {
		case '[':
			depth++
		case ']':
			depth--
			if depth == 0 {
				return i + 1
			}
		}
	}
	return 0
}

// parseLiteralSpec parses "{n}", "{n+}" or "~{n}" that must end the line.
func parseLiteralSpec(b []byte) (size int64, sync, lit8, ok bool) {
	if len(b) > 0 && b[0] == '~' {
		lit8 = true
		b = b[1:]
	}
	if len(b) < 3 || b[0] != '{' || b[len(b)-1] != '}' {
		return 0, false, false, false
	}
	num := b[1 : len(b)-1]
	sync = true
	if len(num) > 0 && num[len(num)-1] == '+' {
		sync = false
		num = num[:len(num)-1]
	}
	if len(num) == 0 || len(num) > maxLiteralDigits {
		return 0, false, false, false
	}
	for _, c := range num {
		if c < '0' || c > '9' {
			return 0, false, false, false
		}
	}
	n, err := strconv.ParseInt(string(num), 10, 64)
	if err != nil {
		return 0, false, false, false
	}
	return n, sync, lit8, true
}

func (p *parser) literal() (Arg, *Error) {
	size, sync, lit8, ok := parseLiteralSpec(p.line[p.pos:])
	if !ok {
		return Arg{}, p.errf("invalid literal")
	}
	p.pos = len(p.line)
	lim := p.r.limits
	var refuse *Error
	switch {
	case p.discarding:
		refuse = p.refused
	case size > lim.MaxLiteral:
		refuse = &Error{Tag: p.tag, Code: "TOOBIG", Msg: "literal too big", No: true}
	case p.litTotal+size > lim.MaxCommandLiterals:
		refuse = &Error{Tag: p.tag, Code: "TOOBIG", Msg: "command too big", No: true}
	}
	if refuse != nil {
		if sync {
			// RFC 9051 §7.5: refuse a synchronising literal instead of
			// sending "+"; the client sends no data and the command ends.
			p.consumedAll = true
			return Arg{}, refuse
		}
		// RFC 7888 §4: the client sends the data of a non-synchronising
		// literal anyway; read and discard it, bounded.
		if p.litTotal+size > lim.MaxDiscard {
			refuse.Fatal = true
			return Arg{}, refuse
		}
		if _, err := io.CopyN(io.Discard, p.r.br, size); err != nil {
			e := *refuse
			e.Fatal = true
			return Arg{}, &e
		}
		p.litTotal += size
		p.discarding = true
		p.refused = refuse
		if err := p.nextLine(); err != nil {
			return Arg{}, err
		}
		return Arg{Kind: KindLiteral, Literal8: lit8}, nil
	}
	if sync && p.r.cont != nil {
		if err := p.r.cont(size); err != nil {
			return Arg{}, &Error{Tag: p.tag, Msg: "sending continuation: " + err.Error(), Fatal: true}
		}
	}
	data := make([]byte, size)
	if _, err := io.ReadFull(p.r.br, data); err != nil {
		return Arg{}, &Error{Tag: p.tag, Msg: "reading literal: " + err.Error(), Fatal: true}
	}
	p.litTotal += size
	if err := p.nextLine(); err != nil {
		return Arg{}, err
	}
	return Arg{Kind: KindLiteral, Lit: data, Literal8: lit8}, nil
}

// nextLine reads the line that continues the command after a literal.
func (p *parser) nextLine() *Error {
	line, err := p.r.readLine()
	if err == errTooLong {
		p.consumedAll = true
		return p.errf(ErrLineTooLong)
	}
	if err != nil {
		return &Error{Tag: p.tag, Msg: "reading command: " + err.Error(), Fatal: true}
	}
	p.line = line
	p.pos = 0
	return nil
}

// skipRest consumes what is left of a broken command: when the current line
// ends with a non-synchronising literal, its data and the following lines
// are read and discarded (bounded by MaxDiscard).
func (p *parser) skipRest() error {
	var discarded int64
	for i := 0; i < 1000; i++ {
		start := -1
		for j := len(p.line) - 1; j >= 0 && j >= len(p.line)-maxLiteralDigits-4; j-- {
			if p.line[j] == '{' {
				start = j
				if j > 0 && p.line[j-1] == '~' {
					start = j - 1
				}
				break
			}
		}
		if start < 0 {
			return nil
		}
		size, sync, _, ok := parseLiteralSpec(p.line[start:])
		if !ok || sync {
			return nil
		}
		discarded += size
		if discarded > p.r.limits.MaxDiscard {
			return &Error{Tag: p.tag, Code: "TOOBIG", Msg: "literal too big", Fatal: true}
		}
		if _, err := io.CopyN(io.Discard, p.r.br, size); err != nil {
			return err
		}
		line, err := p.r.readLine()
		if err != nil && err != errTooLong {
			return err
		}
		p.line = line
	}
	return &Error{Tag: p.tag, Msg: "command too long", Fatal: true}
}
