package webmail

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"pimail/internal/message"
)

func parseMsg(raw string) *message.Parsed { return message.Parse([]byte(raw)) }

// seedMailbox fills alice's inbox with a small realistic mailbox: a
// conversation of four, newsletters in HTML, older mail with dates of
// past years, attachments (one with a very long name).
func seedMailbox(t *testing.T, f *fixture) {
	t.Helper()
	people := []string{"Ada Lovelace <ada@example.net>", "Grace Hopper <grace@example.org>", "Linus <linus@example.com>",
		"Margaret Hamilton <mh@example.net>", "Dennis Ritchie <dmr@example.org>", "Barbara Liskov <liskov@example.net>"}
	subjects := []string{"Quarterly report", "Lunch on Friday?", "The build is green again", "Conference travel",
		"Invoice 2025-114", "Photos from the trip", "New office keys", "Review: storage layer", "Weekly status", "Team offsite agenda"}
	for i := range 24 {
		d := time.Date(2023+i/10, time.Month(1+i%12), 3+i, 9+i%8, 15, 0, 0, time.UTC)
		f.deliver(t, "x@example.net", []string{"alice@example.com"}, fmt.Sprintf(
			"From: %s\nTo: alice@example.com\nSubject: %s\nDate: %s\nMessage-ID: <seed%d@example.net>\n\nHello Alice,\n\nmessage %d of the seed.\n",
			people[i%len(people)], subjects[i%len(subjects)], d.Format(time.RFC1123Z), i, i))
	}
	f.deliver(t, "x@example.net", []string{"alice@example.com"}, "From: Ada Lovelace <ada@example.net>\nTo: alice@example.com\n"+
		"Subject: Plans for the analytical engine\nMessage-ID: <t1@example.net>\nDate: Mon, 2 Nov 2026 09:00:00 +0000\n\nShall we meet on Tuesday?\n")
	f.deliver(t, "x@example.net", []string{"alice@example.com"}, "From: Grace Hopper <grace@example.org>\nTo: alice@example.com\n"+
		"Subject: Re: Plans for the analytical engine\nMessage-ID: <t2@example.net>\nIn-Reply-To: <t1@example.net>\nReferences: <t1@example.net>\n"+
		"Date: Mon, 2 Nov 2026 10:30:00 +0000\n\n> Shall we meet on Tuesday?\nTuesday works. I'll bring the punch cards.\n")
	f.deliver(t, "x@example.net", []string{"alice@example.com"}, "From: Ada Lovelace <ada@example.net>\nTo: alice@example.com\n"+
		"Subject: Re: Plans for the analytical engine\nMessage-ID: <t3@example.net>\nIn-Reply-To: <t2@example.net>\nReferences: <t1@example.net> <t2@example.net>\n"+
		"Date: Tue, 3 Nov 2026 08:10:00 +0000\n\nPerfect, see you then.\n")
	f.deliver(t, "x@example.net", []string{"alice@example.com"}, "From: Linus <linus@example.com>\nTo: alice@example.com\n"+
		"Subject: Build times\nMessage-ID: <b1@example.net>\nDate: Tue, 3 Nov 2026 11:00:00 +0000\n"+
		"MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=MM\n\n--MM\nContent-Type: text/plain\n\nThe numbers are attached.\n"+
		"--MM\nContent-Type: application/pdf\nContent-Disposition: attachment; filename=\""+strings.Repeat("build-times-of-every-package-", 8)+"final.pdf\"\n"+
		"Content-Transfer-Encoding: base64\n\nJVBERi0xLjQK\n--MM--\n")
	f.deliver(t, "x@example.net", []string{"alice@example.com"}, "From: Grace Hopper <grace@example.org>\nTo: alice@example.com\n"+
		"Subject: Re: Plans for the analytical engine\nMessage-ID: <t4@example.net>\nIn-Reply-To: <t1@example.net>\nReferences: <t1@example.net>\n"+
		"Date: Tue, 3 Nov 2026 12:00:00 +0000\n\nAlso: I found the moth.\n")
	var para strings.Builder
	for i := range 30 {
		fmt.Fprintf(&para, "<p>Paragraph %d of the newsletter, with <b>bold</b> words and <a href=\"https://example.org/%d\">a link</a>.</p>\n", i, i)
	}
	f.deliver(t, "x@example.net", []string{"alice@example.com"}, "From: The Newsletter <news@example.org>\nTo: alice@example.com\n"+
		"Subject: This week in computing\nMessage-ID: <n1@example.net>\nDate: Wed, 4 Nov 2026 07:00:00 +0000\nContent-Type: text/html\n\n"+
		"<h1>This week</h1>"+para.String())
}

