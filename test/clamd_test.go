package blackbox

import (
	"archive/zip"
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// testEICAR is the EICAR anti-virus test file (eicar.org), harmless by
// design.
const testEICAR = `X5O!P%@AP[4\PZX54(P^)7CC)7}$EICAR-STANDARD-ANTIVIRUS-TEST-FILE!$H+H*`

// TestClamdAtDATA runs the built binary against Debian's real clamd
// (clamav-daemon) with a one-signature database the test writes (no
// signature download): the EICAR file in the body and inside a zip
// attachment is refused at the end of DATA with 554 5.7.1 and nothing is
// stored; a clean message is delivered with X-Virus-Status: Clean; with
// clamd stopped, the default policy defers with 451 and the "accept"
// policy delivers the message tagged as unscanned.
func TestClamdAtDATA(t *testing.T) {
	t.Parallel()
	sock, stop := startRealClamd(t)
	for _, down := range []string{"defer", "accept"} {
		t.Run("clamd_down="+down, func(t *testing.T) {
			cfg := fmt.Sprintf("[av]\nclamd = \"unix:%s\"\nclamd_timeout = \"10s\"\nclamd_down = %q\n[spam]\nenabled = false\n", sock, down)
			srv := NewServer(t, cfg)
			rcpt := srv.AddAccounts("virus")[0]
			srv.Start()
			defer srv.Stop()
			if down == "accept" {
				// clamd was stopped by the first subtest.
				c := dialSMTP(t, srv.SMTP)
				c.send("sender@example.org", []string{rcpt}, cleanMail("while clamd is down"))
				got := waitInbox(t, srv, rcpt, 1)
				if !strings.Contains(got[0], "X-Virus-Status: Unscanned") {
					t.Fatalf("clamd down, accept policy: delivered without the Unscanned tag:\n%.600s", got[0])
				}
				return
			}

			c := dialSMTP(t, srv.SMTP)
			c.send("sender@example.org", []string{rcpt}, cleanMail("clean"))
			got := waitInbox(t, srv, rcpt, 1)
			if !strings.Contains(got[0], "X-Virus-Status: Clean") {
				t.Fatalf("clean message stored without X-Virus-Status: Clean:\n%.600s", got[0])
			}

			// The zip's member has a .txt name and no program inside, so the
			// built-in attachment policy lets it through: only clamd can
			// find the signature.
			var zbuf bytes.Buffer
			zw := zip.NewWriter(&zbuf)
			w, err := zw.Create("readme.txt")
			if err != nil {
				t.Fatal(err)
			}
			w.Write([]byte(testEICAR))
			if err := zw.Close(); err != nil {
				t.Fatal(err)
			}
			for name, msg := range map[string][]byte{
				"EICAR in the body": []byte("From: sender@example.org\r\nTo: " + rcpt + "\r\nSubject: test\r\n" +
					"Message-ID: <eicar-plain@example.org>\r\n\r\n" + testEICAR + "\r\n"),
				"EICAR in a zip": attachMail(rcpt, "docs.zip", "application/zip", zbuf.Bytes()),
			} {
				c.expect("MAIL FROM:<sender@example.org>", 250)
				c.expect("RCPT TO:<"+rcpt+">", 250)
				code, text, err := c.data(msg)
				if err != nil || code != 554 || !strings.Contains(text, "5.7.1") {
					t.Errorf("%s: end of DATA got %d %q (%v), want 554 5.7.1", name, code, text, err)
				}
			}
			if n := inboxCount(t, srv, rcpt); n != 1 {
				t.Errorf("INBOX holds %d messages after the refusals, want the 1 clean one", n)
			}

			// clamd stopped: the default policy defers.
			stop()
			c.expect("MAIL FROM:<sender@example.org>", 250)
			c.expect("RCPT TO:<"+rcpt+">", 250)
			code, text, err := c.data(cleanMail("while clamd is down"))
			if err != nil || code != 451 {
				t.Fatalf("clamd stopped, defer policy: end of DATA got %d %q (%v), want 451", code, text, err)
			}
			if n := inboxCount(t, srv, rcpt); n != 1 {
				t.Errorf("INBOX holds %d messages after the deferral, want 1", n)
			}
		})
	}
}

func cleanMail(subject string) []byte {
	return []byte("From: sender@example.org\r\nTo: virus@" + testDomain + "\r\nSubject: " + subject +
		"\r\nDate: Mon, 4 Mar 2024 10:00:00 +0000\r\nMessage-ID: <" + strings.ReplaceAll(subject, " ", ".") +
		"@example.org>\r\n\r\nPlain words, nothing attached.\r\n")
}

// attachMail builds a message with one base64 attachment.
func attachMail(rcpt, name, ctype string, content []byte) []byte {
	var b strings.Builder
	b.WriteString("From: sender@example.org\r\nTo: " + rcpt + "\r\nSubject: files\r\nMIME-Version: 1.0\r\n")
	b.WriteString("Message-ID: <eicar-zip@example.org>\r\nContent-Type: multipart/mixed; boundary=\"XX\"\r\n\r\n")
	b.WriteString("--XX\r\nContent-Type: text/plain\r\n\r\nsee attached\r\n")
	fmt.Fprintf(&b, "--XX\r\nContent-Type: %s; name=\"%s\"\r\nContent-Disposition: attachment; filename=\"%s\"\r\nContent-Transfer-Encoding: base64\r\n\r\n", ctype, name, name)
	enc := base64.StdEncoding.EncodeToString(content)
	for len(enc) > 76 {
		b.WriteString(enc[:76] + "\r\n")
		enc = enc[76:]
	}
	b.WriteString(enc + "\r\n--XX--\r\n")
	return []byte(b.String())
}

// waitInbox waits up to 10 s for user's INBOX to hold n messages and
// returns them.
func waitInbox(t *testing.T, srv *Server, user string, n int) []string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		c := imapLogin(t, srv.IMAP, user, nil)
		msgs := fetchAll(t, c, "INBOX")
		c.Close()
		if len(msgs) >= n || time.Now().After(deadline) {
			if len(msgs) != n {
				t.Fatalf("INBOX of %s holds %d messages, want %d", user, len(msgs), n)
			}
			var out []string
			for _, m := range msgs {
				out = append(out, string(m))
			}
			return out
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// startRealClamd runs Debian's clamd on a unix socket in a temporary
// directory with a database holding one signature, EICAR's, in ClamAV's
// extended format (.ndb: Name:TargetType:Offset:HexSignature). It returns
// the socket path and a function that stops clamd (by its PID).
func startRealClamd(t *testing.T) (sock string, stop func()) {
	t.Helper()
	bin, err := exec.LookPath("clamd")
	if err != nil {
		if _, e := os.Stat("/usr/sbin/clamd"); e == nil {
			bin, err = "/usr/sbin/clamd", nil
		}
	}
	if err != nil {
		if os.Getenv("PIMAIL_TEST_SKIP_CLIENTS") == "1" {
			t.Skip("clamd not installed (PIMAIL_TEST_SKIP_CLIENTS=1)")
		}
		t.Fatal("clamd is not installed: apt-get install clamav-daemon (or set PIMAIL_TEST_SKIP_CLIENTS=1 to skip)")
	}
	// A short path: unix socket names are limited to 108 bytes.
	dir, err := os.MkdirTemp("", "clamd")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	db := filepath.Join(dir, "db")
	if err := os.Mkdir(db, 0o755); err != nil {
		t.Fatal(err)
	}
	sig := fmt.Sprintf("Pimail-Test-EICAR:0:*:%s\n", hex.EncodeToString([]byte(testEICAR)))
	if err := os.WriteFile(filepath.Join(db, "test.ndb"), []byte(sig), 0o644); err != nil {
		t.Fatal(err)
	}
	sock = filepath.Join(dir, "clamd.sock")
	conf := filepath.Join(dir, "clamd.conf")
	cfg := fmt.Sprintf("LocalSocket %s\nDatabaseDirectory %s\nForeground yes\nLogFile %s\nTemporaryDirectory %s\nScanMail yes\nScanArchive yes\nStreamMaxLength 10M\n",
		sock, db, filepath.Join(dir, "clamd.log"), dir)
	if os.Geteuid() == 0 {
		cfg += "User root\n"
	}
	if err := os.WriteFile(conf, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--config-file="+conf)
	if err := cmd.Start(); err != nil {
		t.Fatalf("start clamd: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	stopped := false
	stop = func() {
		if !stopped {
			stopped = true
			cmd.Process.Kill()
			<-done
		}
	}
	t.Cleanup(stop)
	deadline := time.Now().Add(60 * time.Second)
	for {
		if c, err := net.DialTimeout("unix", sock, time.Second); err == nil {
			c.SetDeadline(time.Now().Add(2 * time.Second))
			c.Write([]byte("zPING\x00"))
			buf := make([]byte, 16)
			n, _ := c.Read(buf)
			c.Close()
			if strings.HasPrefix(string(buf[:n]), "PONG") {
				return sock, stop
			}
		}
		select {
		case err := <-done:
			log, _ := os.ReadFile(filepath.Join(dir, "clamd.log"))
			t.Fatalf("clamd exited: %v\n%s", err, log)
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatal("clamd did not answer PING within 60 s")
		}
	}
}
