package webmail

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"pimail/internal/message"
	"pimail/internal/store"
)

// subjects returns the subjects of the list's rows, in order.
func (b *browser) subjects() []string {
	b.t.Helper()
	var out []string
	b.eval("subjects", `Array.from(document.querySelectorAll("#msgs tr.msg .subj a")).map(a => a.textContent)`, &out)
	return out
}

// TestBrowserThreadsAndSort: the toolbar's order applies at once, threads
// put replies under what they answer, and the choice is kept across
// pages and visits.
func TestBrowserThreadsAndSort(t *testing.T) {
	f := newFixture(t)
	seedMailbox(t, f)
	b := newBrowser(t, f)
	b.login("alice@example.com")
	change := func(id, value string) chromedp.Action {
		return chromedp.SetValue("#"+id, value, chromedp.ByQuery) // which fires change
	}
	// By subject, Z first; then A first (base subjects, RFC 5256 §2.1:
	// "Re: Plans…" sorts as "Plans…").
	b.reloaded("sort by subject", change("sort", "subject"))
	if s := b.subjects(); len(s) < 2 || s[0] != "Weekly status" {
		t.Errorf("by subject, Z first: %q", s)
	}
	b.reloaded("A first", change("order", "asc"))
	if s := b.subjects(); len(s) < 2 || s[0] != "Build times" {
		t.Errorf("by subject, A first: %q", s)
	}
	// Threads, newest conversation first.
	b.reloaded("received", change("sort", "arrival"))
	b.reloaded("newest", change("order", "desc"))
	b.reloaded("threads", chromedp.Click("#threads", chromedp.ByQuery))
	var rows []string
	b.eval("thread rows", `Array.from(document.querySelectorAll("#msgs tr.msg")).slice(0, 6).map(r => r.className + "|" + r.querySelector(".subj a").textContent)`, &rows)
	// The conversation is placed by its newest message (Nov 3, 12:00),
	// which is a reply to its first; the second reply answers the first
	// reply.
	want := []string{"msg|This week in computing", "msg|Plans for the analytical engine", "msg t1|Re: Plans for the analytical engine",
		"msg t2|Re: Plans for the analytical engine", "msg t1|Re: Plans for the analytical engine", "msg|Build times"}
	for i := range want {
		got := ""
		if i < len(rows) {
			got = strings.NewReplacer(" unread", "", " current", "", " open", "").Replace(rows[i])
		}
		if got != want[i] {
			t.Errorf("thread row %d: %q, want %q (all: %q)", i, got, want[i], rows)
			break
		}
	}
	b.fits("threaded list")
	b.shot("threads-desktop", "#listcol .listhead")
	// Kept: another visit shows the same order.
	inbox := itoa(f.box(t, "alice@example.com", "INBOX").ID)
	b.open("/box/"+inbox+"?page=0", "#msgs")
	var checked bool
	b.eval("threads kept", `document.getElementById("threads").checked`, &checked)
	if !checked {
		t.Error("the threaded view was not kept")
	}
	b.silent()
}

