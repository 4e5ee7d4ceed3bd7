package imapd

import (
	"bufio"
	"compress/flate"
	"strconv"
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

// partialFlusher compresses like zlib with Z_PARTIAL_FLUSH, as mbsync
// does: each flush ends the current block and appends an empty
// fixed-Huffman block (RFC 1951 §3.2.6: 3 header bits and the 7-bit
// end-of-block code), of which only the complete bytes are sent; the
// remaining bits go out with the next flush. Blocks hold literals only.
type partialFlusher struct {
	acc   uint32
	nbits uint
	out   []byte
}

func (p *partialFlusher) bits(v uint32, n uint) {
	p.acc |= v << p.nbits
	p.nbits += n
	for p.nbits >= 8 {
		p.out = append(p.out, byte(p.acc))
		p.acc >>= 8
		p.nbits -= 8
	}
}

// code writes a Huffman code most significant bit first (§3.1.1).
func (p *partialFlusher) code(c uint32, n uint) {
	for i := int(n) - 1; i >= 0; i-- {
		p.bits(c>>uint(i)&1, 1)
	}
}

// flush returns the bytes to send for data followed by a partial flush.
func (p *partialFlusher) flush(data []byte) []byte {
	p.bits(0, 1) // BFINAL 0
	p.bits(1, 2) // BTYPE 01, fixed Huffman
	for _, b := range data {
		if b < 144 {
			p.code(0x30+uint32(b), 8)
		} else {
			p.code(0x190+uint32(b)-144, 9)
		}
	}
	p.code(0, 7)                  // end of block
	p.bits(0, 1)                  // the empty block: BFINAL 0,
	p.bits(1, 2)                  // BTYPE 01,
	p.code(0, 7)                  // end of block
	out := p.out                  // only whole bytes are sent
	p.out = make([]byte, 0, 1024) // the rest waits in acc
	return out
}

// TestCompressPartialFlushClient is the mbsync case: a client whose
// compressor flushes with Z_PARTIAL_FLUSH must get its commands answered
// although the last bits of each flush only arrive with the next command.
func TestCompressPartialFlushClient(t *testing.T) {
	e := newTestEnv(t, Config{})
	r := e.raw()
	r.login()
	if res := r.cmd("z", "COMPRESS DEFLATE"); len(res) != 1 || !strings.HasPrefix(res[0], "z OK") {
		t.Fatalf("COMPRESS: %q", res)
	}
	pf := &partialFlusher{}
	zr := &rawConn{t: t, c: r.c, br: bufio.NewReader(flate.NewReader(r.br))}
	send := func(s string) {
		t.Helper()
		b := pf.flush([]byte(s))
		_ = r.c.SetWriteDeadline(time.Now().Add(5 * time.Second))
		if _, err := r.c.Write(b); err != nil {
			t.Fatal(err)
		}
	}
	send("3 NAMESPACE\r\n")
	if res := zr.until("3 "); !strings.HasPrefix(last(res), "3 OK") || !strings.HasPrefix(res[0], "* NAMESPACE") {
		t.Fatalf("NAMESPACE: %q", res)
	}
	send("4 SELECT INBOX\r\n")
	if l := last(zr.until("4 ")); !strings.HasPrefix(l, "4 OK") {
		t.Fatalf("SELECT: %q", l)
	}
	// A synchronizing literal (RFC 9051 §4.3): the server must see the
	// command line to send its continuation request.
	msg := "Subject: über\r\n\r\nhello from a partial flush\r\n"
	send("5 APPEND INBOX {" + strconv.Itoa(len(msg)) + "}\r\n")
	if l := zr.line(); !strings.HasPrefix(l, "+") {
		t.Fatalf("APPEND continuation: %q", l)
	}
	send(msg + "\r\n")
	if l := last(zr.until("5 ")); !strings.HasPrefix(l, "5 OK") {
		t.Fatalf("APPEND: %q", l)
	}
	send("6 FETCH 1 BODY.PEEK[]\r\n")
	res := zr.until("6 ")
	if !strings.HasPrefix(last(res), "6 OK") || !strings.Contains(strings.Join(res, "\n"), "hello from a partial flush") {
		t.Fatalf("FETCH: %q", res)
	}
}

// TestCompressNoEmptyFlush checks that the server sends no compressed bytes
// until it has a response: an empty flush block right after COMPRESS
// inflates to nothing, and mbsync reads that as an empty response and
// drops the connection.
func TestCompressNoEmptyFlush(t *testing.T) {
	e := newTestEnv(t, Config{})
	r := e.raw()
	r.login()
	if res := r.cmd("z", "COMPRESS DEFLATE"); !strings.HasPrefix(last(res), "z OK") {
		t.Fatalf("COMPRESS: %q", res)
	}
	_ = r.c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	if b, err := r.br.ReadByte(); err == nil {
		t.Fatalf("server sent compressed byte %#x before any command", b)
	}
	_ = r.c.SetReadDeadline(time.Time{})
}
