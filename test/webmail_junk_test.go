package blackbox

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"
)

// TestWebmailJunkTrainsSpamFilter marks messages as junk and as not junk
// in the webmail of the real server and then scores new messages with
// `pimail spam check` for that account: the account's classifier learned
// from the clicks.
func TestWebmailJunkTrainsSpamFilter(t *testing.T) {
	t.Parallel()
	junkTraining(t, "junkclicker", markInWebmail)
}

// TestIMAPJunkTrainsSpamFilter does the same with an IMAP client: the
// junk-like messages moved into Junk, the others flagged $NotJunk.
func TestIMAPJunkTrainsSpamFilter(t *testing.T) {
	t.Parallel()
	junkTraining(t, "junkmover", markOverIMAP)
}

// junkTraining delivers 25 junk-like messages (subject "toolchain release
// notes N") and 25 ordinary ones ("planning meeting notes N") to a new
// account, has mark tell the server which are which, and checks that the
// account's classifier learned it.
func junkTraining(t *testing.T, name string, mark func(t *testing.T, srv *Server, l Listeners, user string)) {
	srv := NewServer(t, "")
	user := srv.AddAccounts(name)[0]
	l := withListeners(t, "http")
	srv.StartWith(l)
	const n = 25
	// Junk to this user, not to the shipped base model: a vendor's
	// newsletter the user never asked for, written like the technical
	// mail of the shipped model's ham, so that it reaches INBOX and only
	// the user's own clicks can teach the filter otherwise.
	spamText := func(i int) string {
		return fmt.Sprintf("From: Toolchain Updates <updates%d@vendor.example>\r\nTo: %s\r\nSubject: toolchain release notes %d\r\n"+
			"Date: %s\r\nMessage-ID: <release%d@vendor.example>\r\n\r\n"+
			"The new release of the build tools fixes the compiler warnings on Linux and updates the documentation; "+
			"see the changelog for the list of patches and the kernel modules it was tested with, release %d.\r\n",
			i, user, i, time.Now().Format(time.RFC1123Z), i, i)
	}
	hamText := func(i int) string {
		return fmt.Sprintf("From: Ann Colleague <ann@work.example>\r\nTo: %s\r\nSubject: planning meeting notes %d\r\n"+
			"Date: %s\r\nMessage-ID: <notes%d@work.example>\r\n\r\n"+
			"Notes from the planning meeting: the budget review moves to Thursday, please update the roadmap draft %d.\r\n",
			user, i, time.Now().Format(time.RFC1123Z), i, i)
	}
	s := dialSMTP(t, srv.SMTP)
	for i := range n {
		s.send("deals@shop.example", []string{user}, []byte(spamText(i)))
		s.send("ann@work.example", []string{user}, []byte(hamText(i)))
	}
	s.Close()

	// The scores of two new messages for this account, before any click.
	dir := t.TempDir()
	probe := func() (spamP, hamP string) {
		t.Helper()
		get := func(name, text string) string {
			f := filepath.Join(dir, name)
			if err := os.WriteFile(f, []byte(text), 0o600); err != nil {
				t.Fatal(err)
			}
			out := srv.Admin("spam", "check", "--account", user, f)
			if m := regexp.MustCompile(`bayes probability ([0-9.]+)`).FindStringSubmatch(out); m != nil {
				return m[1]
			}
			return "untrained"
		}
		return get("spam.eml", spamText(1000)), get("ham.eml", hamText(1000))
	}
	spam0, ham0 := probe()

	mark(t, srv, l, user)
	srv.Stop() // the learner saves the account's model on shutdown

	spam1, ham1 := probe()
	t.Logf("bayes probability for this account: junk-like %s → %s, ordinary %s → %s", spam0, spam1, ham0, ham1)
	p := func(s string) float64 {
		v, err := strconv.ParseFloat(s, 64)
		if err != nil {
			t.Fatalf("no bayes probability after training (%q)", s)
		}
		return v
	}
	// The classifier's indicator does not saturate (internal/spam,
	// combine): a few dozen clicks move it far, not to 0 or 1.
	if p(spam1) < 0.8 || p(ham1) > 0.3 {
		t.Fatalf("after marking: junk-like %s, ordinary %s; want > 0.8 and < 0.3", spam1, ham1)
	}
	if spam0 != "untrained" && p(spam1)-p(spam0) < 0.3 {
		t.Fatalf("marking as junk moved the junk-like score only from %s to %s", spam0, spam1)
	}
}

