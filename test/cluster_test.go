package blackbox

import (
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Several pimail nodes on one PostgreSQL database (docs/deploy.md): each
// node is a `pimail serve` of its own, with its own data directory and
// loopback ports, and the same --database.

// clusterNodes starts n nodes on one new database, with the accounts.
// Spam filtering is off: the tests are about where mail goes across
// nodes, and every message must land in INBOX.
func clusterNodes(t *testing.T, n int, locals ...string) ([]*Server, []string) {
	t.Helper()
	return clusterNodesConfig(t, n, "[spam]\nenabled = false\n", locals...)
}

// clusterNodesConfig is clusterNodes with every node on config.
func clusterNodesConfig(t *testing.T, n int, config string, locals ...string) ([]*Server, []string) {
	t.Helper()
	first := newServer(t, config, true)
	users := first.AddAccounts(locals...)
	nodes := []*Server{first}
	for range n - 1 {
		nodes = append(nodes, first.Node())
	}
	for _, s := range nodes {
		s.Start()
	}
	return nodes, users
}

// TestClusterIdle: a client in IDLE on node B learns of a message that
// node A accepted within a second of its 250 (the change feed over
// LISTEN/NOTIFY).
func TestClusterIdle(t *testing.T) {
	nodes, users := clusterNodes(t, 2, "idler")
	idleSeesDelivery(t, nodes[0], nodes[1], users)
}

const (
	clusterMessages = 2000
	clusterConns    = 10 // half to each node
	clusterKillAt   = 600
)

// TestClusterKillDuringIngest: 2,000 messages go in over 10 connections
// spread over two nodes; node A is killed with SIGKILL midway. Every
// message that got a 250, from either node, is in the mailbox exactly
// once and whole, read through node B, which kept taking mail; node A,
// restarted, needs no repair and sees the same mailbox.
func TestClusterKillDuringIngest(t *testing.T) {
	nodes, users := clusterNodes(t, 2, "ingest")
	a, b := nodes[0], nodes[1]
	want := make([][]byte, clusterMessages)
	for i := range want {
		want[i] = generatedMessage("cluster", i, 2000+13*(i%200))
	}
	var (
		acked   [clusterMessages]atomic.Bool
		ackedBy [2]atomic.Int32
		nAcked  atomic.Int32
		killed  atomic.Bool
		wg      sync.WaitGroup
	)
	start := time.Now()
	for c := range clusterConns {
		node := c % 2
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Node B's senders start again after a failure that is
			// not the kill (none is expected); node A's stop.
			crashSender(nodes[node].SMTP, users[0], c, clusterConns, want, func(i int) {
				acked[i].Store(true)
				ackedBy[node].Add(1)
				if nAcked.Add(1) == clusterKillAt && !killed.Swap(true) {
					a.Kill9()
				}
			})
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	if !killed.Load() {
		t.Fatalf("only %d messages were acknowledged; node A was not killed", nAcked.Load())
	}
	total := int(nAcked.Load())
	t.Logf("node A killed after %d acknowledgements; %d acknowledged in %v (node A %d, node B %d)",
		clusterKillAt, total, elapsed.Round(time.Millisecond), ackedBy[0].Load(), ackedBy[1].Load())
	if int(ackedBy[1].Load()) != clusterMessages/2 {
		t.Errorf("node B acknowledged %d of its %d messages: the other node's death got in its way", ackedBy[1].Load(), clusterMessages/2)
	}
	if total == clusterMessages {
		t.Errorf("all messages acknowledged: the kill hit no delivery in flight")
	}

	check := func(s *Server, what string) {
		t.Helper()
		c := imapLogin(t, s.IMAP, users[0], nil)
		got := fetchAll(t, c, "INBOX")
		seen := map[int]string{}
		for name, msg := range got {
			subj := headerValue(msg, "Subject")
			n, ok := strings.CutPrefix(subj, "cluster ")
			i, err := strconv.Atoi(n)
			if !ok || err != nil || i < 0 || i >= clusterMessages {
				t.Errorf("%s: %s: unexpected Subject %q", what, name, subj)
				continue
			}
			if prev, dup := seen[i]; dup {
				t.Errorf("%s: message %d is in the mailbox twice (%s and %s)", what, i, prev, name)
			}
			seen[i] = name
			if err := checkDelivered(msg, want[i], "\r\n"); err != nil {
				t.Errorf("%s: message %d (%s) is damaged: %v", what, i, name, err)
			}
		}
		lost := 0
		for i := range want {
			if _, ok := seen[i]; acked[i].Load() && !ok {
				if lost++; lost <= 10 {
					t.Errorf("%s: message %d got 250 but is not in the mailbox", what, i)
				}
			}
		}
		if lost > 0 {
			t.Errorf("%s: %d acknowledged messages lost", what, lost)
		}
		t.Logf("%s: %d messages in INBOX, %d acknowledged", what, len(got), total)
	}
	check(b, "node B after the kill")
	a.Start() // no repair by hand
	check(a, "node A restarted")
}
