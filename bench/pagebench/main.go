// Command pagebench times the webmail pages of issue 27 — the inbox, the
// threaded inbox, a message and the compose page — on pimail and on the
// Roundcube peer (../shared/peers/roundcube) with the same mailbox, two
// ways each:
//
//   - server: the HTTP requests a browser makes for the page's content
//     (Roundcube: the page and its list request), timed from the request
//     to the last byte over loopback with keep-alive, -reps times after
//     -warmup: p50 and p99;
//   - browser: Debian's Chromium (headless, its own profile, static files
//     cached as for a returning user) loads the page until its load event
//     and until the page's content is there (the list's rows, the
//     message's text, the compose form), -browser-reps times: p50.
//
// bench/pagebench/run.sh seeds both sides and runs it.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"time"

	"pimail/bench/procstat"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
)

var (
	pimailURL = flag.String("pimail", "http://127.0.0.1:18095", "pimail webmail base URL (\"\" to skip)")
	pimUser   = flag.String("pimail-user", "user20@bench.test", "pimail login")
	rcURL     = flag.String("roundcube", "http://127.0.0.1:8081", "Roundcube base URL (\"\" to skip)")
	rcUser    = flag.String("roundcube-user", "user20@bench.test", "Roundcube login")
	pass      = flag.String("pass", "benchpass", "password of both")
	reps      = flag.Int("reps", 50, "measured requests per page (server)")
	warm      = flag.Int("warmup", 5, "warm-up requests per page")
	breps     = flag.Int("browser-reps", 15, "measured loads per page (Chromium)")
	jsonOut   = flag.String("json", "", "write the results as JSON here")
	settle    = flag.Int("settle-pid", 0, "before measuring, wait (at most 5 minutes) until this process (pimail) is idle: the word index of a fresh import is built in the background")
)

// Result is one page of one side.
type Result struct {
	Side, Page           string
	ServerP50, ServerP99 float64 // ms
	BrowserP50           float64 // ms
}

// side is one webmail: how to log in, and each page's requests and
// Chromium's readiness selector.
type side interface {
	name() string
	login(c *http.Client) error
	// pages returns, per page, the requests of one view (run in order)
	// and the URL and selector Chromium waits for.
	pages(c *http.Client) ([]page, error)
	browserLogin(ctx context.Context) error
}

type page struct {
	name     string
	requests []func(c *http.Client) error
	setup    func(c *http.Client) error // before the page (threads on/off)
	url, sel string
	bsetup   func(ctx context.Context) error
}

