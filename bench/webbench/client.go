package main

import (
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
}

var (
	csrfInput = regexp.MustCompile(`name="csrf" value="([^"]+)"`)
	csrfMeta  = regexp.MustCompile(`<meta name="csrf" content="([^"]+)"`)
	msgLink   = regexp.MustCompile(`<td class="subj"><a href="(/msg/\d+/\d+)">([^<]*)</a>`)
	frameSrc  = regexp.MustCompile(`<iframe[^>]* src="([^"]+)"`)
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
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, "", "", fmt.Errorf("%s %s: %w", method, path, err)
	}
	return resp.StatusCode, string(b), resp.Header.Get("Location"), nil
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

// list fetches the inbox's first page and remembers its messages.
func (u *user) list() error {
	body, _, err := u.get(u.inbox, 200)
	if err != nil {
		return err
	}
	if m := csrfMeta.FindStringSubmatch(body); m != nil {
		u.csrf = m[1]
	}
	rows := msgLink.FindAllStringSubmatch(body, -1)
	if len(rows) == 0 {
		return fmt.Errorf("inbox page has no messages")
	}
	u.msgs = u.msgs[:0]
	for _, r := range rows {
		u.msgs = append(u.msgs, r[1])
		if n, ok := strings.CutPrefix(r[2], "rcbench size "); ok {
			if size, err := strconv.Atoi(n); err == nil {
				u.sized[size] = r[1]
			}
		}
	}
	return nil
}

// open reads one message: the page and, for an HTML message, the
// sanitised body its iframe loads (one user action, two requests).
func (u *user) open(path string) error {
	body, _, err := u.get(path, 200)
	if err != nil {
		return err
	}
	if m := frameSrc.FindStringSubmatch(body); m != nil {
		_, _, err = u.get(strings.ReplaceAll(m[1], "&amp;", "&"), 200)
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
