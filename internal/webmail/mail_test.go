package webmail

import (
	"bufio"
	"context"
	"encoding/base64"
	"fmt"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"pimail/internal/delivery"
	"pimail/internal/spam"
	"pimail/internal/store"
)

func TestListAndRead(t *testing.T) {
	f := newFixture(t)
	f.deliver(t, "carol@example.net", []string{"alice@example.com"}, simpleMail)
	f.deliver(t, "carol@example.net", []string{"alice@example.com"}, "From: x@example.net\nSubject: <b>second</b>\nContent-Type: multipart/mixed; boundary=BB\n\n--BB\nContent-Type: text/plain\n\nbody\n--BB\nContent-Type: application/pdf\nContent-Disposition: attachment; filename=a.pdf\n\nJVBE\n--BB--\n")
	c := f.client(t)
	c.login("alice@example.com")
	inbox := f.box(t, "alice@example.com", "INBOX")
	resp, body := c.get("/box/" + itoa(inbox.ID))
	expectStatus(t, resp, http.StatusOK, body)
	i1, i2 := strings.Index(body, "Hello there"), strings.Index(body, "&lt;b&gt;second&lt;/b&gt;")
	if i1 < 0 || i2 < 0 || i2 > i1 {
		t.Fatalf("list lacks messages newest first (escaped): %d %d", i1, i2)
	}
	if !strings.Contains(body, `<b class="count">2</b>`) || !strings.Contains(body, "Carol Sender") || !strings.Contains(body, `<svg class="att"`) {
		t.Fatalf("list lacks unread count, sender or attachment marker:\n%s", body)
	}
	resp, body = c.get("/msg/" + itoa(inbox.ID) + "/1")
	expectStatus(t, resp, http.StatusOK, body)
	if !strings.Contains(body, `<a href="https://example.org/page" rel="noopener noreferrer" target="_blank">https://example.org/page</a>`) {
		t.Fatalf("link not made clickable:\n%s", body)
	}
	if m := f.metas(t, "alice@example.com", "INBOX"); m[0].Flags&store.FlagSeen == 0 {
		t.Fatal("reading did not mark seen")
	}
	resp, body = c.get("/box/" + itoa(inbox.ID))
	if !strings.Contains(body, `<b class="count">1</b>`) {
		t.Fatal("unread count not updated")
	}
}

// A long plain-text message is spliced into its page whole, and the page
// goes out with its length (one write, no chunked encoding).
func TestLongTextPage(t *testing.T) {
	f := newFixture(t)
	var b strings.Builder
	b.WriteString("From: carol@example.net\nSubject: long\n\n")
	for i := range 3000 {
		fmt.Fprintf(&b, "line %d of a long message <kept> & escaped\n", i)
	}
	f.deliver(t, "carol@example.net", []string{"alice@example.com"}, b.String())
	c := f.client(t)
	c.login("alice@example.com")
	inbox := f.box(t, "alice@example.com", "INBOX")
	resp, body := c.get("/msg/" + itoa(inbox.ID) + "/1")
	expectStatus(t, resp, http.StatusOK, body)
	if resp.ContentLength != int64(len(body)) || len(resp.TransferEncoding) > 0 {
		t.Fatalf("Content-Length %d, transfer encoding %v; body %d bytes", resp.ContentLength, resp.TransferEncoding, len(body))
	}
	first, last := strings.Index(body, "line 0 of a long message &lt;kept&gt; &amp; escaped"), strings.Index(body, "line 2999 of")
	text := strings.Index(body, `id="body-text"`)
	if text < 0 || first < text || last < first || !strings.HasSuffix(strings.TrimSpace(body), "</html>") {
		t.Fatalf("text not in place: body-text at %d, first line %d, last %d", text, first, last)
	}
}

