package smtpserver

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"net"
	"net/textproto"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"
	"github.com/xdg-go/scram"

	"pimail/internal/auth"
)

const body = "From: Alice <alice@example.org>\r\nTo: someone@remote.example\r\nSubject: hi\r\n\r\nHello.\r\n"

// scramClient is a go-sasl client over xdg-go/scram's client.
type scramClient struct{ conv *scram.ClientConversation }

func newSCRAMClient(t *testing.T, user, pw string) *scramClient {
	c, err := scram.SHA256.NewClient(user, pw, "")
	if err != nil {
		t.Fatal(err)
	}
	return &scramClient{conv: c.NewConversation()}
}

func (s *scramClient) Start() (string, []byte, error) {
	first, err := s.conv.Step("")
	return "SCRAM-SHA-256", []byte(first), err
}

func (s *scramClient) Next(challenge []byte) ([]byte, error) {
	r, err := s.conv.Step(string(challenge))
	return []byte(r), err
}

func code(err error) int {
	var se *smtp.SMTPError
	if errors.As(err, &se) {
		return se.Code
	}
	return 0
}

func dialStartTLS(t *testing.T, e *submitEnv) *smtp.Client {
	t.Helper()
	c, err := smtp.DialStartTLS(e.addr, e.clientTLS)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func dialTLS(t *testing.T, e *submitEnv) *smtp.Client {
	t.Helper()
	c, err := smtp.DialTLS(e.tlsAddr, e.clientTLS)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func send(t *testing.T, c *smtp.Client, from string, rcpts []string, msg string) error {
	t.Helper()
	if err := c.Mail(from, nil); err != nil {
		return err
	}
	for _, r := range rcpts {
		if err := c.Rcpt(r, nil); err != nil {
			return err
		}
	}
	w, err := c.Data()
	if err != nil {
		return err
	}
	if _, err := w.Write([]byte(msg)); err != nil {
		return err
	}
	return w.Close()
}

func TestSubmitAllMechanisms(t *testing.T) {
	e := newSubmitEnv(t, Config{})
	cases := []struct {
		name string
		dial func(*testing.T, *submitEnv) *smtp.Client
		mech func() sasl.Client
	}{
		{"starttls-plain", dialStartTLS, func() sasl.Client { return sasl.NewPlainClient("", "alice@example.org", alicePW) }},
		{"implicit-login", dialTLS, func() sasl.Client { return sasl.NewLoginClient("alice@example.org", alicePW) }},
		{"starttls-scram", dialStartTLS, func() sasl.Client { return newSCRAMClient(t, "alice@example.org", alicePW) }},
		{"implicit-scram", dialTLS, func() sasl.Client { return newSCRAMClient(t, "alice@example.org", alicePW) }},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := tc.dial(t, e)
			if err := c.Auth(tc.mech()); err != nil {
				t.Fatalf("AUTH: %v", err)
			}
			if err := send(t, c, "alice@example.org", []string{"someone@remote.example", "bob@example.org"}, body); err != nil {
				t.Fatalf("send: %v", err)
			}
			q := e.q.all()
			if len(q) != i+1 || q[i].from != "alice@example.org" || len(q[i].rcpts) != 1 || q[i].rcpts[0] != "someone@remote.example" || q[i].account != e.ids["alice@example.org"] {
				t.Fatalf("queued: %+v", q)
			}
			raw := string(q[i].raw)
			for _, want := range []string{"Message-ID: <", "Date: ", "Received: from", "with ESMTPSA", "\r\nSubject: hi\r\n"} {
				if !strings.Contains(raw, want) {
					t.Errorf("queued message lacks %q:\n%s", want, raw)
				}
			}
			if got := e.mailbox(t, "bob@example.org", "INBOX"); len(got) != i+1 {
				t.Fatalf("bob's INBOX has %d messages, want %d", len(got), i+1)
			}
			if got := e.mailbox(t, "alice@example.org", "Sent"); len(got) != i+1 {
				t.Fatalf("alice's Sent has %d messages, want %d", len(got), i+1)
			}
		})
	}
}

