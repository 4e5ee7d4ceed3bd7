package blackbox

import (
	"testing"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"
)

// TestIdleSeesDelivery checks that a client in IDLE on INBOX learns of a
// new message (an untagged EXISTS) within a second of the SMTP 250.
func TestIdleSeesDelivery(t *testing.T) {
	srv := NewServer(t, "[spam]\nenabled = false\n") // not about spam: every message to INBOX
	users := srv.AddAccounts("idler")
	srv.Start()
	idleSeesDelivery(t, srv, srv, users)
}

// idleSeesDelivery delivers three messages to users over SMTP at mx and
// checks that a client in IDLE at the IMAP server of idler learns of each
// within a second of the 250.
func idleSeesDelivery(t *testing.T, mx, idler *Server, users []string) {
	exists := make(chan uint32, 16)
	c := imapLogin(t, idler.IMAP, users[0], &imapclient.Options{
		UnilateralDataHandler: &imapclient.UnilateralDataHandler{
			Mailbox: func(d *imapclient.UnilateralDataMailbox) {
				if d.NumMessages != nil {
					select {
					case exists <- *d.NumMessages:
					default:
					}
				}
			},
		},
	})
	sel, err := c.Select("INBOX", &imap.SelectOptions{}).Wait()
	if err != nil {
		t.Fatalf("SELECT INBOX: %v", err)
	}
	if sel.NumMessages != 0 {
		t.Fatalf("fresh INBOX has %d messages", sel.NumMessages)
	}
	idle, err := c.Idle()
	if err != nil {
		t.Fatalf("IDLE: %v", err)
	}

	for i := 1; i <= 3; i++ {
		s := dialSMTP(t, mx.SMTP)
		s.send("sender@example.org", users, generatedMessage("idle", i, 2048))
		acked := time.Now()
		deadline := time.After(time.Second)
	wait:
		for {
			select {
			case n := <-exists:
				if n >= uint32(i) {
					t.Logf("delivery %d: EXISTS %d %v after the 250", i, n, time.Since(acked).Round(time.Millisecond))
					break wait
				}
			case <-deadline:
				t.Fatalf("delivery %d: no EXISTS %d within 1s of the SMTP 250", i, i)
			}
		}
		s.expect("QUIT", 221)
	}

	if err := idle.Close(); err != nil {
		t.Fatalf("DONE: %v", err)
	}
	if err := idle.Wait(); err != nil {
		t.Fatalf("IDLE ended with: %v", err)
	}
	if err := c.Noop().Wait(); err != nil {
		t.Fatalf("NOOP after IDLE: %v", err)
	}
}
