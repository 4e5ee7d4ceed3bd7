package blackbox

import (
	"bufio"
	"net"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// localserve runs `pimail localserve` on data with free ports until it is
// ready and returns its output so far and the IMAP address; stop ends it.
func localserve(t *testing.T, data string) (out string, imapAddr string, stop func()) {
	t.Helper()
	imapAddr = freeAddr(t)
	args := []string{"localserve", "--data", data, "--imap", imapAddr}
	for _, l := range []string{"smtp", "submission", "submissions", "imaps", "pop3", "pop3s", "http", "managesieve"} {
		args = append(args, "--"+l, freeAddr(t))
	}
	cmd := exec.Command(pimailBin, args...)
	log := newLogWriter()
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	stop = func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	}
	t.Cleanup(stop)
	select {
	case <-log.ready:
	case <-done:
		t.Fatalf("localserve exited:\n%s", log.tail(4000))
	case <-time.After(readyTimeout):
		t.Fatalf("localserve not ready:\n%s", log.tail(4000))
	}
	// The banner is printed when ready; give it a moment to be complete.
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(log.tail(maxLogBytes), "stop with Ctrl-C") && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	return log.tail(maxLogBytes), imapAddr, stop
}

// imapLoginOK reports whether LOGIN user pw succeeds at addr.
func imapLoginOK(t *testing.T, addr, user, pw string) bool {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ic := &imapConn{c: c, r: bufio.NewReader(c)}
	if line, err := ic.line(); err != nil || !strings.HasPrefix(line, "* OK") {
		t.Fatalf("greeting %q: %v", line, err)
	}
	status, _, err := ic.command("L", "LOGIN "+quoteIMAP(user)+" "+quoteIMAP(pw))
	if err != nil {
		t.Fatal(err)
	}
	return strings.HasPrefix(status, "OK")
}

// TestLocalserve: localserve prints a password that logs in, says which
// ports it opened (submission too), and after `account passwd` no longer
// prints the first password (issue 24: it kept printing it).
func TestLocalserve(t *testing.T) {
	t.Parallel()
	data := t.TempDir() + "/data"
	out, imapAddr, stop := localserve(t, data)
	m := regexp.MustCompile(`password:\s+(\S+)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no password in:\n%s", out)
	}
	first := m[1]
	for _, want := range []string{"me@localhost", "submission", "submissions", "IMAPS", "POP3S", "webmail"} {
		if !strings.Contains(out, want) {
			t.Errorf("the banner does not mention %s:\n%s", want, out)
		}
	}
	if !imapLoginOK(t, imapAddr, "me@localhost", first) {
		t.Fatalf("the printed password %q does not log in", first)
	}
	stop()

	runTool(t, time.Minute, "", nil, pimailBin, "account", "passwd", "--password", "another-secret-2", "me@localhost", "--data", data)
	out, imapAddr, _ = localserve(t, data)
	if strings.Contains(out, first) || !strings.Contains(out, "changed with pimail account passwd") {
		t.Errorf("after account passwd, localserve prints:\n%s", out)
	}
	if !imapLoginOK(t, imapAddr, "me@localhost", "another-secret-2") {
		t.Error("the new password does not log in")
	}
}