func TestPaging(t *testing.T) {
	f := newFixture(t)
	f.srv.cfg.PageSize = 3
	for i := range 7 {
		f.deliver(t, "carol@example.net", []string{"alice@example.com"}, "Subject: msg-"+string(rune('a'+i))+"\n\nx\n")
	}
	c := f.client(t)
	c.login("alice@example.com")
	id := itoa(f.box(t, "alice@example.com", "INBOX").ID)
	_, p0 := c.get("/box/" + id)
	_, p2 := c.get("/box/" + id + "?page=2")
	if !strings.Contains(p0, "msg-g") || strings.Contains(p0, "msg-d") || !strings.Contains(p0, "Page 1 of 3") {
		t.Fatalf("page 0 wrong:\n%s", p0)
	}
	if !strings.Contains(p2, "msg-a") || strings.Contains(p2, "msg-b") {
		t.Fatalf("page 2 wrong")
	}
}

func TestActions(t *testing.T) {
	f := newFixture(t)
	for range 3 {
		f.deliver(t, "carol@example.net", []string{"alice@example.com"}, simpleMail)
	}
	c := f.client(t)
	c.login("alice@example.com")
	u := "alice@example.com"
	inbox := f.box(t, u, "INBOX")
	act := func(box store.Mailbox, op string, uids ...string) {
		t.Helper()
		v := url.Values{"box": {itoa(box.ID)}, "op": {op}, "uid": uids}
		if op == "move" {
			v.Set("target", itoa(f.box(t, u, "Archive").ID))
		}
		resp, body := c.post("/act", v)
		expectStatus(t, resp, http.StatusSeeOther, body)
	}
	act(inbox, "flag", "1")
	act(inbox, "read", "1", "2")
	act(inbox, "unread", "2")
	m := f.metas(t, u, "INBOX")
	if m[0].Flags != store.FlagFlagged|store.FlagSeen || m[1].Flags != 0 {
		t.Fatalf("flags: %v %v", m[0].Flags, m[1].Flags)
	}
	act(inbox, "move", "3")
	if len(f.metas(t, u, "Archive")) != 1 {
		t.Fatal("move failed")
	}
	act(inbox, "junk", "2")
	j := f.metas(t, u, "Junk")
	if len(j) != 1 || !slices.Contains(j[0].Keywords, "$Junk") {
		t.Fatalf("junk: %+v", j)
	}
	act(f.box(t, u, "Junk"), "notjunk", itoa(int64(j[0].UID)))
	in := f.metas(t, u, "INBOX")
	if len(in) != 2 || !slices.Contains(in[1].Keywords, "$NotJunk") || slices.Contains(in[1].Keywords, "$Junk") {
		t.Fatalf("not junk: %+v", in)
	}
	act(inbox, "delete", "1")
	tr := f.metas(t, u, "Trash")
	if len(tr) != 1 || len(f.metas(t, u, "INBOX")) != 1 {
		t.Fatal("delete did not move to Trash")
	}
	act(f.box(t, u, "Trash"), "delete", itoa(int64(tr[0].UID)))
	if len(f.metas(t, u, "Trash")) != 0 {
		t.Fatal("delete in Trash did not expunge")
	}
	resp, _ := c.post("/act", url.Values{"box": {itoa(inbox.ID)}, "op": {"bogus"}, "uid": {"4"}})
	expectStatus(t, resp, http.StatusBadRequest, "")
}

