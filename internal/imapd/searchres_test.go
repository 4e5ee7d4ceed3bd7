package imapd

import (
	"strings"
	"testing"
)

func TestSearchRes(t *testing.T) {
	e, r := searchEnv(t) // 3 messages, 2 is \Flagged
	if res := r.cmd("c", "CAPABILITY"); !strings.Contains(res[0], " SEARCHRES") {
		t.Fatalf("capability: %q", res)
	}
	// SAVE alone: no untagged response at all.
	if res := r.cmd("a", "SEARCH RETURN (SAVE) NOT FLAGGED"); len(res) != 1 || !strings.HasPrefix(res[0], "a OK") {
		t.Fatalf("SAVE: %q", res)
	}
	if res := r.cmd("f", "FETCH $ (UID)"); len(res) != 3 || res[0] != "* 1 FETCH (UID 1)" || res[1] != "* 3 FETCH (UID 3)" {
		t.Fatalf("FETCH $: %q", res)
	}
	if res := r.cmd("s", "UID SEARCH $ FROM ann"); res[0] != "* SEARCH 1" {
		t.Fatalf("SEARCH $: %q", res)
	}
	if res := r.cmd("s2", "SEARCH OR $ FLAGGED"); res[0] != "* SEARCH 1 2 3" {
		t.Fatalf("SEARCH OR $: %q", res)
	}
	// SAVE with MIN saves only the minimum, and answers MIN.
	if res := r.cmd("m", "SEARCH RETURN (SAVE MIN) ALL"); res[0] != `* ESEARCH (TAG "m") MIN 1` {
		t.Fatalf("SAVE MIN: %q", res)
	}
	if res := r.cmd("st", `STORE $ +FLAGS (\Answered)`); len(res) != 2 || !strings.HasPrefix(res[0], "* 1 FETCH") {
		t.Fatalf("STORE $: %q", res)
	}
	// $ follows expunges: UIDs, not sequence numbers, are saved.
	r.cmd("sv", "SEARCH RETURN (SAVE) UID 3")
	e.deliver("", multipartMsg)
	r.cmd("d", `STORE 1 +FLAGS.SILENT (\Deleted)`)
	r.cmd("x", "EXPUNGE")
	if res := r.cmd("f2", "FETCH $ (UID)"); len(res) != 2 || res[0] != "* 2 FETCH (UID 3)" {
		t.Fatalf("FETCH $ after expunge: %q", res)
	}
	if res := r.cmd("cp", "UID COPY $ Archive"); !strings.HasSuffix(last(res), " 3 1] COPY completed") {
		t.Fatalf("COPY $: %q", res)
	}
	// A failed SAVE search empties $.
	r.cmd("bad", "SEARCH RETURN (SAVE) CHARSET KOI8-R ALL")
	if res := r.cmd("f3", "FETCH $ (UID)"); len(res) != 1 {
		t.Fatalf("$ after failed search: %q", res)
	}
	// A new SELECT forgets $.
	r.cmd("sv2", "SEARCH RETURN (SAVE) ALL")
	r.cmd("sel", "SELECT INBOX")
	if res := r.cmd("f4", "UID FETCH $ (UID)"); len(res) != 1 {
		t.Fatalf("$ after SELECT: %q", res)
	}
}

func TestESearchReturnOptions(t *testing.T) {
	_, r := searchEnv(t)
	cases := map[string]string{
		"SEARCH RETURN () ALL":                    `* ESEARCH (TAG "t") ALL 1:3`,
		"SEARCH RETURN (COUNT) FROM nobody":       `* ESEARCH (TAG "t") COUNT 0`,
		"SEARCH RETURN (MIN MAX) FROM nobody":     `* ESEARCH (TAG "t")`,
		"UID SEARCH RETURN (ALL COUNT) NOT UID 2": `* ESEARCH (TAG "t") UID ALL 1,3 COUNT 2`,
		"SEARCH RETURN (MAX MAX) ALL":             `* ESEARCH (TAG "t") MAX 3`,
	}
	for q, want := range cases {
		if res := r.cmd("t", q); len(res) != 2 || res[0] != want {
			t.Errorf("%s: %q, want %q", q, res, want)
		}
	}
}
