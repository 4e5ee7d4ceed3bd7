// Command soak runs a steady mixed load against a running pimail for a set
// time and watches the server process for leaks: SMTP ingest on port 25,
// short IMAP sessions (LOGIN, SELECT, FETCH, IDLE, LOGOUT) and webmail page
// views (the inbox page and one message, over one logged-in session per
// account). Every -sample it records the server's resident memory
// (/proc/PID/status VmRSS) and open descriptors (/proc/PID/fd), and at the
// end prints a table and a verdict: "flat" when the median of the last
// third of the samples is within -tolerance of the median of the first
// third, for both RSS and descriptors.
//
// bench/soak/run.sh builds and starts a server and runs this against it.
//
//	soak -pid 1234 -smtp 127.0.0.1:2525 -imap 127.0.0.1:1143 \
//	     -http http://127.0.0.1:8080 -users a@localhost,b@localhost -pass secret
package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

type options struct {
	pid       int
	smtp      string
	imap      string
	http      string
	users     []string
	pass      string
	duration  time.Duration
	sample    time.Duration
	smtpRate  float64
	imapRate  float64
	webRate   float64
	idle      time.Duration
	maxOps    int64
	inflight  int
	tolerance float64
}

func main() {
	var o options
	var users string
	flag.IntVar(&o.pid, "pid", 0, "PID of the pimail server to watch (required)")
	flag.StringVar(&o.smtp, "smtp", "", "SMTP (port 25 role) address; empty: no ingest")
	flag.StringVar(&o.imap, "imap", "", "IMAP address; empty: no IMAP sessions")
	flag.StringVar(&o.http, "http", "", "webmail base URL, http://HOST:PORT; empty: no webmail load")
	flag.StringVar(&users, "users", "", "comma-separated account addresses (mail goes to them in turn)")
	flag.StringVar(&o.pass, "pass", "", "the accounts' password")
	flag.DurationVar(&o.duration, "duration", 30*time.Minute, "how long to run the load")
	flag.DurationVar(&o.sample, "sample", time.Minute, "interval between RSS/fd samples")
	flag.Float64Var(&o.smtpRate, "smtp-rate", 5, "SMTP messages per second")
	flag.Float64Var(&o.imapRate, "imap-rate", 2, "IMAP sessions started per second")
	flag.Float64Var(&o.webRate, "web-rate", 10, "webmail requests per second")
	flag.DurationVar(&o.idle, "idle", time.Second, "time each IMAP session spends in IDLE")
	flag.Int64Var(&o.maxOps, "max-ops", 10_000_000, "stop after this many operations in all")
	flag.IntVar(&o.inflight, "inflight", 32, "operations in flight per kind at most (more are skipped and counted)")
	flag.Float64Var(&o.tolerance, "tolerance", 0.15, "verdict: allowed relative change of the median")
	flag.Parse()
	for u := range strings.SplitSeq(users, ",") {
		if u = strings.TrimSpace(u); u != "" {
			o.users = append(o.users, u)
		}
	}
	if o.pid <= 0 || len(o.users) == 0 || o.sample <= 0 || o.duration <= 0 {
		fmt.Fprintln(os.Stderr, "soak: -pid, -users, a positive -duration and -sample are required")
		os.Exit(2)
	}
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "soak:", err)
		os.Exit(1)
	}
}

// counter counts one kind of operation.
type counter struct {
	name               string
	ok, fail, skipped  atomic.Int64
	lastErr            atomic.Value // string
	sem                chan struct{}
	totalNanos, maxNan atomic.Int64
}

func (c *counter) record(d time.Duration, err error) {
	c.totalNanos.Add(int64(d))
	for {
		m := c.maxNan.Load()
		if int64(d) <= m || c.maxNan.CompareAndSwap(m, int64(d)) {
			break
		}
	}
	if err != nil {
		c.fail.Add(1)
		c.lastErr.Store(err.Error())
		return
	}
	c.ok.Add(1)
}

type sample struct {
	at      time.Duration
	rssKiB  int64
	fds     int
	ok      [3]int64
	fail    [3]int64
	skipped [3]int64
}

