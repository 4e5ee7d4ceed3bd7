package blackbox

import (
	"flag"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"
)

// longTests turns on the long variants of the fault, flood and attack
// tests (more rounds, more connections); PIMAIL_TEST_LONG=1 does the same.
// docs/reliability.md lists what each variant does.
var longFlag = flag.Bool("pimail.long", false, "run the long fault/flood/attack variants")

func longTests() bool { return *longFlag || os.Getenv("PIMAIL_TEST_LONG") == "1" }

// pick returns short in the default run and long with -pimail.long.
func pick(short, long int) int {
	if longTests() {
		return long
	}
	return short
}

// Listeners are the extra listener addresses a test asks for on top of
// the Server's SMTP and IMAP (Server.Start turns every other one off).
type Listeners struct {
	Submission  string
	Submissions string // implicit TLS (465)
	POP3        string
	HTTP        string
	IMAPS       string
	POP3S       string // implicit TLS (995)
	HTTPS       string
	ManageSieve string
}

// withListeners picks free loopback ports for the listeners named
// ("submission", "submissions", "pop3", "pop3s", "http", "https", "imaps",
// "managesieve").
func withListeners(t *testing.T, names ...string) Listeners {
	t.Helper()
	var l Listeners
	for _, n := range names {
		switch n {
		case "submission":
			l.Submission = freeAddr(t)
		case "submissions":
			l.Submissions = freeAddr(t)
		case "pop3":
			l.POP3 = freeAddr(t)
		case "http":
			l.HTTP = freeAddr(t)
		case "https":
			l.HTTPS = freeAddr(t)
		case "imaps":
			l.IMAPS = freeAddr(t)
		case "pop3s":
			l.POP3S = freeAddr(t)
		case "managesieve":
			l.ManageSieve = freeAddr(t)
		default:
			t.Fatalf("unknown listener %q", n)
		}
	}
	return l
}

// logLines returns the lines of the server's log (its tail) that match re.
func (s *Server) logLines(re *regexp.Regexp) []string {
	var out []string
	for _, line := range strings.Split(s.Logs(), "\n") {
		if re.MatchString(line) {
			out = append(out, line)
		}
	}
	return out
}

// waitLog waits up to d for a log line matching re and returns the lines.
func (s *Server) waitLog(re *regexp.Regexp, d time.Duration) []string {
	deadline := time.Now().Add(d)
	for {
		if lines := s.logLines(re); len(lines) > 0 || time.Now().After(deadline) {
			return lines
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitLogCount waits up to d for at least n log lines matching re and
// returns how many there are.
func (s *Server) waitLogCount(re *regexp.Regexp, n int, d time.Duration) int {
	deadline := time.Now().Add(d)
	for {
		if got := len(s.logLines(re)); got >= n || time.Now().After(deadline) {
			return got
		}
		time.Sleep(50 * time.Millisecond)
	}
}
