package delivery

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"pimail/internal/av"
	"pimail/internal/message"
	"pimail/internal/spam"
	"pimail/internal/store"
)

func spamMsg(i int, subject, body string) []byte {
	return []byte(fmt.Sprintf("Received: from mx.remote.test by mail.example.com; Mon, 2 Jan 2006 15:04:05 +0000\r\n"+
		"From: s%d@remote.test\r\nTo: alice@example.com\r\nSubject: %s %d\r\nDate: Mon, 2 Jan 2006 15:00:00 +0000\r\n"+
		"Message-ID: <%d@remote.test>\r\nX-Spam-Status: No, score=-100 (forged by the sender)\r\nX-Virus-Status: Clean\r\n\r\n%s\r\n", i, subject, i, i, body))
}

const (
	pills = "cheap pills online pharmacy discount order now limited offer"
	notes = "the quarterly report meeting agenda attached please review before thursday"
)

func trainedFilter(t *testing.T, cfg spam.Config) *spam.Filter {
	t.Helper()
	cfg.Logger = quiet()
	f, err := spam.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < spam.MinTrained+5; i++ {
		f.TrainSpam(spam.BaseAccount, spamMsg(i, "offer", pills))
		f.TrainHam(spam.BaseAccount, spamMsg(i, "meeting", notes))
	}
	return f
}

