package deliverylog

import (
	"errors"
	"fmt"
	"strings"

	"github.com/emersion/go-smtp"

	"pimail/internal/message"
	"pimail/internal/store"
)

// LogEach logs a copy of e for each recipient (To set to it): one line for
// a message with many recipients. The copies have one time, so that the
// store keeps what they share once.
func (l *Logger) LogEach(e store.DeliveryLogEntry, rcpts []string) {
	if l == nil {
		return
	}
	if e.Time.IsZero() {
		e.Time = l.now()
	}
	for _, r := range rcpts {
		e.To = r
		l.Log(e)
	}
}

// Reply renders an error as the SMTP reply a log reader expects: "550 5.1.1
// text" for an *smtp.SMTPError (also wrapped), the error text otherwise,
// "" for nil.
func Reply(err error) string {
	if err == nil {
		return ""
	}
	var se *smtp.SMTPError
	if errors.As(err, &se) {
		s := fmt.Sprint(se.Code)
		if ec := se.EnhancedCode; ec != smtp.NoEnhancedCode && ec != smtp.EnhancedCodeNotSet && ec[0] > 0 {
			s += fmt.Sprintf(" %d.%d.%d", ec[0], ec[1], ec[2])
		}
		if se.Message != "" {
			s += " " + se.Message
		}
		return s
	}
	return err.Error()
}

// maxHeaderScan bounds how much of a message Identify reads.
const maxHeaderScan = 64 << 10

// Identify returns the Message-ID (without <>) and the decoded Subject of
// a raw message from its header section, read with the message toolkit,
// cheaply (no MIME parse): the first field of each counts, as for IMAP.
// Either is "" when missing.
func Identify(raw []byte) (messageID, subject string) {
	if len(raw) > maxHeaderScan {
		raw = raw[:maxHeaderScan]
	}
	var id, subj []byte
	message.ScanFields(raw, func(f message.RawField) bool {
		switch {
		case id == nil && f.Is("Message-ID"):
			id = f.Value[:len(f.Value):len(f.Value)]
		case subj == nil && f.Is("Subject"):
			subj = f.Value[:len(f.Value):len(f.Value)]
		}
		return id == nil || subj == nil
	})
	messageID = strings.TrimSpace(message.RawField{Value: id}.Unfolded())
	messageID = strings.TrimSuffix(strings.TrimPrefix(messageID, "<"), ">")
	subject = message.DecodeHeaderValue(message.RawField{Value: subj}.Unfolded())
	return messageID, subject
}
