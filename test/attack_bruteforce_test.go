package blackbox

import (
	"bufio"
	"encoding/base64"
	"fmt"
	"net"
	"regexp"
	"strings"
	"testing"
	"time"
)

// fail2banRegex is the failregex documented in SECURITY.md, with <HOST>
// written out: fail2ban needs the remote address of every failed login
// in one line of the log.
var fail2banRegex = regexp.MustCompile(`level=WARN msg="authentication failed" .*\bremote=([0-9A-Fa-f.:]+)\b`)

// loginAttempt is one password try over a protocol from a source address;
// it reports whether the server accepted it.
type loginAttempt func(src int, user, pass string) (bool, error)

func imapAttempt(addr string) loginAttempt {
	return func(src int, user, pass string) (bool, error) {
		c, err := dialFrom(src, addr)
		if err != nil {
			return false, err
		}
		defer c.Close()
		ic := &imapConn{c: c, r: bufio.NewReader(c)}
		if _, err := ic.line(); err != nil {
			return false, err
		}
		st, _, err := ic.command("a", fmt.Sprintf("LOGIN %q %q", user, pass))
		return strings.HasPrefix(st, "OK"), err
	}
}

func pop3Attempt(addr string) loginAttempt {
	return func(src int, user, pass string) (bool, error) {
		c, err := dialFrom(src, addr)
		if err != nil {
			return false, err
		}
		defer c.Close()
		p := &pop3Conn{c: c, r: bufio.NewReader(c)}
		if _, err := p.line(); err != nil {
			return false, err
		}
		if r, err := p.cmd("USER " + user); err != nil || !strings.HasPrefix(r, "+OK") {
			return false, fmt.Errorf("USER: %q %v", r, err)
		}
		r, err := p.cmd("PASS " + pass)
		return strings.HasPrefix(r, "+OK"), err
	}
}

// submissionAttempt sends AUTH PLAIN and does not wait for the answer:
// submission delays the reply to a failed login (1 s, doubling up to
// 30 s, a tarpit on top of the lockout), so it waits instead until the
// server has logged the outcome for this address. It cannot tell a
// success; the test checks the log for that. The connections stay open
// in the tarpit until the test ends.
func submissionAttempt(t *testing.T, srv *Server, addr string) loginAttempt {
	return func(src int, user, pass string) (bool, error) {
		c, err := dialFrom(src, addr)
		if err != nil {
			return false, err
		}
		t.Cleanup(func() { c.Close() })
		s := &smtpConn{c: c, r: bufio.NewReader(c)}
		if code, text, err := s.reply(); err != nil || code != 220 {
			return false, fmt.Errorf("greeting %d %q %v", code, text, err)
		}
		if code, text, err := s.cmd("EHLO attacker.example"); err != nil || code != 250 {
			return false, fmt.Errorf("EHLO %d %q %v", code, text, err)
		}
		ip := c.LocalAddr().(*net.TCPAddr).IP.String()
		seen := regexp.MustCompile(`remote=` + regexp.QuoteMeta(ip) + `\b`)
		before := len(srv.logLines(seen))
		cred := base64.StdEncoding.EncodeToString([]byte("\x00" + user + "\x00" + pass))
		if _, err := c.Write([]byte("AUTH PLAIN " + cred + "\r\n")); err != nil {
			return false, err
		}
		for end := time.Now().Add(20 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
			if len(srv.logLines(seen)) > before {
				return false, nil
			}
		}
		return false, fmt.Errorf("no log line for the login from %s within 20 s", ip)
	}
}

// TestAttackBruteForce guesses passwords on IMAP, POP3 and submission,
// each from its own loopback address against its own account. Each
// failure must be logged in a line fail2ban can match (with the client's
// address), the rate limit must engage within a bounded number of
// guesses, and once it has, even the right password is refused from that
// address — while another address and account still log in.
func TestAttackBruteForce(t *testing.T) {
	srv := NewServer(t, "[submission]\nallow_loopback_auth = true\n")
	victims := srv.AddAccounts("bf-imap", "bf-pop3", "bf-sub", "bystander")
	l := withListeners(t, "submission", "pop3")
	srv.StartWith(l)
	protos := []struct {
		name    string
		try     loginAttempt
		src     int // dialFrom index: 127.0.0.(2+src)
		account string
	}{
		{"imap", imapAttempt(srv.IMAP), 20, victims[0]},
		{"pop3", pop3Attempt(l.POP3), 21, victims[1]},
		{"submission", submissionAttempt(t, srv, l.Submission), 22, victims[2]},
	}
	maxGuesses := pick(40, 200)
	for _, p := range protos {
		t.Run(p.name, func(t *testing.T) {
			ip := fmt.Sprintf("127.0.0.%d", 2+p.src)
			limited := regexp.MustCompile(`msg="authentication failed" .*remote=` + regexp.QuoteMeta(ip) + `\b.*reason="rate limited"`)
			guesses := 0
			start := time.Now()
			for ; guesses < maxGuesses && len(srv.logLines(limited)) == 0; guesses++ {
				ok, err := p.try(p.src, p.account, fmt.Sprintf("guess-%d", guesses))
				if err != nil {
					t.Fatalf("guess %d: %v", guesses, err)
				}
				if ok {
					t.Fatalf("guess %d: a wrong password was accepted", guesses)
				}
			}
			t.Logf("%s: rate limit engaged after %d wrong guesses in %v", p.name, guesses, time.Since(start).Round(time.Millisecond))
			if guesses >= maxGuesses {
				t.Fatalf("%s: no rate limiting after %d wrong passwords from %s", p.name, guesses, ip)
			}
			// Locked out: the right password does not get through.
			before := len(srv.logLines(limited))
			if ok, err := p.try(p.src, p.account, testPassword); err != nil || ok {
				t.Errorf("%s: right password from the locked-out address: accepted=%v err=%v", p.name, ok, err)
			}
			if srv.waitLogCount(limited, before+1, 5*time.Second) <= before {
				t.Errorf("%s: the right password from the locked-out address was not refused as rate limited", p.name)
			}
			ok := regexp.MustCompile(`msg=("imap login"|"pop3 login"|authenticated) .*(account|user)=` + regexp.QuoteMeta(p.account) + `\b`)
			if lines := srv.logLines(ok); len(lines) > 0 {
				t.Errorf("%s: a login of the attacked account succeeded: %q", p.name, lines)
			}
			// fail2ban sees every failure with the attacker's address.
			n := 0
			for _, line := range srv.logLines(fail2banRegex) {
				if m := fail2banRegex.FindStringSubmatch(line); m != nil && m[1] == ip {
					n++
				}
			}
			t.Logf("%s: %d log lines match the fail2ban regex for %s", p.name, n, ip)
			if n < guesses {
				t.Errorf("%s: %d wrong guesses but only %d log lines fail2ban can match", p.name, guesses, n)
			}
		})
	}
	// Someone else, elsewhere, is not locked out.
	if ok, err := imapAttempt(srv.IMAP)(60, victims[3], testPassword); err != nil || !ok {
		t.Errorf("a bystander cannot log in during the attack: %v %v", ok, err)
	}
}
