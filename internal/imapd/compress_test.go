package imapd

import (
	"bufio"
	"compress/flate"
	"strings"
	"testing"
	"time"
)

func TestCompressDeflate(t *testing.T) {
	e := newTestEnv(t, Config{})
	e.deliver("", multipartMsg)
	r := e.raw()
	if res := r.cmd("c", "CAPABILITY"); !strings.Contains(res[0], " COMPRESS=DEFLATE") {
		t.Fatalf("capability: %q", res)
	}
	if l := last(r.cmd("p", "COMPRESS DEFLATE")); !strings.HasPrefix(l, "p BAD") {
		t.Fatalf("COMPRESS before login: %q", l)
	}
	r.login()
	if l := last(r.cmd("u", "COMPRESS GZIP")); !strings.HasPrefix(l, "u BAD") {
		t.Fatalf("unknown mechanism: %q", l)
	}
	if res := r.cmd("z", "COMPRESS DEFLATE"); len(res) != 1 || !strings.HasPrefix(res[0], "z OK") {
		t.Fatalf("COMPRESS: %q", res)
	}
	// From here on both directions are raw DEFLATE.
	fw, err := flate.NewWriter(r.c, flate.DefaultCompression)
	if err != nil {
		t.Fatal(err)
	}
	zr := &rawConn{t: t, c: r.c, br: bufio.NewReader(flate.NewReader(r.br))}
	cmd := func(tag, command string) []string {
		t.Helper()
		_ = r.c.SetWriteDeadline(time.Now().Add(5 * time.Second))
		if _, err := fw.Write([]byte(tag + " " + command + "\r\n")); err != nil {
			t.Fatal(err)
		}
		if err := fw.Flush(); err != nil {
			t.Fatal(err)
		}
		return zr.until(tag + " ")
	}
	if l := last(cmd("n", "NOOP")); !strings.HasPrefix(l, "n OK") {
		t.Fatalf("NOOP compressed: %q", l)
	}
	if l := last(cmd("z2", "COMPRESS DEFLATE")); !strings.HasPrefix(l, "z2 NO [COMPRESSIONACTIVE]") {
		t.Fatalf("second COMPRESS: %q", l)
	}
	cmd("s", "SELECT INBOX")
	res := cmd("f", "FETCH 1 BODY.PEEK[]")
	if !strings.HasPrefix(res[0], "* 1 FETCH (BODY[] {") || !strings.HasPrefix(last(res), "f OK") {
		t.Fatalf("FETCH compressed: %q", res)
	}
	if !strings.Contains(strings.Join(res, "\n"), "caf=C3=A9 pineapple") {
		t.Fatalf("message body not in compressed FETCH: %q", res)
	}
	// Two commands in one compressed flush are both answered.
	if _, err := fw.Write([]byte("a NOOP\r\nb NOOP\r\n")); err != nil {
		t.Fatal(err)
	}
	if err := fw.Flush(); err != nil {
		t.Fatal(err)
	}
	if res := zr.until("b "); len(res) != 2 || !strings.HasPrefix(res[0], "a OK") {
		t.Fatalf("pipelined: %q", res)
	}
}
