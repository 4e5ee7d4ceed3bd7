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

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"pimail/internal/message"
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

func TestBrowser(t *testing.T) {
	exe := chromiumPath(t)
	f := newFixture(t)
	profile, err := os.MkdirTemp("", "pimail-chromium-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(profile) // after the browser has exited (deferred cancels run first)
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(exe), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.Flag("disable-quic", true), chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(profile), chromedp.WindowSize(1200, 900),
	}
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelA()
	ctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	ctx, cancelT := context.WithTimeout(ctx, 90*time.Second)
	defer cancelT()

	var log browserLog
	chromedp.ListenTarget(ctx, func(ev any) {
		log.mu.Lock()
		defer log.mu.Unlock()
		switch e := ev.(type) {
		case *page.EventJavascriptDialogOpening:
			log.dialogs = append(log.dialogs, e.Message)
			go chromedp.Run(ctx, page.HandleJavaScriptDialog(false))
		case *runtime.EventConsoleAPICalled:
			log.console = append(log.console, string(e.Type))
		case *runtime.EventExceptionThrown:
			log.errors = append(log.errors, e.ExceptionDetails.Text)
		case *network.EventRequestWillBeSent:
			log.requests = append(log.requests, e.Request.URL)
		}
	})
	base := f.ts.URL
	shot := func(name string, sel string) {
		t.Helper()
		var buf []byte
		if err := chromedp.Run(ctx, chromedp.WaitVisible(sel, chromedp.ByQuery), chromedp.FullScreenshot(&buf, 80)); err != nil {
			t.Fatalf("screenshot %s: %v", name, err)
		}
		img, err := png.Decode(bytes.NewReader(buf))
		if err != nil {
			// FullScreenshot with quality < 100 is JPEG; accept either.
			if len(buf) < 2000 {
				t.Fatalf("screenshot %s: %d bytes", name, len(buf))
			}
		} else if img.Bounds().Dx() < 300 {
			t.Fatalf("screenshot %s too small: %v", name, img.Bounds())
		}
		_ = os.WriteFile(filepath.Join(t.TempDir(), name+".jpg"), buf, 0o600)
	}

	// Log in.
	err = chromedp.Run(ctx, network.Enable(),
		chromedp.Navigate(base+"/login"),
		chromedp.WaitVisible("#login-form", chromedp.ByQuery),
		chromedp.SendKeys("#username", "alice@example.com", chromedp.ByQuery),
		chromedp.SendKeys("#password", testPassword, chromedp.ByQuery),
		chromedp.Click("#login-btn", chromedp.ByQuery),
		chromedp.WaitVisible("#msgs", chromedp.ByQuery),
	)
	if err != nil {
		t.Fatalf("login: %v", err)
	}
	// A message delivered now appears without reloading (server-sent events).
	time.Sleep(300 * time.Millisecond) // let the event stream connect
	f.deliver(t, "bob@example.com", []string{"alice@example.com"},
		"From: Bob <bob@example.com>\nTo: alice@example.com\nSubject: Live hello\nMessage-ID: <live@example.com>\n\nAre you there? https://example.org/\n")
	if err := chromedp.Run(ctx, chromedp.WaitVisible(`//td[contains(@class,"subj")]/a[contains(., "Live hello")]`, chromedp.BySearch)); err != nil {
		t.Fatalf("live update: %v", err)
	}
	var unread string
	if err := chromedp.Run(ctx, chromedp.Text(".folders li.cur .count", &unread, chromedp.ByQuery)); err != nil || unread != "1" {
		t.Fatalf("unread count %q: %v", unread, err)
	}
	shot("inbox", "#msgs")

	// Open it (keyboard: j then Enter), reply with an attachment.
	attach := filepath.Join(t.TempDir(), "notes.txt")
	if err := os.WriteFile(attach, []byte("attached from the browser"), 0o600); err != nil {
		t.Fatal(err)
	}
	err = chromedp.Run(ctx,
		chromedp.KeyEvent("j"), chromedp.KeyEvent("\r"),
		chromedp.WaitVisible("#body-text", chromedp.ByQuery),
	)
	if err != nil {
		t.Fatalf("open message: %v", err)
	}
	shot("read", "#body-text")
	err = chromedp.Run(ctx,
		chromedp.KeyEvent("r"),
		chromedp.WaitVisible("#compose-form", chromedp.ByQuery),
		chromedp.SetUploadFiles("#files", []string{attach}, chromedp.ByQuery),
		chromedp.Click("#send", chromedp.ByQuery),
		chromedp.WaitVisible(`//h1[contains(., "Sent")]`, chromedp.BySearch),
	)
	if err != nil {
		t.Fatalf("reply: %v", err)
	}
	raw := f.raw(t, "bob@example.com", "INBOX", 0)
	p := message.Parse([]byte(raw))
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
	err = chromedp.Run(ctx,
		chromedp.Navigate(base+"/msg/"+inbox+"/"+uid),
		chromedp.WaitVisible("#body-frame", chromedp.ByQuery),
		chromedp.Sleep(1500*time.Millisecond),
	)
	if err != nil {
		t.Fatalf("open hostile message: %v", err)
	}
	shot("hostile", "#body-frame")
	dialogs, console, errs, reqs := log.snapshot()
	if len(dialogs) > 0 || len(console) > 0 || len(errs) > 0 {
		t.Fatalf("page was not silent: dialogs %q console %q exceptions %q", dialogs, console, errs)
	}
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
	err = chromedp.Run(ctx, chromedp.EmulateViewport(390, 844),
		chromedp.Navigate(base+"/box/"+inbox), chromedp.WaitVisible("#msgs", chromedp.ByQuery),
		chromedp.Evaluate(`getComputedStyle(document.getElementById("menu-toggle")).display !== "none" && getComputedStyle(document.getElementById("folders")).display === "none"`, &menuVisible))
	if err != nil || !menuVisible {
		t.Fatalf("phone layout: menu shown and folders hidden = %v, %v", menuVisible, err)
	}
	shot("phone", "#msgs")
}
