package message

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

// crlf converts "\n" line endings to CRLF.
func crlf(s string) string { return strings.ReplaceAll(s, "\n", "\r\n") }

// body returns the body bytes of pt.
func body(raw string, pt *Part) string { return raw[pt.BodyStart:pt.End] }

// header returns the header bytes of pt.
func header(raw string, pt *Part) string { return raw[pt.HeaderStart:pt.BodyStart] }

func mustParse(t *testing.T, raw string) *Parsed {
	t.Helper()
	recoverPanics = false
	defer func() { recoverPanics = true }()
	p := Parse([]byte(raw))
	if err := checkInvariants([]byte(raw), p); err != nil {
		t.Fatalf("invariants: %v", err)
	}
	return p
}

const nestedMsg = `From: Alice <alice@example.org>
To: Bob <bob@example.net>
Subject: nested
Date: Tue, 1 Jul 2003 10:52:37 +0200
Message-ID: <outer@example.org>
MIME-Version: 1.0
Content-Type: multipart/mixed; boundary="outer"

This is the preamble.
--outer
Content-Type: multipart/alternative; boundary=inner

--inner
Content-Type: text/plain; charset=utf-8

plain text
--inner
Content-Type: text/html; charset=utf-8
Content-Transfer-Encoding: quoted-printable

<p>html=20text</p>
--inner--
--outer
Content-Type: message/rfc822
Content-Disposition: attachment; filename="fwd.eml"

From: Carol <carol@example.com>
Subject: inner message
Message-ID: <inner@example.com>

inner body
line two
--outer--
epilogue
`

func TestNestedMultipart(t *testing.T) {
	for _, ending := range []string{"LF", "CRLF"} {
		t.Run(ending, func(t *testing.T) {
			raw := nestedMsg
			if ending == "CRLF" {
				raw = crlf(raw)
			}
			nl := map[string]string{"LF": "\n", "CRLF": "\r\n"}[ending]
			p := mustParse(t, raw)
			top := p.Body
			if top.MIMEType() != "multipart/mixed" || len(top.Parts) != 2 {
				t.Fatalf("top = %s with %d parts", top.MIMEType(), len(top.Parts))
			}
			if !strings.HasSuffix(header(raw, top), nl+nl) || !strings.HasPrefix(header(raw, top), "From: Alice") {
				t.Errorf("top header = %q", header(raw, top))
			}
			alt := top.Parts[0]
			if alt.MIMEType() != "multipart/alternative" || len(alt.Parts) != 2 {
				t.Fatalf("alt = %s with %d parts", alt.MIMEType(), len(alt.Parts))
			}
			plain, html := alt.Parts[0], alt.Parts[1]
			if got := body(raw, plain); got != "plain text" {
				t.Errorf("plain body = %q", got)
			}
			if plain.Param("charset") != "utf-8" || plain.Lines != 1 || plain.Size != 10 {
				t.Errorf("plain = %+v", plain)
			}
			if got := body(raw, html); got != "<p>html=20text</p>" {
				t.Errorf("html body = %q", got)
			}
			if txt, err := DecodeText([]byte(raw), html); err != nil || txt != "<p>html text</p>" {
				t.Errorf("DecodeText(html) = %q, %v", txt, err)
			}
			if got := body(raw, alt); !strings.HasPrefix(got, "--inner"+nl) || !strings.HasSuffix(got, "--inner--") {
				t.Errorf("alt body = %q", got)
			}
			msg := top.Parts[1]
			if msg.MIMEType() != "message/rfc822" || msg.Message == nil || msg.Envelope == nil {
				t.Fatalf("attachment = %+v", msg)
			}
			if msg.Disposition != "attachment" || msg.Filename() != "fwd.eml" {
				t.Errorf("disposition %q filename %q", msg.Disposition, msg.Filename())
			}
			if msg.Envelope.Subject != "inner message" || msg.Envelope.MessageID != "<inner@example.com>" {
				t.Errorf("inner envelope = %+v", msg.Envelope)
			}
			if len(msg.Envelope.From) != 1 || msg.Envelope.From[0].Addr() != "carol@example.com" {
				t.Errorf("inner from = %+v", msg.Envelope.From)
			}
			if got := body(raw, msg.Message); got != "inner body"+nl+"line two" {
				t.Errorf("inner body = %q", got)
			}
			if msg.Lines != 6 || msg.Message.MIMEType() != "text/plain" {
				t.Errorf("message lines %d, inner type %s", msg.Lines, msg.Message.MIMEType())
			}
			if p.Subject != "nested" || p.From != "Alice <alice@example.org>" || p.To != "Bob <bob@example.net>" {
				t.Errorf("decoded = %q %q %q", p.Subject, p.From, p.To)
			}
			want := time.Date(2003, 7, 1, 8, 52, 37, 0, time.UTC)
			if !p.Date.Equal(want) {
				t.Errorf("date = %v", p.Date)
			}
		})
	}
}

