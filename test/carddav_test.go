package blackbox

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestCardDAVVdirsyncer syncs an account's address book both ways with
// Debian's vdirsyncer (a real CardDAV client, RFC 6352 over discovery of
// RFC 6764 and RFC 5397): a card made in the webmail reaches the client's
// folder, a card edited and one added there reach the webmail, and an edit
// made in the webmail after that reaches the client again.
func TestCardDAVVdirsyncer(t *testing.T) {
	t.Parallel()
	vdir := requireTool(t, "vdirsyncer")
	srv := NewServer(t, "")
	user := srv.AddAccounts("cards")[0]
	l := withListeners(t, "http")
	srv.StartWith(l)
	base := "http://" + l.HTTP
	web, _ := webmailLogin(t, base, user)
	save := func(vals url.Values) {
		t.Helper()
		page := webGet(t, web, base+"/contacts/card")
		m := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindStringSubmatch(page)
		if m == nil {
			t.Fatalf("no CSRF token on the contact form")
		}
		vals.Set("csrf", m[1])
		resp, err := web.PostForm(base+"/contacts/save", vals)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "Contact saved.") {
			t.Fatalf("save contact: %s\n%s", resp.Status, clip(string(body), 2000))
		}
	}
	save(url.Values{"name": {"Ann Webmail"}, "emails": {"ann@example.net"}, "groups": {"Friends"}})

	dir := t.TempDir()
	local := filepath.Join(dir, "contacts")
	conf := filepath.Join(dir, "config")
	if err := os.WriteFile(conf, []byte(`[general]
status_path = "`+filepath.Join(dir, "status")+`/"

[pair book]
a = "local"
b = "server"
collections = ["from b"]
conflict_resolution = "b wins"

[storage local]
type = "filesystem"
path = "`+local+`/"
fileext = ".vcf"

[storage server]
type = "carddav"
url = "`+base+`/dav/"
username = "`+user+`"
password = "`+testPassword+`"
`), 0o600); err != nil {
		t.Fatal(err)
	}
	env := []string{"HOME=" + dir, "LC_ALL=C.UTF-8"}
	sync := func() {
		t.Helper()
		runTool(t, time.Minute, dir, env, vdir, "-c", conf, "sync")
	}
	// discover asks whether to create the local folder: yes.
	cmdOut, err := runToolStdin(time.Minute, dir, env, "y\ny\ny\n", vdir, "-c", conf, "discover")
	if err != nil {
		t.Fatalf("vdirsyncer discover: %v\n%s", err, cmdOut)
	}
	sync()
	book := filepath.Join(local, "default")
	cards := func() map[string]string {
		t.Helper()
		out := map[string]string{}
		files, _ := filepath.Glob(filepath.Join(book, "*.vcf"))
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			out[f] = string(b)
		}
		return out
	}
	var annFile string
	for f, c := range cards() {
		if strings.Contains(c, "FN:Ann Webmail") && strings.Contains(c, "ann@example.net") && strings.Contains(c, "CATEGORIES:Friends") {
			annFile = f
		}
	}
	if annFile == "" {
		t.Fatalf("the webmail's card did not reach the client: %v", cards())
	}

	// On the client: edit Ann, add Bob.
	ann := cards()[annFile]
	if err := os.WriteFile(annFile, []byte(strings.Replace(ann, "FN:Ann Webmail", "FN:Ann Edited On The Phone", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	bob := "BEGIN:VCARD\r\nVERSION:3.0\r\nUID:bob-from-the-client\r\nFN:Bob Client\r\nN:Client;Bob;;;\r\nEMAIL:bob@example.org\r\nEND:VCARD\r\n"
	if err := os.WriteFile(filepath.Join(book, "bob-from-the-client.vcf"), []byte(bob), 0o600); err != nil {
		t.Fatal(err)
	}
	sync()
	list := webGet(t, web, base+"/contacts")
	if !strings.Contains(list, "Ann Edited On The Phone") || !strings.Contains(list, "Bob Client") || strings.Contains(list, "Ann Webmail") {
		t.Fatalf("the client's edit and new card are not in the webmail:\n%s", clip(list, 3000))
	}

	// In the webmail: edit Bob; the client gets the change.
	form := webGet(t, web, base+"/contacts/card?href="+url.QueryEscape(hrefOf(t, list, "Bob Client")))
	version := regexp.MustCompile(`name="version" value="(\d+)"`).FindStringSubmatch(form)
	href := regexp.MustCompile(`name="href" value="([^"]+)"`).FindStringSubmatch(form)
	if version == nil || href == nil {
		t.Fatalf("Bob's form:\n%s", clip(form, 2000))
	}
	save(url.Values{"href": {href[1]}, "version": {version[1]}, "name": {"Bob Edited In The Webmail"}, "emails": {"bob@example.org\nbob@work.example"}})
	sync()
	found := false
	for _, c := range cards() {
		if strings.Contains(c, "FN:Bob Edited In The Webmail") && strings.Contains(c, "bob@work.example") && strings.Contains(c, "UID:bob-from-the-client") {
			found = true
		}
		if strings.Contains(c, "Ann") && !strings.Contains(c, "FN:Ann Edited On The Phone") {
			t.Errorf("Ann's card on the client lost its edit:\n%s", c)
		}
	}
	if !found || len(cards()) != 2 {
		t.Fatalf("the webmail's edit did not reach the client: %v", cards())
	}
	// Nothing left to do: a second sync changes nothing.
	before := cards()
	sync()
	if after := cards(); len(after) != len(before) {
		t.Fatalf("a quiet sync changed the client: %v", after)
	}
}

// hrefOf finds the card link of a name on the contacts page.
func hrefOf(t *testing.T, page, name string) string {
	t.Helper()
	m := regexp.MustCompile(`<a href="/contacts/card\?href=([^"]+)">` + regexp.QuoteMeta(name) + `</a>`).FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("no card %q on:\n%s", name, clip(page, 3000))
	}
	h, err := url.QueryUnescape(strings.ReplaceAll(m[1], "&amp;", "&"))
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// runToolStdin is runToolErr with stdin given.
func runToolStdin(timeout time.Duration, dir string, env []string, stdin, name string, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdin = strings.NewReader(stdin)
	cmd.WaitDelay = 5 * time.Second
	return cmd.CombinedOutput()
}