func (f *fixture) mailbox(t *testing.T, addr, name string) ([]byte, []string, *message.Parsed) {
	t.Helper()
	ctx := context.Background()
	mb, err := f.st.Mailbox(ctx, f.ids[addr], name)
	if err != nil {
		t.Fatal(err)
	}
	msgs, err := f.st.Fetch(ctx, mb.ID, nil, store.FetchOptions{Parsed: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 1 {
		t.Fatalf("%s %s has %d messages, want 1", addr, name, len(msgs))
	}
	raw, err := f.st.ReadBlob(ctx, msgs[0].BlobID)
	if err != nil {
		t.Fatal(err)
	}
	return raw, msgs[0].Keywords, msgs[0].Parsed
}

func TestFilterJunkAndInbox(t *testing.T) {
	f := newFixture(t)
	f.pipe.WithFilters(Filters{Spam: trainedFilter(t, spam.Config{NoReject: true})})
	ctx := context.Background()
	env := Envelope{MailFrom: "s@remote.test", Recipients: []string{"alice@example.com"}}
	if _, err := f.pipe.Deliver(ctx, env, spamMsg(500, "offer", pills)); err != nil {
		t.Fatal(err)
	}
	raw, kw, parsed := f.mailbox(t, "alice@example.com", "Junk")
	if !slices.Contains(kw, "$Junk") {
		t.Fatalf("keywords %v", kw)
	}
	s := string(raw)
	if !strings.HasPrefix(s, "Return-Path: <s@remote.test>\r\nX-Spam-Status: Yes, score=") || strings.Contains(s, "forged") || strings.Contains(s, "X-Virus-Status") {
		t.Fatalf("stored header:\n%s", s[:min(len(s), 600)])
	}
	// The parsed offsets were moved with the inserted fields.
	if got := string(raw[parsed.Body.BodyStart:parsed.Body.End]); got != pills+"\r\n" {
		t.Fatalf("body by parsed offsets: %q", got)
	}
	if _, err := f.pipe.Deliver(ctx, env, spamMsg(501, "meeting", notes)); err != nil {
		t.Fatal(err)
	}
	raw, kw, _ = f.mailbox(t, "alice@example.com", "INBOX")
	if len(kw) != 0 || !strings.Contains(string(raw), "X-Spam-Status: No, score=-") {
		t.Fatalf("ham: keywords %v\n%s", kw, raw)
	}
}

func TestFilterRejectStoresNothing(t *testing.T) {
	f := newFixture(t)
	f.pipe.WithFilters(Filters{Spam: trainedFilter(t, spam.Config{RejectThreshold: 6})})
	ctx := context.Background()
	_, err := f.pipe.Deliver(ctx, Envelope{Recipients: []string{"alice@example.com", "bob@example.com"}}, spamMsg(500, "offer", pills))
	var re *RejectError
	if !errors.As(err, &re) || re.Code != 550 || re.Enhanced != [3]int{5, 7, 1} || re.Temporary() {
		t.Fatalf("err = %v", err)
	}
	st, _ := f.st.Stats(ctx)
	if st.Messages != 0 {
		t.Fatalf("%d messages stored after reject", st.Messages)
	}
}

func attachmentMsg(name string, content []byte) []byte {
	return []byte("From: a@remote.test\r\nTo: bob@example.com\r\nSubject: invoice\r\nMIME-Version: 1.0\r\n" +
		"Content-Type: multipart/mixed; boundary=\"b\"\r\n\r\n--b\r\nContent-Type: text/plain\r\n\r\nsee attached\r\n" +
		"--b\r\nContent-Type: application/octet-stream\r\nContent-Disposition: attachment; filename=\"" + name + "\"\r\n" +
		"Content-Transfer-Encoding: base64\r\n\r\n" + base64.StdEncoding.EncodeToString(content) + "\r\n--b--\r\n")
}

func TestFilterAttachmentPolicy(t *testing.T) {
	f := newFixture(t)
	f.pipe.WithFilters(Filters{AV: av.NewScanner(av.Config{Logger: quiet()})})
	ctx := context.Background()
	env := Envelope{Recipients: []string{"bob@example.com"}}
	_, err := f.pipe.Deliver(ctx, env, attachmentMsg("invoice.pdf.exe", []byte("x")))
	var re *RejectError
	if !errors.As(err, &re) || re.Code != 554 || re.Enhanced != [3]int{5, 7, 1} || !strings.Contains(re.Message, "double-extension") {
		t.Fatalf("err = %v", err)
	}
	if _, err := f.pipe.Deliver(ctx, env, attachmentMsg("invoice.pdf", []byte("%PDF-1.4"))); err != nil {
		t.Fatalf("clean attachment: %v", err)
	}
	raw, _, _ := f.mailbox(t, "bob@example.com", "INBOX")
	if strings.Contains(string(raw), "X-Spam-") || strings.Contains(string(raw), "X-Virus-") {
		t.Fatalf("fields added without a verdict to report:\n%s", raw)
	}
}

func TestFilterClamdDown(t *testing.T) {
	f := newFixture(t)
	down := &av.Clamd{Network: "unix", Address: t.TempDir() + "/none.sock"}
	ctx := context.Background()
	env := Envelope{Recipients: []string{"bob@example.com"}}
	f.pipe.WithFilters(Filters{AV: av.NewScanner(av.Config{Clamd: down, Logger: quiet()})})
	_, err := f.pipe.Deliver(ctx, env, []byte(testMessage))
	var re *RejectError
	if !errors.As(err, &re) || re.Code != 451 || re.Enhanced != [3]int{4, 7, 1} || !re.Temporary() {
		t.Fatalf("defer policy: err = %v", err)
	}
	f.pipe.WithFilters(Filters{AV: av.NewScanner(av.Config{Clamd: down, ClamdDown: av.DownAccept, Logger: quiet()})})
	if _, err := f.pipe.Deliver(ctx, env, []byte(testMessage)); err != nil {
		t.Fatalf("accept policy: %v", err)
	}
	raw, _, _ := f.mailbox(t, "bob@example.com", "INBOX")
	if !strings.Contains(string(raw), "\r\nX-Virus-Status: Unscanned (scanner-unavailable)\r\nReceived:") {
		t.Fatalf("stored:\n%s", raw)
	}
}

// The client's blocklist listings reach the spam score: the same
// message goes to INBOX from a clean client and to Junk, with the
// listings among the reasons, from a listed one.
func TestFilterCountsDNSBL(t *testing.T) {
	f := newFixture(t)
	// The rules alone (no classifier), so that the listing is what decides.
	sf, err := spam.New(spam.Config{NoShippedModel: true, NoReject: true, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	f.pipe.WithFilters(Filters{Spam: sf})
	ctx := context.Background()
	note := "a few lines about the garden and the weather this week"
	env := Envelope{MailFrom: "s@remote.test", Recipients: []string{"alice@example.com"}}
	if _, err := f.pipe.Deliver(ctx, env, spamMsg(600, "garden", note)); err != nil {
		t.Fatal(err)
	}
	listed := env
	listed.DNSBL = []spam.DNSBLHit{{List: "zen.example", Weight: 0.9}, {List: "bl.example", Weight: 0.5}}
	if _, err := f.pipe.Deliver(ctx, listed, spamMsg(601, "garden", note)); err != nil {
		t.Fatal(err)
	}
	clean, _, _ := f.mailbox(t, "alice@example.com", "INBOX")
	junk, kw, _ := f.mailbox(t, "alice@example.com", "Junk")
	if !strings.Contains(string(clean), "Message-ID: <600@") || !strings.Contains(string(junk), "Message-ID: <601@") || !slices.Contains(kw, "$Junk") {
		t.Fatalf("INBOX:\n%s\nJunk (%v):\n%s", clean, kw, junk)
	}
	score := func(raw []byte) float64 {
		var v float64
		for _, line := range strings.Split(string(raw), "\r\n") {
			if s, ok := strings.CutPrefix(line, "X-Spam-Score: "); ok {
				fmt.Sscanf(s, "%g", &v)
			}
		}
		return v
	}
	if d := score(junk) - score(clean); d < 4.19 || d > 4.21 {
		t.Errorf("the listings (weights 0.9 and 0.5, 3 points each) added %.2f points, want 4.20", d)
	}
	if !strings.Contains(string(junk), "DNSBL_zen.example=2.70") || !strings.Contains(string(junk), "DNSBL_bl.example=1.50") {
		t.Errorf("listings not among the reasons:\n%s", junk[:min(len(junk), 600)])
	}
}
