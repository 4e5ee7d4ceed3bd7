package webmail

import (
	"bytes"
	"context"
	"image/png"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// chromiumPath finds Debian's Chromium; the test fails (not skips) without
// it unless PIMAIL_TEST_SKIP_CLIENTS=1.
func chromiumPath(t *testing.T) string {
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

// browserLog records what a page did that a test must check.
type browserLog struct {
	mu       sync.Mutex
	dialogs  []string
	console  []string
	errors   []string
	requests []string
}

func (l *browserLog) snapshot() (dialogs, console, errs, reqs []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.dialogs), slices.Clone(l.console), slices.Clone(l.errors), slices.Clone(l.requests)
}

// browser is a headless Chromium on the fixture's webmail, in its own
// profile, with a desktop window of 1280×800.
type browser struct {
	t    *testing.T
	f    *fixture
	ctx  context.Context
	log  *browserLog
	base string
}

// Screen sizes of the screenshots: a laptop and a phone.
const (
	desktopW, desktopH = 1280, 800
	phoneW, phoneH     = 390, 844
)

func newBrowser(t *testing.T, f *fixture) *browser {
	exe := chromiumPath(t)
	profile, err := os.MkdirTemp("", "pimail-chromium-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(profile) }) // after the browser has exited (cleanups run last-in first)
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(exe), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.Flag("disable-quic", true), chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true),
		chromedp.Flag("hide-scrollbars", false), chromedp.Flag("font-render-hinting", "none"),
		chromedp.UserDataDir(profile), chromedp.WindowSize(desktopW, desktopH),
	}
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancelA)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(cancel)
	ctx, cancelT := context.WithTimeout(ctx, 150*time.Second)
	t.Cleanup(cancelT)
	b := &browser{t: t, f: f, ctx: ctx, log: &browserLog{}, base: f.ts.URL}
	chromedp.ListenTarget(ctx, func(ev any) {
		b.log.mu.Lock()
		defer b.log.mu.Unlock()
		switch e := ev.(type) {
		case *page.EventJavascriptDialogOpening:
			b.log.dialogs = append(b.log.dialogs, e.Message)
			go chromedp.Run(ctx, page.HandleJavaScriptDialog(true))
		case *runtime.EventConsoleAPICalled:
			b.log.console = append(b.log.console, string(e.Type))
		case *runtime.EventExceptionThrown:
			b.log.errors = append(b.log.errors, e.ExceptionDetails.Error())
		case *network.EventRequestWillBeSent:
			b.log.requests = append(b.log.requests, e.Request.URL)
		}
	})
	b.run("start", network.Enable(), b.viewport(desktopW, desktopH))
	return b
}

// viewport sets the window: width and height in CSS pixels (a phone's
// with touch and its device scale).
func (b *browser) viewport(w, h int64) chromedp.Action {
	if w < 600 {
		return chromedp.Tasks{emulation.SetDeviceMetricsOverride(w, h, 1, true), emulation.SetTouchEmulationEnabled(true)}
	}
	return chromedp.Tasks{emulation.SetDeviceMetricsOverride(w, h, 1, false), emulation.SetTouchEmulationEnabled(false)}
}

// run runs actions, failing the test with what as the step's name.
func (b *browser) run(what string, actions ...chromedp.Action) {
	b.t.Helper()
	if err := chromedp.Run(b.ctx, actions...); err != nil {
		b.t.Fatalf("%s: %v", what, err)
	}
}

// eval evaluates a JavaScript expression into out.
func (b *browser) eval(what, expr string, out any) {
	b.t.Helper()
	b.run(what, chromedp.Evaluate(expr, out))
}

// login logs user in through the form and waits for the inbox.
func (b *browser) login(user string) {
	b.t.Helper()
	b.run("login", chromedp.Navigate(b.base+"/login"),
		chromedp.WaitVisible("#login-form", chromedp.ByQuery),
		chromedp.SendKeys("#username", user, chromedp.ByQuery),
		chromedp.SendKeys("#password", testPassword, chromedp.ByQuery),
		chromedp.Click("#login-btn", chromedp.ByQuery),
		chromedp.WaitVisible("#msgs", chromedp.ByQuery))
}

// open navigates to path and waits until sel is visible.
func (b *browser) open(path, sel string) {
	b.t.Helper()
	b.run("open "+path, chromedp.Navigate(b.base+path), chromedp.WaitVisible(sel, chromedp.ByQuery))
}

// shot takes a screenshot of the window once sel is visible. With
// PIMAIL_SCREENSHOTS=DIR it is written there as NAME.png (docs/screenshots
// holds the committed ones; see docs/screenshots/README.md), else into
// the test's temporary directory.
func (b *browser) shot(name, sel string) {
	b.t.Helper()
	var buf []byte
	b.run("screenshot "+name, chromedp.WaitVisible(sel, chromedp.ByQuery),
		chromedp.Evaluate(`document.querySelector("`+sel+`").scrollIntoView({block: "nearest"})`, nil),
		chromedp.Sleep(150*time.Millisecond), chromedp.CaptureScreenshot(&buf))
	img, err := png.Decode(bytes.NewReader(buf))
	if err != nil {
		b.t.Fatalf("screenshot %s: %v", name, err)
	}
	if img.Bounds().Dx() < 300 {
		b.t.Fatalf("screenshot %s too small: %v", name, img.Bounds())
	}
	dir := os.Getenv("PIMAIL_SCREENSHOTS")
	if dir == "" {
		dir = b.t.TempDir()
	}
	if err := os.WriteFile(filepath.Join(dir, name+".png"), buf, 0o644); err != nil {
		b.t.Fatal(err)
	}
}

