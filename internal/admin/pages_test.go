package admin

import (
	"errors"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"pimail/internal/auth"
	"pimail/internal/deliverylog"
	"pimail/internal/store"
)

func TestEveryPageRenders(t *testing.T) {
	f := newFixture(t)
	c := f.adminClient(t)
	logEntries(t, f.st, store.DeliveryLogEntry{Direction: store.DirectionIn, Result: store.ResultAccepted,
		From: "a@example.net", To: "user@example.com", MessageID: "m1@example.net"},
		store.DeliveryLogEntry{Direction: store.DirectionIn, Result: store.ResultRejected, RemoteIP: "192.0.2.66",
			Count: 40, Reason: "40 more refusals from 192.0.2.66/32"})
	q, err := f.st.Enqueue(ctxT(t), store.QueueEntry{MailFrom: "user@example.com",
		Recipients: []store.QueueRecipient{{Address: "x@example.net"}}}, []byte("Subject: hi\r\n\r\nbody\r\n"))
	if err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{
		"/admin/":                     "Last hour, per minute",
		"/admin/domains":              "example.com",
		"/admin/accounts":             "user@example.com",
		"/admin/aliases":              "No aliases.",
		"/admin/queue":                "x@example.net",
		"/admin/queue/1":              "Subject: hi",
		"/admin/log":                  "m1@example.net",
		"/admin/static/admin.css":     ".grid",
		"/admin/log?q=m1@example.net": "a@example.net",
		"/admin/log?q=192.0.2.66":     "×40",
	} {
		code, body := c.get(path)
		if code != http.StatusOK || !strings.Contains(body, want) {
			t.Errorf("GET %s = %d, want 200 with %q:\n%s", path, code, want, body)
		}
	}
	_ = q
	if code, _ := c.get("/admin/queue/999"); code != http.StatusNotFound {
		t.Errorf("unknown queue entry = %d, want 404", code)
	}
	if code, _ := c.get("/admin/nothing"); code != http.StatusNotFound {
		t.Errorf("unknown page = %d, want 404", code)
	}
}

func TestSecurityHeadersAndCookies(t *testing.T) {
	f := newFixture(t)
	c := f.client(t)
	tok := c.csrf("/admin/login")
	code, _, h := c.post("/admin/login", url.Values{"csrf": {tok}, "username": {"admin@example.com"}, "password": {testPassword}})
	if code != http.StatusSeeOther {
		t.Fatalf("login = %d", code)
	}
	csp := h.Get("Content-Security-Policy")
	if !strings.Contains(csp, "default-src 'none'") || strings.Contains(csp, "unsafe") {
		t.Errorf("CSP = %q", csp)
	}
	var sess *http.Cookie
	for _, ck := range (&http.Response{Header: h}).Cookies() {
		if ck.Name == "pimail-admin" {
			sess = ck
		}
	}
	if sess == nil || !sess.HttpOnly || sess.SameSite != http.SameSiteStrictMode || sess.Path != "/admin/" {
		t.Fatalf("session cookie = %+v", sess)
	}
	if h.Get("X-Frame-Options") != "DENY" || h.Get("Cache-Control") != "no-store" {
		t.Errorf("headers = %v", h)
	}

	// Behind TLS the cookies are Secure and __Secure- prefixed.
	f.srv.cfg.SecureCookies = true
	rec := httptestRecorder(f.srv, "/admin/login")
	ck := rec.Result().Cookies()
	if len(ck) != 1 || ck[0].Name != "__Secure-pimail-admin-login" || !ck[0].Secure || !ck[0].HttpOnly {
		t.Fatalf("secure login cookie = %+v", ck)
	}
}

