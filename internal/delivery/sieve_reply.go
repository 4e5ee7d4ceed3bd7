package delivery

import (
	"bytes"
	"fmt"
	"mime"
	"mime/quotedprintable"
	"strings"
	"time"

	"pimail/internal/message"
	"pimail/internal/sieve"
)

// spamtestScore maps a spam score onto spamtest's scales (RFC 5235 §3.1,
// §3.2) so that the filter's own verdicts read the same in a script: a
// score at the junk threshold is 5 (50 %), at the reject threshold 10
// (100 %), and 0 or less is 1 (0 %); in between it grows linearly.
func spamtestScore(score, junk, reject float64) sieve.Spam {
	s := sieve.Spam{Tested: true}
	switch {
	case score <= 0 || junk <= 0:
		s.Value, s.Percent = 1, 0
	case score < junk:
		s.Value = 1 + int(4*score/junk)
		s.Percent = int(50 * score / junk)
	case reject <= junk || score >= reject:
		s.Value, s.Percent = 10, 100
	default:
		f := (score - junk) / (reject - junk)
		s.Value = 5 + int(5*f)
		s.Percent = 50 + int(50*f)
	}
	return s
}

// smtpReason is the reply text of a refusal at the protocol level: the
// script's reason on one line of printable ASCII (an SMTP reply carries
// no more, RFC 5321 §4.2), or a plain text when the reason has none.
func smtpReason(reason string) string {
	const generic = "Message refused by the recipient's filter"
	var b strings.Builder
	for _, f := range strings.Fields(reason) {
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(f)
	}
	s := b.String()
	if s == "" || len(s) > 200 {
		return generic
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return generic
		}
	}
	return s
}

// replyHeader starts an automatic message (RFC 3834 §5: Auto-Submitted
// keeps other responders from answering it).
func replyHeader(b *bytes.Buffer, from, to, subject string, now time.Time) {
	domain := message.DomainOf(from)
	if domain == "" {
		domain = "localhost"
	}
	fmt.Fprintf(b, "From: <%s>\r\n", from)
	fmt.Fprintf(b, "To: <%s>\r\n", to)
	fmt.Fprintf(b, "Subject: %s\r\n", mime.QEncoding.Encode("utf-8", subject))
	fmt.Fprintf(b, "Date: %s\r\n", now.Format(time.RFC1123Z))
	fmt.Fprintf(b, "Message-ID: <sieve.%s@%s>\r\n", NewID(), domain)
	b.WriteString("Auto-Submitted: auto-replied\r\n")
}

// vacationMessage is the reply of RFC 5230 §5: to the sender, answering
// the message (In-Reply-To, References), with the :subject given or
// "Auto: " and the original subject (§5.4), and the reason as a text
// body or, with :mime, as the whole MIME entity (§5.8).
func vacationMessage(v *sieve.VacationReply, parsed *message.Parsed, full []byte, from string, now time.Time) []byte {
	var b bytes.Buffer
	subject := v.Subject
	if subject == "" {
		orig := message.DecodeHeaderValue(parsed.Envelope.Subject)
		if orig == "" {
			orig = "your message"
		}
		subject = "Auto: " + orig
	}
	replyHeader(&b, from, v.Recipient, subject, now)
	if id := strings.TrimSpace(parsed.Envelope.MessageID); id != "" {
		fmt.Fprintf(&b, "In-Reply-To: %s\r\n", id)
		refs := ""
		for _, r := range parsed.References {
			refs += "<" + r + "> "
		}
		fmt.Fprintf(&b, "References: %s%s\r\n", refs, id)
	}
	b.WriteString("MIME-Version: 1.0\r\n")
	if v.MIME {
		body := strings.ReplaceAll(strings.ReplaceAll(v.Reason, "\r\n", "\n"), "\n", "\r\n")
		b.WriteString(body)
		if !strings.HasSuffix(body, "\r\n") {
			b.WriteString("\r\n")
		}
		return b.Bytes()
	}
	writeTextBody(&b, v.Reason)
	return b.Bytes()
}

// writeTextBody writes a text/plain body, quoted-printable when it is not
// ASCII.
func writeTextBody(b *bytes.Buffer, text string) {
	text = strings.ReplaceAll(strings.ReplaceAll(text, "\r\n", "\n"), "\n", "\r\n")
	ascii := true
	for i := 0; i < len(text); i++ {
		if text[i] > 0x7e || (text[i] < 0x20 && text[i] != '\r' && text[i] != '\n' && text[i] != '\t') {
			ascii = false
			break
		}
	}
	if ascii {
		b.WriteString("Content-Type: text/plain; charset=us-ascii\r\n\r\n")
		b.WriteString(text)
	} else {
		b.WriteString("Content-Type: text/plain; charset=utf-8\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\n")
		w := quotedprintable.NewWriter(b)
		w.Write([]byte(text))
		w.Close()
	}
	if !bytes.HasSuffix(b.Bytes(), []byte("\r\n")) {
		b.WriteString("\r\n")
	}
}

// rejectionMessage is the delivery status notification (RFC 3464) of a
// reject or ereject that could not refuse the message at the protocol
// level (RFC 5429 §2.1.2): the reason for people, the status for
// programs (5.7.1), and the original header.
func rejectionMessage(account, sender string, a sieve.Action, full []byte, parsed *message.Parsed, now time.Time) []byte {
	const boundary = "pimail-reject-boundary"
	var b bytes.Buffer
	replyHeader(&b, "postmaster@"+message.DomainOf(account), sender, "Message refused: "+message.DecodeHeaderValue(parsed.Envelope.Subject), now)
	b.WriteString("MIME-Version: 1.0\r\n")
	fmt.Fprintf(&b, "Content-Type: multipart/report; report-type=delivery-status; boundary=%q\r\n\r\n", boundary)
	fmt.Fprintf(&b, "--%s\r\n", boundary)
	writeTextBody(&b, fmt.Sprintf("Your message to %s was refused by the recipient's filter:\n\n%s\n", account, a.Reason))
	fmt.Fprintf(&b, "--%s\r\nContent-Type: message/delivery-status\r\n\r\n", boundary)
	fmt.Fprintf(&b, "Reporting-MTA: dns; %s\r\n\r\n", message.DomainOf(account))
	fmt.Fprintf(&b, "Final-Recipient: rfc822; %s\r\nAction: failed\r\nStatus: 5.7.1\r\n", account)
	fmt.Fprintf(&b, "Diagnostic-Code: smtp; 550 5.7.1 %s\r\n\r\n", smtpReason(a.Reason))
	fmt.Fprintf(&b, "--%s\r\nContent-Type: text/rfc822-headers\r\n\r\n", boundary)
	hdr := full
	if parsed.Body != nil && int(parsed.Body.BodyStart) <= len(full) {
		hdr = full[:parsed.Body.BodyStart]
	}
	b.Write(hdr)
	fmt.Fprintf(&b, "--%s--\r\n", boundary)
	return b.Bytes()
}
