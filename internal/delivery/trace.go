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

// returnPath is the "Return-Path: <reverse-path>" field put on top of the
// message. RFC 5321 §4.4: the final delivery server records the MAIL FROM
// reverse-path there; "<>" for the null reverse-path.
func returnPath(mailFrom string) string {
	mailFrom = strings.Map(func(r rune) rune {
		if r == '\r' || r == '\n' || r == '<' || r == '>' {
			return -1
		}
		return r
	}, mailFrom)
	return "Return-Path: <" + mailFrom + ">\r\n"
}

// minimalParsed describes a message as a single text/plain part, the
// fallback of message.Parse's own contract for mail it cannot understand.
func minimalParsed(raw []byte) *message.Parsed {
	n := int64(len(raw))
	bodyStart := int64(headerLen(raw))
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
