package deliverylog

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"mime"
	"net/textproto"
	"strings"

	"github.com/emersion/go-smtp"

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

// wordDecoder decodes RFC 2047 words in UTF-8, US-ASCII and ISO-8859-1;
// others stay encoded, which is still readable enough for a log.
var wordDecoder = mime.WordDecoder{}

// Identify returns the Message-ID (without <>) and the decoded Subject of
// a raw message from its header section, cheaply (no MIME parse). Either
// is "" when missing or unreadable.
func Identify(raw []byte) (messageID, subject string) {
	if len(raw) > maxHeaderScan {
		raw = raw[:maxHeaderScan]
	}
	r := textproto.NewReader(bufio.NewReader(bytes.NewReader(raw)))
	h, _ := r.ReadMIMEHeader() // a partial header is still useful
	messageID = strings.TrimSpace(h.Get("Message-Id"))
	messageID = strings.TrimSuffix(strings.TrimPrefix(messageID, "<"), ">")
	subject = strings.TrimSpace(h.Get("Subject"))
	if dec, err := wordDecoder.DecodeHeader(subject); err == nil {
		subject = dec
	}
	return messageID, subject
}