func TestNonAdminRefused(t *testing.T) {
	f := newFixture(t)
	c := f.client(t)
	code, body := c.login("user@example.com", testPassword)
	if code != http.StatusForbidden || !strings.Contains(body, "not an administrator") {
		t.Fatalf("non-admin login = %d:\n%s", code, body)
	}
	if code, _ := c.get("/admin/"); code != http.StatusSeeOther {
		t.Fatalf("non-admin dashboard = %d, want redirect to login", code)
	}
	code, _ = c.login("admin@example.com", "wrong password!")
	if code != http.StatusUnauthorized {
		t.Fatalf("wrong password = %d", code)
	}
	// Not logged in: pages redirect, posts are refused.
	if code, _, _ := c.post("/admin/domains", url.Values{"action": {"add"}, "domain": {"x.org"}}); code != http.StatusUnauthorized {
		t.Fatalf("anonymous POST = %d", code)
	}

	// An administrator who is demoted (or disabled) loses the session at once.
	a := f.adminClient(t)
	if err := f.st.SetAdmin(ctxT(t), "user@example.com", true); err != nil {
		t.Fatal(err)
	}
	if err := f.st.SetAdmin(ctxT(t), "admin@example.com", false); err != nil {
		t.Fatal(err)
	}
	if code, _ := a.get("/admin/"); code != http.StatusForbidden {
		t.Fatalf("demoted admin = %d, want 403", code)
	}
	if code, _ := a.get("/admin/"); code != http.StatusSeeOther {
		t.Fatalf("demoted admin's session not ended: %d", code)
	}
	u := f.client(t)
	if code, _ := u.login("user@example.com", testPassword); code != http.StatusSeeOther {
		t.Fatalf("newly flagged admin login = %d", code)
	}
	if err := f.st.SetAccountDisabled(ctxT(t), "user@example.com", true); err != nil {
		t.Fatal(err)
	}
	if code, _ := u.get("/admin/"); code != http.StatusForbidden {
		t.Fatalf("disabled admin = %d, want 403", code)
	}
}

