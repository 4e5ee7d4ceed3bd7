package main

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// user is one logged-in webmail session.
type user struct {
	base  string
	hc    *http.Client
	csrf  string
	inbox string   // "/box/N"
	msgs  []string // "/msg/N/U" of the inbox's first page
	sized map[int]string
	buf   bytes.Buffer // response bodies, reused
}

var (
	csrfInput = regexp.MustCompile(`name="csrf" value="([^"]+)"`)
)

func newUser(base string) *user {
	jar, _ := cookiejar.New(nil)
	tr := &http.Transport{MaxIdleConnsPerHost: 4, DisableCompression: false}
	return &user{base: base, sized: map[int]string{}, hc: &http.Client{
		Jar: jar, Transport: tr, Timeout: 60 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}
}

// do sends one request and reads the whole body; it returns the status,
// the body and the Location header.
func (u *user) do(method, path string, form url.Values) (int, string, string, error) {
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, u.base+path, body)
	if err != nil {
		return 0, "", "", err
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", u.base)
	}
	resp, err := u.hc.Do(req)
	if err != nil {
		return 0, "", "", fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	u.buf.Reset()
	if _, err := u.buf.ReadFrom(resp.Body); err != nil {
		return 0, "", "", fmt.Errorf("%s %s: %w", method, path, err)
	}
	return resp.StatusCode, u.buf.String(), resp.Header.Get("Location"), nil
}

func (u *user) get(path string, want int) (string, string, error) {
	code, body, loc, err := u.do("GET", path, nil)
	if err == nil && code != want {
		err = fmt.Errorf("GET %s: status %d, want %d", path, code, want)
	}
	return body, loc, err
}

// login runs the login form (GET + POST) and finds the inbox.
func (u *user) login(address, password string) error {
	body, _, err := u.get("/login", 200)
	if err != nil {
		return err
	}
	m := csrfInput.FindStringSubmatch(body)
	if m == nil {
		return fmt.Errorf("login page has no csrf token")
	}
	code, _, _, err := u.do("POST", "/login", url.Values{"csrf": {m[1]}, "username": {address}, "password": {password}})
	if err != nil {
		return err
	}
	if code != http.StatusSeeOther {
		return fmt.Errorf("login %s: status %d", address, code)
	}
	_, loc, err := u.get("/", http.StatusSeeOther)
	if err != nil {
		return err
	}
	u.inbox = loc
	return nil
}

// list fetches the inbox's first page and remembers its messages. The
// page is scanned with strings.Index rather than regular expressions: the
// client shares the machine's two cores with the server, and a regexp
// over every 50 KB page costs more CPU than the server's whole request.
func (u *user) list() error {
	body, _, err := u.get(u.inbox, 200)
	if err != nil {
		return err
	}
	if v, ok := between(body, `<meta name="csrf" content="`, `"`); ok {
		u.csrf = v
	}
	u.msgs = u.msgs[:0]
	const cell = `<td class="subj"><a href="`
	for rest := body; ; {
		i := strings.Index(rest, cell)
		if i < 0 {
			break
		}
		rest = rest[i+len(cell):]
		href, after, ok := strings.Cut(rest, `">`)
		if !ok || !strings.HasPrefix(href, "/msg/") {
			continue
		}
		subject, _, _ := strings.Cut(after, "<")
		u.msgs = append(u.msgs, href)
		if n, ok := strings.CutPrefix(subject, "rcbench size "); ok {
			if size, err := strconv.Atoi(n); err == nil {
				u.sized[size] = href
			}
		}
		rest = after
	}
	if len(u.msgs) == 0 {
		return fmt.Errorf("inbox page has no messages")
	}
	return nil
}

// between returns the text of s between the first start and the next end.
func between(s, start, end string) (string, bool) {
	i := strings.Index(s, start)
	if i < 0 {
		return "", false
	}
	v, _, ok := strings.Cut(s[i+len(start):], end)
	return v, ok
}

// open reads one message: the page and, for an HTML message, the
// sanitised body its iframe loads (one user action, two requests).
func (u *user) open(path string) error {
	body, _, err := u.get(path, 200)
	if err != nil {
		return err
	}
	if i := strings.Index(body, `<iframe class="body"`); i >= 0 {
		if src, ok := between(body[i:], ` src="`, `"`); ok {
			_, _, err = u.get(strings.ReplaceAll(src, "&amp;", "&"), 200)
		}
	}
	return err
}

// send opens the compose page and sends a plain text message of size
// bytes of body to rcpt (copy kept in Sent, like Roundcube's).
func (u *user) send(rcpt, text string) error {
	if _, _, err := u.get("/compose", 200); err != nil {
		return err
	}
	code, body, _, err := u.do("POST", "/compose", url.Values{"csrf": {u.csrf}, "to": {rcpt},
		"subject": {fmt.Sprintf("webbench %d bytes", len(text))}, "body": {text}, "action": {"send"}})
	if err != nil {
		return err
	}
	if code != http.StatusSeeOther {
		if len(body) > 300 {
			body = body[:300]
		}
		return fmt.Errorf("send: status %d: %s", code, body)
	}
	return nil
}
