package blackbox

import (
	"bufio"
	"net"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestCheckDNSStreams: with a DNS server that never answers, check dns
// prints each line as its check ends (before, it printed nothing until
// every query had timed out, then all lines at once), and every query
// gives up after --timeout.
func TestCheckDNSStreams(t *testing.T) {
	t.Parallel()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	go func() { // reads every query, answers none
		buf := make([]byte, 4096)
		for {
			if _, _, err := pc.ReadFrom(buf); err != nil {
				return
			}
		}
	}()
	data := filepath.Join(t.TempDir(), "data")
	runTool(t, time.Minute, "", nil, pimailBin, "init", "--data", data)

	cmd := exec.Command(pimailBin, "check", "dns", "--data", data, "--hostname", "mail.silent.test",
		"--dns", pc.LocalAddr().String(), "--timeout", "300ms", "silent.test")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var lines []string
	var at []time.Duration
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		lines, at = append(lines, sc.Text()), append(at, time.Since(t0))
	}
	err = cmd.Wait()
	total := time.Since(t0)
	if err == nil {
		t.Fatalf("check dns passed with a silent DNS server:\n%s", strings.Join(lines, "\n"))
	}
	if len(lines) < 10 || !strings.HasPrefix(lines[0], "WRONG   MX silent.test") {
		t.Fatalf("%d lines:\n%s", len(lines), strings.Join(lines, "\n"))
	}
	// Each query waits 2 × 300 ms, so the lines come over several seconds;
	// printed at the end they would all arrive within a moment.
	t.Logf("%d lines, the first after %v, the last after %v, exit after %v", len(lines), at[0], at[len(at)-1], total)
	if at[len(at)-1]-at[0] < time.Second {
		t.Errorf("the lines came all at once (first %v, last %v): not printed as found", at[0], at[len(at)-1])
	}
	if total > time.Minute {
		t.Errorf("check dns took %v with a 300 ms query timeout", total)
	}
}
