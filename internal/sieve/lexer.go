package sieve

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Pos is a place in a script: 1-based line and column (the column counts
// characters, not bytes).
type Pos struct{ Line, Col int }

func (p Pos) String() string { return fmt.Sprintf("line %d, column %d", p.Line, p.Col) }

// Error is a problem found in a script, at its place. Parse errors are
// reported by Parse; run-time errors (a limit reached, an address that a
// variable made invalid) by Run, with the place of the command.
type Error struct {
	Pos Pos
	Msg string
}

func (e *Error) Error() string { return fmt.Sprintf("%s: %s", e.Pos, e.Msg) }

func errorf(p Pos, format string, args ...any) *Error {
	return &Error{Pos: p, Msg: fmt.Sprintf(format, args...)}
}

// tokKind is the kind of a lexical token (RFC 5228 §8.1).
type tokKind uint8

const (
	tokEOF tokKind = iota
	tokIdent
	tokTag    // ":name", the name in text without the colon
	tokNumber // num with its quantifier applied
	tokString // quoted-string or multi-line, value in text
	tokLBracket
	tokRBracket
	tokLParen
	tokRParen
	tokLBrace
	tokRBrace
	tokComma
	tokSemicolon
)

func (k tokKind) String() string {
	return [...]string{"end of script", "identifier", "tag", "number", "string",
		`"["`, `"]"`, `"("`, `")"`, `"{"`, `"}"`, `","`, `";"`}[k]
}

type token struct {
	kind tokKind
	text string
	num  int64
	pos  Pos
}

// maxNumber bounds numbers after their quantifier: sizes in octets need no
// more, and the bound keeps arithmetic from overflowing.
const maxNumber = 1 << 53

// lexer splits a script into tokens (RFC 5228 §2 and §8.1).
type lexer struct {
	src  string
	off  int
	line int
	col  int
}

func newLexer(src string) *lexer { return &lexer{src: src, line: 1, col: 1} }

func (l *lexer) pos() Pos { return Pos{l.line, l.col} }

// advance moves past n bytes of the source, keeping line and column.
func (l *lexer) advance(n int) {
	for _, r := range l.src[l.off : l.off+n] {
		if r == '\n' {
			l.line++
			l.col = 1
		} else {
			l.col++
		}
	}
	l.off += n
}

// skipSpace skips white space and comments (RFC 5228 §2.3): "#" to the end
// of the line, and "/* ... */" (bracketed comments do not nest).
func (l *lexer) skipSpace() error {
	for l.off < len(l.src) {
		c := l.src[l.off]
		switch {
		case c == ' ' || c == '\t' || c == '\r' || c == '\n':
			l.advance(1)
		case c == '#':
			end := strings.IndexByte(l.src[l.off:], '\n')
			if end < 0 {
				end = len(l.src) - l.off
			}
			l.advance(end)
		case strings.HasPrefix(l.src[l.off:], "/*"):
			start := l.pos()
			end := strings.Index(l.src[l.off+2:], "*/")
			if end < 0 {
				return errorf(start, "comment not closed (missing \"*/\")")
			}
			l.advance(end + 4)
		default:
			return nil
		}
	}
	return nil
}

func isIdentStart(c byte) bool {
	return c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
}

func isIdentChar(c byte) bool { return isIdentStart(c) || '0' <= c && c <= '9' }

// next returns the next token.
func (l *lexer) next() (token, error) {
	if err := l.skipSpace(); err != nil {
		return token{}, err
	}
	p := l.pos()
	if l.off >= len(l.src) {
		return token{kind: tokEOF, pos: p}, nil
	}
	c := l.src[l.off]
	if k, ok := punct[c]; ok {
		l.advance(1)
		return token{kind: k, text: string(c), pos: p}, nil
	}
	switch {
	case c == '"':
		s, err := l.quoted()
		return token{kind: tokString, text: s, pos: p}, err
	case c == ':':
		l.advance(1)
		if l.off >= len(l.src) || !isIdentStart(l.src[l.off]) {
			return token{}, errorf(p, "\":\" must be followed by a tag name")
		}
		return token{kind: tokTag, text: strings.ToLower(l.ident()), pos: p}, nil
	case '0' <= c && c <= '9':
		n, err := l.number(p)
		return token{kind: tokNumber, num: n, pos: p}, err
	case isIdentStart(c):
		id := l.ident()
		if strings.EqualFold(id, "text") && l.off < len(l.src) && l.src[l.off] == ':' {
			l.advance(1)
			s, err := l.multiline(p)
			return token{kind: tokString, text: s, pos: p}, err
		}
		return token{kind: tokIdent, text: strings.ToLower(id), pos: p}, nil
	}
	r, _ := utf8.DecodeRuneInString(l.src[l.off:])
	return token{}, errorf(p, "unexpected character %q", r)
}

var punct = map[byte]tokKind{
	'[': tokLBracket, ']': tokRBracket, '(': tokLParen, ')': tokRParen,
	'{': tokLBrace, '}': tokRBrace, ',': tokComma, ';': tokSemicolon,
}

func (l *lexer) ident() string {
	start := l.off
	end := start
	for end < len(l.src) && isIdentChar(l.src[end]) {
		end++
	}
	l.advance(end - start)
	return l.src[start:end]
}

// number reads a number with its optional quantifier K, M or G (RFC 5228
// §2.4.1: powers of 1024).
func (l *lexer) number(p Pos) (int64, error) {
	var n int64
	for l.off < len(l.src) && '0' <= l.src[l.off] && l.src[l.off] <= '9' {
		n = n*10 + int64(l.src[l.off]-'0')
		if n > maxNumber {
			return 0, errorf(p, "number too large")
		}
		l.advance(1)
	}
	if l.off < len(l.src) {
		shift := map[byte]uint{'k': 10, 'K': 10, 'm': 20, 'M': 20, 'g': 30, 'G': 30}[l.src[l.off]]
		if shift > 0 {
			l.advance(1)
			if n > maxNumber>>shift {
				return 0, errorf(p, "number too large")
			}
			n <<= shift
		}
	}
	if l.off < len(l.src) && isIdentChar(l.src[l.off]) {
		return 0, errorf(p, "a number must not run into letters")
	}
	return n, nil
}

// quoted reads a quoted string (RFC 5228 §2.4.2): a backslash escapes the
// next character, which stands for itself.
func (l *lexer) quoted() (string, error) {
	start := l.pos()
	l.advance(1)
	var b strings.Builder
	var prev byte
	for l.off < len(l.src) {
		c := l.src[l.off]
		switch c {
		case '"':
			l.advance(1)
			return b.String(), nil
		case '\\':
			if l.off+1 >= len(l.src) {
				return "", errorf(start, "string not closed")
			}
			prev = l.src[l.off+1]
			b.WriteByte(prev)
			l.advance(2)
		default:
			// Line endings inside a quoted string are CRLF (RFC 5228
			// §2.4.2), whatever the script was saved with.
			if c == '\n' && prev != '\r' {
				b.WriteByte('\r')
			}
			prev = c
			b.WriteByte(c)
			l.advance(1)
		}
	}
	return "", errorf(start, "string not closed (missing '\"')")
}

// multiline reads the rest of a "text:" string (RFC 5228 §2.4.2): white
// space or a comment up to the end of the line, then lines up to one that
// is a single ".". A line starting with "." has it doubled (dot-stuffing).
func (l *lexer) multiline(start Pos) (string, error) {
	for l.off < len(l.src) && (l.src[l.off] == ' ' || l.src[l.off] == '\t') {
		l.advance(1)
	}
	if l.off < len(l.src) && l.src[l.off] == '#' {
		end := strings.IndexByte(l.src[l.off:], '\n')
		if end < 0 {
			return "", errorf(start, "multi-line string not closed")
		}
		l.advance(end)
	}
	if strings.HasPrefix(l.src[l.off:], "\r\n") {
		l.advance(2)
	} else if strings.HasPrefix(l.src[l.off:], "\n") {
		l.advance(1)
	} else {
		return "", errorf(start, "\"text:\" must be followed by the end of the line")
	}
	var b strings.Builder
	for l.off < len(l.src) {
		end := strings.IndexByte(l.src[l.off:], '\n')
		if end < 0 {
			break
		}
		line := strings.TrimSuffix(l.src[l.off:l.off+end], "\r")
		l.advance(end + 1)
		if line == "." {
			return b.String(), nil
		}
		line = strings.TrimPrefix(line, ".") // ".." stands for "."; a lone leading "." is dropped too
		b.WriteString(line)
		b.WriteString("\r\n")
	}
	return "", errorf(start, "multi-line string not closed (missing a line with a single \".\")")
}