// frameFills checks that the body frame reaches the bottom of the
// scrolling box it is in (the pane or the page), which does not scroll.
func (b *browser) frameFills(what, box string) {
	b.t.Helper()
	var r []float64
	b.eval(what+": frame", `(function(){var f=document.getElementById("body-frame").getBoundingClientRect(),
		c=document.getElementById("`+box+`"); var cr=c.getBoundingClientRect();
		return [f.height, cr.bottom-f.bottom, c.scrollHeight-c.clientHeight];})()`, &r)
	if r[0] < 300 || r[1] < 0 || r[1] > 60 || r[2] > 1 {
		b.t.Errorf("%s: frame %v px tall, %v px above the bottom of #%s, which overflows by %v px", what, r[0], r[1], box, r[2])
	}
}

// TestBrowserReadingPane: messages open beside the list (right), under it
// (below) or on their own page (off), by click and by the keyboard; the
// body frame fills the space the headers leave, and no page is taller or
// wider than the window.
func TestBrowserReadingPane(t *testing.T) {
	f := newFixture(t)
	seedMailbox(t, f)
	b := newBrowser(t, f)
	b.login("alice@example.com")
	inbox := itoa(f.box(t, "alice@example.com", "INBOX").ID)
	b.fits("inbox")

	// Right (the default): a click opens the message in the pane, and
	// the address bar names the list with the message.
	b.run("click a row", chromedp.Click(`//tr[contains(@class,"msg")]//a[contains(., "Build times")]`, chromedp.BySearch),
		chromedp.WaitVisible("#pane #body-text", chromedp.ByQuery))
	var loc, subject string
	b.run("pane", chromedp.Evaluate(`location.pathname + location.search`, &loc), chromedp.Text("#pane .subject", &subject, chromedp.ByQuery))
	if !strings.HasPrefix(loc, "/box/"+inbox+"?") || !strings.Contains(loc, "msg=") || subject != "Build times" {
		t.Fatalf("pane: location %q subject %q", loc, subject)
	}
	b.fits("list with the message beside it")
	b.shot("pane-right-desktop", "#pane #body-text")
	// The attachment's long name wraps inside the pane.
	var attW, paneW float64
	b.eval("attachment width", `document.querySelector("#attachments li").getBoundingClientRect().width`, &attW)
	b.eval("pane width", `document.getElementById("pane").clientWidth`, &paneW)
	if attW > paneW {
		t.Errorf("attachment name %v px wide in a pane of %v", attW, paneW)
	}
	// j/k move through the list and show each message in the pane.
	b.run("keyboard", chromedp.KeyEvent("j"), chromedp.Sleep(600*time.Millisecond))
	var subject2 string
	b.run("after j", chromedp.Text("#pane .subject", &subject2, chromedp.ByQuery))
	if subject2 == subject || subject2 == "" {
		t.Fatalf("j did not open the next message in the pane: %q", subject2)
	}
	// The HTML newsletter: the frame takes the height the headers leave
	// in the pane, so only the frame scrolls, and a short message leaves
	// no empty box under the pane.
	b.run("open newsletter", chromedp.Click(`//tr[contains(@class,"msg")]//a[contains(., "This week in computing")]`, chromedp.BySearch),
		chromedp.WaitVisible("#pane #body-frame", chromedp.ByQuery), chromedp.Sleep(500*time.Millisecond))
	b.frameFills("pane with an HTML message", "pane")
	b.fits("pane with an HTML message")
	b.shot("pane-html-desktop", "#pane #body-frame")
	// On a page of its own as well.
	b.open("/msg/"+inbox+"/"+itoa(int64(len(f.metas(t, "alice@example.com", "INBOX")))), "#body-frame")
	b.frameFills("message page", "main")
	b.fits("message page")

	// Below, then off, through the settings.
	for _, pane := range []string{"below", "off"} {
		b.open("/settings", "#pane-"+pane)
		b.run("choose "+pane, chromedp.Click("#pane-"+pane, chromedp.ByQuery), chromedp.Click("#save-settings", chromedp.ByQuery),
			chromedp.WaitVisible(`//p[@role="status"]`, chromedp.BySearch))
		b.open("/box/"+inbox, "#msgs")
		b.run("open with enter", chromedp.KeyEvent("j"), chromedp.KeyEvent("\r"), chromedp.WaitVisible("#message", chromedp.ByQuery))
		var inPane bool
		b.eval("where", `!!document.querySelector("#pane #message")`, &inPane)
		if inPane != (pane == "below") {
			t.Errorf("pane %s: message in the pane = %v", pane, inPane)
		}
		b.fits("pane " + pane)
		if pane == "below" {
			b.shot("pane-below-desktop", "#pane #message")
		}
	}
	b.silent()
}
