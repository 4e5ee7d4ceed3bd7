package sieve

import (
	"errors"
	"strings"
	"testing"
)

func TestParseErrorsHaveLineAndColumn(t *testing.T) {
	cases := []struct {
		script    string
		line, col int
		msg       string
	}{
		{"keep", 1, 5, `expected ";"`},
		{"require \"fileinto\";\nfileinto \"a\"\nkeep;", 3, 1, `expected ";"`},
		{"if true {\n  keep;\n", 3, 1, `expected a command or "}"`},
		{"frobnicate;", 1, 1, `unknown command "frobnicate"`},
		{"fileinto \"x\";", 1, 1, `fileinto needs require "fileinto"`},
		{"require \"nosuch\";", 1, 9, `unsupported extension "nosuch"`},
		{"keep;\nrequire \"fileinto\";", 2, 1, "require must come before"},
		{"if header :is \"a\" { keep; }", 1, 4, "takes 2 positional"},
		{"if header :bogus \"a\" \"b\" { keep; }", 1, 11, "does not take :bogus"},
		{"if size 100 { keep; }", 1, 4, "either :over or :under"},
		{"elsif true { keep; }", 1, 1, "elsif without a preceding if"},
		{"keep;\n  /* never closed", 2, 3, "comment not closed"},
		{"set \"a\" \"b\";", 1, 1, `set needs require "variables"`},
		{"require \"fileinto\";\nfileinto \"unterminated;", 2, 10, "string not closed"},
		{"require \"vacation\";\nvacation text:\nline\n", 2, 10, "multi-line string not closed"},
		{"if header :comparator \"i;nope\" \"a\" \"b\" { keep; }", 1, 23, `unknown comparator "i;nope"`},
		{"if header :value \"gt\" \"a\" \"b\" { keep; }", 1, 11, `:value needs require "relational"`},
		{"require \"relational\";\nif header :value \"big\" \"a\" \"b\" { keep; }", 2, 18, "unknown relational operator"},
		{"require [\"comparator-i;ascii-numeric\"];\nif header :contains :comparator \"i;ascii-numeric\" \"a\" \"1\" { keep; }", 2, 33, "cannot be used with :contains"},
		{"redirect \"not an address\";", 1, 10, "invalid address"},
		{"if address \"subject\" \"x\" { keep; }", 1, 12, "not a header field with addresses"},
		{"require \"envelope\";\nif envelope \"body\" \"x\" { keep; }", 2, 13, "unknown envelope part"},
		{"require \"date\";\nif currentdate \"fortnight\" \"1\" { keep; }", 2, 16, "unknown date part"},
		{"require \"date\";\nif currentdate :zone \"CET\" \"hour\" \"1\" { keep; }", 2, 22, "invalid time zone"},
		{"require \"variables\";\nset :lower :upper \"a\" \"b\";", 2, 1, "cannot be combined"},
		{"keep 12;", 1, 1, "no positional arguments"},
		{"if true;", 1, 1, "needs a block"},
		{"require \"fileinto\";\nfileinto \"a//b\";", 2, 10, "invalid mailbox name"},
		{"require \"encoded-character\";\nkeep;\nif header \"x\" \"${unicode:D800}\" { keep; }", 3, 15, "invalid Unicode code point"},
		{"12;", 1, 1, "expected a command"},
		{"keep; }", 1, 7, "expected a command"},
		{"if header [\"a\" \"b\"] \"c\" { keep; }", 1, 16, `expected "," or "]"`},
	}
	for _, c := range cases {
		_, err := Parse(c.script)
		var se *Error
		if !errors.As(err, &se) {
			t.Errorf("Parse(%q) = %v; want a *sieve.Error", c.script, err)
			continue
		}
		if se.Pos.Line != c.line || se.Pos.Col != c.col || !strings.Contains(se.Msg, c.msg) {
			t.Errorf("Parse(%q) = %q at %d:%d; want %q at %d:%d", c.script, se.Msg, se.Pos.Line, se.Pos.Col, c.msg, c.line, c.col)
		}
		if !strings.HasPrefix(err.Error(), "line ") {
			t.Errorf("error text %q does not start with its place", err)
		}
	}
}

func TestLexerStrings(t *testing.T) {
	cases := []struct{ src, want string }{
		{`"a\"b\\c"`, `a"b\c`},
		{"\"two\nlines\"", "two\r\nlines"},
		{"\"crlf\r\nkept\"", "crlf\r\nkept"},
		{"text: # comment\nline one\n..dot\n.\n", "line one\r\n.dot\r\n"},
		{"text:\r\nx\r\n.\r\n", "x\r\n"},
		{`"\q"`, "q"}, // RFC 5228 §2.4.2: other escapes stand for the character
	}
	for _, c := range cases {
		lx := newLexer(c.src)
		tok, err := lx.next()
		if err != nil || tok.kind != tokString || tok.text != c.want {
			t.Errorf("lex %q = %v %q %v; want string %q", c.src, tok.kind, tok.text, err, c.want)
		}
	}
	lx := newLexer("100K 2M 1G 7")
	for _, want := range []int64{100 << 10, 2 << 20, 1 << 30, 7} {
		tok, err := lx.next()
		if err != nil || tok.kind != tokNumber || tok.num != want {
			t.Errorf("number = %v %d %v; want %d", tok.kind, tok.num, err, want)
		}
	}
	if _, err := newLexer("99999999999999999999").next(); err == nil {
		t.Error("huge number accepted")
	}
}

func TestParseLimits(t *testing.T) {
	deep := strings.Repeat("if true {", maxDepth+2) + strings.Repeat("}", maxDepth+2)
	if _, err := Parse(deep); err == nil || !strings.Contains(err.Error(), "nested too deeply") {
		t.Errorf("deep nesting: %v", err)
	}
	deepTest := "if " + strings.Repeat("not ", maxDepth+2) + "true { keep; }"
	if _, err := Parse(deepTest); err == nil || !strings.Contains(err.Error(), "nested too deeply") {
		t.Errorf("deep test nesting: %v", err)
	}
}

func TestCommentsAndCase(t *testing.T) {
	// Identifiers and tags are case-insensitive (RFC 5228 §2.9 and
	// §8.1); comments of both kinds are white space.
	check(t, `REQUIRE "fileinto"; # a comment
IF HEADER :CONTAINS "subject" "ACME" /* inline */ { FILEINTO "acme"; }`, "fileinto:acme")
}
