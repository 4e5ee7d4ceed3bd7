package imapd

import (
	"strings"
	"testing"
)

// threadEnv holds six messages whose threading, subjects, addresses,
// dates and sizes are known.
func threadEnv(t *testing.T) *rawConn {
	e := newTestEnv(t, Config{})
	msgs := []struct {
		hdr, date string
		size      int
	}{
		{"From: Carl <carl@x.org>\r\nTo: zed@x.org\r\nSubject: Re: apples\r\nMessage-ID: <b@x>\r\nIn-Reply-To: <a@x>", "3", 3000},
		{"From: \"Anna\" <bob@x.org>\r\nTo: amy@x.org\r\nSubject: apples\r\nMessage-ID: <a@x>", "1", 1000},
		{"From: zoe@x.org\r\nSubject: [list] Bananas\r\nMessage-ID: <c@x>\r\nReferences: <a@x> <b@x>", "2", 5000},
		{"From: =?utf-8?q?Beth?= <adam@x.org>\r\nSubject: Fwd: cherries\r\nMessage-ID: <d@x>\r\nReferences: <missing@x>", "4", 2000},
		{"From: eve@x.org\r\nSubject: cherries\r\nMessage-ID: <e@x>\r\nReferences: <missing@x>", "5", 6000},
		{"From: dan@x.org\r\nSubject: Re: apples\r\nMessage-ID: <f@x>", "6", 4000},
	}
	for _, m := range msgs {
		e.deliver("", m.hdr+"\r\nDate: "+m.date+" Mar 2024 10:00:00 +0000\r\n\r\n"+strings.Repeat("x", m.size)+"\r\n")
	}
	r := e.raw()
	r.login()
	r.cmd("s", "SELECT INBOX")
	return r
}

func TestSort(t *testing.T) {
	r := threadEnv(t)
	if res := r.cmd("c", "CAPABILITY"); !strings.Contains(res[0], " SORT ") || !strings.Contains(res[0], " SORT=DISPLAY ") {
		t.Fatalf("capability: %q", res)
	}
	cases := map[string]string{
		"SORT (SUBJECT) UTF-8 ALL":                           "* SORT 1 2 6 3 4 5",
		"SORT (DATE) UTF-8 ALL":                              "* SORT 2 3 1 4 5 6",
		"SORT (REVERSE DATE) UTF-8 ALL":                      "* SORT 6 5 4 1 3 2",
		"SORT (FROM) US-ASCII ALL":                           "* SORT 4 2 1 6 5 3",
		"SORT (DISPLAYFROM) UTF-8 ALL":                       "* SORT 2 4 1 6 5 3",
		"SORT (SIZE) UTF-8 ALL":                              "* SORT 2 4 1 6 3 5",
		"SORT (TO DATE) UTF-8 ALL":                           "* SORT 3 4 5 6 2 1",
		"SORT (CC REVERSE SIZE) UTF-8 ALL":                   "* SORT 5 3 6 1 4 2",
		"UID SORT (REVERSE ARRIVAL) UTF-8 NOT FROM carl":     "* SORT 2 3 4 5 6",
		"SORT (SUBJECT REVERSE DATE) UTF-8 SUBJECT cherries": "* SORT 5 4",
		"SORT (DATE) UTF-8 FROM nobody":                      "* SORT",
	}
	for q, want := range cases {
		if res := r.cmd("t", q); len(res) != 2 || res[0] != want {
			t.Errorf("%s: %q, want %q", q, res, want)
		}
	}
	for _, q := range []string{"SORT () UTF-8 ALL", "SORT (REVERSE) UTF-8 ALL", "SORT (BOGUS) UTF-8 ALL", "SORT (DATE) ALL", "SORT DATE UTF-8 ALL"} {
		if l := last(r.cmd("b", q)); !strings.HasPrefix(l, "b BAD") {
			t.Errorf("%s: %q", q, l)
		}
	}
	if l := last(r.cmd("n", "SORT (DATE) KOI8-R ALL")); !strings.HasPrefix(l, "n NO [BADCHARSET") {
		t.Errorf("charset: %q", l)
	}
}

func TestThread(t *testing.T) {
	r := threadEnv(t)
	if res := r.cmd("c", "CAPABILITY"); !strings.Contains(res[0], " THREAD=REFERENCES") || !strings.Contains(res[0], " THREAD=ORDEREDSUBJECT") {
		t.Fatalf("capability: %q", res)
	}
	cases := map[string]string{
		// 2 ← 1 ← 3 by references; 6 joins 2 by subject ("Re: apples"
		// under "apples"); 4 and 5 share the missing parent <missing@x>.
		"THREAD REFERENCES UTF-8 ALL":         "* THREAD (2 (1 3)(6))((4)(5))",
		"THREAD ORDEREDSUBJECT UTF-8 ALL":     "* THREAD (2 (1)(6))(3)(4 5)",
		"UID THREAD REFERENCES UTF-8 NOT 1":   "* THREAD (2 (3)(6))((4)(5))",
		"THREAD REFERENCES UTF-8 OR 4 5":      "* THREAD ((4)(5))",
		"THREAD REFERENCES UTF-8 4":           "* THREAD (4)",
		"THREAD ORDEREDSUBJECT UTF-8 1,6":     "* THREAD (1 6)",
		"THREAD REFERENCES UTF-8 FROM nobody": "* THREAD",
	}
	for q, want := range cases {
		if res := r.cmd("t", q); len(res) != 2 || res[0] != want {
			t.Errorf("%s: %q, want %q", q, res, want)
		}
	}
	if l := last(r.cmd("b", "THREAD JWZ UTF-8 ALL")); !strings.HasPrefix(l, "b BAD") {
		t.Errorf("unknown algorithm: %q", l)
	}
}