func TestFolders(t *testing.T) {
	f := newFixture(t)
	c := f.client(t)
	c.login("alice@example.com")
	resp, body := c.post("/folders", url.Values{"op": {"create"}, "name": {"Projects/2024"}})
	expectStatus(t, resp, http.StatusSeeOther, body)
	b := f.box(t, "alice@example.com", "Projects/2024")
	if !b.Subscribed { // for IMAP clients that list subscribed folders
		t.Fatal("folder made in the webmail not subscribed")
	}
	resp, body = c.post("/folders", url.Values{"op": {"rename"}, "box": {itoa(b.ID)}, "name": {"Projects/Old"}})
	expectStatus(t, resp, http.StatusSeeOther, body)
	b = f.box(t, "alice@example.com", "Projects/Old")
	if !b.Subscribed {
		t.Fatal("renamed folder not subscribed")
	}
	resp, _ = c.post("/folders", url.Values{"op": {"create"}, "name": {"bad\r\nname"}})
	expectStatus(t, resp, http.StatusBadRequest, "")
	resp, _ = c.post("/folders", url.Values{"op": {"delete"}, "box": {itoa(f.box(t, "alice@example.com", "Sent").ID)}})
	expectStatus(t, resp, http.StatusBadRequest, "")
	resp, body = c.post("/folders", url.Values{"op": {"delete"}, "box": {itoa(b.ID)}})
	expectStatus(t, resp, http.StatusSeeOther, body)
	if _, err := f.st.Mailbox(context.Background(), f.ids["alice@example.com"], "Projects/Old"); err == nil {
		t.Fatal("folder not deleted")
	}
	if subs, err := f.st.Subscriptions(context.Background(), f.ids["alice@example.com"]); err != nil || slices.Contains(subs, "Projects/Old") {
		t.Fatalf("deleted folder still subscribed: %q %v", subs, err)
	}
}

func TestSearch(t *testing.T) {
	f := newFixture(t)
	f.deliver(t, "carol@example.net", []string{"alice@example.com"}, simpleMail)
	f.deliver(t, "dave@example.net", []string{"alice@example.com"}, "From: dave@example.net\nSubject: quarterly\nContent-Transfer-Encoding: quoted-printable\n\nthe zebra=\n crossing\n")
	c := f.client(t)
	c.login("alice@example.com")
	for q, want := range map[string]string{"zebra crossing": "quarterly", "CAROL": "Hello there", "hello": "Hello there"} {
		_, body := c.get("/search?q=" + url.QueryEscape(q))
		if !strings.Contains(body, want) || !strings.Contains(body, "1 found") {
			t.Errorf("search %q: want %q in result", q, want)
		}
	}
	_, body := c.get("/search?q=nothing-like-this")
	if !strings.Contains(body, "0 found") {
		t.Error("search for absent text found something")
	}
}

func TestSettings(t *testing.T) {
	f := newFixture(t)
	c := f.client(t)
	c.login("alice@example.com")
	resp, body := c.post("/settings/identity", url.Values{"id": {"0"}, "address": {"alice@example.com"},
		"name": {"Alice\r\nBcc: evil@example.net"}, "signature": {"Alice A."}})
	expectStatus(t, resp, http.StatusSeeOther, body)
	ids, err := f.st.Identities(context.Background(), f.ids["alice@example.com"])
	if err != nil || len(ids) != 1 || ids[0].Signature != "Alice A." {
		t.Fatalf("identity not kept: %v %+v", err, ids)
	}
	_, body = c.get("/compose")
	if !strings.Contains(body, "-- \nAlice A.") {
		t.Fatal("signature not in new message")
	}
	resp, body = c.post("/compose", url.Values{"to": {"bob@example.com"}, "subject": {"hi"}, "body": {"x"}, "action": {"send"}})
	expectStatus(t, resp, http.StatusSeeOther, body)
	raw := f.raw(t, "bob@example.com", "INBOX", 0)
	if !strings.Contains(raw, "From: \"Alice  Bcc: evil@example.net\" <alice@example.com>") && !strings.Contains(raw, "From: \"Alice Bcc: evil@example.net\"") {
		t.Fatalf("display name not used or not contained:\n%s", raw)
	}
	if hasHeader(raw, "Bcc") {
		t.Fatal("display name injected a header")
	}
	// Password change needs the old password.
	resp, _ = c.post("/settings/password", url.Values{"old": {"wrong"}, "new": {"a new secret pw"}, "confirm": {"a new secret pw"}})
	expectStatus(t, resp, http.StatusForbidden, "")
	resp, body = c.post("/settings/password", url.Values{"old": {testPassword}, "new": {"a new secret pw"}, "confirm": {"a new secret pw"}})
	expectStatus(t, resp, http.StatusSeeOther, body)
	if _, err := f.srv.authn.Authenticate(context.Background(), "alice@example.com", "a new secret pw", "127.0.0.1"); err != nil {
		t.Fatalf("new password not accepted: %v", err)
	}
}

