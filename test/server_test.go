package blackbox

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

const (
	testDomain   = "test.local"
	testPassword = "blackbox-secret-1"
	readyMarker  = "pimail: ready"
	readyTimeout = 30 * time.Second
)

// Server is one pimail data directory and, while started, the
// `pimail serve` process running on it. Ports stay the same across
// restarts, so clients can reconnect after a crash.
type Server struct {
	t      *testing.T
	Data   string
	SMTP   string // host:port
	IMAP   string // host:port
	Config string // path of a config file, or ""
	// Prefix is a command the server runs under (e.g. prlimit), or nil.
	Prefix []string
	// Database is the PostgreSQL URL of the store ("": SQLite in Data);
	// NewServer sets it for the tests onPostgres names (postgres_test.go).
	Database string
	// Hostname is given to serve as --hostname; "" means test.local.
	Hostname string
	// Env is added to the environment of pimail serve.
	Env []string

	proc *serverProc
}

// serverProc is one running `pimail serve`.
type serverProc struct {
	cmd    *exec.Cmd
	log    *logWriter
	exited chan struct{}
}

// NewServer makes a fresh data directory with the test domain and picks
// free loopback ports. config, if not empty, is written as the TOML config
// file given to serve. The server is not started.
func NewServer(t *testing.T, config string) *Server {
	t.Helper()
	return newServer(t, config, onPostgres(t))
}

// newServer is NewServer with the store in a new PostgreSQL database when
// pg is true.
func newServer(t *testing.T, config string, pg bool) *Server {
	t.Helper()
	s := &Server{t: t, Data: filepath.Join(t.TempDir(), "data")}
	if pg {
		s.Database = postgresDatabase(t)
	}
	s.SMTP = freeAddr(t)
	s.IMAP = freeAddr(t)
	if config != "" {
		s.Config = filepath.Join(t.TempDir(), "pimail.toml")
		if err := os.WriteFile(s.Config, []byte(config), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if s.Database == "" { // a PostgreSQL store needs no data directory
		runTool(t, time.Minute, "", nil, pimailBin, "init", "--data", s.Data)
	}
	s.Admin("domain", "add", testDomain)
	// Registered after TempDir, so it runs before the directory is removed.
	t.Cleanup(s.cleanup)
	return s
}

// Node returns another node on s's PostgreSQL database: a server with a
// data directory and ports of its own and the same store (cluster_test.go).
func (s *Server) Node() *Server {
	s.t.Helper()
	if s.Database == "" {
		s.t.Fatal("Node of a server without a database")
	}
	n := &Server{t: s.t, Data: filepath.Join(s.t.TempDir(), "data"), Config: s.Config, Database: s.Database,
		Hostname: s.Hostname, Env: s.Env}
	n.SMTP = freeAddr(s.t)
	n.IMAP = freeAddr(s.t)
	s.t.Cleanup(n.cleanup)
	return n
}

// freeAddr returns a loopback address with a port that was free a moment ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("pick a free port: %v", err)
	}
	defer l.Close()
	return l.Addr().String()
}

// Admin runs `pimail ARGS... --data DIR` and returns its output.
func (s *Server) Admin(args ...string) string {
	s.t.Helper()
	args = append(args, "--data", s.Data)
	if s.Database != "" {
		args = append(args, "--database", s.Database)
	}
	return string(runTool(s.t, 2*time.Minute, "", nil, pimailBin, args...))
}

// AddAccounts creates local@test.local accounts with testPassword and
// returns their addresses.
func (s *Server) AddAccounts(locals ...string) []string {
	s.t.Helper()
	addrs := make([]string, len(locals))
	for i, l := range locals {
		addrs[i] = l + "@" + testDomain
		s.Admin("account", "add", "--password", testPassword, addrs[i])
	}
	return addrs
}

// Start runs `pimail serve` and waits for its ready line.
func (s *Server) Start() { s.StartWith(Listeners{}) }

