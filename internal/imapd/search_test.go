package imapd

import (
	"strings"
	"testing"

	"github.com/emersion/go-imap/v2"
)

func plainMsg(from, subject, body, date string) string {
	return "From: " + from + "\r\nTo: team@example.org\r\nSubject: " + subject + "\r\nDate: " + date +
		"\r\nX-Tag: " + subject + "-tag\r\n\r\n" + body + "\r\n"
}

func searchEnv(t *testing.T) (*testEnv, *rawConn) {
	e := newTestEnv(t, Config{})
	e.deliver("", plainMsg("Ann <ann@example.com>", "Quarterly numbers", "the pineapple budget", "Mon, 4 Mar 2024 08:00:00 +0000"))
	e.deliver("", plainMsg("Bob <bob@example.net>", "Lunch", "no fruit today "+strings.Repeat("x", 2000), "Fri, 1 Mar 2024 08:00:00 +0000"))
	e.deliver("", multipartMsg)
	r := e.raw()
	r.login()
	r.cmd("s", "SELECT INBOX")
	r.cmd("st", `STORE 2 +FLAGS ($Important \Flagged)`)
	return e, r
}

func TestSearchKeys(t *testing.T) {
	_, r := searchEnv(t)
	cases := map[string]string{
		"ALL":                                "* SEARCH 1 2 3",
		"FROM ann":                           "* SEARCH 1",
		"FROM EXAMPLE.NET":                   "* SEARCH 2",
		"SUBJECT grüße":                      "* SEARCH 3",
		"CHARSET UTF-8 SUBJECT {7}\r\ngrüße": "* SEARCH 3",
		"BODY pineapple":                     "* SEARCH 1 3",
		"BODY café":                          "* SEARCH 3",
		"TEXT quarterly":                     "* SEARCH 1",
		"HEADER X-Tag lunch-TAG":             "* SEARCH 2",
		"HEADER Message-ID \"\"":             "* SEARCH 3",
		"LARGER 1500":                        "* SEARCH 2",
		"SMALLER 1500":                       "* SEARCH 1 3",
		"FLAGGED":                            "* SEARCH 2",
		"KEYWORD $important":                 "* SEARCH 2",
		"UNKEYWORD $Important UNFLAGGED":     "* SEARCH 1 3",
		"OR FROM ann FROM bob":               "* SEARCH 1 2",
		"NOT (FROM ann)":                     "* SEARCH 2 3",
		"SENTBEFORE 2-Mar-2024":              "* SEARCH 2",
		"SENTON 5-Mar-2024":                  "* SEARCH 3",
		"SENTSINCE 4-Mar-2024":               "* SEARCH 1 3",
		"ON 5-Mar-2024":                      "* SEARCH 1 2 3",
		"BEFORE 5-Mar-2024":                  "* SEARCH",
		"2:*":                                "* SEARCH 2 3",
		"UID 1,3":                            "* SEARCH 1 3",
		"UNSEEN":                             "* SEARCH 1 2 3",
		"NEW":                                "* SEARCH 1 2 3", // delivered while nobody had INBOX selected
		"OLD":                                "* SEARCH",
	}
	i := 0
	for q, want := range cases {
		i++
		tag := "q" + string(rune('a'+i%26)) + strings.Repeat("x", i/26)
		var res []string
		if strings.Contains(q, "{") {
			head, lit, _ := strings.Cut(q, "\r\n")
			r.send(tag + " SEARCH " + head + "\r\n")
			if l := r.line(); !strings.HasPrefix(l, "+") {
				t.Fatalf("no continuation: %q", l)
			}
			r.send(lit + "\r\n")
			res = r.until(tag + " ")
		} else {
			res = r.cmd(tag, "SEARCH "+q)
		}
		if len(res) != 2 || res[0] != want || !strings.HasPrefix(res[1], tag+" OK") {
			t.Errorf("SEARCH %s: got %q, want %q", q, res, want)
		}
	}
	if l := last(r.cmd("bc", "SEARCH CHARSET KOI8-R ALL")); !strings.HasPrefix(l, "bc NO [BADCHARSET") {
		t.Errorf("bad charset: %q", l)
	}
	if l := last(r.cmd("bk", "SEARCH FROBNICATE")); !strings.HasPrefix(l, "bk BAD") {
		t.Errorf("bad key: %q", l)
	}
}

func TestESearch(t *testing.T) {
	_, r := searchEnv(t)
	res := r.cmd("a", "UID SEARCH RETURN (MIN MAX COUNT) ALL")
	if res[0] != `* ESEARCH (TAG "a") UID MIN 1 MAX 3 COUNT 3` {
		t.Errorf("ESEARCH: %q", res)
	}
	r.cmd("e", "ENABLE IMAP4rev2")
	res = r.cmd("b", "SEARCH NOT FLAGGED")
	if res[0] != `* ESEARCH (TAG "b") ALL 1,3` {
		t.Errorf("rev2 SEARCH: %q", res)
	}
	res = r.cmd("c", "SEARCH FROM nobody")
	if res[0] != `* ESEARCH (TAG "c")` {
		t.Errorf("rev2 empty SEARCH: %q", res)
	}
}

func TestSearchClient(t *testing.T) {
	e, _ := searchEnv(t)
	c := e.client(nil)
	if _, err := c.Select("INBOX", nil).Wait(); err != nil {
		t.Fatal(err)
	}
	data, err := c.UIDSearch(&imap.SearchCriteria{Body: []string{"PINEAPPLE"}}, nil).Wait()
	if err != nil {
		t.Fatal(err)
	}
	if got := data.AllUIDs(); len(got) != 2 || got[0] != 1 || got[1] != 3 {
		t.Errorf("UID SEARCH BODY: %v", got)
	}
}
