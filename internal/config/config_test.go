package config

import (
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"
)

func write(t *testing.T, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "pimail.toml")
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestLoadOverridesDefaults(t *testing.T) {
	cfg, err := Load(write(t, `
hostname = "mx.example.org"
[listen]
smtp = "127.0.0.1:2525"
imaps = ""
[smtp]
max_message_size = 100000
data_timeout = "90s"
`))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Hostname != "mx.example.org" || cfg.Listen.SMTP != "127.0.0.1:2525" || cfg.Listen.IMAPS != "" {
		t.Errorf("overrides not applied: %+v", cfg)
	}
	if cfg.SMTP.MaxMessageSize != 100000 || cfg.SMTP.DataTimeout.Duration != 90*time.Second {
		t.Errorf("smtp section: %+v", cfg.SMTP)
	}
	if cfg.Listen.IMAP != ":143" || cfg.SMTP.MaxRecipients != 100 {
		t.Errorf("defaults lost: %+v", cfg)
	}
}

func TestUnknownKeyIsAnError(t *testing.T) {
	_, err := Load(write(t, "[smtp]\nmax_mesage_size = 1\n"))
	if err == nil || !strings.Contains(err.Error(), "smtp.max_mesage_size") {
		t.Fatalf("want unknown-key error naming the key, got %v", err)
	}
}

func TestInvalidValues(t *testing.T) {
	for _, text := range []string{
		"[smtp]\nmax_message_size = 0\n",
		"[log]\nlevel = \"loud\"\n",
		"[tls]\ncert_file = \"a.pem\"\n",
		"[smtp]\ndata_timeout = \"soon\"\n",
	} {
		if _, err := Load(write(t, text)); err == nil {
			t.Errorf("%q: want error", text)
		}
	}
}

func TestExampleRoundTrips(t *testing.T) {
	cfg, err := Load(write(t, Example()))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(cfg, Default()) {
		t.Errorf("example does not reproduce the defaults:\n%+v\n%+v", cfg, Default())
	}
}

func TestMemoryLimit(t *testing.T) {
	cfg, err := Load(write(t, "memory_limit_mb = 48\n"))
	if err != nil || cfg.MemoryLimitMB != 48 {
		t.Fatalf("memory_limit_mb = 48: %d, %v", cfg.MemoryLimitMB, err)
	}
	if _, err := Load(write(t, "memory_limit_mb = -1\n")); err == nil {
		t.Fatal("a negative memory limit was accepted")
	}
}

// TestExampleHasEveryKey: `pimail config` shows every key of the
// configuration, set or as a commented example (acme_hosts was missing).
func TestExampleHasEveryKey(t *testing.T) {
	ex := Example()
	var walk func(typ reflect.Type, path string)
	walk = func(typ reflect.Type, path string) {
		for i := range typ.NumField() {
			f := typ.Field(i)
			tag := strings.Split(f.Tag.Get("toml"), ",")[0]
			if tag == "" || tag == "-" {
				continue
			}
			ft := f.Type
			if ft.Kind() == reflect.Struct && ft != reflect.TypeOf(Duration{}) {
				walk(ft, path+tag+".")
				continue
			}
			if !regexp.MustCompile(`(?m)^[ #]*`+regexp.QuoteMeta(tag)+` = `).MatchString(ex) &&
				!strings.Contains(ex, "["+path+tag) && !strings.Contains(ex, "[["+path+tag) {
				t.Errorf("pimail config does not show %s%s", path, tag)
			}
		}
	}
	walk(reflect.TypeOf(Config{}), "")
}
