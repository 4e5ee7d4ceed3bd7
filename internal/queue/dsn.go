package queue

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"mime/quotedprintable"
	"strings"
	"time"

	"pimail/internal/delivery"
	"pimail/internal/message"
	"pimail/internal/store"
)

const (
	actionFailed  = "failed"
	actionDelayed = "delayed"
)

// maxReturnedHeader bounds the original header returned in a DSN.
const maxReturnedHeader = 64 << 10

// notify sends the sender a delivery status notification for the
// recipients at idx. A message with the null reverse-path gets none: a
// bounce is never bounced (RFC 5321 §4.5.5, RFC 3464 §2).
func (q *Queue) notify(ctx context.Context, log *slog.Logger, e store.QueueEntry, raw []byte, idx []int, statuses map[int]string, action string) {
	if e.MailFrom == "" {
		log.Info("no notification for a message with the null sender", "action", action)
		return
	}
	dsn := q.buildDSN(e, raw, idx, statuses, action)
	if q.dir.IsLocalDomain(message.DomainOf(e.MailFrom)) {
		env := delivery.Envelope{MailFrom: "", Recipients: []string{e.MailFrom}, RemoteIP: "127.0.0.1", Helo: q.cfg.Hostname, Authenticated: true} // our own notice
		if _, err := q.local.Deliver(ctx, env, dsn); err != nil {
			log.Error("delivering notification to the sender", "sender", e.MailFrom, "action", action, "err", err)
			return
		}
	} else {
		id, err := q.Enqueue(ctx, 0, "", []string{e.MailFrom}, dsn)
		if err != nil {
			log.Error("queueing notification to the sender", "sender", e.MailFrom, "action", action, "err", err)
			return
		}
		log.Info("notification queued", "dsn_queue_id", id)
	}
	queueNotices.With(action).Inc()
	log.Info("notification sent", "sender", e.MailFrom, "action", action, "rcpts", len(idx))
}

// Bounce tells the sender at once that rcpts did not get the message
// (a DSN, action failed): for a failure found while the message was being
// accepted after other copies of it were already queued, when a failure
// reply would make the client send all of it again (submission's local
// recipients). reason is the refusal ("452 4.2.2 mailbox full"); the
// status reported is its enhanced code in class 5, as nothing retries it.
func (q *Queue) Bounce(ctx context.Context, from string, rcpts []string, reason string, raw []byte) {
	now := q.now()
	status := "5.0.0"
	if f := strings.Fields(reason); len(f) > 1 && len(f[1]) >= 5 && f[1][1] == '.' {
		status = "5" + f[1][1:]
	}
	e := store.QueueEntry{MailFrom: from, Created: now}
	idx := make([]int, len(rcpts))
	statuses := make(map[int]string, len(rcpts))
	for i, r := range rcpts {
		e.Recipients = append(e.Recipients, store.QueueRecipient{Address: r, LastError: reason, LastAttempt: now})
		idx[i], statuses[i] = i, status
	}
	q.notify(ctx, q.log.With("from", from), e, raw, idx, statuses, actionFailed)
}

