package managesieve

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"
)

// The grammar of RFC 5804 §4 as the server reads it:
//
//	command      = atom *(SP argument) CRLF
//	argument     = string / number
//	string       = quoted / literal-c2s
//	quoted       = DQUOTE *(SAFE-UTF8-CHAR / "\" QUOTED-SPECIALS) DQUOTE
//	literal-c2s  = "{" number [ "+" ] "}" CRLF *OCTET
//
// A synchronizing literal ("{n}") needs no continuation from the server in
// ManageSieve; both forms are read the same way.

// Errors of the reader. errSyntax and errTooLong leave the connection
// usable (the rest of the command has been consumed); others end it.
var (
	errSyntax     = errors.New("syntax error")
	errTooLong    = errors.New("line too long")
	errLiteralBig = errors.New("literal too big")
)

// maxQuoted bounds a quoted string (RFC 5804 §4: 1024 octets).
const maxQuoted = 1024

// argument is one argument of a command.
type argument struct {
	s     string
	num   int64
	isNum bool
}

type reader struct {
	br         *bufio.Reader
	maxLine    int
	maxLiteral int64
}

// readLine reads one line without its CRLF; an over-long line is
// consumed and reported as errTooLong.
func (r *reader) readLine() (string, error) {
	var b []byte
	for {
		chunk, isPrefix, err := r.br.ReadLine()
		if err != nil {
			return "", err
		}
		if len(b)+len(chunk) > r.maxLine {
			for isPrefix {
				if _, isPrefix, err = r.br.ReadLine(); err != nil {
					return "", err
				}
			}
			return "", errTooLong
		}
		b = append(b, chunk...)
		if !isPrefix {
			return string(b), nil
		}
	}
}

// command reads one command: its name (upper case) and arguments.
func (r *reader) command() (string, []argument, error) {
	line, err := r.readLine()
	if err != nil {
		return "", nil, err
	}
	name, rest, _ := strings.Cut(line, " ")
	if name == "" {
		return "", nil, errSyntax
	}
	args, err := r.arguments(rest)
	return strings.ToUpper(name), args, err
}

// arguments parses the arguments on line, reading literals and the lines
// that follow them.
func (r *reader) arguments(line string) ([]argument, error) {
	var args []argument
	for {
		line = strings.TrimLeft(line, " ")
		if line == "" {
			return args, nil
		}
		switch c := line[0]; {
		case c == '"':
			s, rest, err := unquote(line)
			if err != nil {
				return nil, err
			}
			args = append(args, argument{s: s})
			line = rest
		case c == '{':
			end := strings.IndexByte(line, '}')
			if end < 0 || end != len(line)-1 {
				return nil, errSyntax
			}
			n, err := strconv.ParseInt(strings.TrimSuffix(line[1:end], "+"), 10, 64)
			if err != nil || n < 0 {
				return nil, errSyntax
			}
			if n > r.maxLiteral {
				// Skip what the client sends anyway, so that the
				// session stays in step.
				if _, err := io.CopyN(io.Discard, r.br, n); err != nil {
					return nil, err
				}
				if _, err := r.readLine(); err != nil {
					return nil, err
				}
				return nil, errLiteralBig
			}
			buf := make([]byte, n)
			if _, err := io.ReadFull(r.br, buf); err != nil {
				return nil, err
			}
			args = append(args, argument{s: string(buf)})
			if line, err = r.readLine(); err != nil {
				return nil, err
			}
		case c >= '0' && c <= '9':
			end := strings.IndexByte(line, ' ')
			if end < 0 {
				end = len(line)
			}
			n, err := strconv.ParseInt(line[:end], 10, 64)
			if err != nil {
				return nil, errSyntax
			}
			args = append(args, argument{num: n, isNum: true})
			line = line[end:]
		default:
			return nil, errSyntax
		}
	}
}

// unquote reads a quoted string at the start of s and returns it and the
// rest of s.
func unquote(s string) (string, string, error) {
	var b strings.Builder
	for i := 1; i < len(s); i++ {
		switch c := s[i]; c {
		case '"':
			if !utf8.ValidString(b.String()) {
				return "", "", errSyntax
			}
			return b.String(), s[i+1:], nil
		case '\\':
			if i+1 >= len(s) || (s[i+1] != '"' && s[i+1] != '\\') {
				return "", "", errSyntax
			}
			i++
			b.WriteByte(s[i])
		default:
			b.WriteByte(c)
		}
		if b.Len() > maxQuoted {
			return "", "", errSyntax
		}
	}
	return "", "", errSyntax
}

// quote writes s as a quoted string when it can be one, else as a literal
// (RFC 5804 §4: CR and LF only in literals).
func quote(s string) string {
	if len(s) > maxQuoted || strings.ContainsAny(s, "\r\n\x00") {
		return fmt.Sprintf("{%d}\r\n%s", len(s), s)
	}
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s) + `"`
}
