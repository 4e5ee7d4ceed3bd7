package webmail

import (
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"pimail/internal/store"
)

// rowSubjects lists the subjects of a list page's rows, in order.
func rowSubjects(body string) []string {
	var out []string
	for _, m := range regexp.MustCompile(`<td class="subj"><a href="[^"]*">([^<]*)</a>`).FindAllStringSubmatch(body, -1) {
		out = append(out, m[1])
	}
	return out
}

// TestListOrderAndPane: the order chosen is kept in the preferences and
// pages through the sorted mailbox; threads indent replies; the reading
// pane shows the message (with its text) beside the list; actions from
// the pane come back to the list, and all=1 reaches every page.
func TestListOrderAndPane(t *testing.T) {
	f := newFixture(t)
	f.srv.cfg.PageSize = 2
	for _, m := range []string{
		"Subject: banana\nMessage-ID: <1@x>\nDate: Mon, 1 Jan 2024 10:00:00 +0000\n\nfirst\n",
		"Subject: apple\nMessage-ID: <2@x>\nDate: Wed, 3 Jan 2024 10:00:00 +0000\n\n" + strings.Repeat("long ", 100) + "\n",
		"Subject: Re: banana\nMessage-ID: <3@x>\nIn-Reply-To: <1@x>\nDate: Tue, 2 Jan 2024 10:00:00 +0000\n\nreply\n",
	} {
		f.deliver(t, "carol@example.net", []string{"alice@example.com"}, "From: carol@example.net\n"+m)
	}
	c := f.client(t)
	c.login("alice@example.com")
	box := itoa(f.box(t, "alice@example.com", "INBOX").ID)
	order := func(vals url.Values, pages ...int) []string {
		t.Helper()
		if vals != nil {
			vals.Set("box", box)
			resp, body := c.post("/view", vals)
			expectStatus(t, resp, http.StatusSeeOther, body)
		}
		var all []string
		for _, p := range pages {
			_, body := c.get("/box/" + box + "?page=" + itoa(int64(p)))
			all = append(all, rowSubjects(body)...)
		}
		return all
	}
	if got := order(nil, 0, 1); strings.Join(got, ",") != "Re: banana,apple,banana" {
		t.Errorf("received, newest first: %q", got)
	}
	if got := order(url.Values{"sort": {"date"}, "order": {"asc"}}, 0, 1); strings.Join(got, ",") != "banana,Re: banana,apple" {
		t.Errorf("sent date, oldest first: %q", got)
	}
	if got := order(url.Values{"sort": {"subject"}, "order": {"asc"}}, 0, 1); strings.Join(got, ",") != "apple,banana,Re: banana" {
		t.Errorf("subject, A first: %q", got)
	}
	if got := order(url.Values{"sort": {"size"}, "order": {"desc"}}, 0); got[0] != "apple" {
		t.Errorf("size, largest first: %q", got)
	}
	if resp, _ := c.post("/view", url.Values{"box": {box}, "sort": {"bogus"}}); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("unknown order: %d", resp.StatusCode)
	}
	// Threads, the conversation with the newest message first: apple
	// (Jan 3), then banana (Jan 1) with its reply (Jan 2) under it.
	got := order(url.Values{"sort": {"date"}, "order": {"desc"}, "threads": {"1"}}, 0, 1)
	if strings.Join(got, ",") != "apple,banana,Re: banana" {
		t.Errorf("threads: %q", got)
	}
	_, body := c.get("/box/" + box + "?page=1")
	if !strings.Contains(body, `<tr class="msg unread t1"`) {
		t.Errorf("the reply is not indented:\n%s", body)
	}
	// The pane: the list and the message, text included.
	resp, body := c.get("/box/" + box + "?page=0&msg=1")
	expectStatus(t, resp, http.StatusOK, body)
	if !strings.Contains(body, `id="pane"`) || !strings.Contains(body, `<div class="text" id="body-text">first`) ||
		!strings.Contains(body, `name="next" value="/box/`+box+`?page=0&amp;msg=1"`) || !strings.Contains(body, `class="listview pane-right has-msg"`) {
		t.Fatalf("pane:\n%s", body)
	}
	// Flag from the pane comes back to it; delete leaves the message out.
	resp, _ = c.post("/act", url.Values{"box": {box}, "uid": {"1"}, "op": {"flag"}, "next": {"/box/" + box + "?page=0&msg=1"}})
	if loc := resp.Header.Get("Location"); loc != "/box/"+box+"?page=0&msg=1" {
		t.Errorf("after flag: %q", loc)
	}
	resp, _ = c.post("/act", url.Values{"box": {box}, "uid": {"1"}, "op": {"delete"}, "next": {"/box/" + box + "?page=0&msg=1"}})
	if loc := resp.Header.Get("Location"); loc != "/box/"+box+"?page=0" {
		t.Errorf("after delete: %q", loc)
	}
	// Copy, and every message of the folder (all=1) marked read.
	archive := itoa(f.box(t, "alice@example.com", "Archive").ID)
	c.post("/act", url.Values{"box": {box}, "uid": {"2"}, "op": {"copy"}, "target": {archive}})
	if len(f.metas(t, "alice@example.com", "Archive")) != 1 || len(f.metas(t, "alice@example.com", "INBOX")) != 2 {
		t.Fatal("copy")
	}
	c.post("/act", url.Values{"box": {box}, "all": {"1"}, "op": {"read"}})
	for _, m := range f.metas(t, "alice@example.com", "INBOX") {
		if m.Flags&store.FlagSeen == 0 {
			t.Errorf("all=1 left message %d unread", m.UID)
		}
	}
	// Off: rows open the message's own page.
	c.post("/settings", url.Values{"pane": {"off"}})
	_, body = c.get("/box/" + box)
	if strings.Contains(body, `id="pane"`) || !strings.Contains(body, `<a href="/msg/`+box+`/`) {
		t.Errorf("pane off:\n%s", body)
	}
}