func TestRFC2231Params(t *testing.T) {
	raw := "Content-Type: application/pdf;\n" +
		" name*0*=iso-8859-1'de'Gr%FC%DFe%20;\n" +
		" name*1=\"aus \";\n" +
		" name*2*=K%F6ln.pdf\n" +
		"Content-Disposition: ATTACHMENT; filename*=UTF-8''%E2%82%AC%20rate.pdf; size=42\n" +
		"\n" +
		"%PDF\n"
	p := mustParse(t, raw)
	b := p.Body
	if b.MIMEType() != "application/pdf" {
		t.Fatalf("type %s", b.MIMEType())
	}
	if got := b.Param("NAME"); got != "Grüße aus Köln.pdf" {
		t.Errorf("name = %q", got)
	}
	if b.Disposition != "attachment" {
		t.Errorf("disposition = %q", b.Disposition)
	}
	if got := b.DispParam("filename"); got != "€ rate.pdf" {
		t.Errorf("filename = %q", got)
	}
	want := []Param{{Name: "filename", Value: "€ rate.pdf"}, {Name: "size", Value: "42"}}
	if !reflect.DeepEqual(b.DispParams, want) {
		t.Errorf("dparams = %+v", b.DispParams)
	}
	if b.Lines != 0 {
		t.Errorf("lines counted for application/*: %d", b.Lines)
	}
}

func TestParamsLenient(t *testing.T) {
	cases := []struct {
		in     string
		typ    string
		params []Param
	}{
		{`Text/HTML; Charset="UTF-8"`, "text/html", []Param{{"charset", "UTF-8"}}},
		{`text/plain; charset=iso-8859-1 (latin); format=flowed`, "text/plain", []Param{{"charset", "iso-8859-1 (latin)"}, {"format", "flowed"}}},
		{`multipart/mixed; boundary="a\"b"`, "multipart/mixed", []Param{{"boundary", `a"b`}}},
		{`text/plain;; ; charset=us-ascii;`, "text/plain", []Param{{"charset", "us-ascii"}}},
		{`text/plain; junk; name=file name.txt`, "text/plain", []Param{{"name", "file name.txt"}}},
		{`text/plain; name="unterminated`, "text/plain", []Param{{"name", "unterminated"}}},
		{`application/octet-stream; name="=?utf-8?B?w6RiYy50eHQ=?="`, "application/octet-stream", []Param{{"name", "=?utf-8?B?w6RiYy50eHQ=?="}}},
	}
	for _, c := range cases {
		typ, sub, params, ok := parseMediaType(c.in)
		if !ok || typ+"/"+sub != c.typ || !reflect.DeepEqual(params, c.params) {
			t.Errorf("parseMediaType(%q) = %s/%s %+v %v", c.in, typ, sub, params, ok)
		}
	}
	for _, bad := range []string{"", "text", "/plain", "text/", "(comment)"} {
		if _, _, _, ok := parseMediaType(bad); ok {
			t.Errorf("parseMediaType(%q) accepted", bad)
		}
	}
}

func TestDefaultsAndBrokenTypes(t *testing.T) {
	p := mustParse(t, "Subject: x\n\nhello\n")
	if p.Body.MIMEType() != "text/plain" || p.Body.Param("charset") != "us-ascii" || p.Body.Encoding != "7bit" {
		t.Errorf("defaults = %+v", p.Body)
	}
	p = mustParse(t, "Content-Type: text\n\nhello\n")
	if p.Body.MIMEType() != "text/plain" || p.Body.Param("charset") != "us-ascii" {
		t.Errorf("invalid type not defaulted: %+v", p.Body)
	}
	// A multipart without a boundary cannot be split: described as text.
	p = mustParse(t, "Content-Type: multipart/mixed\n\n--x\n\nhello\n")
	if p.Body.MIMEType() != "text/plain" || len(p.Body.Parts) != 0 {
		t.Errorf("multipart without boundary = %s, %d parts", p.Body.MIMEType(), len(p.Body.Parts))
	}
	// A boundary that never occurs: one header-less child covering the body.
	raw := "Content-Type: multipart/mixed; boundary=zzz\n\nno delimiters here\n"
	p = mustParse(t, raw)
	if len(p.Body.Parts) != 1 || body(raw, p.Body.Parts[0]) != "no delimiters here\n" {
		t.Errorf("boundary missing: %+v", p.Body.Parts)
	}
	// No close delimiter: the last part runs to the end.
	raw = "Content-Type: multipart/mixed; boundary=b\n\n--b\n\none\n--b\nContent-Type: text/html\n\ntwo\n"
	p = mustParse(t, raw)
	if len(p.Body.Parts) != 2 || body(raw, p.Body.Parts[0]) != "one" || body(raw, p.Body.Parts[1]) != "two\n" {
		t.Errorf("unclosed multipart parts = %+v", p.Body.Parts)
	}
	// Transport padding after a delimiter and an empty part.
	raw = "Content-Type: multipart/mixed; boundary=b\n\n--b  \n\none\n--b\n--b--\t\nepilogue"
	p = mustParse(t, raw)
	if len(p.Body.Parts) != 2 || body(raw, p.Body.Parts[0]) != "one" || p.Body.Parts[1].End-p.Body.Parts[1].HeaderStart != 0 {
		t.Errorf("padding/empty parts = %+v", p.Body.Parts)
	}
	// A part that starts with text instead of a header.
	raw = "Content-Type: multipart/mixed; boundary=b\n\n--b\nno header here\n--b--\n"
	p = mustParse(t, raw)
	if pt := p.Body.Parts[0]; pt.HeaderStart != pt.BodyStart || body(raw, pt) != "no header here" {
		t.Errorf("headerless part = %+v", pt)
	}
}

