package blackbox

import (
	"bufio"
	"encoding/base64"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2"
)

// bigPart is one attachment of a generated large message: size bytes of
// random data, base64-encoded, or the EICAR test file when eicar is set.
type bigPart struct {
	size  int
	eicar bool
}

// writeBigMessage writes a message with a text part and the given
// attachments to w as DATA (CR LF lines; no line starts with a dot),
// generating the attachments as it goes, so that the test holds none of
// it in memory. It returns the bytes written.
func writeBigMessage(w io.Writer, tag string, parts []bigPart) (int64, error) {
	bw := bufio.NewWriterSize(w, 64<<10)
	var n int64
	put := func(s string) {
		m, _ := bw.WriteString(s)
		n += int64(m)
	}
	put("From: Big <big@example.org>\r\nTo: <large@" + testDomain + ">\r\nSubject: " + tag + "\r\n")
	put("Date: Mon, 3 Mar 2025 10:00:00 +0000\r\nMessage-ID: <" + tag + "@example.org>\r\nMIME-Version: 1.0\r\n")
	put("Content-Type: multipart/mixed; boundary=\"big-boundary\"\r\n\r\n--big-boundary\r\n")
	put("Content-Type: text/plain; charset=utf-8\r\n\r\nThe files you asked for.\r\n")
	rng := rand.New(rand.NewPCG(uint64(len(tag)), 7))
	raw := make([]byte, 57) // one base64 line
	for i, p := range parts {
		name := fmt.Sprintf("scan-%d.bin", i)
		if p.eicar {
			name = fmt.Sprintf("note-%d.txt", i)
		}
		put(fmt.Sprintf("--big-boundary\r\nContent-Type: application/octet-stream; name=\"%s\"\r\n", name))
		put(fmt.Sprintf("Content-Disposition: attachment; filename=\"%s\"\r\nContent-Transfer-Encoding: base64\r\n\r\n", name))
		if p.eicar {
			put(base64.StdEncoding.EncodeToString([]byte(testEICAR)) + "\r\n")
			continue
		}
		for done := 0; done < p.size; done += len(raw) {
			for j := range raw {
				raw[j] = byte(rng.Uint32())
			}
			put(base64.StdEncoding.EncodeToString(raw) + "\r\n")
		}
	}
	put("--big-boundary--\r\n.\r\n")
	return n, bw.Flush()
}

// sendBig runs one transaction with a generated large message and returns
// the final reply.
func sendBig(addr, rcpt, tag string, parts []bigPart) (int, string, error) {
	s, err := rawSMTP(addr)
	if err != nil {
		return 0, "", err
	}
	defer s.Close()
	for _, cmd := range []string{"MAIL FROM:<big@example.org>", "RCPT TO:<" + rcpt + ">", "DATA"} {
		code, text, err := s.cmd(cmd)
		if err != nil || code >= 400 {
			return code, text, fmt.Errorf("%s: %d %q %v", cmd, code, text, err)
		}
	}
	_ = s.c.SetWriteDeadline(time.Now().Add(5 * time.Minute))
	if _, err := writeBigMessage(s.c, tag, parts); err != nil {
		return 0, "", err
	}
	_ = s.c.SetReadDeadline(time.Now().Add(5 * time.Minute))
	line, err := s.r.ReadString('\n')
	if err != nil || len(line) < 3 {
		return 0, line, fmt.Errorf("final reply %q: %w", line, err)
	}
	var code int
	fmt.Sscanf(line, "%d", &code)
	return code, strings.TrimSpace(line), nil
}