func client() *http.Client {
	jar, _ := cookiejar.New(nil)
	return &http.Client{Jar: jar, Timeout: 60 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// fetch sends one request and reads the whole answer.
func fetch(c *http.Client, method, u string, form url.Values, hdr ...string) (int, string, http.Header, error) {
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, u, body)
	if err != nil {
		return 0, "", nil, err
	}
	req.Header.Set("User-Agent", "Mozilla/5.0 (X11; Linux x86_64) pagebench/1.0")
	// No Accept-Encoding of our own: the transport asks for gzip, as a
	// browser does, and unpacks it (Roundcube's nginx compresses HTML).
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, "", nil, err
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp.StatusCode, string(b), resp.Header, err
}

func pct(v []float64, p float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	return s[min(len(s)-1, int(p*float64(len(s))))]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func main() {
	flag.Parse()
	var sides []side
	if *pimailURL != "" {
		sides = append(sides, &pimail{base: *pimailURL})
	}
	if *rcURL != "" {
		sides = append(sides, &roundcube{base: *rcURL})
	}
	if *settle != 0 {
		busy := procstat.Settle([]int{*settle}, 5*time.Minute, 3*time.Second)
		fmt.Printf("pimail was busy %.1f s before the run\n", busy.Seconds())
	}
	var results []Result
	for _, s := range sides {
		rs, err := run(s)
		if err != nil {
			log.Fatalf("%s: %v", s.name(), err)
		}
		results = append(results, rs...)
	}
	fmt.Printf("%-10s %-16s %12s %12s %14s\n", "side", "page", "server p50", "server p99", "Chromium p50")
	for _, r := range results {
		fmt.Printf("%-10s %-16s %9.2f ms %9.2f ms %11.1f ms\n", r.Side, r.Page, r.ServerP50, r.ServerP99, r.BrowserP50)
	}
	if *jsonOut != "" {
		b, _ := json.MarshalIndent(results, "", "  ")
		if err := os.WriteFile(*jsonOut, b, 0o644); err != nil {
			log.Fatal(err)
		}
	}
}

func run(s side) ([]Result, error) {
	c := client()
	if err := s.login(c); err != nil {
		return nil, fmt.Errorf("login: %w", err)
	}
	pages, err := s.pages(c)
	if err != nil {
		return nil, err
	}
	var out []Result
	for _, p := range pages {
		if p.setup != nil {
			if err := p.setup(c); err != nil {
				return nil, fmt.Errorf("%s setup: %w", p.name, err)
			}
		}
		var times []float64
		for i := range *warm + *reps {
			t := time.Now()
			for _, rq := range p.requests {
				if err := rq(c); err != nil {
					return nil, fmt.Errorf("%s: %w", p.name, err)
				}
			}
			if i >= *warm {
				times = append(times, ms(time.Since(t)))
			}
		}
		out = append(out, Result{Side: s.name(), Page: p.name, ServerP50: pct(times, .5), ServerP99: pct(times, .99)})
	}
	// Chromium.
	exe, err := exec.LookPath("chromium")
	if err != nil {
		return out, fmt.Errorf("chromium: %w", err)
	}
	profile, err := os.MkdirTemp("", "pagebench-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(profile)
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), chromedp.ExecPath(exe), chromedp.Headless, chromedp.NoSandbox,
		chromedp.DisableGPU, chromedp.NoFirstRun, chromedp.UserDataDir(profile), chromedp.WindowSize(1280, 800),
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true))
	defer cancelA()
	ctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	ctx, cancelT := context.WithTimeout(ctx, 10*time.Minute)
	defer cancelT()
	if err := chromedp.Run(ctx, network.Enable()); err != nil {
		return nil, err
	}
	if err := s.browserLogin(ctx); err != nil {
		return nil, fmt.Errorf("browser login: %w", err)
	}
	for i, p := range pages {
		var err error
		switch {
		case p.bsetup != nil:
			err = p.bsetup(ctx)
		case p.setup != nil:
			err = p.setup(c) // an account's preference, for the browser too
		}
		if err != nil {
			return nil, fmt.Errorf("%s browser setup: %w", p.name, err)
		}
		var times []float64
		for k := range *breps + 2 {
			t := time.Now()
			if err := chromedp.Run(ctx, chromedp.Navigate(p.url), chromedp.WaitReady(p.sel, chromedp.ByQuery)); err != nil {
				return nil, fmt.Errorf("%s in Chromium: %w", p.name, err)
			}
			if k >= 2 { // the first two fill the browser's cache
				times = append(times, ms(time.Since(t)))
			}
		}
		out[i].BrowserP50 = pct(times, .5)
	}
	return out, nil
}

// pimail.
type pimail struct {
	base, csrf, box, msg string
}

func (p *pimail) name() string { return "pimail" }

var csrfRE = regexp.MustCompile(`name="csrf" (?:value|content)="([^"]+)"`)

func (p *pimail) login(c *http.Client) error {
	_, page, _, err := fetch(c, "GET", p.base+"/login", nil)
	if err != nil {
		return err
	}
	m := csrfRE.FindStringSubmatch(page)
	if m == nil {
		return fmt.Errorf("no login form")
	}
	st, _, _, err := fetch(c, "POST", p.base+"/login", url.Values{"csrf": {m[1]}, "username": {*pimUser}, "password": {*pass}})
	if err != nil || st != http.StatusSeeOther {
		return fmt.Errorf("login: %d %v", st, err)
	}
	_, _, h, err := fetch(c, "GET", p.base+"/", nil)
	if err != nil {
		return err
	}
	p.box = h.Get("Location")
	_, page, _, err = fetch(c, "GET", p.base+p.box, nil)
	if m = csrfRE.FindStringSubmatch(page); m == nil || err != nil {
		return fmt.Errorf("inbox %s: %v", p.box, err)
	}
	p.csrf = m[1]
	if m = regexp.MustCompile(`data-href="(/msg/[0-9]+/[0-9]+)"`).FindStringSubmatch(page); m == nil {
		return fmt.Errorf("no message on the inbox page")
	}
	p.msg = m[1]
	return nil
}

