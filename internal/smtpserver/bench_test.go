package smtpserver

import (
	"bufio"
	"net"
	"strings"
	"testing"
)

// BenchmarkRefusedSession is a whole session refused at RCPT, as a spam
// flood's sessions mostly are: connect, greeting, EHLO, MAIL, RCPT (550
// 5.1.1), QUIT, over loopback. The server's share of it is what issue 28
// asks to cost almost nothing (bench/run-smtp-ab.sh measures it from
// outside, beside Postfix and bench/smtpfloor).
func BenchmarkRefusedSession(b *testing.B) {
	e := newEnv(&testing.T{}, Config{})
	b.Cleanup(func() { e.srv.Close() })
	script := "EHLO client.test\r\nMAIL FROM:<spam@bot.test>\r\nRCPT TO:<nobody@example.com>\r\nQUIT\r\n"
	b.ReportAllocs()
	for b.Loop() {
		c, err := net.Dial("tcp", e.addr)
		if err != nil {
			b.Fatal(err)
		}
		r := bufio.NewReader(c)
		// A client that waits for each reply, as smtpload's does.
		if _, err := r.ReadString('\n'); err != nil {
			b.Fatal(err)
		}
		for _, cmd := range strings.SplitAfter(script, "\r\n")[:4] {
			if _, err := c.Write([]byte(cmd)); err != nil {
				b.Fatal(err)
			}
			for {
				line, err := r.ReadString('\n')
				if err != nil {
					b.Fatal(err)
				}
				if len(line) > 3 && line[3] == ' ' {
					break
				}
			}
		}
		c.Close()
	}
}
