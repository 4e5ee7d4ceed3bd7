package message

import (
	"reflect"
	"testing"
	"time"
)

func TestParseAddressList(t *testing.T) {
	cases := []struct {
		in   string
		want []Address
	}{
		{"a@b.c", []Address{{Mailbox: "a", Host: "b.c"}}},
		{`"Doe, John" <john.doe@example.com>, jane@example.com (Jane)`, []Address{
			{Name: "Doe, John", Mailbox: "john.doe", Host: "example.com"},
			{Name: "Jane", Mailbox: "jane", Host: "example.com"},
		}},
		{"John Q. Public <JQP@x.test>", []Address{{Name: "John Q. Public", Mailbox: "JQP", Host: "x.test"}}},
		{"A Group:Ed Jones <c@a.test>,joe@where.test,John <jdoe@one.test>;, after@x.y", []Address{
			{Group: "A Group"},
			{Name: "Ed Jones", Mailbox: "c", Host: "a.test"},
			{Mailbox: "joe", Host: "where.test"},
			{Name: "John", Mailbox: "jdoe", Host: "one.test"},
			{End: true},
			{Mailbox: "after", Host: "x.y"},
		}},
		{"undisclosed-recipients:;", []Address{{Group: "undisclosed-recipients"}, {End: true}}},
		{"Unclosed group: a@b", []Address{{Group: "Unclosed group"}, {Mailbox: "a", Host: "b"}, {End: true}}},
		{"<@route1,@route2:user@host>", []Address{{Mailbox: "user", Host: "host", Route: "@route1,@route2"}}},
		{"CEO <ceo@(x)victim.test>", []Address{{Name: "CEO", Mailbox: "ceo", Host: "victim.test"}}},
		{"ceo@victim.test (Chief (Executive) Officer) (last)", []Address{{Name: "last", Mailbox: "ceo", Host: "victim.test"}}},
		{"(c1) Name (c2) <a@b> (c3)", []Address{{Name: "Name", Mailbox: "a", Host: "b"}}},
		{`"quoted local"@[192.0.2.1]`, []Address{{Mailbox: "quoted local", Host: "[192.0.2.1]"}}},
		{"Name Only", []Address{{Mailbox: "Name Only"}}},
		{"Broken <no-at-sign>", []Address{{Name: "Broken", Mailbox: "no-at-sign"}}},
		{"Display Name user@host", []Address{{Name: "Display Name", Mailbox: "user", Host: "host"}}},
		{"bob@x.y <bob@x.y>", []Address{{Name: "bob@x.y", Mailbox: "bob", Host: "x.y"}}},
		{"<unclosed@angle", []Address{{Mailbox: "unclosed", Host: "angle"}}},
		{", ,,", nil},
		{"", nil},
		{`"unterminated <a@b>`, []Address{{Mailbox: "unterminated <a@b>"}}},
	}
	for _, c := range cases {
		got := ParseAddressList(c.in)
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("ParseAddressList(%q)\n got %+v\nwant %+v", c.in, got, c.want)
		}
	}
}

func TestFormatAddresses(t *testing.T) {
	got := formatAddresses(ParseAddressList(`=?utf-8?q?J=C3=BCrgen?= <j@x.de>, team: a@b, c@d;, e@f`), "")
	want := "Jürgen <j@x.de>, team: a@b, c@d;, e@f"
	if got != want {
		t.Errorf("got %q want %q", got, want)
	}
}

func TestParseDate(t *testing.T) {
	utc := func(y int, mo time.Month, d, h, mi, s int) time.Time {
		return time.Date(y, mo, d, h, mi, s, 0, time.UTC)
	}
	cases := []struct {
		in   string
		want time.Time
	}{
		{"Tue, 1 Jul 2003 10:52:37 +0200", utc(2003, 7, 1, 8, 52, 37)},
		{"1 Jul 2003 10:52:37 +0200", utc(2003, 7, 1, 8, 52, 37)},
		{"Tue, 01 Jul 2003 10:52:37 +0200 (CEST)", utc(2003, 7, 1, 8, 52, 37)},
		{"Tue,  1 Jul 03 10:52:37 +0200", utc(2003, 7, 1, 8, 52, 37)},
		{"Tue, 1 Jul 2003 10:52 +0200", utc(2003, 7, 1, 8, 52, 0)},
		{"Tue, 1 Jul 2003 10:52:37 GMT", utc(2003, 7, 1, 10, 52, 37)},
		{"Tue, 1 Jul 2003 10:52:37 -0000 GMT", utc(2003, 7, 1, 10, 52, 37)},
		{"Tue Jul  1 10:52:37 2003", utc(2003, 7, 1, 10, 52, 37)},
		{"Tuesday, 1 July 2003 10:52:37 +0000", utc(2003, 7, 1, 10, 52, 37)},
		{"2003-07-01T10:52:37Z", utc(2003, 7, 1, 10, 52, 37)},
		{"Fri, 21 Nov 1997 09(comment):   55  :  06 -0600", utc(1997, 11, 21, 15, 55, 6)},
		{"01 Jan 2001 00:01+0000", utc(2001, 1, 1, 0, 1, 0)},
		{"tue,1 Jul 2003 10:52:37 +0200", utc(2003, 7, 1, 8, 52, 37)},
		{"SUN,\t1 Jul 2003 10:52:37 +0200", utc(2003, 7, 1, 8, 52, 37)},
	}
	for _, c := range cases {
		got, ok := ParseDate(c.in)
		if !ok || !got.Equal(c.want) {
			t.Errorf("ParseDate(%q) = %v, %v; want %v", c.in, got, ok, c.want)
		}
	}
	for _, bad := range []string{"", "Whenever", "<HR>", "Pn, 29 paX 2007 21:13:00 +0100"} {
		if got, ok := ParseDate(bad); ok {
			t.Errorf("ParseDate(%q) = %v, want failure", bad, got)
		}
	}
}

func TestParseMailboxList(t *testing.T) {
	for in, want := range map[string]int{
		"a@b.example": 1,
		"A <a@b.example>, \"Doe, J\" <j@d.example>": 2,
		"<a@b.example> (comment), c@d.example":      2,
		"=?utf-8?q?J=C3=BCrgen?= <j@x.de>":          1,
		"":                                          0,
	} {
		got, err := ParseMailboxList(in)
		if err != nil || len(got) != want {
			t.Errorf("ParseMailboxList(%q) = %+v, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"bob@exa mple.com", `bob@example.com>"`, "Bob bob@x.example", "team: a@b.example;",
		"<@r:a@b.example>", "a@b.example>x", "no-at-sign", "a@", "@b.example", "<a@b.example", "a@b@c.example"} {
		if got, err := ParseMailboxList(bad); err == nil {
			t.Errorf("ParseMailboxList(%q) accepted: %+v", bad, got)
		}
	}
}
