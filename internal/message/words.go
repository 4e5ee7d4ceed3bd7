package message

import (
	"strings"
	"unicode/utf8"
)

// DecodeHeaderValue decodes RFC 2047 encoded words in an unfolded header
// value to UTF-8. It is lenient where real mail is broken: raw 8-bit bytes
// inside Q-encoded words, unknown charsets, language tags (RFC 2231 §5),
// and multi-byte characters split across adjacent words of one charset
// are all handled. Malformed words are kept as written. 8-bit text outside
// encoded words is kept if it is valid UTF-8 (RFC 6532) and otherwise read
// as Windows-1252.
func DecodeHeaderValue(s string) string {
	return decodeHeader(s, "")
}

// decodeHeader is DecodeHeaderValue with a charset to assume for raw
// 8-bit text that is not UTF-8 (for example the message body's charset).
func decodeHeader(s, fallback string) string {
	if !strings.Contains(s, "=?") {
		return rawToUTF8(s, fallback)
	}
	var out strings.Builder
	out.Grow(len(s))
	// Encoded bytes waiting for conversion, all in pendingCharset.
	var pending []byte
	pendingCharset := ""
	flush := func() {
		if pending != nil {
			out.WriteString(charsetToUTF8(pending, pendingCharset))
			pending = nil
		}
	}
	lastWasWord := false
	for len(s) > 0 {
		i := strings.Index(s, "=?")
		if i < 0 {
			flush()
			out.WriteString(rawToUTF8(s, fallback))
			break
		}
		cs, decoded, n, ok := parseEncodedWord(s[i:])
		if !ok {
			// Not a word: keep "=?" literally and go on after it.
			flush()
			out.WriteString(rawToUTF8(s[:i+2], fallback))
			s = s[i+2:]
			lastWasWord = false
			continue
		}
		between := s[:i]
		// RFC 2047 §6.2: white space between adjacent encoded words is
		// not displayed.
		if !(lastWasWord && strings.Trim(between, " \t\r\n") == "") {
			flush()
			out.WriteString(rawToUTF8(between, fallback))
		}
		if pending != nil && !strings.EqualFold(cs, pendingCharset) {
			flush()
		}
		if pending == nil {
			pending = make([]byte, 0, len(decoded))
		}
		pending = append(pending, decoded...)
		pendingCharset = cs
		s = s[i+n:]
		lastWasWord = true
	}
	flush()
	return out.String()
}

// parseEncodedWord parses "=?charset?enc?text?=" (RFC 2047 §2) at the start
// of s and returns the charset, the decoded bytes and the word's length.
func parseEncodedWord(s string) (cs string, decoded []byte, n int, ok bool) {
	// s starts with "=?".
	q1 := strings.IndexByte(s[2:], '?')
	if q1 <= 0 || q1 > 64 {
		return "", nil, 0, false
	}
	cs = s[2 : 2+q1]
	if strings.ContainsAny(cs, " \t\r\n") {
		return "", nil, 0, false
	}
	if star := strings.IndexByte(cs, '*'); star >= 0 {
		cs = cs[:star] // RFC 2231 §5 language
	}
	rest := s[2+q1+1:]
	if len(rest) < 2 || rest[1] != '?' {
		return "", nil, 0, false
	}
	enc := rest[0] | 0x20
	text := rest[2:]
	end := strings.Index(text, "?=")
	if end < 0 {
		return "", nil, 0, false
	}
	text = text[:end]
	switch enc {
	case 'b':
		decoded = decodeBase64([]byte(text))
	case 'q':
		decoded = decodeQWord(text)
	default:
		return "", nil, 0, false
	}
	n = 2 + q1 + 1 + 2 + end + 2
	return cs, decoded, n, true
}

// decodeQWord decodes the RFC 2047 §4.2 "Q" encoding: "_" is a space and
// "=XX" an octet; anything else, raw 8-bit bytes included, stands for
// itself.
func decodeQWord(text string) []byte {
	out := make([]byte, 0, len(text))
	for i := 0; i < len(text); i++ {
		c := text[i]
		switch {
		case c == '_':
			out = append(out, ' ')
		case c == '=' && i+2 < len(text):
			h, ok1 := unhex(text[i+1])
			l, ok2 := unhex(text[i+2])
			if ok1 && ok2 {
				out = append(out, h<<4|l)
				i += 2
			} else {
				out = append(out, c)
			}
		default:
			out = append(out, c)
		}
	}
	return out
}

// rawToUTF8 converts header text outside encoded words: valid UTF-8 stays,
// anything else is read in the fallback charset or Windows-1252.
func rawToUTF8(s, fallback string) string {
	if utf8.ValidString(s) {
		return s
	}
	if fallback != "" {
		return charsetToUTF8([]byte(s), fallback)
	}
	return legacyToUTF8(s)
}
