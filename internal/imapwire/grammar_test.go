package imapwire

import (
	"bufio"
	"bytes"
	"io"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestParseFetchAtt(t *testing.T) {
	cases := []struct {
		in   string
		want FetchAtt
	}{
		{"FLAGS", FetchAtt{Name: "FLAGS"}},
		{"body.peek[]", FetchAtt{Name: "BODY[]", Peek: true, Section: &Section{}}},
		{"BODY[1.2.HEADER.FIELDS (From \"To\")]<0.100>", FetchAtt{Name: "BODY[]",
			Section: &Section{Part: []int{1, 2}, Text: "HEADER.FIELDS", Fields: []string{"From", "To"}, Raw: `1.2.HEADER.FIELDS (From "To")`},
			Partial: &Partial{Origin: 0, Count: 100, HasCount: true}}},
		{"BODY[3.MIME]", FetchAtt{Name: "BODY[]", Section: &Section{Part: []int{3}, Text: "MIME", Raw: "3.MIME"}}},
		{"BINARY.PEEK[1]<5>", FetchAtt{Name: "BINARY[]", Peek: true, Section: &Section{Part: []int{1}, Raw: "1"}, Partial: &Partial{Origin: 5}}},
	}
	for _, c := range cases {
		got, err := ParseFetchAtt(c.in)
		if err != nil {
			t.Errorf("%s: %v", c.in, err)
			continue
		}
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: got %+v (%+v), want %+v", c.in, got, got.Section, c.want)
		}
	}
	for _, bad := range []string{"BODY[MIME]", "BODY[0]", "BODY[1.]", "BODY[HEADER.FIELDS ()]", "BODY[]<1.0>", "BINARY[TEXT]", "FOO", "BODY[TEXT]<x>", "BODY[1.2"} {
		if _, err := ParseFetchAtt(bad); err == nil {
			t.Errorf("%s: accepted", bad)
		}
	}
	atts, err := ParseFetchAtts(Arg{Kind: KindAtom, Str: "full"})
	if err != nil || len(atts) != 5 || atts[4].Name != "BODY" {
		t.Errorf("FULL = %+v %v", atts, err)
	}
}