// TestBrowserSelectionCopyDrag: select every message of a folder over
// its pages and delete them; copy one to another folder; drag one onto a
// folder (with Ctrl: copy).
func TestBrowserSelectionCopyDrag(t *testing.T) {
	f := newFixture(t)
	f.srv.cfg.PageSize = 10
	seedMailbox(t, f)
	b := newBrowser(t, f)
	b.login("alice@example.com")
	inbox := f.box(t, "alice@example.com", "INBOX")
	archive := f.box(t, "alice@example.com", "Archive")
	total := len(f.metas(t, "alice@example.com", "INBOX"))

	// Copy the first message to Archive with the toolbar.
	b.reloaded("copy", chromedp.Click(`#msgs tr.msg input[name=uid]`, chromedp.ByQuery),
		chromedp.SetValue(`#list-toolbar select[name=target]`, itoa(archive.ID), chromedp.ByQuery),
		chromedp.Click(`#list-toolbar button[value=copy]`, chromedp.ByQuery))
	if n := len(f.metas(t, "alice@example.com", "Archive")); n != 1 || len(f.metas(t, "alice@example.com", "INBOX")) != total {
		t.Fatalf("after copy: %d in Archive", n)
	}
	// Drag the second row onto Archive (move), the third with Ctrl (copy).
	drag := func(row int, ctrl bool) {
		t.Helper()
		b.eval("drag", `(function(){var rows=document.querySelectorAll("#msgs tr.msg"), r=rows[`+itoa(int64(row))+`];
			var a=document.querySelector('#folders a[data-box="`+itoa(archive.ID)+`"]'), dt=new DataTransfer();
			r.dispatchEvent(new DragEvent("dragstart",{bubbles:true,dataTransfer:dt}));
			a.dispatchEvent(new DragEvent("dragover",{bubbles:true,cancelable:true,dataTransfer:dt,ctrlKey:`+map[bool]string{true: "true", false: "false"}[ctrl]+`}));
			a.dispatchEvent(new DragEvent("drop",{bubbles:true,cancelable:true,dataTransfer:dt,ctrlKey:`+map[bool]string{true: "true", false: "false"}[ctrl]+`}));
			r.dispatchEvent(new DragEvent("dragend",{bubbles:true,dataTransfer:dt}));return true})()`, nil)
		b.run("settle", chromedp.Sleep(700*time.Millisecond))
	}
	drag(1, false)
	if n, m := len(f.metas(t, "alice@example.com", "Archive")), len(f.metas(t, "alice@example.com", "INBOX")); n != 2 || m != total-1 {
		t.Fatalf("after drag: Archive %d, INBOX %d (was %d)", n, m, total)
	}
	drag(2, true)
	if n, m := len(f.metas(t, "alice@example.com", "Archive")), len(f.metas(t, "alice@example.com", "INBOX")); n != 3 || m != total-1 {
		t.Fatalf("after ctrl-drag: Archive %d, INBOX %d", n, m)
	}
	// Every message of the folder, over all its pages.
	b.open("/box/"+itoa(inbox.ID), "#msgs")
	var shown bool
	b.run("select page", chromedp.Click("#select-page", chromedp.ByQuery),
		chromedp.Evaluate(`getComputedStyle(document.getElementById("allpages")).display !== "none"`, &shown))
	if !shown {
		t.Fatal("selecting the page does not offer the whole folder")
	}
	b.shot("select-all-desktop", "#allpages")
	b.reloaded("select all and delete", chromedp.Click("#all-pages", chromedp.ByQuery), chromedp.Click("#delete-btn", chromedp.ByQuery))
	if m := len(f.metas(t, "alice@example.com", "INBOX")); m != 0 {
		t.Fatalf("%d messages left after deleting all", m)
	}
	if n := len(f.metas(t, "alice@example.com", "Trash")); n != total-1 {
		t.Fatalf("Trash has %d, want %d", n, total-1)
	}
	b.silent()
}

// TestBrowserContacts: a sender becomes a contact from the reading pane,
// gets a group in the card's form, and the compose form completes it and
// its group.
func TestBrowserContacts(t *testing.T) {
	f := newFixture(t)
	seedMailbox(t, f)
	b := newBrowser(t, f)
	b.login("alice@example.com")
	b.run("open", chromedp.Click(`//tr[contains(@class,"msg")]//a[contains(., "Build times")]`, chromedp.BySearch),
		chromedp.WaitVisible("#pane #add-contact", chromedp.ByQuery),
		chromedp.Click("#pane #add-contact", chromedp.ByQuery), chromedp.WaitVisible("#contact-form", chromedp.ByQuery))
	var name string
	b.run("card", chromedp.Value("#c-name", &name, chromedp.ByQuery))
	if name != "Linus" {
		t.Fatalf("card from the message: name %q", name)
	}
	b.run("edit", chromedp.SendKeys("#c-groups", "Kernel team", chromedp.ByQuery), chromedp.SendKeys("#c-phones", "+1 555 0199", chromedp.ByQuery),
		chromedp.Click("#save-contact", chromedp.ByQuery), chromedp.WaitVisible(`//p[@role="status"][contains(., "Contact saved.")]`, chromedp.BySearch))
	cs, _ := f.st.Contacts(context.Background(), f.ids["alice@example.com"])
	if len(cs) != 1 || len(cs[0].Groups) != 1 || cs[0].Groups[0] != "Kernel team" {
		t.Fatalf("stored: %+v", cs)
	}
	b.open("/contacts", "#contacts")
	b.fits("contacts")
	b.shot("contacts-desktop", "#contacts")
	// Completion in the compose form: the card, then its group.
	b.open("/compose", "#to")
	var to string
	b.run("complete", chromedp.SendKeys("#to", "linu", chromedp.ByQuery), chromedp.WaitVisible(".suggest li", chromedp.ByQuery),
		chromedp.Click(".suggest li", chromedp.ByQuery), chromedp.Value("#to", &to, chromedp.ByQuery))
	if to != "Linus <linus@example.com>, " {
		t.Fatalf("completed To: %q", to)
	}
	var label string
	b.run("group", chromedp.SendKeys("#cc", "kernel", chromedp.ByQuery), chromedp.WaitVisible(".suggest li", chromedp.ByQuery),
		chromedp.Text(".suggest li", &label, chromedp.ByQuery))
	if label != "Group: Kernel team (1)" {
		t.Fatalf("group suggestion: %q", label)
	}
	b.silent()
}

