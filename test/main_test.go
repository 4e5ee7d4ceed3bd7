package blackbox

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// pimailBin is the binary built once per test run by TestMain.
var pimailBin string

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

// runMain builds the binary every test runs, once, unless $PIMAIL_BIN
// names one already built from this tree (test/all.sh passes the one it
// built for amd64).
func runMain(m *testing.M) int {
	// The PostgreSQL server of TestOnPostgres, if a test started it, ends
	// with the tests on both paths (with $PIMAIL_BIN it was left running).
	defer stopPostgres()
	if p := os.Getenv("PIMAIL_BIN"); p != "" {
		pimailBin = p
		return m.Run()
	}
	dir, err := os.MkdirTemp("", "pimail-blackbox-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "blackbox: temp dir:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	pimailBin = filepath.Join(dir, "pimail")
	if err := buildPimail(pimailBin); err != nil {
		fmt.Fprintln(os.Stderr, "blackbox:", err)
		return 1
	}
	return m.Run()
}

// buildPimail compiles ./cmd/pimail of this module into out.
func buildPimail(out string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, goTool(), "build", "-o", out, "./cmd/pimail")
	cmd.Dir = repoRoot()
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build ./cmd/pimail: %v\n%s", err, b)
	}
	return nil
}

// repoRoot is the module root: the parent of this package's directory,
// which is the working directory of a `go test` run.
func repoRoot() string {
	wd, err := os.Getwd()
	if err != nil {
		panic(err)
	}
	return filepath.Dir(wd)
}

// goTool finds the go command: PATH first, then the standard install.
func goTool() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	return "/usr/local/go/bin/go"
}

// requireTool returns the path of an external client program. A missing
// tool fails the test: test/all.sh installs them. PIMAIL_TEST_SKIP_CLIENTS=1
// turns that into a skip for quick local runs.
func requireTool(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err == nil {
		return p
	}
	if os.Getenv("PIMAIL_TEST_SKIP_CLIENTS") == "1" {
		t.Skipf("%s not installed (PIMAIL_TEST_SKIP_CLIENTS=1)", name)
	}
	t.Fatalf("%s not installed: run test/all.sh, which installs the client tools, or set PIMAIL_TEST_SKIP_CLIENTS=1", name)
	return ""
}

// runTool runs an external program with a deadline and returns its
// combined output; it fails the test on a non-zero exit.
func runTool(t *testing.T, timeout time.Duration, dir string, env []string, name string, args ...string) []byte {
	t.Helper()
	out, err := runToolErr(timeout, dir, env, name, args...)
	if err != nil {
		t.Fatalf("%s %q: %v\n%s", name, args, err, out)
	}
	return out
}

// runToolErr is runTool that returns the error instead of failing.
func runToolErr(timeout time.Duration, dir string, env []string, name string, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		err = fmt.Errorf("timed out after %v: %w", timeout, err)
	}
	return out, err
}