func TestSeqSet(t *testing.T) {
	s, err := ParseSeqSet("1:3,7,9:*")
	if err != nil {
		t.Fatal(err)
	}
	for n, want := range map[uint32]bool{1: true, 3: true, 4: false, 7: true, 8: false, 9: true, 20: true} {
		if s.Contains(n, 20) != want {
			t.Errorf("Contains(%d) != %v", n, want)
		}
	}
	if !s.HasStar() {
		t.Error("HasStar false")
	}
	for _, bad := range []string{"", "0", "1:", ",", "a", "1,,2", "99999999999"} {
		if _, err := ParseSeqSet(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	if got := FormatUIDs([]uint32{1, 2, 3, 5, 7, 8}); got != "1:3,5,7:8" {
		t.Errorf("FormatUIDs = %s", got)
	}
}

func atoms(ss ...string) []Arg {
	var out []Arg
	for _, s := range ss {
		out = append(out, Arg{Kind: KindAtom, Str: s})
	}
	return out
}

func TestParseSearch(t *testing.T) {
	args := append(atoms("RETURN"), Arg{Kind: KindList, List: atoms("MIN", "COUNT")})
	args = append(args, atoms("CHARSET", "UTF-8", "OR", "FROM", "alice", "NOT", "SEEN", "SINCE", "1-Feb-2024", "1:5")...)
	args = append(args, Arg{Kind: KindList, List: atoms("HEADER", "X-A", "b", "LARGER", "100")})
	sc, err := ParseSearch(args)
	if err != nil {
		t.Fatal(err)
	}
	if !sc.HasReturn || !reflect.DeepEqual(sc.Return, []string{"MIN", "COUNT"}) || sc.Charset != "UTF-8" {
		t.Fatalf("sc = %+v", sc)
	}
	k := sc.Key
	if k.Op != "AND" || len(k.Children) != 4 {
		t.Fatalf("key = %+v", k)
	}
	or := k.Children[0]
	if or.Op != "OR" || or.Children[0].Str != "alice" || or.Children[1].Op != "NOT" {
		t.Errorf("or = %+v", or)
	}
	if !k.Children[1].Date.Equal(time.Date(2024, 2, 1, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("date = %v", k.Children[1].Date)
	}
	if k.Children[2].Op != "SEQSET" || k.Children[3].Children[0].Field != "X-A" || k.Children[3].Children[1].Num != 100 {
		t.Errorf("rest = %+v", k.Children[2:])
	}
	for _, bad := range [][]Arg{nil, atoms("FROM"), atoms("OR", "SEEN"), atoms("BOGUS"), atoms("SINCE", "1-Foo-2020"), atoms("LARGER", "x")} {
		if _, err := ParseSearch(bad); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
}

func TestMUTF7(t *testing.T) {
	for utf, enc := range map[string]string{
		"INBOX":             "INBOX",
		"a&b":               "a&-b",
		"Entwürfe":          "Entw&APw-rfe",
		"日本語":               "&ZeVnLIqe-",
		"x/€uro/\U0001F600": "x/&IKw-uro/&2D3eAA-",
	} {
		if got := EncodeMUTF7(utf); got != enc {
			t.Errorf("Encode(%q) = %q, want %q", utf, got, enc)
		}
		if got, err := DecodeMUTF7(enc); err != nil || got != utf {
			t.Errorf("Decode(%q) = %q %v", enc, got, err)
		}
	}
	for _, bad := range []string{"&", "&AGE-", "a\x80", "&Jjo"} {
		if _, err := DecodeMUTF7(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestWriterStrings(t *testing.T) {
	var buf bytes.Buffer
	bw := bufio.NewWriter(&buf)
	w := NewWriter(bw)
	w.String("plain").SP().String("with \"quote\"").SP().NString("").SP().String("über").SP().AString("INBOX").SP().AString("a b")
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	want := "\"plain\" {12}\r\nwith \"quote\" NIL {5}\r\nüber INBOX \"a b\""
	if buf.String() != want {
		t.Errorf("got %q want %q", buf.String(), want)
	}
	buf.Reset()
	w.UTF8 = true
	w.String("über")
	w.Flush()
	if buf.String() != "\"über\"" {
		t.Errorf("UTF8 quoted: %q", buf.String())
	}
}

func TestDateTime(t *testing.T) {
	tm, err := ParseDateTime(" 7-Feb-2024 10:11:12 +0100")
	if err != nil {
		t.Fatal(err)
	}
	if got := FormatDateTime(tm); got != "07-Feb-2024 10:11:12 +0100" {
		t.Errorf("format = %s", got)
	}
	if _, err := ParseDateTime("7-Feb-2024"); err == nil {
		t.Error("date without time accepted")
	}
	// AppendDateTime writes what FormatDateTime does.
	for _, tm := range []time.Time{
		tm, time.Unix(0, 0).UTC(), time.Unix(1700000000, 0), time.Unix(-86400*400, 0).In(time.FixedZone("", -(9*3600 + 30*60))),
		time.Date(2024, 12, 31, 23, 59, 59, 0, time.FixedZone("", 14*3600)), time.Date(9999, 1, 2, 3, 4, 5, 0, time.UTC),
		time.Date(12345, 1, 2, 3, 4, 5, 0, time.UTC), time.Date(1901, 1, 2, 3, 4, 5, 0, time.FixedZone("", -1234)),
	} {
		if got, want := string(AppendDateTime([]byte("x"), tm)), "x"+FormatDateTime(tm); got != want {
			t.Errorf("AppendDateTime = %q, want %q", got, want)
		}
	}
}

// AppendString writes a string that reads back as s: quoted (with
// quoted-specials escaped) unless it needs a literal, as NString for "".
func TestWriterAppendStrings(t *testing.T) {
	for _, utf8 := range []bool{false, true} {
		strs := []string{"", "plain", "with \"quote\"", "back\\slash", "\"", "\\", "über", "cr\rlf\n", "nul\x00",
			strings.Repeat("x", 1025), strings.Repeat("y", 1024), strings.Repeat("\"", 1024)}
		// Every special byte at every offset of a string.
		for _, c := range []byte{0, '\r', '\n', '"', '\\', 0x80, 0xff, 0x7f, 0x01, '!', '#', '[', ']'} {
			for at := range 19 {
				b := []byte(strings.Repeat("abcdefgh", 3)[:19])
				b[at] = c
				strs = append(strs, string(b))
			}
		}
		w := NewWriter(bufio.NewWriter(io.Discard))
		w.UTF8 = utf8
		for _, s := range strs {
			literal := len(s) > 1024 || strings.ContainsAny(s, "\r\n\x00")
			for i := 0; i < len(s); i++ {
				literal = literal || s[i] >= 0x80 && !utf8
			}
			out := w.AppendString([]byte("a X "), s)
			r, _ := newTestReader(string(out)+"\r\n", Limits{})
			cmd, err := r.ReadCommand()
			if err != nil {
				t.Fatalf("utf8 %v: %q: %v", utf8, out, err)
			}
			a := cmd.Args[0]
			switch {
			case literal && (a.Kind != KindLiteral || string(a.Lit) != s):
				t.Errorf("utf8 %v: %q read as %+v, want the literal %q", utf8, out, a, s)
			case !literal && (a.Kind != KindQuoted || a.Str != s):
				t.Errorf("utf8 %v: %q read as %+v, want the quoted %q", utf8, out, a, s)
			}
			if got := string(w.AppendNString(nil, s)); s == "" && got != "NIL" || s != "" && got != string(out[4:]) {
				t.Errorf("AppendNString(%q) = %q", s, got)
			}
			// String keeps its rule: quotes and backslashes as literals.
			strLiteral := literal || strings.ContainsAny(s, "\"\\")
			if got := w.needsLiteral(s); got != strLiteral {
				t.Errorf("utf8 %v: needsLiteral(%q) = %v, want %v", utf8, s, got, strLiteral)
			}
		}
	}
}