func (p *pimail) view(c *http.Client, threads string) error {
	st, _, _, err := fetch(c, "POST", p.base+"/view", url.Values{"csrf": {p.csrf}, "box": {strings.TrimPrefix(p.box, "/box/")},
		"sort": {"arrival"}, "order": {"desc"}, "threads": {threads}})
	if err != nil || st != http.StatusSeeOther {
		return fmt.Errorf("view: %d %v", st, err)
	}
	return nil
}

func (p *pimail) get(path string) func(*http.Client) error {
	return func(c *http.Client) error {
		st, _, _, err := fetch(c, "GET", p.base+path, nil)
		if err != nil || st != http.StatusOK {
			return fmt.Errorf("GET %s: %d %v", path, st, err)
		}
		return nil
	}
}

func (p *pimail) pages(c *http.Client) ([]page, error) {
	return []page{
		{name: "inbox", setup: func(c *http.Client) error { return p.view(c, "") }, requests: []func(*http.Client) error{p.get(p.box)},
			url: p.base + p.box, sel: "#msgs tr.msg"},
		{name: "threaded inbox", setup: func(c *http.Client) error { return p.view(c, "1") }, requests: []func(*http.Client) error{p.get(p.box)},
			url: p.base + p.box, sel: "#msgs tr.msg"},
		{name: "message", setup: func(c *http.Client) error { return p.view(c, "") }, requests: []func(*http.Client) error{p.get(p.msg)},
			url: p.base + p.msg, sel: "#message"},
		{name: "compose", requests: []func(*http.Client) error{p.get("/compose")}, url: p.base + "/compose", sel: "#compose-form"},
	}, nil
}

func (p *pimail) browserLogin(ctx context.Context) error {
	return chromedp.Run(ctx, chromedp.Navigate(p.base+"/login"), chromedp.WaitVisible("#username", chromedp.ByQuery),
		chromedp.SendKeys("#username", *pimUser, chromedp.ByQuery), chromedp.SendKeys("#password", *pass, chromedp.ByQuery),
		chromedp.Click("#login-btn", chromedp.ByQuery), chromedp.WaitVisible("#msgs", chromedp.ByQuery))
}

// Roundcube 1.6 (elastic): the inbox is the mail page and its list
// request, a message its show page, compose a redirect and the form.
type roundcube struct {
	base, token, uid string
}

func (r *roundcube) name() string { return "Roundcube" }

var (
	rcTokRE = regexp.MustCompile(`name="_token" value="([^"]+)"`)
	rcReqRE = regexp.MustCompile(`"request_token":"([^"]+)"`)
	rcRowRE = regexp.MustCompile(`add_message_row\((\d+),`)
	rcLockN int
)

func (r *roundcube) login(c *http.Client) error {
	_, page, _, err := fetch(c, "GET", r.base+"/", nil)
	if err != nil {
		return err
	}
	m := rcTokRE.FindStringSubmatch(page)
	if m == nil {
		return fmt.Errorf("no login form")
	}
	st, _, h, err := fetch(c, "POST", r.base+"/?_task=login", url.Values{"_token": {m[1]}, "_task": {"login"}, "_action": {"login"},
		"_timezone": {"UTC"}, "_url": {""}, "_user": {*rcUser}, "_pass": {*pass}})
	if err != nil || st != http.StatusFound {
		return fmt.Errorf("login: %d %v", st, err)
	}
	u, _ := url.Parse(h.Get("Location"))
	_, page, _, err = fetch(c, "GET", r.base+"/?"+u.RawQuery, nil)
	if m = rcReqRE.FindStringSubmatch(page); m == nil || err != nil {
		return fmt.Errorf("mail page: %v", err)
	}
	r.token = m[1]
	return nil
}