func TestCSRFRefused(t *testing.T) {
	f := newFixture(t)
	c := f.adminClient(t)
	add := url.Values{"action": {"add"}, "domain": {"evil.example"}}
	if code, _, _ := c.post("/admin/domains", add); code != http.StatusForbidden {
		t.Fatalf("POST without token = %d, want 403", code)
	}
	add.Set("csrf", "forged")
	if code, _, _ := c.post("/admin/domains", add); code != http.StatusForbidden {
		t.Fatalf("POST with a wrong token = %d, want 403", code)
	}
	// The right token from another origin.
	add.Set("csrf", c.csrf("/admin/domains"))
	for _, h := range [][2]string{{"Origin", "https://attacker.example"}, {"Origin", "null"}, {"Sec-Fetch-Site", "cross-site"}, {"Sec-Fetch-Site", "same-site"}} {
		req, _ := http.NewRequest(http.MethodPost, c.base+"/admin/domains", strings.NewReader(add.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set(h[0], h[1])
		if code, _, _ := c.do(req); code != http.StatusForbidden {
			t.Fatalf("POST with %s: %s = %d, want 403", h[0], h[1], code)
		}
	}
	if ds, _ := f.st.Domains(ctxT(t)); len(ds) != 1 {
		t.Fatalf("a refused request changed the domains: %v", ds)
	}
	// Login without the login form's token (login CSRF).
	d := f.client(t)
	code, _, _ := d.post("/admin/login", url.Values{"username": {"admin@example.com"}, "password": {testPassword}})
	if code != http.StatusForbidden {
		t.Fatalf("login without token = %d, want 403", code)
	}
	// Logout needs the token too.
	if code, _, _ := c.post("/admin/logout", url.Values{}); code != http.StatusForbidden {
		t.Fatalf("logout without token = %d", code)
	}
	if code, _ := c.action("/admin/", "/admin/logout", url.Values{}); code != http.StatusSeeOther {
		t.Fatalf("logout = %d", code)
	}
	if code, _ := c.get("/admin/"); code != http.StatusSeeOther {
		t.Fatalf("after logout = %d", code)
	}
}

func TestDomains(t *testing.T) {
	f := newFixture(t)
	c := f.adminClient(t)
	code, body := c.action("/admin/domains", "/admin/domains", url.Values{"action": {"add"}, "domain": {"New.Example.ORG"}})
	if code != http.StatusSeeOther {
		t.Fatalf("add domain = %d:\n%s", code, body)
	}
	mustContain(t, body, "The domain was added.", "new.example.org")
	code, body = c.action("/admin/domains", "/admin/domains", url.Values{"action": {"add"}, "domain": {"new.example.org"}})
	if code != http.StatusBadRequest || !strings.Contains(body, "already exists") {
		t.Fatalf("add twice = %d:\n%s", code, body)
	}
	code, body = c.action("/admin/domains", "/admin/domains", url.Values{"action": {"remove"}, "domain": {"example.com"}})
	if code != http.StatusConflict || !strings.Contains(body, "accounts and aliases first") {
		t.Fatalf("remove used domain = %d:\n%s", code, body)
	}
	code, _ = c.action("/admin/domains", "/admin/domains", url.Values{"action": {"remove"}, "domain": {"new.example.org"}})
	if code != http.StatusSeeOther {
		t.Fatalf("remove = %d", code)
	}
	if ds, _ := f.st.Domains(ctxT(t)); len(ds) != 1 {
		t.Fatalf("domains = %v", ds)
	}
}

func TestAccounts(t *testing.T) {
	f := newFixture(t)
	c := f.adminClient(t)
	ctx := ctxT(t)
	authn := auth.New(f.st, quiet())
	code, body := c.action("/admin/accounts", "/admin/accounts",
		url.Values{"action": {"add"}, "local": {"Carol"}, "domain": {"example.com"}, "password": {"carol's secret pw"}})
	if code != http.StatusSeeOther {
		t.Fatalf("create = %d:\n%s", code, body)
	}
	mustContain(t, body, "The account was created.", "carol@example.com")
	if _, err := authn.Authenticate(ctx, "carol@example.com", "carol's secret pw", "192.0.2.1"); err != nil {
		t.Fatalf("new account cannot log in: %v", err)
	}
	if _, err := f.st.SCRAM(ctx, "carol@example.com"); err != nil {
		t.Fatalf("no SCRAM keys: %v", err)
	}
	code, body = c.action("/admin/accounts", "/admin/accounts",
		url.Values{"action": {"add"}, "local": {"x"}, "domain": {"example.com"}, "password": {"short"}})
	if code != http.StatusBadRequest || !strings.Contains(body, "at least 10") {
		t.Fatalf("short password = %d", code)
	}
	code, body = c.action("/admin/accounts", "/admin/accounts",
		url.Values{"action": {"add"}, "local": {"x"}, "domain": {"nowhere.example"}, "password": {"long enough pw"}})
	if code != http.StatusBadRequest || !strings.Contains(body, "does not exist") {
		t.Fatalf("unknown domain = %d:\n%s", code, body)
	}

	// Reset with a generated password, shown once.
	code, body = c.action("/admin/accounts", "/admin/accounts", url.Values{"action": {"password"}, "address": {"carol@example.com"}})
	m := regexp.MustCompile(`<code id="generated">([^<]+)</code>`).FindStringSubmatch(body)
	if code != http.StatusOK || m == nil {
		t.Fatalf("generated password = %d:\n%s", code, body)
	}
	if _, err := authn.Authenticate(ctx, "carol@example.com", m[1], "192.0.2.1"); err != nil {
		t.Fatalf("generated password does not work: %v", err)
	}

	steps := []struct {
		action string
		check  func(store.Account) bool
	}{
		{"disable", func(a store.Account) bool { return a.Disabled }},
		{"enable", func(a store.Account) bool { return !a.Disabled }},
	}
	for _, s := range steps {
		code, _ := c.action("/admin/accounts", "/admin/accounts", url.Values{"action": {s.action}, "address": {"carol@example.com"}})
		a, _ := f.st.Account(ctx, "carol@example.com")
		if code != http.StatusSeeOther || !s.check(a) {
			t.Fatalf("%s = %d, account %+v", s.action, code, a)
		}
	}
	if code, _ := c.action("/admin/accounts", "/admin/accounts", url.Values{"action": {"admin"}, "address": {"carol@example.com"}}); code != http.StatusSeeOther {
		t.Fatalf("make admin = %d", code)
	}
	admins, _ := f.st.Admins(ctx)
	if strings.Join(admins, " ") != "admin@example.com carol@example.com" {
		t.Fatalf("admins = %v", admins)
	}
	if code, _ := c.action("/admin/accounts", "/admin/accounts", url.Values{"action": {"unadmin"}, "address": {"carol@example.com"}}); code != http.StatusSeeOther {
		t.Fatalf("revoke admin = %d", code)
	}
	// Not oneself.
	for _, a := range []string{"disable", "remove", "unadmin"} {
		code, body := c.action("/admin/accounts", "/admin/accounts", url.Values{"action": {a}, "address": {"admin@example.com"}, "confirm": {"yes"}})
		if code != http.StatusBadRequest || !strings.Contains(body, "your own account") {
			t.Fatalf("%s self = %d", a, code)
		}
	}
	// Removal needs the confirmation box.
	if code, _ := c.action("/admin/accounts", "/admin/accounts", url.Values{"action": {"remove"}, "address": {"carol@example.com"}}); code != http.StatusBadRequest {
		t.Fatalf("remove without confirm = %d", code)
	}
	code, body = c.action("/admin/accounts", "/admin/accounts", url.Values{"action": {"remove"}, "address": {"carol@example.com"}, "confirm": {"yes"}})
	if code != http.StatusSeeOther || strings.Contains(body, "carol@example.com") {
		t.Fatalf("remove = %d:\n%s", code, body)
	}
	if _, err := f.st.Account(ctx, "carol@example.com"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("account still there: %v", err)
	}
}

func TestAliases(t *testing.T) {
	f := newFixture(t)
	c := f.adminClient(t)
	code, body := c.action("/admin/aliases", "/admin/aliases", url.Values{"action": {"add"}, "address": {"Sales@example.com"}, "targets": {"user@example.com, boss@example.net"}})
	if code != http.StatusSeeOther {
		t.Fatalf("add alias = %d:\n%s", code, body)
	}
	mustContain(t, body, "sales@example.com", "boss@example.net, user@example.com")
	code, body = c.action("/admin/aliases", "/admin/aliases", url.Values{"action": {"add"}, "address": {"@example.com"}, "targets": {"user@example.com"}})
	if code != http.StatusSeeOther || !strings.Contains(body, "catch-all") {
		t.Fatalf("catch-all = %d:\n%s", code, body)
	}
	code, _ = c.action("/admin/aliases", "/admin/aliases", url.Values{"action": {"add"}, "address": {"x@nowhere.example"}, "targets": {"user@example.com"}})
	if code != http.StatusBadRequest {
		t.Fatalf("alias in unknown domain = %d", code)
	}
	code, _ = c.action("/admin/aliases", "/admin/aliases", url.Values{"action": {"add"}, "address": {"y@example.com"}, "targets": {"@example.com"}})
	if code != http.StatusBadRequest {
		t.Fatalf("bad target = %d", code)
	}
	if code, _ := c.action("/admin/aliases", "/admin/aliases", url.Values{"action": {"remove"}, "address": {"sales@example.com"}}); code != http.StatusSeeOther {
		t.Fatalf("remove = %d", code)
	}
	al, _ := f.st.Aliases(ctxT(t))
	if len(al) != 1 || al[0].Address != "@example.com" {
		t.Fatalf("aliases = %+v", al)
	}
}

func TestQueueActions(t *testing.T) {
	f := newFixture(t)
	c := f.adminClient(t)
	ctx := ctxT(t)
	later := time.Now().Add(2 * time.Hour)
	e, err := f.st.Enqueue(ctx, store.QueueEntry{MailFrom: "user@example.com", NextAttempt: later,
		Recipients: []store.QueueRecipient{{Address: "far@example.net"}}},
		[]byte("From: user@example.com\r\nSubject: <b>queued</b>\r\n\r\nhello\r\n"))
	if err != nil {
		t.Fatal(err)
	}
	path := "/admin/queue/" + itoa(e.ID)
	code, body := c.get(path)
	if code != http.StatusOK {
		t.Fatalf("show = %d", code)
	}
	mustContain(t, body, "far@example.net", "Subject: &lt;b&gt;queued&lt;/b&gt;")
	code, body = c.action(path, path, url.Values{"action": {"retry"}})
	if code != http.StatusSeeOther || !strings.Contains(body, "will be retried") {
		t.Fatalf("retry = %d:\n%s", code, body)
	}
	got, _ := f.st.QueueEntry(ctx, e.ID)
	if got.NextAttempt.After(time.Now()) {
		t.Fatalf("retry left next attempt at %v", got.NextAttempt)
	}
	code, body = c.action(path, path, url.Values{"action": {"drop"}})
	if code != http.StatusSeeOther || !strings.Contains(body, "The outbound queue is empty.") {
		t.Fatalf("drop = %d:\n%s", code, body)
	}
	if _, err := f.st.QueueEntry(ctx, e.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("entry not dropped: %v", err)
	}
}

func TestDeliveryLogSearchAndXSS(t *testing.T) {
	f := newFixture(t)
	c := f.adminClient(t)
	const evilFrom = `"><script>alert('from')</script>@evil.example`
	const evilSubject = `<img src=x onerror=alert('subject')>`
	logEntries(t, f.st,
		store.DeliveryLogEntry{Direction: store.DirectionIn, Result: store.ResultRejected, From: evilFrom,
			To: "user@example.com", RemoteIP: "198.51.100.7", Subject: evilSubject, Reason: "550 5.7.1 <script>x</script>"},
		store.DeliveryLogEntry{Direction: store.DirectionOut, Result: store.ResultDelivered, MessageID: "<out1@example.com>",
			QueueID: 7, From: "user@example.com", To: "far@example.net", RemoteIP: "203.0.113.5", Reason: "250 ok"},
		store.DeliveryLogEntry{Direction: store.DirectionOut, Result: store.ResultDeferred, QueueID: 8,
			From: "user@example.com", To: "slow@example.org", Reason: "451 4.7.1 greylisted"},
	)
	code, body := c.get("/admin/log")
	if code != http.StatusOK {
		t.Fatal(code)
	}
	if strings.Contains(body, "<script>") || strings.Contains(body, "<img ") {
		t.Fatalf("markup from the network reached the page:\n%s", body)
	}
	mustContain(t, body, "&lt;script&gt;alert(&#39;from&#39;)&lt;/script&gt;@evil.example", "&lt;img src=x onerror=alert(&#39;subject&#39;)&gt;",
		"rejected", "delivered", "deferred", "451 4.7.1 greylisted")
	for q, want := range map[string][]string{
		"out1@example.com":   {"far@example.net"},
		"<out1@example.com>": {"far@example.net"},
		"7":                  {"far@example.net"},
		"slow@example.org":   {"greylisted"},
		"@evil.example":      {"evil.example"},
		"198.51.100.7":       {"550 5.7.1"},
	} {
		code, body := c.get("/admin/log?q=" + url.QueryEscape(q))
		if code != http.StatusOK {
			t.Fatalf("search %q = %d", q, code)
		}
		mustContain(t, body, want...)
		if n := strings.Count(body, "<tr class=\"r-"); n != 1 {
			t.Errorf("search %q found %d rows, want 1", q, n)
		}
	}
	_, body = c.get("/admin/log?result=deferred")
	if n := strings.Count(body, "<tr class=\"r-"); n != 1 || !strings.Contains(body, "greylisted") {
		t.Errorf("result filter: %d rows", n)
	}
	// The dashboard counts them.
	_, body = c.get("/admin/")
	mustContain(t, body, "in · rejected", "out · delivered", "Rejected: <strong>1</strong>")
}

func TestLogPaging(t *testing.T) {
	f := newFixture(t)
	c := f.adminClient(t)
	var batch []store.DeliveryLogEntry
	for i := range logPageSize + 5 {
		batch = append(batch, store.DeliveryLogEntry{Direction: store.DirectionIn, Result: store.ResultAccepted,
			To: "user@example.com", Reason: "n" + itoa(int64(i)) + "."})
	}
	logEntries(t, f.st, batch...)
	_, body := c.get("/admin/log")
	m := regexp.MustCompile(`href="(/admin/log\?[^"]+)" id="older"`).FindStringSubmatch(body)
	if m == nil || strings.Contains(body, ">n0.<") {
		t.Fatalf("first page has no link to older entries")
	}
	_, body = c.get(strings.ReplaceAll(m[1], "&amp;", "&"))
	if !strings.Contains(body, ">n0.<") || strings.Count(body, "<tr class=\"r-") != 5 || strings.Contains(body, `id="older"`) {
		t.Fatalf("second page wrong:\n%s", body)
	}
}

// TestLogPageFlushesTheLogger: the log page shows an entry that the
// delivery logger still holds in its buffer.
func TestLogPageFlushesTheLogger(t *testing.T) {
	f := newFixture(t)
	dlog := deliverylog.New(f.st, quiet(), deliverylog.Options{FlushInterval: time.Hour, Retention: -1})
	t.Cleanup(func() { dlog.Close() })
	f.srv.cfg.DeliveryLog = dlog
	c := f.adminClient(t)
	dlog.Log(store.DeliveryLogEntry{Direction: store.DirectionIn, Result: store.ResultAccepted,
		To: "user@example.com", Reason: "buffered entry."})
	if _, body := c.get("/admin/log"); !strings.Contains(body, ">buffered entry.<") {
		t.Fatalf("log page without the buffered entry:\n%s", body)
	}
}

// TestDeliveryLogControlCharacters: control and bidi characters in a
// logged subject and sender are shown marked, not raw (issue 22).
func TestDeliveryLogControlCharacters(t *testing.T) {
	f := newFixture(t)
	c := f.adminClient(t)
	logEntries(t, f.st, store.DeliveryLogEntry{Direction: store.DirectionIn, Result: store.ResultAccepted,
		From: "ceo\u202e@evil.example", To: "user@example.com", Subject: "invoice\u202efdp.exe \x1b[2J", Reason: "250 ok"})
	code, body := c.get("/admin/log")
	if code != http.StatusOK {
		t.Fatal(code)
	}
	body = html.UnescapeString(body)
	if strings.ContainsAny(body, "\u202e\x1b") {
		t.Fatalf("raw control or bidi character on the page")
	}
	mustContain(t, body, "invoice[U+202E]fdp.exe [U+001B][2J", "ceo[U+202E]@evil.example")
}