// reloaded runs actions that load a new page (a form's submit) and
// waits until the new page has loaded.
func (b *browser) reloaded(what string, actions ...chromedp.Action) {
	b.t.Helper()
	b.run(what+": mark", chromedp.Evaluate(`window.pimailOld = true`, nil))
	b.run(what, actions...)
	deadline := time.Now().Add(20 * time.Second)
	for {
		var done bool
		// An evaluation during the navigation fails; try again.
		err := chromedp.Run(b.ctx, chromedp.Evaluate(`!window.pimailOld && document.readyState === "complete"`, &done))
		if err == nil && done {
			return
		}
		if time.Now().After(deadline) {
			b.t.Fatalf("%s: no new page: %v", what, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// silent fails the test when a page ran into a script error, wrote to
// the console or opened a dialog.
func (b *browser) silent() {
	b.t.Helper()
	dialogs, console, errs, _ := b.log.snapshot()
	if len(dialogs) > 0 || len(console) > 0 || len(errs) > 0 {
		b.t.Fatalf("page was not silent: dialogs %q console %q exceptions %q", dialogs, console, errs)
	}
}

// fits checks the rules every page keeps at the current window size: it
// is no taller and no wider than the window (no scroll bar on the page
// itself; lists and messages scroll inside it).
func (b *browser) fits(what string) {
	b.t.Helper()
	var dims []int
	b.eval(what+": page size", `[document.documentElement.scrollWidth, document.documentElement.scrollHeight, innerWidth, innerHeight]`, &dims)
	if dims[0] > dims[2] || dims[1] > dims[3] {
		b.t.Errorf("%s: the page is %d×%d in a %d×%d window", what, dims[0], dims[1], dims[2], dims[3])
	}
}

func TestBrowser(t *testing.T) {
	f := newFixture(t)
	b := newBrowser(t, f)
	b.login("alice@example.com")
	// A message delivered now appears without reloading (server-sent events).
	time.Sleep(300 * time.Millisecond) // let the event stream connect
	f.deliver(t, "bob@example.com", []string{"alice@example.com"},
		"From: Bob <bob@example.com>\nTo: alice@example.com\nSubject: Live hello\nMessage-ID: <live@example.com>\n\nAre you there? https://example.org/\n")
	b.run("live update", chromedp.WaitVisible(`//td[contains(@class,"subj")]/a[contains(., "Live hello")]`, chromedp.BySearch))
	var unread string
	b.run("unread count", chromedp.Text(".folders li.cur .count", &unread, chromedp.ByQuery))
	if unread != "1" {
		t.Fatalf("unread count %q", unread)
	}

	// Open it (keyboard: j then Enter: in the reading pane), reply with
	// an attachment.
	attach := filepath.Join(t.TempDir(), "notes.txt")
	if err := os.WriteFile(attach, []byte("attached from the browser"), 0o600); err != nil {
		t.Fatal(err)
	}
	b.run("open message", chromedp.KeyEvent("j"), chromedp.KeyEvent("\r"), chromedp.WaitVisible("#pane #body-text", chromedp.ByQuery))
	b.run("reply", chromedp.KeyEvent("r"),
		chromedp.WaitVisible("#compose-form", chromedp.ByQuery),
		chromedp.SetUploadFiles("#files", []string{attach}, chromedp.ByQuery),
		chromedp.Click("#send", chromedp.ByQuery),
		chromedp.WaitVisible(`//p[@role="status"][contains(., "Message sent.")]`, chromedp.BySearch))
	raw := f.raw(t, "bob@example.com", "INBOX", 0)
	p := parseMsg(raw)
	if p.Subject != "Re: Live hello" || p.Envelope.InReplyTo != "<live@example.com>" {
		t.Fatalf("reply in bob's inbox: subject %q in-reply-to %q", p.Subject, p.Envelope.InReplyTo)
	}
	if a := attachments(p.Body); len(a) != 1 || a[0].Name != "notes.txt" {
		t.Fatalf("reply attachments: %+v", a)
	}

	// A hostile HTML message: nothing runs, nothing leaves for another host.
	f.deliver(t, "evil@example.net", []string{"alice@example.com"}, "From: evil@example.net\nSubject: hostile\nContent-Type: text/html\n\n"+
		strings.Join(xssCorpus, "\n")+"\n")
	inbox := itoa(f.box(t, "alice@example.com", "INBOX").ID)
	ms := f.metas(t, "alice@example.com", "INBOX")
	uid := itoa(int64(ms[len(ms)-1].UID))
	b.open("/msg/"+inbox+"/"+uid, "#body-frame")
	b.run("settle", chromedp.Sleep(1500*time.Millisecond))
	b.silent()
	_, _, _, reqs := b.log.snapshot()
	for _, r := range reqs {
		u, err := url.Parse(r)
		if err != nil || (u.Scheme != "data" && u.Hostname() != "127.0.0.1") {
			t.Errorf("request left for a non-loopback host: %s", r)
		}
	}
	if !slices.ContainsFunc(reqs, func(r string) bool { return strings.HasSuffix(r, "/msg/"+inbox+"/"+uid+"/body") }) {
		t.Fatalf("the body frame was never requested: %q", reqs)
	}
	// The phone layout: the folder list hides behind the menu button.
	var menuVisible bool
	b.run("phone", b.viewport(phoneW, phoneH), chromedp.Navigate(b.base+"/box/"+inbox), chromedp.WaitVisible("#msgs", chromedp.ByQuery),
		chromedp.Evaluate(`getComputedStyle(document.getElementById("menu-toggle")).display !== "none" && getComputedStyle(document.getElementById("folders")).display === "none"`, &menuVisible))
	if !menuVisible {
		t.Fatal("phone layout: menu not shown or folders not hidden")
	}
}