func (r *roundcube) list(threads string) func(*http.Client) error {
	return func(c *http.Client) error {
		rcLockN++
		q := ""
		if threads != "" {
			q = "&_threads=" + threads // also saves the choice in the user's preferences
		}
		st, b, _, err := fetch(c, "GET", fmt.Sprintf("%s/?_task=mail&_action=list&_mbox=INBOX&_page=1%s&_remote=1&_unlock=loading%d", r.base, q, rcLockN),
			nil, "X-Roundcube-Request", r.token, "X-Requested-With", "XMLHttpRequest")
		m := rcRowRE.FindStringSubmatch(b)
		if err != nil || st != http.StatusOK || m == nil {
			return fmt.Errorf("list: %d %v %.200s", st, err, b)
		}
		r.uid = m[1]
		return nil
	}
}

func (r *roundcube) get(path string, want int) func(*http.Client) error {
	return func(c *http.Client) error {
		st, _, _, err := fetch(c, "GET", r.base+path, nil)
		if err != nil || st != want {
			return fmt.Errorf("GET %s: %d %v", path, st, err)
		}
		return nil
	}
}

func (r *roundcube) pages(c *http.Client) ([]page, error) {
	if err := r.list("0")(c); err != nil {
		return nil, err
	}
	show := "/?_task=mail&_mbox=INBOX&_uid=" + r.uid + "&_action=show"
	compose := func(c *http.Client) error {
		st, _, h, err := fetch(c, "GET", r.base+"/?_task=mail&_action=compose", nil)
		if err != nil || st != http.StatusFound {
			return fmt.Errorf("compose: %d %v", st, err)
		}
		u, _ := url.Parse(h.Get("Location"))
		return r.get("/?"+u.RawQuery, http.StatusOK)(c)
	}
	bview := func(threads string) func(context.Context) error {
		return func(ctx context.Context) error {
			return chromedp.Run(ctx, chromedp.Navigate(r.base+"/?_task=mail&_mbox=INBOX"), chromedp.WaitReady("#messagelist tbody tr", chromedp.ByQuery),
				chromedp.Evaluate(`rcmail.set_list_options(null, undefined, undefined, `+threads+`)`, nil), chromedp.Sleep(2*time.Second))
		}
	}
	mailPage := r.get("/?_task=mail&_mbox=INBOX", http.StatusOK)
	return []page{
		{name: "inbox", setup: r.list("0"), requests: []func(*http.Client) error{mailPage, r.list("")}, url: r.base + "/?_task=mail&_mbox=INBOX",
			sel: "#messagelist tbody tr", bsetup: bview("0")},
		{name: "threaded inbox", setup: r.list("1"), requests: []func(*http.Client) error{mailPage, r.list("")}, url: r.base + "/?_task=mail&_mbox=INBOX",
			sel: "#messagelist tbody tr", bsetup: bview("1")},
		{name: "message", setup: r.list("0"), requests: []func(*http.Client) error{r.get(show, http.StatusOK)}, url: r.base + show, sel: "#messagebody",
			bsetup: bview("0")},
		{name: "compose", requests: []func(*http.Client) error{compose}, url: r.base + "/?_task=mail&_action=compose", sel: "#composebody"},
	}, nil
}

func (r *roundcube) browserLogin(ctx context.Context) error {
	return chromedp.Run(ctx, chromedp.Navigate(r.base+"/"), chromedp.WaitVisible("#rcmloginuser", chromedp.ByQuery),
		chromedp.SendKeys("#rcmloginuser", *rcUser, chromedp.ByQuery), chromedp.SendKeys("#rcmloginpwd", *pass, chromedp.ByQuery),
		chromedp.Click("#rcmloginsubmit", chromedp.ByQuery), chromedp.WaitReady("#messagelist", chromedp.ByQuery))
}