// TestAttackMemoryPerMessage (issue 28, item 5): one 49 MB message took
// the server from 24 to 236 MB of RSS, 8 in parallel to 1.3 GB. Now a
// message larger than smtp.spool_threshold goes to a file while it
// arrives, and at most smtp.large_deliveries (2) spooled messages are
// delivered at once, mapped from their file: 8 messages of 50 MB in
// parallel must stay within 200 MB of RSS above the idle server, and all
// of them are stored whole. Meanwhile another user logs in over IMAP,
// gets a message over SMTP and loads the webmail's login page.
func TestAttackMemoryPerMessage(t *testing.T) {
	srv := NewServer(t, "")
	users := srv.AddAccounts("large", "bystander")
	rcpt := users[0]
	l := withListeners(t, "http")
	srv.StartWith(l)
	base := warmRSS(t, srv, rcpt)

	var peak, peakAnon, peakFile int64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			if r := srv.RSSKiB(); r > peak {
				peak = r
				peakAnon, peakFile = srv.procStatusKiB("RssAnon"), srv.procStatusKiB("RssFile")
			}
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// 37.4 MB of data, 51.2 MB (48.8 MiB) as base64: within the 50 MiB limit.
			code, text, err := sendBig(srv.SMTP, rcpt, fmt.Sprintf("big-%d", i), []bigPart{{size: 37_400_000}})
			if err != nil || code != 250 {
				errs <- fmt.Errorf("message %d: %d %q %v", i, code, text, err)
			}
		}()
	}
	time.Sleep(3 * time.Second) // the 8 messages are arriving
	served := time.Now()
	imapLogin(t, srv.IMAP, users[1], nil).Close()
	dialSMTP(t, srv.SMTP).send("someone@example.org", users[1:], generatedMessage("large-bystander", 1, 500))
	resp, err := http.Get("http://" + l.HTTP + "/login")
	if err != nil {
		t.Fatalf("webmail during the flood: %v", err)
	}
	resp.Body.Close()
	t.Logf("IMAP login, SMTP delivery and a web page during the flood: %v", time.Since(served).Round(time.Millisecond))
	wg.Wait()
	close(stop)
	<-sampled
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	t.Logf("8 × 50 MB in parallel in %v: RSS idle %d MiB, peak %d MiB (+%d MiB; anonymous %d MiB, file pages %d MiB)",
		time.Since(start).Round(time.Millisecond), base>>10, peak>>10, (peak-base)>>10, peakAnon>>10, peakFile>>10)
	if peak-base > 200<<10 {
		t.Errorf("peak RSS %d MiB above idle, want at most 200 MiB", (peak-base)>>10)
	}
	// All stored, in INBOX or (the spam filter runs with its defaults:
	// its shipped model may file random text as spam) in Junk.
	c := imapLogin(t, srv.IMAP, rcpt, nil)
	defer c.Close()
	var n uint32
	for _, mbox := range []string{"INBOX", "Junk"} {
		st, err := c.Status(mbox, &imap.StatusOptions{NumMessages: true}).Wait()
		if err != nil {
			t.Fatal(err)
		}
		if st.NumMessages != nil {
			n += *st.NumMessages
		}
	}
	if n != 8 {
		t.Fatalf("%d messages stored in INBOX and Junk, want 8", n)
	}
}

// TestAttackLargeMessageVirusScan (issue 28, item 6): a message larger
// than clamd takes (StreamMaxLength, 25 MB by default) but within
// pimail's 50 MiB was delivered "X-Virus-Status: Unscanned (too-large)".
// Now it is scanned in pieces of whole MIME parts, each within the limit:
// a virus in its last part is found; a clean one is delivered as scanned;
// a single part larger than clamd takes is refused (av.too_large =
// reject, the default) with 552 5.3.4.
func TestAttackLargeMessageVirusScan(t *testing.T) {
	t.Parallel()
	sock, _ := startRealClamdMax(t, "25M")
	srv := NewServer(t, fmt.Sprintf("[av]\nclamd = \"unix:%s\"\nclamd_timeout = \"60s\"\n[spam]\nenabled = false\n", sock))
	rcpt := srv.AddAccounts("scan")[0]
	srv.Start()
	five := bigPart{size: 5_000_000}
	for _, c := range []struct {
		name  string
		parts []bigPart
		code  int
		enh   string
	}{
		{"a virus in the last of six parts", []bigPart{five, five, five, five, five, {eicar: true}}, 554, "5.7.1"},
		{"clean parts", []bigPart{five, five, five, five, five, five}, 250, "2.0.0"},
		{"one part larger than clamd takes", []bigPart{{size: 28_000_000}}, 552, "5.3.4"},
	} {
		code, text, err := sendBig(srv.SMTP, rcpt, strings.ReplaceAll(c.name, " ", "-"), c.parts)
		if err != nil || code != c.code || !strings.Contains(text, " "+c.enh+" ") {
			t.Errorf("%s: %d %q %v, want %d %s", c.name, code, text, err, c.code, c.enh)
		}
	}
	got := waitInbox(t, srv, rcpt, 1)
	if !strings.Contains(got[0][:4096], "X-Virus-Status: Clean") {
		t.Errorf("the clean message is not marked as scanned:\n%.800s", got[0])
	}
}
