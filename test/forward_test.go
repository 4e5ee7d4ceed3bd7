package blackbox

import (
	"fmt"
	"io"
	"log"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2/imapclient"
	"github.com/emersion/go-smtp"
)

// captureMX is an SMTP server (go-smtp) standing in for another domain's
// MX that keeps every message with its envelope.
type captureMX struct {
	addr string
	mu   sync.Mutex
	got  []capturedMsg
}

type capturedMsg struct {
	from  string
	rcpts []string
	data  string
}

func startCaptureMX(t *testing.T) *captureMX {
	t.Helper()
	m := &captureMX{}
	s := smtp.NewServer(smtp.BackendFunc(func(*smtp.Conn) (smtp.Session, error) {
		return &captureSession{m: m}, nil
	}))
	s.Domain = "mx.remote.test"
	s.ReadTimeout = 30 * time.Second
	s.WriteTimeout = 30 * time.Second
	s.MaxMessageBytes = 1 << 20
	s.ErrorLog = log.New(io.Discard, "", 0)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	m.addr = ln.Addr().String()
	go func() { _ = s.Serve(ln) }()
	t.Cleanup(func() { s.Close() })
	return m
}

// wait returns the first message whose data contains want, or fails the
// test after d.
func (m *captureMX) wait(t *testing.T, want string, d time.Duration) capturedMsg {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		m.mu.Lock()
		for _, g := range m.got {
			if strings.Contains(g.data, want) {
				m.mu.Unlock()
				return g
			}
		}
		m.mu.Unlock()
		if time.Now().After(deadline) {
			t.Fatalf("no message with %q reached the remote MX within %v", want, d)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

type captureSession struct {
	m     *captureMX
	from  string
	rcpts []string
}

func (s *captureSession) Mail(from string, _ *smtp.MailOptions) error {
	s.from, s.rcpts = from, nil
	return nil
}

func (s *captureSession) Rcpt(to string, _ *smtp.RcptOptions) error {
	s.rcpts = append(s.rcpts, to)
	return nil
}

func (s *captureSession) Data(r io.Reader) error {
	b, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	s.m.mu.Lock()
	defer s.m.mu.Unlock()
	s.m.got = append(s.m.got, capturedMsg{s.from, s.rcpts, string(b)})
	return nil
}

func (s *captureSession) Reset()        { s.from, s.rcpts = "", nil }
func (s *captureSession) Logout() error { return nil }

// TestForwardSRS: aliases with targets at another domain (remote.test,
// whose transport is an SMTP server in the test) forward through the
// outbound queue. The forwarded copy is the message as received, with an
// SRS envelope sender at the alias's domain; a mixed alias also stores the
// local copy. A bounce to the SRS address, even after a restart (the
// secret is on disk), goes back to the original sender with the null
// sender; a forged one is refused at RCPT.
func TestForwardSRS(t *testing.T) {
	t.Parallel()
	mx := startCaptureMX(t)
	srv := NewServer(t, fmt.Sprintf("[queue]\nmta_sts = false\nretry_initial = \"1s\"\n[queue.transports.\"remote.test\"]\nhost = %q\n", mx.addr))
	users := srv.AddAccounts("carol")
	srv.Admin("alias", "add", "fwd@"+testDomain, "someone@remote.test")
	srv.Admin("alias", "add", "mixed@"+testDomain, users[0], "other@remote.test")
	srv.Start()
	stamp := time.Now().UnixNano()

	send := func(from, to, subject string) {
		t.Helper()
		s := dialSMTP(t, srv.SMTP)
		msg := "From: <" + from + ">\r\nTo: <" + to + ">\r\nSubject: " + subject +
			"\r\nDate: " + time.Now().Format(time.RFC1123Z) + "\r\nMessage-ID: <" + fmt.Sprint(time.Now().UnixNano()) + "@remote.test>" +
			"\r\n\r\nBody of " + subject + ".\r\n"
		if err := s.transaction(from, []string{to}, []byte(msg)); err != nil {
			t.Fatalf("send %q to %s: %v", subject, to, err)
		}
		s.expect("QUIT", 221)
	}

	subject := fmt.Sprintf("forwarded %d", stamp)
	send("sender@remote.test", "fwd@"+testDomain, subject)
	got := mx.wait(t, "Subject: "+subject, 30*time.Second)
	if !strings.HasPrefix(got.from, "SRS0=") || !strings.HasSuffix(got.from, "=remote.test=sender@"+testDomain) {
		t.Errorf("forwarded with envelope sender %q, want SRS0=…=remote.test=sender@%s", got.from, testDomain)
	}
	if len(got.rcpts) != 1 || got.rcpts[0] != "someone@remote.test" {
		t.Errorf("forwarded to %v", got.rcpts)
	}
	if !strings.HasPrefix(got.data, "Received: from client.example") {
		t.Errorf("the forwarded copy does not start with pimail's Received field:\n%s", headerOf(got.data))
	}
	srs := got.from

	msubject := fmt.Sprintf("mixed %d", stamp)
	send("sender@remote.test", "mixed@"+testDomain, msubject)
	if m := mx.wait(t, "Subject: "+msubject, 30*time.Second); len(m.rcpts) != 1 || m.rcpts[0] != "other@remote.test" {
		t.Errorf("mixed alias forwarded to %v", m.rcpts)
	}
	carol := imapLogin(t, srv.IMAP, users[0], &imapclient.Options{})
	if waitMessage(t, carol, "INBOX", msubject, 10*time.Second) == "" {
		t.Errorf("the mixed alias's local target got nothing")
	}

	// The SRS address works across a restart; a forged one does not.
	srv.Stop()
	srv.Start()
	s := dialSMTP(t, srv.SMTP)
	s.expect("MAIL FROM:<>", 250)
	forged := "SRS0=aaaaaa=" + srs[len("SRS0=xxxxxx="):]
	s.expect("RCPT TO:<"+forged+">", 550)
	s.expect("RCPT TO:<"+srs+">", 250)
	bsubject := fmt.Sprintf("bounce %d", stamp)
	code, text, err := s.data([]byte("From: MAILER-DAEMON@remote.test\r\nTo: <" + srs + ">\r\nSubject: " + bsubject + "\r\n\r\nYour message could not be delivered.\r\n"))
	if err != nil || code != 250 {
		t.Fatalf("bounce to the SRS address: %d %q (%v)", code, text, err)
	}
	s.expect("QUIT", 221)
	b := mx.wait(t, "Subject: "+bsubject, 30*time.Second)
	if b.from != "" || len(b.rcpts) != 1 || b.rcpts[0] != "sender@remote.test" {
		t.Errorf("bounce sent on as MAIL FROM:<%s> to %v, want <> to sender@remote.test", b.from, b.rcpts)
	}
}