func run(o options) error {
	if _, err := readRSS(o.pid); err != nil {
		return fmt.Errorf("server process: %w", err)
	}
	kinds := []*counter{{name: "smtp"}, {name: "imap"}, {name: "web"}}
	for _, k := range kinds {
		k.sem = make(chan struct{}, max(1, o.inflight))
	}
	var web *webPool
	if o.http != "" {
		var err error
		if web, err = newWebPool(o.http, o.users, o.pass); err != nil {
			return err
		}
	}
	start := time.Now()
	deadline := start.Add(o.duration)
	var ops atomic.Int64
	var wg sync.WaitGroup
	stop := make(chan struct{})
	var seq atomic.Int64
	load := func(k *counter, rate float64, op func(i int64) error) {
		if rate <= 0 {
			return
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			t := time.NewTicker(time.Duration(float64(time.Second) / rate))
			defer t.Stop()
			for {
				select {
				case <-stop:
					return
				case <-t.C:
				}
				if ops.Add(1) > o.maxOps {
					return
				}
				select {
				case k.sem <- struct{}{}:
				default:
					k.skipped.Add(1)
					continue
				}
				i := seq.Add(1)
				wg.Add(1)
				go func() {
					defer wg.Done()
					defer func() { <-k.sem }()
					t0 := time.Now()
					err := op(i)
					k.record(time.Since(t0), err)
				}()
			}
		}()
	}
	if o.smtp != "" {
		load(kinds[0], o.smtpRate, func(i int64) error {
			return sendMail(o.smtp, o.users[int(i)%len(o.users)], i)
		})
	}
	if o.imap != "" {
		load(kinds[1], o.imapRate, func(i int64) error {
			return imapSession(o.imap, o.users[int(i)%len(o.users)], o.pass, o.idle)
		})
	}
	if web != nil {
		load(kinds[2], o.webRate, func(i int64) error { return web.request(i) })
	}

	var samples []sample
	take := func() {
		s := sample{at: time.Since(start).Round(time.Second)}
		s.rssKiB, _ = readRSS(o.pid)
		s.fds, _ = countFDs(o.pid)
		for j, k := range kinds {
			s.ok[j], s.fail[j], s.skipped[j] = k.ok.Load(), k.fail.Load(), k.skipped.Load()
		}
		samples = append(samples, s)
		fmt.Printf("sample %s: rss %.1f MiB, fds %d, ok smtp/imap/web %d/%d/%d, failed %d/%d/%d\n",
			s.at, float64(s.rssKiB)/1024, s.fds, s.ok[0], s.ok[1], s.ok[2], s.fail[0], s.fail[1], s.fail[2])
	}
	take()
	tick := time.NewTicker(o.sample)
	end := time.NewTimer(time.Until(deadline))
	alive := time.NewTicker(2 * time.Second)
loop:
	for {
		select {
		case <-tick.C:
			take()
		case <-alive.C:
			if _, err := readRSS(o.pid); err != nil {
				close(stop)
				wg.Wait()
				return fmt.Errorf("server process gone after %s: %w", time.Since(start).Round(time.Second), err)
			}
		case <-end.C:
			break loop
		}
	}
	tick.Stop()
	alive.Stop()
	close(stop)
	waitBounded(&wg, time.Minute)
	take()
	report(o, kinds, samples)
	return nil
}

func waitBounded(wg *sync.WaitGroup, d time.Duration) {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(d):
		fmt.Println("warning: operations still running after", d)
	}
}

