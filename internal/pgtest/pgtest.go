// Package pgtest runs a real PostgreSQL server for tests and benchmarks:
// initdb in a temporary directory, the server on a unix socket in it (no
// TCP port, so parallel test binaries never collide), and a fresh database
// per test. It is never imported by the server itself.
//
// PostgreSQL refuses to run as root, so when the process is root the
// server runs as the "postgres" user that Debian's package creates (the
// files it needs are given to that user), else as the calling user. The
// binaries are found in $PIMAIL_PG_BIN, else the newest
// /usr/lib/postgresql/*/bin, else on $PATH; test/all.sh installs Debian's
// postgresql when they are missing. The server is stopped by its PID.
package pgtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// ErrNoPostgres says that no PostgreSQL binaries were found.
var ErrNoPostgres = errors.New("postgresql binaries not found (install Debian's postgresql, or set PIMAIL_PG_BIN)")

// port names the socket file (.s.PGSQL.<port>); nothing listens on TCP.
const port = 5432

// Options tune a server.
type Options struct {
	// Settings are extra postgresql.conf lines ("key = value").
	Settings []string
}

// Server is a running PostgreSQL server.
type Server struct {
	dir     string // the temporary directory: data/, sock/, log
	sockDir string
	cmd     *exec.Cmd
	exited  chan struct{}
	n       atomic.Int64 // databases created
}

// BinDir finds the directory of initdb and postgres.
func BinDir() (string, error) {
	if d := os.Getenv("PIMAIL_PG_BIN"); d != "" {
		return d, nil
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return version(dirs[i]) > version(dirs[j]) })
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			return d, nil
		}
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		return filepath.Dir(p), nil
	}
	return "", ErrNoPostgres
}

func version(binDir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return n
}

// credential returns who runs the server: nil for the caller, the
// postgres user when the caller is root.
func credential() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("running as root, and no postgres user to run PostgreSQL as: %w", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

// Start runs initdb in a new temporary directory and starts the server.
func Start(opts Options) (*Server, error) {
	bin, err := BinDir()
	if err != nil {
		return nil, err
	}
	cred, err := credential()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "pimail-pg-")
	if err != nil {
		return nil, err
	}
	s := &Server{dir: dir, sockDir: filepath.Join(dir, "sock"), exited: make(chan struct{})}
	ok := false
	defer func() {
		if !ok {
			s.Stop()
		}
	}()
	data := filepath.Join(dir, "data")
	for _, d := range []string{data, s.sockDir} {
		if err := os.Mkdir(d, 0o700); err != nil {
			return nil, err
		}
	}
	if cred != nil {
		// The server's user must reach its directories.
		if err := os.Chmod(dir, 0o755); err != nil {
			return nil, err
		}
		for _, d := range []string{data, s.sockDir} {
			if err := os.Chown(d, int(cred.Uid), int(cred.Gid)); err != nil {
				return nil, err
			}
		}
	}
	run := func(name string, args ...string) *exec.Cmd {
		c := exec.Command(filepath.Join(bin, name), args...)
		c.Dir = dir
		c.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Setpgid: true}
		return c
	}
	initdb := run("initdb", "-D", data, "-U", "pimail", "--auth=trust", "--encoding=UTF8", "--locale=C", "--no-sync")
	if out, err := initdb.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("initdb: %v: %s", err, out)
	}
	conf := append([]string{
		"listen_addresses = ''",
		fmt.Sprintf("port = %d", port),
		"unix_socket_directories = '" + s.sockDir + "'",
		"max_connections = 200",
		"shared_buffers = 128MB",
		"dynamic_shared_memory_type = mmap",
		"logging_collector = off",
		"log_min_messages = warning",
	}, opts.Settings...)
	f, err := os.OpenFile(filepath.Join(data, "postgresql.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return nil, err
	}
	_, err = f.WriteString("\n# pgtest\n" + strings.Join(conf, "\n") + "\n")
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, err
	}
	logf, err := os.Create(filepath.Join(dir, "server.log"))
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	s.cmd = run("postgres", "-D", data)
	s.cmd.Stdout, s.cmd.Stderr = logf, logf
	if err := s.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start postgres: %w", err)
	}
	go func() { s.cmd.Wait(); close(s.exited) }()
	deadline := time.Now().Add(60 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		c, err := pgx.Connect(ctx, s.URL("postgres"))
		cancel()
		if err == nil {
			c.Close(context.Background())
			break
		}
		select {
		case <-s.exited:
			log, _ := os.ReadFile(filepath.Join(dir, "server.log"))
			return nil, fmt.Errorf("postgres exited: %s", log)
		default:
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("postgres not ready after 60 s: %w", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	ok = true
	return s, nil
}

// URL is the connection string of database db.
func (s *Server) URL(db string) string {
	return fmt.Sprintf("postgres://pimail@/%s?host=%s&port=%d", db, s.sockDir, port)
}

// CreateDatabase creates a new, empty database and returns its URL.
func (s *Server) CreateDatabase(ctx context.Context) (string, error) {
	name := fmt.Sprintf("t%d", s.n.Add(1))
	c, err := pgx.Connect(ctx, s.URL("postgres"))
	if err != nil {
		return "", err
	}
	defer c.Close(context.Background())
	if _, err := c.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		return "", fmt.Errorf("create database %s: %w", name, err)
	}
	return s.URL(name), nil
}

// Stop stops the server (SIGINT: fast shutdown, then SIGKILL after 30 s)
// and removes its directory.
func (s *Server) Stop() error {
	if s.cmd != nil && s.cmd.Process != nil {
		s.cmd.Process.Signal(syscall.SIGINT)
		select {
		case <-s.exited:
		case <-time.After(30 * time.Second):
			s.cmd.Process.Kill()
			<-s.exited
		}
	}
	return os.RemoveAll(s.dir)
}

// Main runs a test binary's tests with a server, which *srv points to
// while they run: for TestMain. Without PostgreSQL binaries, *srv stays
// nil and the tests that need it decide (Need).
func Main(m *testing.M, srv **Server, opts Options) int {
	s, err := Start(opts)
	if err != nil && !errors.Is(err, ErrNoPostgres) {
		fmt.Fprintln(os.Stderr, "pgtest:", err)
		return 1
	}
	*srv = s
	code := m.Run()
	if s != nil {
		s.Stop()
	}
	return code
}

// Need returns the server, or ends the test when there is none: it fails,
// unless PIMAIL_TEST_SKIP_CLIENTS=1 lets it skip (test/all.sh installs
// PostgreSQL).
func Need(t testing.TB, s *Server) *Server {
	t.Helper()
	if s != nil {
		return s
	}
	if os.Getenv("PIMAIL_TEST_SKIP_CLIENTS") == "1" {
		t.Skip("PostgreSQL not installed (PIMAIL_TEST_SKIP_CLIENTS=1)")
	}
	t.Fatal("PostgreSQL not installed: run test/all.sh, which installs it, or set PIMAIL_TEST_SKIP_CLIENTS=1")
	return nil
}

// Database returns the URL of a new database for the test.
func Database(t testing.TB, s *Server) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	u, err := Need(t, s).CreateDatabase(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return u
}