// TestBrowserIdentitiesAndCompose: a reply starts from the alias the
// message came to, with its signature; choosing another identity swaps
// the signature; the Send button is in sight at 1280×800; a formatted
// message goes out with bold text in its HTML part and a text part.
func TestBrowserIdentitiesAndCompose(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	if err := f.st.AddAlias(ctx, "sales@example.com", []string{"alice@example.com"}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.st.PutIdentity(ctx, f.ids["alice@example.com"], store.Identity{Address: "sales@example.com", Name: "Alice at Sales", Signature: "Sales desk"}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.st.PutIdentity(ctx, f.ids["alice@example.com"], store.Identity{Address: "alice@example.com", Name: "Alice", Signature: "Alice A."}); err != nil {
		t.Fatal(err)
	}
	f.deliver(t, "carol@example.net", []string{"alice@example.com"}, "From: Carol <carol@example.net>\nTo: sales@example.com\nSubject: a quote\nMessage-ID: <q@example.net>\n\nHow much?\n")
	b := newBrowser(t, f)
	b.login("alice@example.com")
	inbox := itoa(f.box(t, "alice@example.com", "INBOX").ID)
	b.open("/compose?mode=reply&box="+inbox+"&uid=1", "#compose-form")
	var from, body string
	var sendBottom float64
	b.run("reply form", chromedp.Value("#from", &from, chromedp.ByQuery), chromedp.Value("#body", &body, chromedp.ByQuery),
		chromedp.Evaluate(`document.getElementById("send").getBoundingClientRect().bottom`, &sendBottom))
	if from != "sales@example.com" || !strings.Contains(body, "-- \nSales desk") {
		t.Fatalf("reply from %q with body %q", from, body)
	}
	if sendBottom > desktopH {
		t.Errorf("Send is below the fold: bottom at %v px", sendBottom)
	}
	b.fits("compose")
	b.shot("compose-desktop", "#compose-form")
	b.run("switch identity", chromedp.SetValue("#from", "alice@example.com", chromedp.ByQuery),
		chromedp.Evaluate(`document.getElementById("from").dispatchEvent(new Event("change"))`, nil), chromedp.Value("#body", &body, chromedp.ByQuery))
	if !strings.Contains(body, "-- \nAlice A.") || strings.Contains(body, "Sales desk") {
		t.Fatalf("signature not swapped: %q", body)
	}
	// Formatted.
	b.open("/compose", "#compose-form")
	b.run("formatted", chromedp.Click("#format-toggle", chromedp.ByQuery), chromedp.WaitVisible("#editor", chromedp.ByQuery),
		chromedp.SendKeys("#to", "bob@example.com", chromedp.ByQuery), chromedp.SendKeys("#subject", "formatted", chromedp.ByQuery),
		chromedp.Click("#editor", chromedp.ByQuery),
		chromedp.Evaluate(`getSelection().collapse(document.getElementById("editor").firstChild, 0)`, nil), chromedp.KeyEvent("Hello "),
		chromedp.Click(`#editbar button[data-cmd=bold]`, chromedp.ByQuery), chromedp.KeyEvent("world"),
		chromedp.Click(`#editbar button[data-cmd=bold]`, chromedp.ByQuery), chromedp.KeyEvent("!"))
	b.shot("compose-html-desktop", "#editor")
	b.run("send", chromedp.Click("#send", chromedp.ByQuery), chromedp.WaitVisible(`//p[@role="status"][contains(., "Message sent.")]`, chromedp.BySearch))
	raw := f.raw(t, "bob@example.com", "INBOX", 0)
	p := message.Parse([]byte(raw))
	if p.Body.Subtype != "alternative" || len(p.Body.Parts) != 2 {
		t.Fatalf("not multipart/alternative:\n%s", raw)
	}
	text, _ := message.DecodeText([]byte(raw), p.Body.Parts[0])
	html, _ := message.DecodeText([]byte(raw), p.Body.Parts[1])
	if !strings.Contains(text, "Hello world!") || !strings.Contains(html, "<b>world</b>") {
		t.Fatalf("text %q html %q", text, html)
	}
	b.silent()
}

// TestBrowserHeadersAndSource: all headers and the source show as text.
func TestBrowserHeadersAndSource(t *testing.T) {
	f := newFixture(t)
	f.deliver(t, "x@example.net", []string{"alice@example.com"}, "From: x@example.net\nSubject: with headers\nX-Mailer: <b>not bold</b>\n"+
		"Received: from a by b; Mon, 2 Jan 2006 15:04:05 +0000\n\nthe body\n")
	b := newBrowser(t, f)
	b.login("alice@example.com")
	inbox := itoa(f.box(t, "alice@example.com", "INBOX").ID)
	b.open("/msg/"+inbox+"/1", "#headers-link")
	var hdr, src string
	b.run("headers", chromedp.Click("#headers-link", chromedp.ByQuery), chromedp.WaitVisible("#all-headers", chromedp.ByQuery),
		chromedp.Text("#all-headers", &hdr, chromedp.ByQuery))
	if !strings.Contains(hdr, "X-Mailer: <b>not bold</b>") || !strings.Contains(hdr, "Received: from a by b") {
		t.Fatalf("all headers: %q", hdr)
	}
	b.fits("all headers")
	b.shot("headers-desktop", "#all-headers")
	b.run("source", chromedp.Click("#source-link", chromedp.ByQuery), chromedp.WaitVisible("#source", chromedp.ByQuery),
		chromedp.Text("#source", &src, chromedp.ByQuery))
	var bold int
	b.eval("no markup", `document.querySelectorAll("#source b").length`, &bold)
	if !strings.Contains(src, "X-Mailer: <b>not bold</b>") || !strings.Contains(src, "the body") || bold != 0 {
		t.Fatalf("source: %q (bold elements %d)", src, bold)
	}
	b.fits("source")
	b.silent()
}

// TestBrowserPhone: at 390×844 the list shows two lines a message with
// its checkbox, so selection and its actions work; a message opens over
// the list with a way back; nothing is wider than the screen.
func TestBrowserPhone(t *testing.T) {
	f := newFixture(t)
	seedMailbox(t, f)
	b := newBrowser(t, f)
	b.login("alice@example.com")
	inbox := itoa(f.box(t, "alice@example.com", "INBOX").ID)
	b.run("phone", b.viewport(phoneW, phoneH))
	b.open("/box/"+inbox, "#msgs")
	b.fits("phone list")
	var subjW, boxW float64
	b.eval("subject width", `document.querySelector("#msgs tr.msg .subj").getBoundingClientRect().width`, &subjW)
	b.eval("checkbox", `document.querySelector("#msgs tr.msg input[name=uid]").getBoundingClientRect().width`, &boxW)
	if subjW < 250 || boxW == 0 {
		t.Fatalf("phone rows: subject %v px wide, checkbox %v px", subjW, boxW)
	}
	b.shot("inbox-phone", "#msgs")
	total := len(f.metas(t, "alice@example.com", "INBOX"))
	b.reloaded("select and delete", chromedp.Click(`#msgs tr.msg input[name=uid]`, chromedp.ByQuery), chromedp.Click("#delete-btn", chromedp.ByQuery))
	if n := len(f.metas(t, "alice@example.com", "INBOX")); n != total-1 {
		t.Fatalf("phone delete: %d left of %d", n, total)
	}
	b.run("open", chromedp.Click(`//tr[contains(@class,"msg")]//a[contains(., "Build times")]`, chromedp.BySearch),
		chromedp.WaitVisible("#pane #body-text", chromedp.ByQuery))
	var listShown bool
	var text string
	b.run("text", chromedp.Text("#pane #body-text", &text, chromedp.ByQuery))
	if !strings.Contains(text, "The numbers are attached.") {
		t.Errorf("phone: the message's text is %q", text)
	}
	b.eval("list hidden", `getComputedStyle(document.getElementById("listcol")).display !== "none"`, &listShown)
	if listShown {
		t.Error("phone: the list stays beside the open message")
	}
	b.fits("phone message")
	b.shot("message-phone", "#pane #body-text")
	b.run("back", chromedp.Click("#pane-back", chromedp.ByQuery), chromedp.WaitVisible("#msgs", chromedp.ByQuery))
	b.open("/compose", "#compose-form")
	b.fits("phone compose")
	b.shot("compose-phone", "#compose-form")
	b.open("/contacts", "#new-contact")
	b.fits("phone contacts")
	b.open("/settings", "#save-settings")
	b.fits("phone settings")
	b.shot("settings-phone", "#save-settings")
	b.silent()
}

// TestBrowserAlsoSeen: the small faults issue 27 listed.
func TestBrowserAlsoSeen(t *testing.T) {
	f := newFixture(t)
	seedMailbox(t, f)
	b := newBrowser(t, f)
	b.login("alice@example.com")
	// The attachment mark is an inline SVG with a size, not an emoji.
	var w float64
	b.eval("icon", `document.querySelector("#msgs svg.att").getBoundingClientRect().width`, &w)
	if w < 8 {
		t.Errorf("attachment icon %v px wide", w)
	}
	// Dates of older mail are whole.
	var cut []string
	b.eval("dates", `Array.from(document.querySelectorAll("#msgs td.date")).filter(td => td.scrollWidth > td.clientWidth).map(td => td.textContent)`, &cut)
	if len(cut) > 0 {
		t.Errorf("dates cut: %q", cut)
	}
	inbox := itoa(f.box(t, "alice@example.com", "INBOX").ID)
	b.run("off", chromedp.Navigate(b.base+"/settings"), chromedp.WaitVisible("#pane-off", chromedp.ByQuery),
		chromedp.Click("#pane-off", chromedp.ByQuery), chromedp.Click("#save-settings", chromedp.ByQuery), chromedp.WaitVisible(`//p[@role="status"]`, chromedp.BySearch))
	b.open("/box/"+inbox, "#msgs")
	b.eval("dates, wide list", `Array.from(document.querySelectorAll("#msgs td.date")).filter(td => td.scrollWidth > td.clientWidth).map(td => td.textContent)`, &cut)
	if len(cut) > 0 {
		t.Errorf("dates cut in the wide list: %q", cut)
	}
	// Every page fits the window: no scroll bar on the page itself.
	for _, p := range []struct{ path, sel string }{{"/box/" + inbox, "#msgs"}, {"/settings", "#save-settings"}, {"/folders", "#new-folder"},
		{"/contacts", "#new-contact"}, {"/compose", "#send"}, {"/msg/" + inbox + "/1", "#message"}} {
		b.open(p.path, p.sel)
		b.fits(p.path)
	}
	// The long attachment name wraps instead of widening the page.
	ms := f.metas(t, "alice@example.com", "INBOX")
	for _, m := range ms {
		if m.Parsed.Subject == "Build times" {
			b.open("/msg/"+inbox+"/"+itoa(int64(m.UID)), "#attachments")
		}
	}
	b.fits("message with a long attachment name")
	// The search page keeps its query.
	var q string
	b.run("search", chromedp.SendKeys("#q", "analytical\r", chromedp.ByQuery), chromedp.WaitVisible("#search-meta", chromedp.ByQuery),
		chromedp.Value("#q", &q, chromedp.ByQuery))
	if q != "analytical" {
		t.Errorf("the search box holds %q after the search", q)
	}
	b.silent()
}

// TestBrowserSessions: a second browser shows in the list; logged out
// from the first, it lands on the login page; "log out everywhere" ends
// both.
func TestBrowserSessions(t *testing.T) {
	f := newFixture(t)
	b := newBrowser(t, f)
	b.login("alice@example.com")
	other := newBrowser(t, f)
	other.login("alice@example.com")
	b.open("/settings", "#session-list")
	var n int
	b.eval("sessions", `document.querySelectorAll("#session-list tbody tr").length`, &n)
	if n != 2 {
		t.Fatalf("%d sessions listed", n)
	}
	b.shot("settings-desktop", "#session-list")
	b.run("log the other out", chromedp.Click(`#session-list tbody tr:not(.current) button`, chromedp.ByQuery),
		chromedp.WaitVisible(`//p[@role="status"][contains(., "logged out")]`, chromedp.BySearch))
	other.open("/settings", "#login-form")
	other.login("alice@example.com")
	b.open("/settings", "#logout-everywhere")
	b.run("everywhere", chromedp.Click("#logout-everywhere", chromedp.ByQuery), chromedp.WaitVisible("#login-form", chromedp.ByQuery))
	other.open("/settings", "#login-form")
}
