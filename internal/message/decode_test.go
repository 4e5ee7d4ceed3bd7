package message

import (
	"errors"
	"testing"
)

func TestDecodeText(t *testing.T) {
	cases := []struct {
		name, raw, want string
	}{
		{"base64 utf-8", "Content-Type: text/plain; charset=utf-8\nContent-Transfer-Encoding: base64\n\nR3LDvMOfZSBh\ndXMgS8O2bG4=\n", "Grüße aus Köln"},
		{"base64 junk and missing padding", "Content-Transfer-Encoding: BASE64\n\nR3J!!!\n1w*\n", "Gru"},
		{"qp latin1", "Content-Type: text/plain; charset=ISO-8859-1\nContent-Transfer-Encoding: quoted-printable\n\nK=F6ln ist =\nsch=f6n   \n=XY bleibt\n", "Köln ist schön\n=XY bleibt\n"},
		{"qp crlf soft breaks", "Content-Transfer-Encoding: quoted-printable\r\n\r\na=\r\nb = \r\nc\r\n", "ab c\r\n"},
		{"koi8-r", "Content-Type: text/plain; charset=koi8-r\n\n\xf0\xd2\xc9\xd7\xc5\xd4", "Привет"},
		{"undeclared 8bit", "Content-Type: text/plain\n\ncaf\xe9", "café"},
		{"unknown charset utf-8 bytes", "Content-Type: text/plain; charset=x-bogus\n\nGrüße", "Grüße"},
		{"encoding with junk", "Content-Transfer-Encoding: base64;\n\naGk=", "hi"},
		{"html kept", "Content-Type: text/html\n\n<b>x</b>", "<b>x</b>"},
		{"iso-2022-jp", "Content-Type: text/plain; charset=ISO-2022-JP\n\n\x1b$B$3$s$K$A$O\x1b(B", "こんにちは"},
	}
	for _, c := range cases {
		p := Parse([]byte(c.raw))
		got, err := DecodeText([]byte(c.raw), p.Body)
		if err != nil || got != c.want {
			t.Errorf("%s: got %q, %v; want %q", c.name, got, err, c.want)
		}
	}
}

func TestDecodeTextErrors(t *testing.T) {
	raw := []byte("Content-Type: image/png\n\nxx")
	p := Parse(raw)
	if _, err := DecodeText(raw, p.Body); !errors.Is(err, ErrNotText) {
		t.Errorf("image part: err = %v", err)
	}
	if _, err := DecodeText(raw, nil); !errors.Is(err, ErrNotText) {
		t.Errorf("nil part: err = %v", err)
	}
	bad := &Part{Type: "text", Subtype: "plain", BodyStart: 5, End: 100}
	if _, err := DecodeText(raw, bad); err == nil {
		t.Error("out-of-range offsets accepted")
	}
}

func TestFilename(t *testing.T) {
	raw := "Content-Type: application/octet-stream; name=\"=?utf-8?B?w6RiYy50eHQ=?=\"\n\nx"
	p := Parse([]byte(raw))
	if got := p.Body.Filename(); got != "äbc.txt" {
		t.Errorf("filename = %q", got)
	}
	if !p.Body.IsAttachment() {
		t.Error("named octet-stream is not an attachment")
	}
}

func TestDecodeHeaderValue(t *testing.T) {
	cases := []struct{ in, want string }{
		{"plain", "plain"},
		{"=?utf-8?q?a?= =?utf-8?q?b?=", "ab"},
		{"=?utf-8?q?a?= x =?utf-8?q?b?=", "a x b"},
		{"Re: =?UTF-8?B?w6Q=?=\r\n =?UTF-8?B?w7Y=?= end", "Re: äö end"},
		// A UTF-8 character split across two base64 words.
		{"=?utf-8?B?4oI=?= =?utf-8?B?rA==?=", "€"},
		// Raw 8-bit byte inside a Q word (Latin-1 ö).
		{"=?iso-8859-1?Q?Fr\xf6sche?=", "Frösche"},
		// RFC 2231 §5 language tag.
		{"=?US-ASCII*EN?Q?Keith_Moore?=", "Keith Moore"},
		{"=?iso-8859-1?q?caf=E9?= =?utf-8?q?_=E2=82=AC?=", "café €"},
		{"=?bogus?q?abc?=", "abc"},
		{"=?utf-8?x?abc?=", "=?utf-8?x?abc?="},
		{"=?utf-8?q?unterminated", "=?utf-8?q?unterminated"},
		{"a =? b", "a =? b"},
	}
	for _, c := range cases {
		if got := DecodeHeaderValue(c.in); got != c.want {
			t.Errorf("DecodeHeaderValue(%q) = %q, want %q", c.in, got, c.want)
		}
	}
	// Raw 8-bit header text takes the body's charset when it is not UTF-8.
	raw := "Subject: \xa4\xa4\xa4\xe5\nContent-Type: text/plain; charset=big5\n\nx"
	if p := Parse([]byte(raw)); p.Subject != "中文" {
		t.Errorf("big5 subject = %q", p.Subject)
	}
}

// TestDecodeTextBOM: a byte-order mark decides the encoding (issue 22: a
// UTF-16 part with a BOM was shown as mojibake).
func TestDecodeTextBOM(t *testing.T) {
	utf16le := []byte{0xFF, 0xFE, 'G', 0, 'r', 0, 0xFC, 0, 0xDF, 0, 'e', 0}
	utf16be := []byte{0xFE, 0xFF, 0, 'G', 0, 'r', 0, 0xFC, 0, 0xDF, 0, 'e'}
	for name, c := range map[string]struct {
		charset string
		body    []byte
	}{
		"utf-16 LE with BOM":          {"utf-16", utf16le},
		"utf-16 BE with BOM":          {"utf-16", utf16be},
		"utf-16le declared, BOM":      {"utf-16le", utf16le},
		"BOM, charset says latin1":    {"iso-8859-1", utf16le},
		"utf-16 without BOM (BE)":     {"utf-16", utf16be[2:]},
		"utf-8 BOM":                   {"utf-8", []byte("\xEF\xBB\xBFGrüße")},
		"utf-8 BOM, no charset given": {"", []byte("\xEF\xBB\xBFGrüße")},
	} {
		raw := []byte("Content-Type: text/plain; charset=" + c.charset + "\r\nContent-Transfer-Encoding: binary\r\n\r\n")
		raw = append(raw, c.body...)
		p := Parse(raw)
		got, err := DecodeText(raw, p.Body)
		if err != nil || got != "Grüße" {
			t.Errorf("%s: %q %v", name, got, err)
		}
	}
}
