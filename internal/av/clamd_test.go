package av

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"pimail/internal/message"
)

// startClamd runs Debian's clamd on a unix socket in a temporary
// directory, with a one-signature database (EICAR) written by the test:
// no signature download is needed. It returns the socket path and a
// function that stops clamd.
func startClamd(t *testing.T) (sock string, stop func()) {
	t.Helper()
	bin, err := exec.LookPath("clamd")
	if err != nil {
		for _, p := range []string{"/usr/sbin/clamd", "/usr/local/sbin/clamd"} {
			if _, e := os.Stat(p); e == nil {
				bin, err = p, nil
			}
		}
	}
	if err != nil {
		if os.Getenv("PIMAIL_TEST_SKIP_CLIENTS") == "1" {
			t.Skip("clamd not installed (PIMAIL_TEST_SKIP_CLIENTS=1)")
		}
		t.Fatal("clamd is not installed: apt-get install clamav-daemon (or set PIMAIL_TEST_SKIP_CLIENTS=1 to skip)")
	}
	dir, err := os.MkdirTemp("", "clamd")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	db := filepath.Join(dir, "db")
	if err := os.Mkdir(db, 0o755); err != nil {
		t.Fatal(err)
	}
	// Extended signature format (.ndb): Name:TargetType:Offset:HexSignature.
	sig := fmt.Sprintf("Pimail-Test-EICAR:0:*:%s\n", hex.EncodeToString([]byte(eicar)))
	if err := os.WriteFile(filepath.Join(db, "test.ndb"), []byte(sig), 0o644); err != nil {
		t.Fatal(err)
	}
	sock = filepath.Join(dir, "clamd.sock")
	conf := filepath.Join(dir, "clamd.conf")
	cfg := fmt.Sprintf("LocalSocket %s\nDatabaseDirectory %s\nForeground yes\nLogFile %s\nTemporaryDirectory %s\nScanMail yes\nScanArchive yes\nStreamMaxLength 10M\n",
		sock, db, filepath.Join(dir, "clamd.log"), dir)
	if os.Geteuid() == 0 {
		cfg += "User root\n"
	}
	if err := os.WriteFile(conf, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--config-file="+conf)
	if err := cmd.Start(); err != nil {
		t.Fatalf("start clamd: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cmd.Process.Kill()
		<-done
	}
	t.Cleanup(stop)
	c := &Clamd{Network: "unix", Address: sock, Timeout: 2 * time.Second}
	deadline := time.Now().Add(60 * time.Second)
	for {
		if err := c.Ping(context.Background()); err == nil {
			return sock, stop
		}
		select {
		case err := <-done:
			log, _ := os.ReadFile(filepath.Join(dir, "clamd.log"))
			t.Fatalf("clamd exited: %v\n%s", err, log)
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatal("clamd did not answer PING within 60 s")
		}
	}
}

func TestClamdReal(t *testing.T) {
	sock, stop := startClamd(t)
	ctx := context.Background()
	c := &Clamd{Network: "unix", Address: sock, Timeout: 10 * time.Second, ChunkSize: 1000}

	clean := []byte("From: a@example.org\r\nTo: b@example.com\r\nSubject: hi\r\n\r\nJust text.\r\n")
	if r, err := c.Scan(ctx, clean); err != nil || r.Infected {
		t.Fatalf("clean message: %+v %v", r, err)
	}
	plain := []byte("From: a@example.org\r\nSubject: test\r\n\r\n" + eicar + "\r\n")
	if r, err := c.Scan(ctx, plain); err != nil || !r.Infected || !strings.Contains(r.Signature, "Pimail-Test-EICAR") {
		t.Fatalf("EICAR in body: %+v %v", r, err)
	}
	zipped := mail("test.zip", "application/zip", makeZip(t, zipEntry{"eicar.com.txt", []byte(eicar)}))
	if r, err := c.Scan(ctx, zipped); err != nil || !r.Infected {
		t.Fatalf("EICAR in a zip attachment: %+v %v", r, err)
	}
	if _, err := c.Scan(ctx, make([]byte, 11<<20)); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("over StreamMaxLength: err = %v", err)
	}

	// Through the Scanner, with the policy on: the zip holds a .txt name
	// and no program, so only clamd can find it.
	s := NewScanner(Config{Clamd: c})
	if r := s.Scan(ctx, zipped, message.Parse(zipped)); r.Action != Reject || r.Reason != "virus" {
		t.Fatalf("scanner on EICAR zip: %+v", r)
	}
	if r := s.Scan(ctx, clean, message.Parse(clean)); r.Action != Clean || !r.Scanned {
		t.Fatalf("scanner on clean: %+v", r)
	}

	// clamd stopped: the configured policy.
	stop()
	if err := c.Ping(ctx); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("ping after stop: %v", err)
	}
	if r := s.Scan(ctx, clean, message.Parse(clean)); r.Action != Defer {
		t.Fatalf("clamd down, default policy: %+v, want defer", r)
	}
	acc := NewScanner(Config{Clamd: c, ClamdDown: DownAccept})
	if r := acc.Scan(ctx, clean, message.Parse(clean)); r.Action != Tag || r.Reason != "scanner-unavailable" {
		t.Fatalf("clamd down, accept policy: %+v, want tag", r)
	}
}

// TestClamdProtocol checks the chunk framing against a fake server that
// reassembles the stream, and the handling of a server that hangs.
func TestClamdProtocol(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "s")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	got := make(chan []byte, 1)
	go func() {
		for i := 0; i < 2; i++ {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			if i == 1 { // hang: never answer
				defer conn.Close()
				continue
			}
			cmd := make([]byte, len("zINSTREAM\x00"))
			if _, err := readFull(conn, cmd); err != nil || string(cmd) != "zINSTREAM\x00" {
				conn.Close()
				continue
			}
			var data []byte
			for {
				var h [4]byte
				if _, err := readFull(conn, h[:]); err != nil {
					break
				}
				n := int(h[0])<<24 | int(h[1])<<16 | int(h[2])<<8 | int(h[3])
				if n == 0 {
					break
				}
				chunk := make([]byte, n)
				readFull(conn, chunk)
				data = append(data, chunk...)
			}
			got <- data
			conn.Write([]byte("stream: Some.Sig FOUND\x00"))
			conn.Close()
		}
	}()
	c := &Clamd{Network: "unix", Address: sock, ChunkSize: 7, Timeout: 300 * time.Millisecond}
	payload := []byte(strings.Repeat("0123456789", 10))
	r, err := c.Scan(context.Background(), payload)
	if err != nil || !r.Infected || r.Signature != "Some.Sig" {
		t.Fatalf("scan: %+v %v", r, err)
	}
	if d := <-got; string(d) != string(payload) {
		t.Fatalf("server got %q", d)
	}
	start := time.Now()
	if _, err := c.Scan(context.Background(), payload); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("hanging server: err = %v", err)
	}
	if time.Since(start) > 3*time.Second {
		t.Fatal("timeout not applied")
	}
	if _, err := (&Clamd{Network: "unix", Address: sock, MaxSize: 10}).Scan(context.Background(), payload); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("MaxSize: %v", err)
	}
}

func readFull(c net.Conn, b []byte) (int, error) {
	n := 0
	for n < len(b) {
		m, err := c.Read(b[n:])
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}