// markInWebmail clicks "junk" on the junk-like messages of the inbox and
// "not junk" on the ordinary ones.
func markInWebmail(t *testing.T, srv *Server, l Listeners, user string) {
	base := "http://" + l.HTTP
	c, inbox := webmailLogin(t, base, user)
	box := strings.TrimPrefix(inbox, "/box/")
	var spamUIDs, hamUIDs []string
	var csrf string
	for page := 0; ; page++ {
		body := webGet(t, c, fmt.Sprintf("%s%s?page=%d", base, inbox, page))
		if m := regexp.MustCompile(`<meta name="csrf" content="([^"]+)"`).FindStringSubmatch(body); m != nil {
			csrf = m[1]
		}
		// A row names its message in data-href; the subject's link opens
		// it in the reading pane.
		rows := regexp.MustCompile(`data-href="/msg/`+box+`/(\d+)"[^>]*>(?s:.*?)<td class="subj"><a href="[^"]*">([^<]*)</a>`).FindAllStringSubmatch(body, -1)
		for _, r := range rows {
			switch {
			case strings.HasPrefix(r[2], "toolchain release notes"):
				spamUIDs = append(spamUIDs, r[1])
			case strings.HasPrefix(r[2], "planning meeting notes"):
				hamUIDs = append(hamUIDs, r[1])
			}
		}
		if page == 0 && len(rows) == 0 {
			t.Logf("inbox page: %s", clip(body, 3000))
		}
		if len(rows) == 0 || page > 5 {
			break
		}
	}
	if len(spamUIDs) < 20 || len(hamUIDs) < 20 {
		t.Fatalf("inbox holds %d of the junk-like and %d of the ordinary messages, want 20 each", len(spamUIDs), len(hamUIDs))
	}
	act := func(op string, uids []string) {
		t.Helper()
		resp, err := c.PostForm(base+"/act", url.Values{"csrf": {csrf}, "box": {box}, "op": {op}, "uid": uids})
		if err != nil {
			t.Fatalf("%s: %v", op, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK { // the redirect to the folder was followed
			t.Fatalf("%s: %s\n%s", op, resp.Status, clip(string(b), 1000))
		}
	}
	act("junk", spamUIDs)
	act("notjunk", hamUIDs)
}

// markOverIMAP moves the junk-like messages into Junk and flags the
// ordinary ones $NotJunk (RFC 5788's registry), with go-imap's client.
func markOverIMAP(t *testing.T, srv *Server, _ Listeners, user string) {
	c, err := imapclient.DialInsecure(srv.IMAP, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Login(user, testPassword).Wait(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Select("INBOX", nil).Wait(); err != nil {
		t.Fatal(err)
	}
	find := func(subject string) imap.UIDSet {
		t.Helper()
		d, err := c.UIDSearch(&imap.SearchCriteria{Header: []imap.SearchCriteriaHeaderField{{Key: "Subject", Value: subject}}}, nil).Wait()
		if err != nil {
			t.Fatalf("SEARCH %s: %v", subject, err)
		}
		uids := d.AllUIDs()
		if len(uids) < 20 {
			t.Fatalf("SEARCH %s: %d messages, want 20 or more", subject, len(uids))
		}
		return imap.UIDSetNum(uids...)
	}
	spamUIDs, hamUIDs := find("toolchain release notes"), find("planning meeting notes")
	if _, err := c.Move(spamUIDs, "Junk").Wait(); err != nil {
		t.Fatalf("MOVE to Junk: %v", err)
	}
	if err := c.Store(hamUIDs, &imap.StoreFlags{Op: imap.StoreFlagsAdd, Silent: true, Flags: []imap.Flag{"$NotJunk"}}, nil).Close(); err != nil {
		t.Fatalf("STORE $NotJunk: %v", err)
	}
	if err := c.Logout().Wait(); err != nil {
		t.Fatal(err)
	}
}

// webGet fetches a page and fails the test on anything but 200.
func webGet(t *testing.T, c *http.Client, u string) string {
	t.Helper()
	resp, err := c.Get(u)
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", u, resp.Status)
	}
	return string(b)
}