func TestDigestDefault(t *testing.T) {
	raw := "Content-Type: multipart/digest; boundary=d\n\n--d\n\nSubject: one\n\nbody one\n--d\nContent-Type: text/plain\n\nnot a message\n--d--\n"
	p := mustParse(t, raw)
	if len(p.Body.Parts) != 2 {
		t.Fatalf("%d parts", len(p.Body.Parts))
	}
	m := p.Body.Parts[0]
	if m.MIMEType() != "message/rfc822" || m.Envelope == nil || m.Envelope.Subject != "one" || body(raw, m.Message) != "body one" {
		t.Errorf("digest child = %+v", m)
	}
	if p.Body.Parts[1].MIMEType() != "text/plain" {
		t.Errorf("explicit type in digest = %s", p.Body.Parts[1].MIMEType())
	}
}

func TestEncodedWords(t *testing.T) {
	raw := "Subject: =?utf-8?B?R3LDvMOfZQ==?= =?ISO-8859-1?Q?_aus_K=F6ln?=\n" +
		"From: =?iso-8859-1?q?Andr=E9?= Pirard <PIRARD@vm1.ulg.ac.be>\n" +
		"To: \"=?utf-8?q?J=C3=BCrgen?=\" <j@example.de>, plain@example.com\n" +
		"Cc: =?unknown-charset?q?abc?= <x@y.z>\n" +
		"\n"
	p := mustParse(t, raw)
	if p.Subject != "Grüße aus Köln" {
		t.Errorf("subject = %q", p.Subject)
	}
	if p.Envelope.Subject != "=?utf-8?B?R3LDvMOfZQ==?= =?ISO-8859-1?Q?_aus_K=F6ln?=" {
		t.Errorf("raw subject = %q", p.Envelope.Subject)
	}
	if p.From != "André Pirard <PIRARD@vm1.ulg.ac.be>" {
		t.Errorf("from = %q", p.From)
	}
	if p.Envelope.From[0].Name != "=?iso-8859-1?q?Andr=E9?= Pirard" {
		t.Errorf("raw from name = %q", p.Envelope.From[0].Name)
	}
	if p.To != "Jürgen <j@example.de>, plain@example.com" {
		t.Errorf("to = %q", p.To)
	}
	if !strings.Contains(p.Cc, "<x@y.z>") {
		t.Errorf("cc = %q", p.Cc)
	}
	// Raw 8-bit Latin-1 in a header becomes UTF-8.
	p = mustParse(t, "Subject: caf\xe9\n\n")
	if p.Subject != "café" {
		t.Errorf("8-bit subject = %q", p.Subject)
	}
}

func TestMissingHeadersAndFolding(t *testing.T) {
	p := mustParse(t, "X-Only: 1\n\nbody")
	if !reflect.DeepEqual(p.Envelope, Envelope{}) || p.Subject != "" || p.From != "" || !p.Date.IsZero() || p.References != nil {
		t.Errorf("missing headers gave %+v", p)
	}
	raw := "Subject: a\n folded\n\tsubject\nReferences: <a@x>\n <b@y>  <c@z>\nSubject: second\n\n"
	p = mustParse(t, raw)
	if p.Envelope.Subject != "a folded\tsubject" {
		t.Errorf("unfolded subject = %q", p.Envelope.Subject)
	}
	if !reflect.DeepEqual(p.References, []string{"a@x", "b@y", "c@z"}) {
		t.Errorf("references = %q", p.References)
	}
}