func report(o options, kinds []*counter, samples []sample) {
	fmt.Println()
	fmt.Println("| time | RSS MiB | open fds | SMTP ok | IMAP ok | web ok | failed (smtp/imap/web) |")
	fmt.Println("|---|---|---|---|---|---|---|")
	for _, s := range samples {
		fmt.Printf("| %s | %.1f | %d | %d | %d | %d | %d/%d/%d |\n", s.at, float64(s.rssKiB)/1024, s.fds,
			s.ok[0], s.ok[1], s.ok[2], s.fail[0], s.fail[1], s.fail[2])
	}
	fmt.Println()
	for _, k := range kinds {
		n := k.ok.Load() + k.fail.Load()
		var mean time.Duration
		if n > 0 {
			mean = time.Duration(k.totalNanos.Load() / n)
		}
		fmt.Printf("%-5s ok %d, failed %d, skipped (too many in flight) %d, mean %s, max %s\n", k.name,
			k.ok.Load(), k.fail.Load(), k.skipped.Load(), mean.Round(time.Millisecond),
			time.Duration(k.maxNan.Load()).Round(time.Millisecond))
		if e, _ := k.lastErr.Load().(string); e != "" {
			fmt.Printf("      last error: %s\n", e)
		}
	}
	rss := make([]float64, len(samples))
	fds := make([]float64, len(samples))
	for i, s := range samples {
		rss[i], fds[i] = float64(s.rssKiB), float64(s.fds)
	}
	v1, r1 := verdict(rss, o.tolerance)
	v2, r2 := verdict(fds, o.tolerance)
	fmt.Printf("RSS: %s (%s)\nfds: %s (%s)\n", v1, r1, v2, r2)
	if v1 == "flat" && v2 == "flat" {
		fmt.Println("verdict: flat")
	} else {
		fmt.Println("verdict: NOT flat")
	}
}

// verdict compares the median of the last third of xs with that of the
// first third.
func verdict(xs []float64, tol float64) (string, string) {
	if len(xs) < 3 {
		return "too few samples", fmt.Sprintf("%d samples", len(xs))
	}
	third := len(xs) / 3
	a, b := median(xs[:third]), median(xs[len(xs)-third:])
	if a == 0 {
		return "no data", "first median 0"
	}
	change := (b - a) / a
	why := fmt.Sprintf("first-third median %.0f, last-third median %.0f, %+.1f %%", a, b, 100*change)
	if change > tol || change < -tol {
		return "changed", why
	}
	return "flat", why
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func readRSS(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			return strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		}
	}
	return 0, errors.New("no VmRSS")
}

func countFDs(pid int) (int, error) {
	ents, err := os.ReadDir(filepath.Join("/proc", strconv.Itoa(pid), "fd"))
	return len(ents), err
}

const ioTimeout = 30 * time.Second

// textConn is a line-oriented client connection with a deadline per step.
type textConn struct {
	c net.Conn
	r *bufio.Reader
}

func dial(addr string) (*textConn, error) {
	c, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		return nil, err
	}
	_ = c.SetDeadline(time.Now().Add(ioTimeout))
	return &textConn{c: c, r: bufio.NewReaderSize(c, 16*1024)}, nil
}

func (t *textConn) line() (string, error) {
	_ = t.c.SetDeadline(time.Now().Add(ioTimeout))
	s, err := t.r.ReadString('\n')
	return strings.TrimRight(s, "\r\n"), err
}

func (t *textConn) send(s string) error {
	_ = t.c.SetDeadline(time.Now().Add(ioTimeout))
	_, err := io.WriteString(t.c, s)
	return err
}

// smtpReply reads one (possibly multi-line) SMTP reply and checks its
// first digit.
func (t *textConn) smtpReply(want byte) error {
	for range 100 {
		l, err := t.line()
		if err != nil {
			return err
		}
		if len(l) < 4 {
			return fmt.Errorf("short reply %q", l)
		}
		if l[3] == '-' {
			continue
		}
		if l[0] != want {
			return fmt.Errorf("reply %q", l)
		}
		return nil
	}
	return errors.New("reply too long")
}

func sendMail(addr, rcpt string, i int64) error {
	t, err := dial(addr)
	if err != nil {
		return err
	}
	defer t.c.Close()
	steps := []struct {
		cmd  string
		want byte
	}{
		{"", '2'},
		{"EHLO soak.example\r\n", '2'},
		{"MAIL FROM:<soak@soak.example>\r\n", '2'},
		{"RCPT TO:<" + rcpt + ">\r\n", '2'},
		{"DATA\r\n", '3'},
		{message(rcpt, i), '2'},
		{"QUIT\r\n", '2'},
	}
	for _, s := range steps {
		if s.cmd != "" {
			if err := t.send(s.cmd); err != nil {
				return err
			}
		}
		if err := t.smtpReply(s.want); err != nil {
			return fmt.Errorf("after %q: %w", strings.TrimSpace(s.cmd[:min(len(s.cmd), 12)]), err)
		}
	}
	return nil
}

