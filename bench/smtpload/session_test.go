package main

import (
	"bufio"
	"bytes"
	"net/textproto"
	"testing"
)

// TestDotStuff checks dotStuff against net/textproto's DotWriter, which
// net/smtp uses, on messages with CRLF line ends. (An empty message, which
// smtpload never sends, is the one difference: DotWriter sends an empty
// line.)
func TestDotStuff(t *testing.T) {
	for _, msg := range []string{
		"a\r\n",
		".\r\n",
		"..\r\n.a\r\nb.\r\n",
		"Subject: x\r\n\r\n.hidden\r\n.\r\nend",
		"no line end",
		"x\r\n\r\n.",
	} {
		var want bytes.Buffer
		bw := bufio.NewWriter(&want)
		dw := textproto.NewWriter(bw).DotWriter()
		if _, err := dw.Write([]byte(msg)); err != nil {
			t.Fatal(err)
		}
		if err := dw.Close(); err != nil {
			t.Fatal(err)
		}
		if got := dotStuff([]byte(msg)); !bytes.Equal(got, want.Bytes()) {
			t.Errorf("dotStuff(%q) = %q, want %q", msg, got, want.Bytes())
		}
	}
}
