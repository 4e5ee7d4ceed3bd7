package blackbox

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestAdminNeedsDataDir: admin commands open an existing data directory
// only; a wrong one is a clear error and is not created (issue 24). --data
// defaults to the configuration's data directory.
func TestAdminNeedsDataDir(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	missing := filepath.Join(dir, "nonexistent")
	for _, args := range [][]string{
		{"domain", "list"},
		{"status", "--data", missing},
		{"account", "add", "--password", testPassword, "a@test.local", "--data", missing},
		{"alias", "list", "--data", missing},
		{"queue", "list", "--data", missing},
		{"export", "--data", missing, "--account", "a@test.local", filepath.Join(dir, "out")},
		{"backup", "--data", missing, filepath.Join(dir, "bak")},
		{"verify", "--data", missing},
		{"dkim", "--data", missing, "test.local"},
	} {
		// Run in dir, where ./pimail-data (the default) does not exist.
		out, err := runToolErr(time.Minute, dir, []string{"PIMAIL_DATA=", "PIMAIL_CONFIG="}, pimailBin, args...)
		if err == nil || !strings.Contains(string(out), "is not a pimail data directory") {
			t.Errorf("pimail %s: %v, want the error that names the directory:\n%s", strings.Join(args, " "), err, out)
		}
	}
	for _, p := range []string{filepath.Join(dir, "pimail-data"), missing} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("%s was created by a command that should have refused it", p)
		}
	}

	// init creates one; a second init refuses.
	data := filepath.Join(dir, "data")
	runTool(t, time.Minute, "", nil, pimailBin, "init", "--data", data)
	if out, err := runToolErr(time.Minute, "", nil, pimailBin, "init", "--data", data); err == nil {
		t.Errorf("second init succeeded:\n%s", out)
	}
	runTool(t, time.Minute, "", nil, pimailBin, "domain", "add", "configured.test", "--data", data)

	// Without --data: the data directory of --config, of $PIMAIL_CONFIG.
	cfg := filepath.Join(dir, "pimail.toml")
	if err := os.WriteFile(cfg, []byte("data = \""+data+"\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if out := string(runTool(t, time.Minute, dir, []string{"PIMAIL_DATA="}, pimailBin, "domain", "list", "--config", cfg)); !strings.Contains(out, "configured.test") {
		t.Errorf("domain list --config: %q", out)
	}
	if out := string(runTool(t, time.Minute, dir, []string{"PIMAIL_DATA=", "PIMAIL_CONFIG=" + cfg}, pimailBin, "domain", "list")); !strings.Contains(out, "configured.test") {
		t.Errorf("domain list with PIMAIL_CONFIG: %q", out)
	}
}

// TestAccountPasswdHelp: `account passwd --help` lists the ways to give
// the password (issue 24 found them missing).
func TestAccountPasswdHelp(t *testing.T) {
	t.Parallel()
	out := string(runTool(t, time.Minute, "", nil, pimailBin, "account", "passwd", "--help"))
	for _, want := range []string{"-password string", "-password-stdin", "-data", "-config"} {
		if !strings.Contains(out, want) {
			t.Errorf("account passwd --help lacks %s:\n%s", want, out)
		}
	}
}
