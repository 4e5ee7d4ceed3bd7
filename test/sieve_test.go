package blackbox

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2"
)

// TestSieveThroughTheBinary: a user uploads and activates a Sieve script
// with Debian's sieve-connect (a ManageSieve client, RFC 5804, over
// STARTTLS); a script with an error is refused with its line; then mail
// sent over SMTP is filed with its flags, refused at DATA (reject, 550
// 5.7.1), redirected to another domain through the queue with an SRS
// sender, and answered by vacation once per sender, never to a list.
func TestSieveThroughTheBinary(t *testing.T) {
	tool := requireTool(t, "sieve-connect")
	mx := startCaptureMX(t)
	srv := NewServer(t, fmt.Sprintf("[queue]\nmta_sts = false\nretry_initial = \"1s\"\n[queue.transports.\"remote.test\"]\nhost = %q\n", mx.addr))
	users := srv.AddAccounts("alice")
	l := withListeners(t, "managesieve")
	srv.StartWith(l)
	host, port, _ := net.SplitHostPort(l.ManageSieve)
	dir := t.TempDir()

	sc := func(args ...string) (string, error) {
		base := []string{"--server", host, "--port", port, "--nosrv", "--user", users[0],
			"--passwordfd", "0", "--notlsverify", "--tlshostname", "test.local"}
		cmd := fmt.Sprintf("echo %s | %s %s", testPassword, tool, strings.Join(append(base, args...), " "))
		out, err := runToolErr(time.Minute, dir, nil, "sh", "-c", cmd)
		return string(out), err
	}
	script := `require ["fileinto", "mailbox", "imap4flags", "reject", "vacation", "copy"];
if header :contains "subject" "[list]" {
    fileinto :create :flags "\\Flagged" "Lists/news";
    stop;
}
if header :contains "subject" "offer" {
    reject "No offers, thanks";
    stop;
}
if header :contains "subject" "forward me" {
    redirect :copy "friend@remote.test";
}
vacation :days 1 :subject "Out of office" "I am away until Monday.";
`
	broken := "require \"fileinto\";\nif true {\n  filein \"x\";\n}\n"
	if err := os.WriteFile(filepath.Join(dir, "rules.sieve"), []byte(script), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "broken.sieve"), []byte(broken), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := sc("--localsieve", "broken.sieve", "--checkscript"); err == nil || !strings.Contains(out, "line 3, column 3") {
		t.Errorf("checkscript of a broken script: %v\n%s", err, out)
	}
	if out, err := sc("--localsieve", "broken.sieve", "--upload"); err == nil || !strings.Contains(out, "line 3") {
		t.Errorf("upload of a broken script: %v\n%s", err, out)
	}
	if out, err := sc("--localsieve", "rules.sieve", "--remotesieve", "rules", "--upload"); err != nil {
		t.Fatalf("upload: %v\n%s", err, out)
	}
	if out, err := sc("--remotesieve", "rules", "--activate"); err != nil {
		t.Fatalf("activate: %v\n%s", err, out)
	}
	out, err := sc("--list")
	if err != nil || !strings.Contains(out, `"rules" ACTIVE`) || strings.Contains(out, "broken") {
		t.Fatalf("list: %v\n%s", err, out)
	}
	if out, err := sc("--localsieve", "back.sieve", "--remotesieve", "rules", "--download"); err != nil {
		t.Fatalf("download: %v\n%s", err, out)
	}
	if back, _ := os.ReadFile(filepath.Join(dir, "back.sieve")); string(back) != script {
		t.Errorf("downloaded script differs:\n%s", back)
	}

	stamp := time.Now().UnixNano()
	send := func(from, subject string, extra string) (int, string) {
		t.Helper()
		s := dialSMTP(t, srv.SMTP)
		defer s.expect("QUIT", 221)
		msg := "From: <" + from + ">\r\nTo: <" + users[0] + ">\r\nSubject: " + subject +
			"\r\nDate: " + time.Now().Format(time.RFC1123Z) + fmt.Sprintf("\r\nMessage-ID: <%d.%s>", time.Now().UnixNano(), from) +
			"\r\n" + extra + "\r\nBody of " + subject + ".\r\n"
		s.expect("MAIL FROM:<"+from+">", 250)
		s.expect("RCPT TO:<"+users[0]+">", 250)
		code, text, err := s.data([]byte(msg))
		if err != nil {
			t.Fatalf("send %q: %v", subject, err)
		}
		return code, text
	}
	alice := imapLogin(t, srv.IMAP, users[0], nil)

	// fileinto :create with flags.
	list := fmt.Sprintf("[list] news %d", stamp)
	if code, text := send("news@remote.test", list, "List-Id: <news.remote.test>\r\n"); code != 250 {
		t.Fatalf("list mail: %d %s", code, text)
	}
	if waitMessage(t, alice, "Lists/news", list, 10*time.Second) == "" {
		t.Fatal("the list message is not in Lists/news")
	}
	sel, err := alice.Select("Lists/news", nil).Wait()
	if err != nil || sel.NumMessages != 1 {
		t.Fatalf("SELECT Lists/news: %v %+v", err, sel)
	}
	// The mailbox :create made is subscribed (RFC 5490 §3.2), so that
	// clients showing only subscribed mailboxes show it.
	subs, err := alice.List("", "*", &imap.ListOptions{SelectSubscribed: true}).Collect()
	if err != nil {
		t.Fatalf("LIST (SUBSCRIBED): %v", err)
	}
	var names []string
	for _, m := range subs {
		names = append(names, m.Mailbox)
	}
	if !slices.Contains(names, "Lists/news") {
		t.Errorf("Lists/news, made by fileinto :create, is not subscribed: %q", names)
	}
	var one imap.SeqSet
	one.AddNum(1)
	msgs, err := alice.Fetch(one, &imap.FetchOptions{Flags: true}).Collect()
	if err != nil || len(msgs) != 1 || !hasFlag(msgs[0].Flags, imap.FlagFlagged) {
		t.Errorf("flags of the filed message: %v %+v", err, msgs)
	}

	// reject at SMTP time.
	if code, text := send("shop@remote.test", fmt.Sprintf("special offer %d", stamp), ""); code != 550 || !strings.Contains(text, "5.7.1 No offers, thanks") {
		t.Errorf("reject: %d %q; want 550 5.7.1 No offers, thanks", code, text)
	}

	// redirect :copy to another domain, with an SRS sender; the copy
	// stays, and the vacation answers (once).
	fwd := fmt.Sprintf("forward me %d", stamp)
	if code, text := send("sender@remote.test", fwd, ""); code != 250 {
		t.Fatalf("forward me: %d %s", code, text)
	}
	got := mx.wait(t, "Subject: "+fwd, 30*time.Second)
	if len(got.rcpts) != 1 || got.rcpts[0] != "friend@remote.test" || !strings.HasPrefix(got.from, "SRS0=") ||
		!strings.Contains(got.data, "X-Sieve-Redirected-From: "+users[0]) {
		t.Errorf("redirected copy: from %q to %v\n%s", got.from, got.rcpts, headerOf(got.data))
	}
	if waitMessage(t, alice, "INBOX", fwd, 10*time.Second) == "" {
		t.Error("redirect :copy left no copy in INBOX")
	}
	reply := mx.wait(t, "Subject: Out of office", 30*time.Second)
	if reply.from != "" || len(reply.rcpts) != 1 || reply.rcpts[0] != "sender@remote.test" ||
		!strings.Contains(reply.data, "Auto-Submitted: auto-replied") || !strings.Contains(reply.data, "I am away until Monday.") {
		t.Errorf("vacation reply: MAIL FROM:<%s> to %v\n%s", reply.from, reply.rcpts, reply.data)
	}
	// The same sender again: no second reply within :days. Another
	// sender gets one; by the time it arrives, a second reply to the
	// first sender would have too.
	if code, _ := send("sender@remote.test", fmt.Sprintf("again %d", stamp), ""); code != 250 {
		t.Fatal(code)
	}
	if code, _ := send("other@remote.test", fmt.Sprintf("hello %d", stamp), ""); code != 250 {
		t.Fatal(code)
	}
	mx.wait(t, "To: <other@remote.test>", 30*time.Second)
	time.Sleep(2 * time.Second)
	replies := map[string]int{}
	mx.mu.Lock()
	for _, m := range mx.got {
		if strings.Contains(m.data, "Subject: Out of office") {
			replies[m.rcpts[0]]++
		}
	}
	mx.mu.Unlock()
	if replies["sender@remote.test"] != 1 || replies["other@remote.test"] != 1 || replies["news@remote.test"] != 0 {
		t.Errorf("vacation replies by recipient: %v; want one each to sender and other, none to the list", replies)
	}
}

func hasFlag(flags []imap.Flag, f imap.Flag) bool {
	for _, g := range flags {
		if strings.EqualFold(string(g), string(f)) {
			return true
		}
	}
	return false
}

// putSieve uploads script with sieve-connect (ManageSieve over STARTTLS)
// and makes it user's active script.
func putSieve(t *testing.T, addr, user, script string) {
	t.Helper()
	tool := requireTool(t, "sieve-connect")
	host, port, _ := net.SplitHostPort(addr)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "s.sieve"), []byte(script), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, step := range []string{"--localsieve s.sieve --remotesieve s --upload", "--remotesieve s --activate"} {
		cmd := fmt.Sprintf("echo %s | %s --server %s --port %s --nosrv --user %s --passwordfd 0 --notlsverify --tlshostname test.local %s",
			testPassword, tool, host, port, user, step)
		if out, err := runToolErr(time.Minute, dir, nil, "sh", "-c", cmd); err != nil {
			t.Fatalf("sieve-connect %s: %v\n%s", step, err, out)
		}
	}
}
