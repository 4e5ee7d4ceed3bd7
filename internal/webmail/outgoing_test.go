package webmail

import (
	"net/mail"
	"strings"
	"testing"
	"time"

	"pimail/internal/message"
)

// headerNames lists the field names of a rendered message's header.
func headerNames(raw []byte) []string {
	p := message.Parse(raw)
	var names []string
	for _, f := range message.HeaderFields(raw[:p.Body.BodyStart]) {
		names = append(names, strings.ToLower(f.Name))
	}
	return names
}

func TestHeaderInjection(t *testing.T) {
	for _, field := range []string{"bob@example.com\r\nBcc: evil@example.net", "bob@example.com\nX-Evil: 1", "Bob\r\n <bob@example.com>", "bob@example.com\x00"} {
		if _, err := parseRecipients(field); err == nil {
			t.Errorf("recipients %q accepted", field)
		}
	}
	for _, bad := range []string{"bob@exa mple.com", "bob@example.com>\"", "@example.com", "bob@[127.0.0.1]"} {
		if l, err := parseRecipients(bad); err == nil {
			t.Errorf("address %q accepted as %v", bad, l)
		}
	}
	to, err := parseRecipients(`"Evil\" <x@y>" <bob@example.com>, =?utf-8?q?a?= <c@example.com>`)
	if err != nil || len(to) != 2 {
		t.Fatalf("parse: %v %v", to, err)
	}
	o := &outgoing{
		From:        mail.Address{Name: "Alice\r\nBcc: evil@example.net", Address: "alice@example.com"},
		To:          to,
		Subject:     "hi\r\nBcc: evil@example.net\nX-Injected: yes",
		Body:        "body\r\n.\r\nBcc: not a header",
		InReplyTo:   "<a@b>\r\nX-Evil: 1",
		References:  []string{"<r@b>", "<x@y>\nX-Evil: 2"},
		Attachments: []outPart{{Name: safeFilename("evil\r\nX-Evil: 3\".txt", nil), Type: "text/plain", Data: []byte("x")}},
		Date:        time.Unix(0, 0),
		MessageID:   "<id@host>",
	}
	raw := o.bytes(false)
	for _, n := range headerNames(raw) {
		if n == "bcc" || strings.HasPrefix(n, "x-") {
			t.Fatalf("injected header %q in:\n%s", n, raw)
		}
	}
	p := message.Parse(raw)
	if !strings.Contains(p.Subject, "Bcc: evil@example.net") || strings.ContainsAny(p.Subject, "\r\n") {
		t.Errorf("subject not kept as text: %q", p.Subject)
	}
	for _, part := range p.Body.Parts {
		for _, f := range message.HeaderFields(raw[part.HeaderStart:part.BodyStart]) {
			if strings.HasPrefix(strings.ToLower(f.Name), "x-") {
				t.Fatalf("injected part header %q", f.Name)
			}
		}
	}
	if a := attachments(p.Body); len(a) != 1 || strings.ContainsAny(a[0].Name, "\r\n") {
		t.Fatalf("attachment name: %+v", a)
	}
	// Every line is CRLF-terminated and at most 998 octets.
	for _, line := range strings.Split(string(raw), "\r\n") {
		if strings.ContainsAny(line, "\r\n") || len(line) > 998 {
			t.Fatalf("bad line %q", line)
		}
	}
}

func TestLongSubjectFolded(t *testing.T) {
	o := &outgoing{From: mail.Address{Address: "a@example.com"}, Subject: strings.Repeat("wörd ", 60), Date: time.Unix(0, 0), MessageID: "<i@h>"}
	raw := o.bytes(false)
	for _, line := range strings.Split(string(raw), "\r\n") {
		if len(line) > 100 {
			t.Fatalf("unfolded line of %d octets", len(line))
		}
	}
	if got := message.Parse(raw).Subject; strings.TrimSpace(got) != strings.TrimSpace(strings.Repeat("wörd ", 60)) {
		t.Fatalf("subject round trip: %q", got)
	}
}

func TestSafeFilenameAndDisposition(t *testing.T) {
	for in, want := range map[string]string{
		"../../etc/passwd":     "_.._etc_passwd",
		"a\r\nb.txt":           "ab.txt",
		"..hidden":             "hidden",
		"report\u202Egpj.exe":  "reportgpj.exe",
		"":                     "attachment",
		`C:\Users\x\evil.html`: "C:_Users_x_evil.html",
	} {
		if got := safeFilename(in, nil); got != want {
			t.Errorf("safeFilename(%q) = %q, want %q", in, got, want)
		}
	}
	cd := contentDisposition("naïve \"quote\";.txt")
	if cd != `attachment; filename="na_ve _quote__.txt"; filename*=UTF-8''na%C3%AFve%20%22quote%22%3B.txt` {
		t.Errorf("disposition %s", cd)
	}
}
