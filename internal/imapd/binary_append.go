package imapd

import (
	"encoding/base64"
	"strings"

	"pimail/internal/message"
)

// binaryToBase64 rewrites the parts of a message APPENDed as literal8
// (RFC 3516 §4.4) whose Content-Transfer-Encoding is binary into base64,
// as Dovecot does. A body fetch (BODY[], RFC822) can then never carry NUL
// octets, which only literal8 may (RFC 9051 §4.3, RFC 3516 §4.2), while
// BINARY[] still returns the octets that were appended. Messages without
// such a part come back unchanged (the same slice).
func binaryToBase64(raw []byte) []byte {
	p := message.Parse(raw)
	if p == nil || p.Body == nil {
		return raw
	}
	var leaves []*message.Part
	p.Body.Walk(func(pt *message.Part) bool {
		if pt.Type != "multipart" && pt.Message == nil && strings.EqualFold(pt.Encoding, "binary") {
			leaves = append(leaves, pt)
		}
		return true
	})
	if len(leaves) == 0 {
		return raw
	}
	out := make([]byte, 0, len(raw)+len(raw)/3)
	at := int64(0)
	for _, pt := range leaves {
		if pt.HeaderStart < at || pt.BodyStart < pt.HeaderStart || pt.End < pt.BodyStart || pt.End > int64(len(raw)) {
			return raw // offsets that do not nest: leave the message alone
		}
		out = append(out, raw[at:pt.HeaderStart]...)
		for _, f := range message.HeaderFields(raw[pt.HeaderStart:pt.BodyStart]) {
			if strings.EqualFold(f.Name, "Content-Transfer-Encoding") {
				out = append(out, "Content-Transfer-Encoding: base64\r\n"...)
			} else {
				out = append(out, f.Raw...)
			}
		}
		out = append(out, "\r\n"...)
		out = appendBase64Lines(out, raw[pt.BodyStart:pt.End])
		at = pt.End
	}
	return append(out, raw[at:]...)
}

// appendBase64Lines appends data in base64, in lines of 76 characters
// ending in CRLF (RFC 2045 §6.8).
func appendBase64Lines(out, data []byte) []byte {
	enc := make([]byte, base64.StdEncoding.EncodedLen(len(data)))
	base64.StdEncoding.Encode(enc, data)
	for len(enc) > 0 {
		n := min(76, len(enc))
		out = append(out, enc[:n]...)
		out = append(out, "\r\n"...)
		enc = enc[n:]
	}
	return out
}
