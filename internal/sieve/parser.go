package sieve

// The generic grammar of RFC 5228 §8.2: commands with arguments, tests and
// blocks. What each command means, and which arguments it takes, is
// checked afterwards (compile.go).
//
//	commands   = *command
//	command    = identifier arguments (";" / block)
//	block      = "{" commands "}"
//	arguments  = *argument [ test / test-list ]
//	argument   = string-list / number / tag
//	string-list = "[" string *("," string) "]" / string
//	test       = identifier arguments
//	test-list  = "(" test *("," test) ")"

// argKind is the kind of one argument.
type argKind uint8

const (
	argTag argKind = iota
	argNumber
	argStrings // a string or a string list
)

// arg is one argument of a command or test.
type arg struct {
	kind   argKind
	pos    Pos
	tag    string   // argTag, lower case without ":"
	num    int64    // argNumber
	strs   []string // argStrings
	isList bool     // written as "[...]" rather than as one string
}

// node is one command or test as written.
type node struct {
	name  string // lower case
	pos   Pos
	args  []arg
	tests []*node // the test or test-list
	block []*node // commands in "{ }"; nil when the command ends with ";"
	// hasBlock distinguishes "cmd {}" from "cmd;".
	hasBlock bool
}

// Parse limits: a script is small, but nesting and list lengths are
// bounded so that a hostile script cannot exhaust the stack or memory.
const (
	maxDepth    = 64
	maxListLen  = 1024
	maxCommands = 10000
)

type parser struct {
	lx    *lexer
	tok   token
	nodes int
}

func (p *parser) advance() error {
	t, err := p.lx.next()
	if err != nil {
		return err
	}
	p.tok = t
	return nil
}

func (p *parser) expect(k tokKind) error {
	if p.tok.kind != k {
		return errorf(p.tok.pos, "expected %s, found %s", k, p.describe())
	}
	return p.advance()
}

func (p *parser) describe() string {
	switch p.tok.kind {
	case tokIdent:
		return "\"" + p.tok.text + "\""
	case tokTag:
		return "\":" + p.tok.text + "\""
	}
	return p.tok.kind.String()
}

// parseTree reads a whole script into commands.
func parseTree(src string) ([]*node, error) {
	p := &parser{lx: newLexer(src)}
	if err := p.advance(); err != nil {
		return nil, err
	}
	cmds, err := p.commands(0)
	if err != nil {
		return nil, err
	}
	if p.tok.kind != tokEOF {
		return nil, errorf(p.tok.pos, "expected a command, found %s", p.describe())
	}
	return cmds, nil
}

func (p *parser) commands(depth int) ([]*node, error) {
	var out []*node
	for p.tok.kind == tokIdent {
		c, err := p.command(depth)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, nil
}

func (p *parser) command(depth int) (*node, error) {
	if depth > maxDepth {
		return nil, errorf(p.tok.pos, "blocks nested too deeply")
	}
	p.nodes++
	if p.nodes > maxCommands {
		return nil, errorf(p.tok.pos, "too many commands")
	}
	n := &node{name: p.tok.text, pos: p.tok.pos}
	if err := p.advance(); err != nil {
		return nil, err
	}
	if err := p.arguments(n, depth); err != nil {
		return nil, err
	}
	switch p.tok.kind {
	case tokSemicolon:
		return n, p.advance()
	case tokLBrace:
		if err := p.advance(); err != nil {
			return nil, err
		}
		block, err := p.commands(depth + 1)
		if err != nil {
			return nil, err
		}
		if p.tok.kind != tokRBrace {
			return nil, errorf(p.tok.pos, "expected a command or \"}\", found %s", p.describe())
		}
		n.block, n.hasBlock = block, true
		return n, p.advance()
	}
	return nil, errorf(p.tok.pos, "expected \";\" or a block after command %q, found %s", n.name, p.describe())
}

// arguments reads the arguments of a command or test, then its test or
// test list.
func (p *parser) arguments(n *node, depth int) error {
	for {
		a := arg{pos: p.tok.pos}
		switch p.tok.kind {
		case tokTag:
			a.kind, a.tag = argTag, p.tok.text
		case tokNumber:
			a.kind, a.num = argNumber, p.tok.num
		case tokString:
			a.kind, a.strs = argStrings, []string{p.tok.text}
		case tokLBracket:
			list, err := p.stringList()
			if err != nil {
				return err
			}
			a.kind, a.strs, a.isList = argStrings, list, true
			n.args = append(n.args, a)
			continue
		default:
			return p.testsOf(n, depth)
		}
		n.args = append(n.args, a)
		if err := p.advance(); err != nil {
			return err
		}
	}
}

func (p *parser) stringList() ([]string, error) {
	if err := p.advance(); err != nil {
		return nil, err
	}
	var list []string
	for {
		if p.tok.kind != tokString {
			return nil, errorf(p.tok.pos, "expected a string in the list, found %s", p.describe())
		}
		if len(list) >= maxListLen {
			return nil, errorf(p.tok.pos, "string list too long")
		}
		list = append(list, p.tok.text)
		if err := p.advance(); err != nil {
			return nil, err
		}
		switch p.tok.kind {
		case tokComma:
			if err := p.advance(); err != nil {
				return nil, err
			}
		case tokRBracket:
			return list, p.advance()
		default:
			return nil, errorf(p.tok.pos, "expected \",\" or \"]\" in the string list, found %s", p.describe())
		}
	}
}

// testsOf reads the optional test or parenthesised test list after the
// arguments.
func (p *parser) testsOf(n *node, depth int) error {
	switch p.tok.kind {
	case tokIdent:
		t, err := p.test(depth + 1)
		if err != nil {
			return err
		}
		n.tests = []*node{t}
	case tokLParen:
		if err := p.advance(); err != nil {
			return err
		}
		for {
			t, err := p.test(depth + 1)
			if err != nil {
				return err
			}
			if len(n.tests) >= maxListLen {
				return errorf(t.pos, "test list too long")
			}
			n.tests = append(n.tests, t)
			if p.tok.kind == tokComma {
				if err := p.advance(); err != nil {
					return err
				}
				continue
			}
			if p.tok.kind != tokRParen {
				return errorf(p.tok.pos, "expected \",\" or \")\" in the test list, found %s", p.describe())
			}
			return p.advance()
		}
	}
	return nil
}

func (p *parser) test(depth int) (*node, error) {
	if depth > maxDepth {
		return nil, errorf(p.tok.pos, "tests nested too deeply")
	}
	if p.tok.kind != tokIdent {
		return nil, errorf(p.tok.pos, "expected a test, found %s", p.describe())
	}
	p.nodes++
	if p.nodes > maxCommands {
		return nil, errorf(p.tok.pos, "too many tests")
	}
	t := &node{name: p.tok.text, pos: p.tok.pos}
	if err := p.advance(); err != nil {
		return nil, err
	}
	return t, p.arguments(t, depth)
}
