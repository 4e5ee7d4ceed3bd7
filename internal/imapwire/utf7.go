package imapwire

import (
	"encoding/base64"
	"errors"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// Modified UTF-7 mailbox names (RFC 3501 §5.1.3), used with IMAP4rev1
// clients; IMAP4rev2 and UTF8=ACCEPT clients use UTF-8 (RFC 9051 §5.1).

var mutf7 = base64.NewEncoding("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+,").WithPadding(base64.NoPadding)

var errUTF7 = errors.New("invalid modified UTF-7 mailbox name")

// EncodeMUTF7 encodes a UTF-8 mailbox name in modified UTF-7.
func EncodeMUTF7(s string) string {
	var b strings.Builder
	var run []uint16
	flush := func() {
		if len(run) == 0 {
			return
		}
		buf := make([]byte, 0, len(run)*2)
		for _, u := range run {
			buf = append(buf, byte(u>>8), byte(u))
		}
		b.WriteByte('&')
		b.WriteString(mutf7.EncodeToString(buf))
		b.WriteByte('-')
		run = run[:0]
	}
	for _, r := range s {
		if r >= 0x20 && r <= 0x7e {
			flush()
			if r == '&' {
				b.WriteString("&-")
			} else {
				b.WriteRune(r)
			}
			continue
		}
		run = utf16.AppendRune(run, r)
	}
	flush()
	return b.String()
}

// DecodeMUTF7 decodes a modified UTF-7 mailbox name to UTF-8.
func DecodeMUTF7(s string) (string, error) {
	if !strings.Contains(s, "&") {
		for i := 0; i < len(s); i++ {
			if s[i] < 0x20 || s[i] > 0x7e {
				return "", errUTF7
			}
		}
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c > 0x7e {
			return "", errUTF7
		}
		if c != '&' {
			b.WriteByte(c)
			continue
		}
		end := strings.IndexByte(s[i+1:], '-')
		if end < 0 {
			return "", errUTF7
		}
		enc := s[i+1 : i+1+end]
		i += end + 1
		if enc == "" {
			b.WriteByte('&')
			continue
		}
		raw, err := mutf7.DecodeString(enc)
		if err != nil || len(raw)%2 != 0 {
			return "", errUTF7
		}
		units := make([]uint16, len(raw)/2)
		for j := range units {
			units[j] = uint16(raw[2*j])<<8 | uint16(raw[2*j+1])
		}
		for _, r := range utf16.Decode(units) {
			if r == utf8.RuneError || r >= 0x20 && r <= 0x7e {
				return "", errUTF7 // printable ASCII must not be encoded
			}
			b.WriteRune(r)
		}
	}
	return b.String(), nil
}