// StartWith is Start with the listeners in l turned on as well (submission,
// POP3, HTTP, IMAPS, POP3S); the others stay off.
func (s *Server) StartWith(l Listeners) {
	s.t.Helper()
	if s.proc != nil {
		s.t.Fatal("server already running")
	}
	host := s.Hostname
	if host == "" {
		host = testDomain
	}
	args := []string{"serve", "--data", s.Data, "--hostname", host,
		"--smtp", s.SMTP, "--imap", s.IMAP,
		"--submission", l.Submission, "--submissions", l.Submissions, "--imaps", l.IMAPS,
		"--pop3", l.POP3, "--pop3s", l.POP3S, "--http", l.HTTP, "--https", l.HTTPS,
		"--managesieve", l.ManageSieve}
	if s.Config != "" {
		args = append(args, "--config", s.Config)
	}
	if s.Database != "" {
		args = append(args, "--database", s.Database)
	}
	p := &serverProc{log: newLogWriter(), exited: make(chan struct{})}
	if len(s.Prefix) > 0 {
		args = append(append(s.Prefix[1:], pimailBin), args...)
		p.cmd = exec.Command(s.Prefix[0], args...)
	} else {
		p.cmd = exec.Command(pimailBin, args...)
	}
	if len(s.Env) > 0 {
		p.cmd.Env = append(os.Environ(), s.Env...)
	}
	p.cmd.Stdout = p.log
	p.cmd.Stderr = p.log
	if err := p.cmd.Start(); err != nil {
		s.t.Fatalf("start pimail serve: %v", err)
	}
	go func() {
		_ = p.cmd.Wait()
		close(p.exited)
	}()
	s.proc = p
	select {
	case <-p.log.ready:
	case <-p.exited:
		s.proc = nil
		s.t.Fatalf("pimail serve exited before ready (%v):\n%s", p.cmd.ProcessState, p.log.tail(8000))
	case <-time.After(readyTimeout):
		s.t.Fatalf("pimail serve not ready after %v:\n%s", readyTimeout, p.log.tail(8000))
	}
	if _, err := os.Stat(filepath.Join(s.Data, "pimail.db")); s.Database != "" && err == nil {
		s.t.Fatalf("serve --database %s made an SQLite database in %s", s.Database, s.Data)
	}
}

// PID is the running server's process id.
func (s *Server) PID() int {
	s.t.Helper()
	if s.proc == nil {
		s.t.Fatal("server not running")
	}
	return s.proc.cmd.Process.Pid
}

// Running reports whether the started server process is still alive.
func (s *Server) Running() bool {
	if s.proc == nil {
		return false
	}
	select {
	case <-s.proc.exited:
		return false
	default:
		return true
	}
}

// Kill9 kills the server with SIGKILL and waits until it is gone.
func (s *Server) Kill9() {
	s.t.Helper()
	s.stop(syscall.SIGKILL, 10*time.Second)
}

// Stop asks the server to shut down (SIGTERM) and kills it after 10 s.
func (s *Server) Stop() {
	s.t.Helper()
	s.stop(syscall.SIGTERM, 10*time.Second)
}

func (s *Server) stop(sig syscall.Signal, grace time.Duration) {
	p := s.proc
	if p == nil {
		return
	}
	s.proc = nil
	_ = p.cmd.Process.Signal(sig)
	select {
	case <-p.exited:
		return
	case <-time.After(grace):
	}
	s.t.Errorf("pimail serve (pid %d) did not exit %v after %v; killing it", p.cmd.Process.Pid, grace, sig)
	_ = p.cmd.Process.Kill()
	select {
	case <-p.exited:
	case <-time.After(10 * time.Second):
		s.t.Errorf("pimail serve (pid %d) survived SIGKILL", p.cmd.Process.Pid)
	}
}

// Logs returns the tail of the current server process's output.
func (s *Server) Logs() string {
	if s.proc == nil {
		return ""
	}
	return s.proc.log.tail(16000)
}

func (s *Server) cleanup() {
	p := s.proc
	if p == nil {
		return
	}
	if s.t.Failed() {
		s.t.Logf("server log (tail):\n%s", p.log.tail(8000))
	}
	s.Stop()
}

// RSSKiB reads VmRSS of the running server from /proc.
func (s *Server) RSSKiB() int64 { return s.procStatusKiB("VmRSS") }

// HWMKiB reads VmHWM (peak RSS) of the running server from /proc.
func (s *Server) HWMKiB() int64 { return s.procStatusKiB("VmHWM") }

func (s *Server) procStatusKiB(field string) int64 {
	s.t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", s.PID()))
	if err != nil {
		s.t.Fatalf("read process status: %v", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		name, val, ok := strings.Cut(line, ":")
		if !ok || name != field {
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(val), " kB"), 10, 64)
		if err != nil {
			s.t.Fatalf("parse %s %q: %v", field, val, err)
		}
		return n
	}
	s.t.Fatalf("no %s in /proc/%d/status", field, s.PID())
	return 0
}

// logWriter keeps a bounded copy of the server's output and signals when
// the ready line appears.
type logWriter struct {
	mu       sync.Mutex
	buf      []byte
	ready    chan struct{}
	sawReady bool
}

const maxLogBytes = 1 << 20

func newLogWriter() *logWriter { return &logWriter{ready: make(chan struct{})} }

func (w *logWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	if !w.sawReady && bytes.Contains(w.buf, []byte(readyMarker)) {
		w.sawReady = true
		close(w.ready)
	}
	if len(w.buf) > maxLogBytes {
		w.buf = append(w.buf[:0:0], w.buf[len(w.buf)-maxLogBytes/2:]...)
	}
	return len(p), nil
}

func (w *logWriter) tail(n int) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.buf) > n {
		return "…" + string(w.buf[len(w.buf)-n:])
	}
	return string(w.buf)
}
