package admin

import (
	"context"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"pimail/internal/store"
)

// findChromium returns Debian's Chromium; without it the test fails
// unless PIMAIL_TEST_SKIP_CLIENTS=1.
func findChromium(t *testing.T) string {
	if os.Getenv("PIMAIL_TEST_SKIP_CLIENTS") == "1" {
		t.Skip("PIMAIL_TEST_SKIP_CLIENTS=1")
	}
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Fatal("chromium not found: install Debian's chromium (apt-get install chromium) or set PIMAIL_TEST_SKIP_CLIENTS=1")
	return ""
}

func TestBrowserAdmin(t *testing.T) {
	exe := findChromium(t)
	f := newFixture(t)
	ctx := ctxT(t)
	const evilFrom = `<script>alert("from")</script>@evil.example`
	const evilSubject = `<img src=x onerror=alert("subject")>`
	logEntries(t, f.st,
		store.DeliveryLogEntry{Direction: store.DirectionIn, Result: store.ResultRejected, From: evilFrom, To: "user@example.com",
			RemoteIP: "198.51.100.7", Subject: evilSubject, Reason: "550 5.7.1 listed at a blocklist"},
		store.DeliveryLogEntry{Direction: store.DirectionOut, Result: store.ResultDelivered, MessageID: "out1@example.com",
			QueueID: 3, From: "user@example.com", To: "far@example.net", Reason: "250 2.0.0 ok"},
	)
	deferred, err := f.st.Enqueue(ctx, store.QueueEntry{MailFrom: "user@example.com", NextAttempt: time.Now().Add(3 * time.Hour),
		Recipients: []store.QueueRecipient{{Address: "slow@example.org"}}}, []byte("Subject: waiting\r\n\r\nhi\r\n"))
	if err != nil {
		t.Fatal(err)
	}

	profile, err := os.MkdirTemp("", "pimail-admin-chromium-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(profile) // after the browser exits (the cancels below run first)
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(exe), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.Flag("disable-quic", true), chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(profile), chromedp.WindowSize(1280, 900),
	}
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelA()
	bctx, cancelB := chromedp.NewContext(actx)
	defer cancelB()
	bctx, cancelT := context.WithTimeout(bctx, 90*time.Second)
	defer cancelT()

	var mu sync.Mutex
	var dialogs, exceptions, requests []string
	chromedp.ListenTarget(bctx, func(ev any) {
		mu.Lock()
		defer mu.Unlock()
		switch e := ev.(type) {
		case *page.EventJavascriptDialogOpening:
			dialogs = append(dialogs, e.Message)
			go chromedp.Run(bctx, page.HandleJavaScriptDialog(false))
		case *runtime.EventExceptionThrown:
			exceptions = append(exceptions, e.ExceptionDetails.Text)
		case *network.EventRequestWillBeSent:
			requests = append(requests, e.Request.URL)
		}
	})
	base := f.ts.URL
	// The first Run starts the browser, on the long-lived context.
	if err := chromedp.Run(bctx, network.Enable()); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	run := func(what string, actions ...chromedp.Action) {
		t.Helper()
		actx, cancel := context.WithTimeout(bctx, 30*time.Second)
		defer cancel()
		if err := chromedp.Run(actx, actions...); err != nil {
			var html, loc string
			hctx, hcancel := context.WithTimeout(bctx, 5*time.Second)
			defer hcancel()
			_ = chromedp.Run(hctx, chromedp.Location(&loc), chromedp.OuterHTML("html", &html, chromedp.ByQuery))
			t.Fatalf("%s: %v\nat %s:\n%s", what, err, loc, html)
		}
	}

	run("log in",
		chromedp.Navigate(base+"/admin/"),
		chromedp.WaitVisible("#login-form", chromedp.ByQuery),
		chromedp.SendKeys("#username", "admin@example.com", chromedp.ByQuery),
		chromedp.SendKeys("#password", testPassword, chromedp.ByQuery),
		chromedp.Click("#login-btn", chromedp.ByQuery),
		chromedp.WaitVisible(`//h1[.="Dashboard"]`, chromedp.BySearch),
	)

	run("create an account",
		chromedp.Navigate(base+"/admin/accounts"),
		chromedp.WaitVisible("#add-account", chromedp.ByQuery),
		chromedp.SendKeys("#local", "dora", chromedp.ByQuery),
		chromedp.SendKeys("#new-password", "dora's long password", chromedp.ByQuery),
		chromedp.Click("#add-account-btn", chromedp.ByQuery),
		chromedp.WaitVisible("#notice", chromedp.ByQuery),
		chromedp.WaitVisible(`tr[data-address="dora@example.com"]`, chromedp.ByQuery),
	)
	if _, err := f.st.Account(ctx, "dora@example.com"); err != nil {
		t.Fatalf("account not created: %v", err)
	}

	var subject, from string
	var imgs int
	run("read the delivery log",
		chromedp.Navigate(base+"/admin/log"),
		chromedp.WaitVisible("#log", chromedp.ByQuery),
		chromedp.WaitVisible(`//tr[contains(@class,"r-delivered")]//td[contains(., "far@example.net")]`, chromedp.BySearch),
		chromedp.WaitVisible(`//tr[contains(@class,"r-rejected")]//td[contains(., "listed at a blocklist")]`, chromedp.BySearch),
		chromedp.Sleep(500*time.Millisecond), // a payload that ran would have raised its dialog by now
		chromedp.Text("tr.r-rejected td.subj", &subject, chromedp.ByQuery),
		chromedp.Text("tr.r-rejected td.addr", &from, chromedp.ByQuery),
		chromedp.Evaluate(`document.querySelectorAll("#log img, #log script").length`, &imgs),
	)
	if subject != evilSubject || from != evilFrom || imgs != 0 {
		t.Fatalf("payload not shown as text: subject %q from %q, %d elements", subject, from, imgs)
	}

	run("search the log by message-id",
		chromedp.SendKeys("#log-q", "<out1@example.com>", chromedp.ByQuery),
		chromedp.Submit("#log-q", chromedp.ByQuery),
		// The results page carries the query in the value attribute; the
		// page the text was typed into does not.
		chromedp.WaitVisible(`//input[@id="log-q" and @value="<out1@example.com>"]`, chromedp.BySearch),
		chromedp.WaitVisible(`//td[contains(., "far@example.net")]`, chromedp.BySearch),
	)
	var rows int
	run("count rows", chromedp.Evaluate(`document.querySelectorAll("#log tbody tr").length`, &rows))
	if rows != 1 {
		t.Fatalf("search by message-id shows %d rows", rows)
	}

	qpath := "/admin/queue/" + itoa(deferred.ID)
	run("retry a deferred message",
		chromedp.Navigate(base+"/admin/queue"),
		chromedp.WaitVisible(`//td[contains(., "slow@example.org")]`, chromedp.BySearch),
		chromedp.Click(`a[href="`+qpath+`"]`, chromedp.ByQuery),
		chromedp.WaitVisible("#retry", chromedp.ByQuery),
		chromedp.Click("#retry", chromedp.ByQuery),
		chromedp.WaitVisible("#notice", chromedp.ByQuery),
	)
	e, err := f.st.QueueEntry(ctx, deferred.ID)
	if err != nil || e.NextAttempt.After(time.Now()) {
		t.Fatalf("retry: next attempt %v, %v", e.NextAttempt, err)
	}

	mu.Lock()
	defer mu.Unlock()
	if len(dialogs) > 0 || len(exceptions) > 0 {
		t.Fatalf("page was not inert: dialogs %q exceptions %q", dialogs, exceptions)
	}
	for _, r := range requests {
		u, err := url.Parse(r)
		if err != nil || u.Hostname() != "127.0.0.1" || strings.Contains(u.Path, "/x") {
			t.Errorf("unexpected request: %s", r)
		}
	}
}