// buildDSN writes a multipart/report of report-type delivery-status (RFC
// 3464 §2, RFC 6522): a human-readable part, the machine-readable
// message/delivery-status, and the original header (text/rfc822-headers).
func (q *Queue) buildDSN(e store.QueueEntry, raw []byte, idx []int, statuses map[int]string, action string) []byte {
	now := q.now()
	boundary := randomToken()
	host := q.cfg.Hostname
	var b bytes.Buffer
	subject := "Undelivered Mail Returned to Sender"
	if action == actionDelayed {
		subject = "Delayed Mail (still being retried)"
	}
	fmt.Fprintf(&b, "From: Mail Delivery System <MAILER-DAEMON@%s>\r\n", host)
	fmt.Fprintf(&b, "To: <%s>\r\n", e.MailFrom)
	fmt.Fprintf(&b, "Subject: %s\r\n", subject)
	fmt.Fprintf(&b, "Date: %s\r\n", now.Format(time.RFC1123Z))
	fmt.Fprintf(&b, "Message-ID: <%s@%s>\r\n", randomToken(), host)
	b.WriteString("Auto-Submitted: auto-replied\r\n") // RFC 3834 §5
	b.WriteString("MIME-Version: 1.0\r\n")
	fmt.Fprintf(&b, "Content-Type: multipart/report; report-type=delivery-status;\r\n\tboundary=\"%s\"\r\n\r\n", boundary)
	b.WriteString("This is a MIME-encapsulated delivery status notification.\r\n\r\n")

	// Part 1: for people.
	fmt.Fprintf(&b, "--%s\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\n", boundary)
	var text strings.Builder
	if action == actionFailed {
		fmt.Fprintf(&text, "This is the mail system at %s.\r\n\r\nYour message could not be delivered to the following recipients:\r\n\r\n", host)
	} else {
		fmt.Fprintf(&text, "This is the mail system at %s.\r\n\r\nYour message has not been delivered yet to the following recipients. Delivery will be retried until %s; you do not need to send it again.\r\n\r\n",
			host, e.Created.Add(q.cfg.MaxAge).Format(time.RFC1123Z))
	}
	for _, i := range idx {
		r := e.Recipients[i]
		fmt.Fprintf(&text, "  <%s>: %s\r\n", r.Address, r.LastError)
	}
	qp := quotedprintable.NewWriter(&b)
	qp.Write([]byte(text.String()))
	qp.Close()
	b.WriteString("\r\n")

	// Part 2: for programs (RFC 3464 §2.2, §2.3).
	fmt.Fprintf(&b, "--%s\r\nContent-Type: message/delivery-status\r\n\r\n", boundary)
	fmt.Fprintf(&b, "Reporting-MTA: dns; %s\r\n", host)
	if e.ID != 0 {
		fmt.Fprintf(&b, "X-Pimail-Queue-ID: %d\r\n", e.ID)
	}
	fmt.Fprintf(&b, "Arrival-Date: %s\r\n", e.Created.Format(time.RFC1123Z))
	for _, i := range idx {
		r := e.Recipients[i]
		status := statuses[i]
		if status == "" || (action == actionFailed && status[0] != '5') {
			status = "5.0.0"
			if action == actionFailed && strings.Contains(r.LastError, "giving up") {
				status = "4.4.7" // RFC 3463: delivery time expired
			}
		}
		if action == actionDelayed && status[0] != '4' {
			status = "4.0.0"
		}
		b.WriteString("\r\n")
		fmt.Fprintf(&b, "Final-Recipient: rfc822; %s\r\n", r.Address)
		fmt.Fprintf(&b, "Action: %s\r\n", action)
		fmt.Fprintf(&b, "Status: %s\r\n", status)
		if r.LastError != "" {
			fmt.Fprintf(&b, "Diagnostic-Code: smtp; %s\r\n", oneLine(r.LastError))
		}
		if !r.LastAttempt.IsZero() {
			fmt.Fprintf(&b, "Last-Attempt-Date: %s\r\n", r.LastAttempt.Format(time.RFC1123Z))
		}
		if action == actionDelayed {
			fmt.Fprintf(&b, "Will-Retry-Until: %s\r\n", e.Created.Add(q.cfg.MaxAge).Format(time.RFC1123Z))
		}
	}
	b.WriteString("\r\n")

	// Part 3: the original header (RFC 3462 text/rfc822-headers).
	fmt.Fprintf(&b, "--%s\r\nContent-Type: text/rfc822-headers\r\n\r\n", boundary)
	b.Write(headerOf(raw))
	fmt.Fprintf(&b, "\r\n--%s--\r\n", boundary)
	return b.Bytes()
}

// headerOf returns the header section of a message, with CRLF line ends,
// bounded in size.
func headerOf(raw []byte) []byte {
	var out bytes.Buffer
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for sc.Scan() {
		line := strings.TrimRight(sc.Text(), "\r")
		if line == "" || out.Len()+len(line) > maxReturnedHeader {
			break
		}
		out.WriteString(line)
		out.WriteString("\r\n")
	}
	return out.Bytes()
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

func randomToken() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