func TestLineEndingsAndNoBlankLine(t *testing.T) {
	// Header only, no blank line at all.
	raw := "Subject: only a header\nFrom: a@b.c"
	p := mustParse(t, raw)
	if p.Body.BodyStart != int64(len(raw)) || p.Body.Size != 0 || p.Envelope.Subject != "only a header" {
		t.Errorf("no blank line: %+v %+v", p.Body, p.Envelope)
	}
	if p.Envelope.From[0].Addr() != "a@b.c" {
		t.Errorf("from = %+v", p.Envelope.From)
	}
	// Header ends in a blank line, empty body.
	raw = "Subject: x\r\n\r\n"
	p = mustParse(t, raw)
	if p.Body.BodyStart != int64(len(raw)) || p.Body.Lines != 0 {
		t.Errorf("empty body: %+v", p.Body)
	}
	// Empty input and a body without header.
	p = mustParse(t, "")
	if p.Body.MIMEType() != "text/plain" || p.Body.End != 0 {
		t.Errorf("empty input: %+v", p.Body)
	}
	raw = "\nbody only\n"
	p = mustParse(t, raw)
	if p.Body.BodyStart != 1 || body(raw, p.Body) != "body only\n" {
		t.Errorf("body only: %+v", p.Body)
	}
	// Garbage lines inside a header are skipped; the blank line still ends it.
	raw = "From nobody Mon Jan  1 00:00:00 2001\nSubject: after mbox line\nnot a field\nTo: x@y\n\nbody\n"
	p = mustParse(t, raw)
	if p.Envelope.Subject != "after mbox line" || p.To != "x@y" || body(raw, p.Body) != "body\n" {
		t.Errorf("garbage lines: %+v", p.Envelope)
	}
	// Mixed CRLF and bare LF.
	raw = "Content-Type: multipart/mixed; boundary=b\r\n\r\n--b\r\n\r\none\n--b\n\ntwo\r\n--b--\n"
	p = mustParse(t, raw)
	if len(p.Body.Parts) != 2 || body(raw, p.Body.Parts[0]) != "one" || body(raw, p.Body.Parts[1]) != "two" {
		t.Errorf("mixed endings: %+v", p.Body.Parts)
	}
}

func TestLimits(t *testing.T) {
	// Deep nesting of multiparts.
	var b strings.Builder
	const levels = 500
	for i := 0; i < levels; i++ {
		b.WriteString("Content-Type: multipart/mixed; boundary=b")
		b.WriteString(strings.Repeat("x", i))
		b.WriteString("\n\n--b")
		b.WriteString(strings.Repeat("x", i))
		b.WriteString("\n")
	}
	b.WriteString("\ndeep\n")
	p := mustParse(t, b.String())
	depth := 0
	for pt := p.Body; pt != nil; depth++ {
		if len(pt.Parts) == 0 {
			if pt.Type == "multipart" {
				t.Fatal("multipart leaf")
			}
			break
		}
		pt = pt.Parts[0]
	}
	if depth > MaxDepth {
		t.Errorf("depth %d > %d", depth, MaxDepth)
	}
	// Deep message/rfc822 nesting.
	p = mustParse(t, strings.Repeat("Content-Type: message/rfc822\n\n", 1000)+"end\n")
	n := 0
	p.Body.Walk(func(*Part) bool { n++; return true })
	if n > MaxDepth+1 {
		t.Errorf("%d nested messages", n)
	}
	// Very many parts.
	raw := "Content-Type: multipart/mixed; boundary=b\n\n" + strings.Repeat("--b\n\nx\n", 3*MaxParts) + "--b--\n"
	p = mustParse(t, raw)
	if len(p.Body.Parts) >= MaxParts || len(p.Body.Parts) < MaxParts-2 {
		t.Errorf("%d parts kept", len(p.Body.Parts))
	}
}

func TestHeaderFields(t *testing.T) {
	h := "Subject: a\r\n b\r\nX-Empty:\r\nbogus line\r\nTo : x@y\r\n\r\nbody: no"
	fs := HeaderFields([]byte(h))
	if len(fs) != 3 {
		t.Fatalf("%d fields: %+v", len(fs), fs)
	}
	if fs[0].Name != "Subject" || string(fs[0].Raw) != "Subject: a\r\n b\r\n" || fs[0].Unfolded() != "a b" {
		t.Errorf("field 0 = %q %q %q", fs[0].Name, fs[0].Raw, fs[0].Unfolded())
	}
	if fs[1].Name != "X-Empty" || fs[1].Unfolded() != "" {
		t.Errorf("field 1 = %+v", fs[1])
	}
	if fs[2].Name != "To" || fs[2].Unfolded() != "x@y" {
		t.Errorf("field 2 = %+v", fs[2])
	}
}