func TestEventsStream(t *testing.T) {
	f := newFixture(t)
	c := f.client(t)
	c.login("alice@example.com")
	req, _ := http.NewRequest("GET", f.ts.URL+"/events", nil)
	req.Header.Set("Accept", "text/event-stream")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req = req.WithContext(ctx)
	c.http.Timeout = 0
	resp, err := c.http.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("content type %q", resp.Header.Get("Content-Type"))
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Scan() // retry line
	errc := make(chan error, 1)
	go func() {
		_, err := f.pipe.Deliver(context.Background(), delivery.Envelope{MailFrom: "carol@example.net", Recipients: []string{"alice@example.com"}},
			[]byte(strings.ReplaceAll(simpleMail, "\n", "\r\n")))
		errc <- err
	}()
	inbox := itoa(f.box(t, "alice@example.com", "INBOX").ID)
	for i := 0; i < 20 && sc.Scan(); i++ {
		if sc.Text() == "data: "+inbox {
			if err := <-errc; err != nil {
				t.Fatal(err)
			}
			return
		}
	}
	t.Fatalf("no change event for the inbox: %v", sc.Err())
}

// raw returns the i-th message of a mailbox as text.
func (f *fixture) raw(t testing.TB, user, box string, i int) string {
	t.Helper()
	ms := f.metas(t, user, box)
	if len(ms) <= i {
		t.Fatalf("%s %s has %d messages, want > %d", user, box, len(ms), i)
	}
	b, err := f.st.ReadBlob(context.Background(), ms[i].BlobID)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// hasHeader reports whether the message's header has a field name.
func hasHeader(raw, name string) bool {
	head, _, _ := strings.Cut(raw, "\r\n\r\n")
	for _, line := range strings.Split(head, "\r\n") {
		if k, _, ok := strings.Cut(line, ":"); ok && strings.EqualFold(k, name) {
			return true
		}
	}
	return false
}

// TestSearchPaged searches through the store's index: subject, sender and
// body text (also inside a base64 part), one folder or all, paged newest
// first with working pager links.
func TestSearchPaged(t *testing.T) {
	f := newFixture(t)
	const n = 120
	for i := range n {
		body := fmt.Sprintf("ordinary words number %d\n", i)
		subj := fmt.Sprintf("note %03d", i)
		if i%2 == 0 {
			body = fmt.Sprintf("the walrus said %d\n", i) // matches "Walrus" in the body
		}
		f.deliver(t, "carol@example.net", []string{"alice@example.com"},
			"From: Carol <carol@example.net>\nTo: alice@example.com\nSubject: "+subj+"\n\n"+body)
	}
	f.deliver(t, "zed@example.org", []string{"alice@example.com"},
		"From: Zed Quux <zed@example.org>\nSubject: from zed\n\nnothing\n")
	f.deliver(t, "dave@example.net", []string{"alice@example.com"},
		"From: dave@example.net\nSubject: encoded\nMIME-Version: 1.0\nContent-Type: text/plain; charset=utf-8\nContent-Transfer-Encoding: base64\n\n"+
			base64.StdEncoding.EncodeToString([]byte("a hidden Ünïcode pangolin here\n"))+"\n")
	c := f.client(t)
	c.login("alice@example.com")
	inbox := f.box(t, "alice@example.com", "INBOX")

	subjects := regexp.MustCompile(`>note (\d{3})</a>`)
	seen := map[string]bool{}
	var order []string
	next := "/search?q=WALRUS"
	for pages := 0; next != ""; pages++ {
		if pages > 3 {
			t.Fatal("too many pages")
		}
		resp, body := c.get(next)
		expectStatus(t, resp, http.StatusOK, body)
		if !strings.Contains(body, "60 found") {
			t.Fatalf("page %d: want 60 found:\n%.600s", pages, body)
		}
		for _, m := range subjects.FindAllStringSubmatch(body, -1) {
			if seen[m[1]] {
				t.Fatalf("note %s on two pages", m[1])
			}
			seen[m[1]] = true
			order = append(order, m[1])
		}
		next = ""
		if m := regexp.MustCompile(`href="([^"]+)" rel="next"`).FindStringSubmatch(body); m != nil {
			next = html.UnescapeString(m[1])
		}
	}
	if len(seen) != 60 || order[0] != "118" || order[59] != "000" {
		t.Fatalf("got %d results, first %v last %v", len(seen), order[0], order[len(order)-1])
	}
	for k := range seen {
		if v, _ := strconv.Atoi(k); v%2 != 0 {
			t.Fatalf("note %s does not contain walrus", k)
		}
	}
	for q, want := range map[string]string{"quux": "from zed", "PANGOLIN": "encoded", "ünïcode": "encoded", "note 007": "note 007"} {
		_, body := c.get("/search?q=" + url.QueryEscape(q) + "&box=" + itoa(inbox.ID))
		if !strings.Contains(body, ">"+want+"</a>") || !strings.Contains(body, "1 found") {
			t.Errorf("search %q: want only %q:\n%.800s", q, want, body)
		}
	}
	// Other folders are searched too, and a folder of its own is honoured.
	act := url.Values{"box": {itoa(inbox.ID)}, "op": {"move"}, "target": {itoa(f.box(t, "alice@example.com", "Archive").ID)}, "uid": {"121"}}
	resp, body := c.post("/act", act)
	expectStatus(t, resp, http.StatusSeeOther, body)
	if _, body := c.get("/search?q=quux"); !strings.Contains(body, ">from zed</a>") {
		t.Error("search of all folders missed the Archive")
	}
	if _, body := c.get("/search?q=quux&box=" + itoa(inbox.ID)); !strings.Contains(body, "0 found") {
		t.Error("search of INBOX found a message in the Archive")
	}
}

// TestJunkTrainsFilter: "Junk" and "Not junk" in the webmail, and moves
// into and out of the Junk folder, train the account's spam model through
// the same learner IMAP uses; deleting from Junk teaches nothing.
func TestJunkTrainsFilter(t *testing.T) {
	f := newFixture(t)
	filter, err := spam.New(spam.Config{Store: f.st, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	learner := spam.NewJunkLearner(filter, f.st.ReadBlob, quiet())
	t.Cleanup(func() { learner.Close() })
	f.srv.cfg.Junk = learner
	const u = "alice@example.com"
	acct := f.ids[u]
	for i := range 3 {
		f.deliver(t, "carol@example.net", []string{u}, fmt.Sprintf("From: carol@example.net\nSubject: cheap pills %d\n\nbuy cheap pills now %d\n", i, i))
	}
	c := f.client(t)
	c.login(u)
	inbox, junk := f.box(t, u, "INBOX"), f.box(t, u, "Junk")
	blobs := map[uint32]int64{}
	for _, m := range f.metas(t, u, "INBOX") {
		blobs[m.UID] = m.BlobID
	}
	act := func(box store.Mailbox, vals url.Values) {
		t.Helper()
		vals.Set("box", itoa(box.ID))
		resp, body := c.post("/act", vals)
		expectStatus(t, resp, http.StatusSeeOther, body)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := learner.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	expect := func(uid uint32, wantSpam, wantTrained bool, nSpam, nHam int) {
		t.Helper()
		isSpam, ok, err := learner.Trained(acct, blobs[uid])
		if err != nil || ok != wantTrained || (ok && isSpam != wantSpam) {
			t.Fatalf("message %d: trained=%v spam=%v err=%v, want trained=%v spam=%v", uid, ok, isSpam, err, wantTrained, wantSpam)
		}
		m, err := filter.Model(acct)
		if err != nil {
			t.Fatal(err)
		}
		if s, h := m.Counts(); s != nSpam || h != nHam {
			t.Fatalf("model of the account: %d spam %d ham, want %d %d", s, h, nSpam, nHam)
		}
	}
	expect(1, false, false, 0, 0)
	act(inbox, url.Values{"op": {"junk"}, "uid": {"1", "2"}})
	expect(1, true, true, 2, 0)
	expect(2, true, true, 2, 0)
	// Message 3 goes to Junk by "move to folder": spam too.
	act(inbox, url.Values{"op": {"move"}, "target": {itoa(junk.ID)}, "uid": {"3"}})
	expect(3, true, true, 3, 0)
	// Not junk: message 1 (now in Junk) becomes ham.
	in := f.metas(t, u, "Junk")
	if len(in) != 3 {
		t.Fatalf("Junk has %d messages", len(in))
	}
	act(junk, url.Values{"op": {"notjunk"}, "uid": {itoa(int64(in[0].UID))}})
	expect(1, false, true, 2, 1)
	// Deleting junk says nothing about it.
	act(junk, url.Values{"op": {"delete"}, "uid": {itoa(int64(in[1].UID))}})
	expect(2, true, true, 2, 1)
	// Without a trainer, marking still files the message.
	f.srv.cfg.Junk = nil
	act(junk, url.Values{"op": {"notjunk"}, "uid": {itoa(int64(in[2].UID))}})
	expect(3, true, true, 2, 1)
}

// TestReadCacheFresh: the read page's cached index entry never outlives a
// change made elsewhere (IMAP, another session): flags show as they are now
// and an expunged message is gone.
func TestReadCacheFresh(t *testing.T) {
	f := newFixture(t)
	f.deliver(t, "carol@example.net", []string{"alice@example.com"}, simpleMail)
	c := f.client(t)
	c.login("alice@example.com")
	inbox := f.box(t, "alice@example.com", "INBOX")
	ctx := context.Background()
	one := store.UIDSet{{Start: 1, Stop: 1}}
	// The list's rendered rows, too: a change elsewhere shows at once.
	list := "/box/" + itoa(inbox.ID)
	for i := range 2 {
		if _, body := c.get(list); !strings.Contains(body, `<tr class="msg unread"`) {
			t.Fatalf("list %d: message not unread:\n%s", i, body)
		}
	}
	if _, err := f.st.StoreFlags(ctx, inbox.ID, one, store.FlagsAdd, store.FlagSeen, nil); err != nil {
		t.Fatal(err)
	}
	if _, body := c.get(list); strings.Contains(body, `<tr class="msg unread"`) || !strings.Contains(body, `<tr class="msg"`) {
		t.Fatal("list shows a message read elsewhere as unread")
	}
	f.deliver(t, "carol@example.net", []string{"alice@example.com"}, strings.Replace(simpleMail, "Hello there", "Second hello", 1))
	if _, body := c.get(list); !strings.Contains(body, "Second hello") {
		t.Fatal("list lacks a new message")
	}
	// Three states of the mailbox were listed: the cache keeps the page's
	// latest rendering only, not one per state.
	if n := f.srv.rows.ll.Len(); n != 1 {
		t.Fatalf("list cache holds %d renderings of one page, want 1", n)
	}
	path := "/msg/" + itoa(inbox.ID) + "/1"
	for i := range 2 {
		_, body := c.get(path)
		if !strings.Contains(body, `value="flag">Flag`) || !strings.Contains(body, `id="body-text">Hi Alice, see <a href="https://example.org/page"`) {
			t.Fatalf("read %d: not an unflagged message page:\n%.600s", i, body)
		}
	}
	if _, err := f.st.StoreFlags(ctx, inbox.ID, one, store.FlagsAdd, store.FlagFlagged|store.FlagDeleted, nil); err != nil {
		t.Fatal(err)
	}
	if _, body := c.get(path); !strings.Contains(body, `value="unflag">Unflag`) {
		t.Fatalf("flag set elsewhere not shown:\n%.600s", body)
	}
	if _, err := f.st.Expunge(ctx, inbox.ID, one); err != nil {
		t.Fatal(err)
	}
	resp, body := c.get(path)
	expectStatus(t, resp, http.StatusNotFound, body)
}
