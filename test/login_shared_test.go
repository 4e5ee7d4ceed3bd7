package blackbox

import (
	"strings"
	"testing"
	"time"
)

// The failed-login throttle counts across nodes and restarts (issue 29,
// item 6): the failures each node counts go to the store, and every node
// folds the others' into its counts within a second.

// sharedLoginConfig: 4 failures of an account from an address, short
// waits after the third.
const sharedLoginConfig = "[login]\nmax_failures = 4\ndelay = \"50ms\"\nmax_delay = \"100ms\"\n[spam]\nenabled = false\n"

// shareLatency is longer than a failure takes to reach the other nodes
// (written and read every half second).
const shareLatency = 3 * time.Second

const (
	authFailed  = "NO [AUTHENTICATIONFAILED]"
	unavailable = "NO [UNAVAILABLE]"
)

// guess sends a wrong password for user from 127.0.0.(2+src) and
// expects it checked and refused.
func guess(t *testing.T, src int, s *Server, user string) {
	t.Helper()
	if st := imapLoginFrom(t, src, s.IMAP, user, "guess"); !strings.HasPrefix(st, authFailed) {
		t.Fatalf("a guess: %q, want %s", st, authFailed)
	}
}

// TestClusterLoginThrottle: guesses at one account from one address,
// spread over two nodes on one PostgreSQL, are refused at the allowance
// of one node (4), on both nodes, the right password too; before, each
// node counted its own, and the attacker had 4 guesses on each. The
// account's owner, from another address, logs in on both.
func TestClusterLoginThrottle(t *testing.T) {
	nodes, users := clusterNodesConfig(t, 2, sharedLoginConfig, "victim")
	a, b := nodes[0], nodes[1]
	const attacker, owner = 70, 71
	guess(t, attacker, a, users[0])
	guess(t, attacker, b, users[0])
	guess(t, attacker, a, users[0])
	guess(t, attacker, b, users[0])
	time.Sleep(shareLatency)
	for i, n := range nodes {
		if st := imapLoginFrom(t, attacker, n.IMAP, users[0], testPassword); !strings.HasPrefix(st, unavailable) {
			t.Errorf("node %c after 2 guesses on each: the right password got %q, want %s", 'A'+i, st, unavailable)
		}
	}
	for i, n := range nodes {
		if st := imapLoginFrom(t, owner, n.IMAP, users[0], testPassword); !strings.HasPrefix(st, "OK") {
			t.Errorf("node %c: the owner from elsewhere got %q", 'A'+i, st)
		}
	}
}

// TestLoginThrottleRestart: a restart of a single node (SQLite) keeps the
// failures counted before it, after SIGKILL too (each failure is written
// within half a second), so it refuses the guess past the allowance.
func TestLoginThrottleRestart(t *testing.T) {
	s := NewServer(t, sharedLoginConfig)
	users := s.AddAccounts("victim")
	s.Start()
	const attacker = 72
	guess(t, attacker, s, users[0])
	guess(t, attacker, s, users[0])
	time.Sleep(shareLatency)
	s.Kill9()
	s.Start()
	guess(t, attacker, s, users[0])
	guess(t, attacker, s, users[0])
	s.Stop()
	s.Start()
	if st := imapLoginFrom(t, attacker, s.IMAP, users[0], testPassword); !strings.HasPrefix(st, unavailable) {
		t.Errorf("after 2 guesses, SIGKILL, 2 guesses and a restart: the right password got %q, want %s", st, unavailable)
	}
}