// Before STARTTLS no AUTH is offered or accepted; without AUTH nothing is
// sent.
func TestNoAuthBeforeTLS(t *testing.T) {
	e := newSubmitEnv(t, Config{})
	c, err := smtp.Dial(e.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Hello("client.test"); err != nil {
		t.Fatal(err)
	}
	if ok, _ := c.Extension("AUTH"); ok {
		t.Fatal("AUTH offered before STARTTLS")
	}
	if ok, _ := c.Extension("STARTTLS"); !ok {
		t.Fatal("STARTTLS not offered")
	}
	tp := rawConn(t, e.addr)
	tp.cmd(t, "EHLO client.test", 250)
	tp.cmd(t, "AUTH PLAIN AGFsaWNlQGV4YW1wbGUub3JnAGNvcnJlY3QgaG9yc2UgYmF0dGVyeQ==", 530)
	tp.cmd(t, "MAIL FROM:<alice@example.org>", 530)
	// Loopback plain-text AUTH only when configured.
	e2 := newSubmitEnv(t, Config{InsecureLoopbackAuth: true})
	c2, err := smtp.Dial(e2.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if err := c2.Auth(sasl.NewPlainClient("", "alice@example.org", alicePW)); err != nil {
		t.Fatalf("loopback AUTH with InsecureLoopbackAuth: %v", err)
	}
}

func TestWrongPasswordsCostMore(t *testing.T) {
	e := newSubmitEnvWith(t, Config{}, auth.Limits{FreeFailures: 1, Delay: 80 * time.Millisecond, MaxDelay: time.Second})
	var took []time.Duration
	for range 4 {
		c := dialStartTLS(t, e)
		start := time.Now()
		err := c.Auth(sasl.NewPlainClient("", "alice@example.org", "wrong"))
		took = append(took, time.Since(start))
		if code(err) != 535 {
			t.Fatalf("wrong password: %v, want 535", err)
		}
	}
	// The first failure is free; then each attempt waits before its
	// check, longer after each failure.
	if took[1] < 80*time.Millisecond || took[2] < 160*time.Millisecond || took[3] < 320*time.Millisecond {
		t.Fatalf("delays %v do not grow (0, 80, 160, 320 ms)", took)
	}
	c := dialStartTLS(t, e)
	if err := c.Auth(newSCRAMClient(t, "alice@example.org", "wrong")); code(err) != 535 {
		t.Fatalf("wrong SCRAM password: %v", err)
	}
	c = dialStartTLS(t, e)
	if err := c.Auth(newSCRAMClient(t, "nobody@example.org", "x")); code(err) != 535 {
		t.Fatalf("SCRAM unknown user: %v", err)
	}
}

func TestSenderSpoofingRefused(t *testing.T) {
	e := newSubmitEnv(t, Config{})
	c := dialStartTLS(t, e)
	if err := c.Auth(sasl.NewPlainClient("", "alice@example.org", alicePW)); err != nil {
		t.Fatal(err)
	}
	if err := c.Mail("bob@example.org", nil); code(err) != 550 {
		t.Fatalf("MAIL FROM another user: %v, want 550", err)
	}
	if err := c.Mail("ceo@example.org", nil); code(err) != 550 {
		t.Fatalf("MAIL FROM an address only the catch-all covers: %v, want 550", err)
	}
	if err := c.Mail("", nil); code(err) != 550 {
		t.Fatalf("MAIL FROM:<>: %v, want 550", err)
	}
	// Her alias and a subaddress are hers.
	aliasMsg := strings.Replace(body, "alice@example.org", "info@example.org", 1)
	if err := send(t, c, "info@example.org", []string{"x@remote.example"}, aliasMsg); err != nil {
		t.Fatalf("sending as an alias: %v", err)
	}
	if err := send(t, c, "alice+news@example.org", []string{"x@remote.example"}, body); err != nil {
		t.Fatalf("sending as a subaddress: %v", err)
	}
	// The From: header must be hers too.
	spoofed := strings.Replace(body, "alice@example.org", "bob@example.org", 1)
	if err := send(t, c, "alice@example.org", []string{"x@remote.example"}, spoofed); code(err) != 550 {
		t.Fatalf("From: bob: %v, want 550", err)
	}
	if n := len(e.q.all()); n != 2 {
		t.Fatalf("%d messages queued, want 2", n)
	}
}

func TestOpenRelayProbes(t *testing.T) {
	e := newSubmitEnv(t, Config{})
	// Unauthenticated, even over TLS: nothing goes anywhere.
	tp := rawTLS(t, e)
	tp.cmd(t, "EHLO probe.test", 250)
	tp.cmd(t, "MAIL FROM:<alice@example.org>", 530) // spoofed local sender
	for _, rcpt := range []string{
		"victim@remote.example",
		"victim%remote.example@example.org",
		"@a.example,@b.example:victim@remote.example",
		`"victim@remote.example"@example.org`,
		"victim@remote.example@example.org",
		"bob@example.org",
	} {
		tp.cmdClass(t, "RCPT TO:<"+rcpt+">", 5)
	}
	// Authenticated, routing tricks are still refused.
	c := dialStartTLS(t, e)
	if err := c.Auth(sasl.NewPlainClient("", "bob@example.org", bobPW)); err != nil {
		t.Fatal(err)
	}
	if err := c.Mail("bob@example.org", nil); err != nil {
		t.Fatal(err)
	}
	for _, rcpt := range []string{`"victim@remote.example"@example.org`, "victim@remote.example@example.org", "victim%remote.example@example.org", "nosuchuser@other-not-local.example!x"} {
		if err := c.Rcpt(rcpt, nil); code(err)/100 != 5 {
			t.Errorf("RCPT %s: %v, want 5xx", rcpt, err)
		}
	}
	if n := len(e.q.all()); n != 0 {
		t.Fatalf("%d messages queued by probes", n)
	}
}

// Commands pipelined behind STARTTLS are discarded, not run after the
// handshake (RFC 3207 §4.2, CVE-2011-0411 class).
func TestSTARTTLSDiscardsPipelinedCommands(t *testing.T) {
	e := newSubmitEnv(t, Config{})
	conn, err := net.Dial("tcp", e.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	r := bufio.NewReader(conn)
	tp := textproto.NewConn(conn)
	if _, _, err := tp.ReadResponse(220); err != nil {
		t.Fatal(err)
	}
	if err := tp.PrintfLine("EHLO c.test"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := tp.ReadResponse(250); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Write([]byte("STARTTLS\r\nMAIL FROM:<alice@example.org>\r\n")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := tp.ReadResponse(220); err != nil {
		t.Fatal(err)
	}
	_ = r
	tc := tls.Client(conn, e.clientTLS)
	if err := tc.Handshake(); err != nil {
		t.Fatal(err)
	}
	ttp := textproto.NewConn(tc)
	if err := ttp.PrintfLine("NOOP"); err != nil {
		t.Fatal(err)
	}
	if code, msg, err := ttp.ReadResponse(250); err != nil {
		t.Fatalf("first reply after TLS: %d %s (%v): a pipelined command ran", code, msg, err)
	}
}

type rawTP struct{ *textproto.Conn }

func rawConn(t *testing.T, addr string) rawTP {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	tp := textproto.NewConn(conn)
	if _, _, err := tp.ReadResponse(220); err != nil {
		t.Fatal(err)
	}
	return rawTP{tp}
}

func rawTLS(t *testing.T, e *submitEnv) rawTP {
	t.Helper()
	conn, err := tls.Dial("tcp", e.tlsAddr, e.clientTLS)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	tp := textproto.NewConn(conn)
	if _, _, err := tp.ReadResponse(220); err != nil {
		t.Fatal(err)
	}
	return rawTP{tp}
}

func (r rawTP) cmd(t *testing.T, line string, want int) {
	t.Helper()
	if err := r.PrintfLine("%s", line); err != nil {
		t.Fatal(err)
	}
	if c, msg, err := r.ReadResponse(want); err != nil {
		t.Fatalf("%s: %d %s, want %d", line, c, msg, want)
	}
}

func (r rawTP) cmdClass(t *testing.T, line string, class int) {
	t.Helper()
	if err := r.PrintfLine("%s", line); err != nil {
		t.Fatal(err)
	}
	c, msg, _ := r.ReadResponse(0)
	if c/100 != class {
		t.Fatalf("%s: %d %s, want %dxx", line, c, msg, class)
	}
}

// TestServeWrappedTLSListener: Serve given a listener from tls.NewListener
// (as `pimail serve` opens port 465) runs implicit TLS: the session sees TLS
// from its start, so EHLO offers AUTH and no STARTTLS (RFC 3207 §4.2), and AUTH
// PLAIN works.
func TestServeWrappedTLSListener(t *testing.T) {
	e := newSubmitEnv(t, Config{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go e.srv.Serve(tls.NewListener(ln, e.srv.cfg.TLS))
	c, err := smtp.DialTLS(ln.Addr().String(), e.clientTLS)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Hello("client.example"); err != nil {
		t.Fatal(err)
	}
	if ok, _ := c.Extension("STARTTLS"); ok {
		t.Error("STARTTLS offered inside implicit TLS")
	}
	if ok, mechs := c.Extension("AUTH"); !ok || !strings.Contains(mechs, "PLAIN") {
		t.Fatalf("AUTH PLAIN not offered inside implicit TLS (AUTH %q)", mechs)
	}
	if err := c.Auth(sasl.NewPlainClient("", "alice@example.org", alicePW)); err != nil {
		t.Fatalf("AUTH PLAIN: %v", err)
	}
}

// TestBareLineEndingRefused: a message with "<LF>.<LF>" (SMTP smuggling)
// is refused as a whole after its real end, nothing is queued, and the
// session goes on.
func TestBareLineEndingRefused(t *testing.T) {
	e := newSubmitEnv(t, Config{})
	tp := rawTLS(t, e)
	tp.cmd(t, "EHLO client.example", 250)
	tp.cmd(t, "AUTH PLAIN "+base64.StdEncoding.EncodeToString([]byte("\x00alice@example.org\x00"+alicePW)), 235)
	tp.cmd(t, "MAIL FROM:<alice@example.org>", 250)
	tp.cmd(t, "RCPT TO:<someone@remote.example>", 250)
	tp.cmd(t, "DATA", 354)
	smuggled := strings.Replace(body, "Hello.\r\n", "Hello.\n.\nMAIL FROM:<alice@example.org>\r\n", 1)
	if _, err := tp.W.WriteString(smuggled + ".\r\n"); err != nil {
		t.Fatal(err)
	}
	if err := tp.W.Flush(); err != nil {
		t.Fatal(err)
	}
	if c, msg, err := tp.ReadResponse(554); err != nil || !strings.HasPrefix(msg, "5.5.2 ") {
		t.Fatalf("message with a dot line between bare LFs: %d %s, want 554 5.5.2", c, msg)
	}
	tp.cmd(t, "NOOP", 250)
	if n := len(e.q.all()); n != 0 {
		t.Fatalf("%d messages queued, want none", n)
	}
}

// TestSubmitFullMailboxRefusedAtRCPT: a local recipient over its quota is
// refused at RCPT, so the rest of the message goes out once. Refused after
// DATA, the whole message would fail with its remote copy already queued,
// and the client's retries would queue it again each time.
func TestSubmitFullMailboxRefusedAtRCPT(t *testing.T) {
	e, c := aliceAndFullBob(t, 1)
	if err := c.Mail("alice@example.org", &smtp.MailOptions{Size: int64(len(body))}); err != nil {
		t.Fatal(err)
	}
	if err := c.Rcpt("someone@remote.example", nil); err != nil {
		t.Fatal(err)
	}
	var se *smtp.SMTPError
	if err := c.Rcpt("bob@example.org", nil); !errors.As(err, &se) || se.Code != 452 || se.EnhancedCode != (smtp.EnhancedCode{4, 2, 2}) {
		t.Fatalf("RCPT to the full mailbox: %v, want 452 4.2.2", err)
	}
	w, err := c.Data()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write([]byte(body)); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatalf("DATA: %v", err)
	}
	if q := e.q.all(); len(q) != 1 || len(q[0].rcpts) != 1 || q[0].rcpts[0] != "someone@remote.example" {
		t.Fatalf("queued: %+v", q)
	}
	if got := e.mailbox(t, "bob@example.org", "INBOX"); len(got) != 0 {
		t.Fatalf("bob's full INBOX got %d messages", len(got))
	}
}

// TestSubmitLocalFailureAfterQueued: a message that itself takes a local
// recipient over quota (no SIZE= at MAIL, so RCPT could not tell) fails
// locally after its remote copy is queued. The client gets 250, so it
// does not send the message again (the remote recipient would get it
// twice), and the sender gets a failure notice for the local recipient.
func TestSubmitLocalFailureAfterQueued(t *testing.T) {
	e, c := aliceAndFullBob(t, 10)
	if err := send(t, c, "alice@example.org", []string{"someone@remote.example", "bob@example.org"}, body); err != nil {
		t.Fatalf("send: %v (want 250: the remote copy is queued)", err)
	}
	if q := e.q.all(); len(q) != 1 || len(q[0].rcpts) != 1 || q[0].rcpts[0] != "someone@remote.example" {
		t.Fatalf("queued: %+v", q)
	}
	e.q.mu.Lock()
	bounces := e.q.bounces
	e.q.mu.Unlock()
	if len(bounces) != 1 || bounces[0].from != "alice@example.org" || len(bounces[0].rcpts) != 1 || bounces[0].rcpts[0] != "bob@example.org" ||
		!strings.Contains(string(bounces[0].raw), "4.2.2") {
		t.Fatalf("failure notices: %+v", bounces)
	}
	for _, m := range e.mailbox(t, "bob@example.org", "INBOX") { // the pipeline's notice to bob may be there
		if strings.Contains(string(m), "\r\nSubject: hi\r\n") {
			t.Fatal("the message reached bob's full INBOX")
		}
	}
}

// aliceAndFullBob gives bob a quota of limit bytes and returns alice's
// logged-in session.
func aliceAndFullBob(t *testing.T, limit int64) (*submitEnv, *smtp.Client) {
	t.Helper()
	e := newSubmitEnv(t, Config{})
	ctx := context.Background()
	if err := e.st.SetQuota(ctx, "bob@example.org", limit); err != nil {
		t.Fatal(err)
	}
	if err := e.srv.deps.Dir.Reload(ctx); err != nil { // as the directory's poll does
		t.Fatal(err)
	}
	c := dialStartTLS(t, e)
	if err := c.Auth(sasl.NewPlainClient("", "alice@example.org", alicePW)); err != nil {
		t.Fatalf("AUTH: %v", err)
	}
	return e, c
}