// message is a small mail, every fourth one HTML, ending with the DATA
// terminator.
func message(rcpt string, i int64) string {
	var b strings.Builder
	fmt.Fprintf(&b, "From: Soak <soak@soak.example>\r\nTo: <%s>\r\nSubject: soak message %d\r\n", rcpt, i)
	fmt.Fprintf(&b, "Date: %s\r\nMessage-ID: <soak-%d-%d@soak.example>\r\nMIME-Version: 1.0\r\n",
		time.Now().Format(time.RFC1123Z), time.Now().UnixNano(), i)
	if i%4 == 0 {
		b.WriteString("Content-Type: text/html; charset=utf-8\r\n\r\n<html><body><h1>Soak</h1>\r\n")
		for j := range 20 {
			fmt.Fprintf(&b, "<p style=\"color:#333\">Paragraph %d of message %d, <a href=\"https://example.org/%d\">link</a>.</p>\r\n", j, i, j)
		}
		b.WriteString("</body></html>\r\n")
	} else {
		b.WriteString("Content-Type: text/plain; charset=utf-8\r\n\r\n")
		for j := range 30 {
			fmt.Fprintf(&b, "Line %d of soak message %d: the quick brown fox jumps over the lazy dog.\r\n", j, i)
		}
	}
	b.WriteString(".\r\n")
	return b.String()
}

var existsRe = regexp.MustCompile(`^\* (\d+) EXISTS`)

// imapCmd sends a tagged command and reads up to its tagged answer,
// returning the untagged lines; literals in answers are skipped.
func (t *textConn) imapCmd(tag, cmd string) ([]string, error) {
	if err := t.send(tag + " " + cmd + "\r\n"); err != nil {
		return nil, err
	}
	return t.imapUntil(tag)
}

var literalRe = regexp.MustCompile(`\{(\d+)\}$`)

func (t *textConn) imapUntil(tag string) ([]string, error) {
	var out []string
	for range 100_000 {
		l, err := t.line()
		if err != nil {
			return out, err
		}
		if m := literalRe.FindStringSubmatch(l); m != nil {
			n, _ := strconv.ParseInt(m[1], 10, 64)
			if _, err := io.CopyN(io.Discard, t.r, n); err != nil {
				return out, err
			}
		}
		if rest, ok := strings.CutPrefix(l, tag+" "); ok {
			if !strings.HasPrefix(rest, "OK") {
				return out, fmt.Errorf("%s", l)
			}
			return out, nil
		}
		if len(out) < 1000 {
			out = append(out, l)
		}
	}
	return out, errors.New("answer too long")
}

func imapQuote(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s) + `"`
}

func imapSession(addr, user, pass string, idle time.Duration) error {
	t, err := dial(addr)
	if err != nil {
		return err
	}
	defer t.c.Close()
	if l, err := t.line(); err != nil || !strings.HasPrefix(l, "* OK") {
		return fmt.Errorf("greeting %q: %v", l, err)
	}
	if _, err := t.imapCmd("a1", "LOGIN "+imapQuote(user)+" "+imapQuote(pass)); err != nil {
		return fmt.Errorf("login: %w", err)
	}
	lines, err := t.imapCmd("a2", "SELECT INBOX")
	if err != nil {
		return fmt.Errorf("select: %w", err)
	}
	exists := 0
	for _, l := range lines {
		if m := existsRe.FindStringSubmatch(l); m != nil {
			exists, _ = strconv.Atoi(m[1])
		}
	}
	if exists > 0 {
		if _, err := t.imapCmd("a3", fmt.Sprintf("FETCH %d:%d (UID FLAGS RFC822.SIZE ENVELOPE)", max(1, exists-49), exists)); err != nil {
			return fmt.Errorf("fetch: %w", err)
		}
		if _, err := t.imapCmd("a4", fmt.Sprintf("FETCH %d:%d (BODY.PEEK[])", max(1, exists-2), exists)); err != nil {
			return fmt.Errorf("fetch body: %w", err)
		}
	}
	if idle > 0 {
		if err := t.send("a5 IDLE\r\n"); err != nil {
			return err
		}
		// Untagged updates (another session's flag change) may come
		// before the continuation request.
		for i := 0; ; i++ {
			l, err := t.line()
			if err != nil {
				return fmt.Errorf("idle: %w", err)
			}
			if strings.HasPrefix(l, "+") {
				break
			}
			if !strings.HasPrefix(l, "* ") || i >= 1000 {
				return fmt.Errorf("idle: %q", l)
			}
		}
		time.Sleep(idle)
		if err := t.send("DONE\r\n"); err != nil {
			return err
		}
		if _, err := t.imapUntil("a5"); err != nil {
			return fmt.Errorf("idle: %w", err)
		}
	}
	if _, err := t.imapCmd("a6", "LOGOUT"); err != nil {
		return fmt.Errorf("logout: %w", err)
	}
	return nil
}

