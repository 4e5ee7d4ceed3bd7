package delivery

import (
	"bytes"
	"crypto/rand"
	"encoding/base32"
	"encoding/binary"
	"strings"
	"time"

	"pimail/internal/message"
)

// idEncoding is base32 with the "extended hex" alphabet (RFC 4648 §7),
// lower case, which keeps IDs in time order when sorted as strings.
var idEncoding = base32.NewEncoding("0123456789abcdefghijklmnopqrstuv").WithPadding(base32.NoPadding)

// NewID returns a short unique message identifier for logs and trace
// fields: 48 bits of milliseconds since the Unix epoch and 32 random bits,
// 16 characters, sortable by time.
func NewID() string {
	var b [10]byte
	binary.BigEndian.PutUint64(b[0:8], uint64(time.Now().UnixMilli())<<16)
	_, _ = rand.Read(b[6:10]) // crypto/rand.Read never fails (Go 1.24+)
	return idEncoding.EncodeToString(b[:])
}

// prependReturnPath puts "Return-Path: <reverse-path>" on top of the
// message. RFC 5321 §4.4: the final delivery server records the MAIL FROM
// reverse-path there; "<>" for the null reverse-path. The copy has room
// for room more bytes, so that insertHeaders can add the filters' fields
// without copying the message again.
func prependReturnPath(mailFrom string, raw []byte, room int) []byte {
	mailFrom = strings.Map(func(r rune) rune {
		if r == '\r' || r == '\n' || r == '<' || r == '>' {
			return -1
		}
		return r
	}, mailFrom)
	out := make([]byte, 0, len("Return-Path: <>\r\n")+len(mailFrom)+len(raw)+room)
	out = append(out, "Return-Path: <"...)
	out = append(out, mailFrom...)
	out = append(out, ">\r\n"...)
	return append(out, raw...)
}

// minimalParsed describes a message as a single text/plain part, the
// fallback of message.Parse's own contract for mail it cannot understand.
func minimalParsed(raw []byte) *message.Parsed {
	n := int64(len(raw))
	bodyStart := n
	if i := bytes.Index(raw, []byte("\r\n\r\n")); i >= 0 {
		bodyStart = int64(i + 4)
	} else if i := bytes.Index(raw, []byte("\n\n")); i >= 0 {
		bodyStart = int64(i + 2)
	}
	return &message.Parsed{Body: &message.Part{
		Type:      "text",
		Subtype:   "plain",
		Params:    []message.Param{{Name: "charset", Value: "us-ascii"}},
		Encoding:  "7bit",
		Size:      n - bodyStart,
		Lines:     int64(bytes.Count(raw[bodyStart:], []byte("\n"))),
		BodyStart: bodyStart,
		End:       n,
	}}
}