// webPool holds one logged-in webmail session per account.
type webPool struct {
	base  string
	users []*webUser
}

type webUser struct {
	mu    sync.Mutex
	hc    *http.Client
	inbox string
	msgs  []string
}

var msgLink = regexp.MustCompile(`href="(/msg/\d+/\d+)"`)
var csrfInput = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

func newWebPool(base string, users []string, pass string) (*webPool, error) {
	p := &webPool{base: strings.TrimSuffix(base, "/")}
	for _, name := range users {
		jar, _ := cookiejar.New(nil)
		u := &webUser{hc: &http.Client{Jar: jar, Timeout: ioTimeout,
			Transport:     &http.Transport{MaxIdleConnsPerHost: 4},
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
		code, body, _, err := p.do(u, "GET", "/login", nil)
		if err != nil || code != 200 {
			return nil, fmt.Errorf("webmail login page: %d %v", code, err)
		}
		m := csrfInput.FindStringSubmatch(body)
		if m == nil {
			return nil, errors.New("webmail login page has no csrf token")
		}
		code, _, _, err = p.do(u, "POST", "/login", url.Values{"csrf": {m[1]}, "username": {name}, "password": {pass}})
		if err != nil || code != http.StatusSeeOther {
			return nil, fmt.Errorf("webmail login %s: %d %v", name, code, err)
		}
		code, _, loc, err := p.do(u, "GET", "/", nil)
		if err != nil || code != http.StatusSeeOther {
			return nil, fmt.Errorf("webmail inbox redirect: %d %v", code, err)
		}
		u.inbox = loc
		p.users = append(p.users, u)
	}
	return p, nil
}

func (p *webPool) do(u *webUser, method, path string, form url.Values) (int, string, string, error) {
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, p.base+path, body)
	if err != nil {
		return 0, "", "", err
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", p.base)
	}
	resp, err := u.hc.Do(req)
	if err != nil {
		return 0, "", "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	return resp.StatusCode, string(b), resp.Header.Get("Location"), err
}

// request is one webmail request: every other one the inbox page, the
// others a message from the last inbox page seen.
func (p *webPool) request(i int64) error {
	u := p.users[int(i)%len(p.users)]
	u.mu.Lock()
	msgs := u.msgs
	u.mu.Unlock()
	if i%2 == 0 || len(msgs) == 0 {
		code, body, _, err := p.do(u, "GET", u.inbox, nil)
		if err != nil {
			return err
		}
		if code != 200 {
			return fmt.Errorf("GET %s: %d", u.inbox, code)
		}
		var found []string
		for _, m := range msgLink.FindAllStringSubmatch(body, 50) {
			found = append(found, m[1])
		}
		u.mu.Lock()
		u.msgs = found
		u.mu.Unlock()
		return nil
	}
	path := msgs[int(i/2)%len(msgs)]
	code, _, _, err := p.do(u, "GET", path, nil)
	if err != nil {
		return err
	}
	if code != 200 {
		return fmt.Errorf("GET %s: %d", path, code)
	}
	return nil
}
