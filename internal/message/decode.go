package message

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/emersion/go-message/charset"
	"golang.org/x/text/encoding/charmap"
	xunicode "golang.org/x/text/encoding/unicode"
)

// ErrNotText is returned by DecodeText for a part that is not text/*.
var ErrNotText = errors.New("message: not a text part")

// legacyToUTF8 returns s unchanged when it is valid UTF-8 and otherwise
// decodes it as Windows-1252.
func legacyToUTF8(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	d, err := charmap.Windows1252.NewDecoder().String(s)
	if err != nil {
		return strings.ToValidUTF8(s, "\uFFFD")
	}
	return d
}

// charsetToUTF8 converts b from the named charset to UTF-8. A byte-order
// mark decides over the named charset, as it does in browsers (WHATWG
// Encoding, "BOM sniff"): UTF-8's is dropped, UTF-16's selects UTF-16 in
// its byte order (RFC 2781 §3.2). An empty, ASCII or unknown charset
// keeps valid UTF-8 as is and reads anything else as Windows-1252;
// invalid sequences become U+FFFD.
func charsetToUTF8(b []byte, cs string) string {
	switch {
	case bytes.HasPrefix(b, []byte{0xEF, 0xBB, 0xBF}):
		return strings.ToValidUTF8(string(b[3:]), "\uFFFD")
	case bytes.HasPrefix(b, []byte{0xFF, 0xFE}), bytes.HasPrefix(b, []byte{0xFE, 0xFF}):
		out, err := xunicode.UTF16(xunicode.BigEndian, xunicode.ExpectBOM).NewDecoder().Bytes(b)
		if err == nil {
			return strings.ToValidUTF8(string(out), "\uFFFD")
		}
	}
	cs = strings.ToLower(strings.Trim(cs, " \t\"'"))
	if cs == "utf-16" {
		// RFC 2781 §4.3: without a BOM, big-endian.
		if out, err := xunicode.UTF16(xunicode.BigEndian, xunicode.IgnoreBOM).NewDecoder().Bytes(b); err == nil {
			return strings.ToValidUTF8(string(out), "\uFFFD")
		}
	}
	switch cs {
	case "", "us-ascii", "ascii", "utf-8", "utf8", "unknown-8bit", "x-unknown", "default":
		if utf8.Valid(b) {
			return string(b)
		}
		if cs == "utf-8" || cs == "utf8" {
			return strings.ToValidUTF8(string(b), "\uFFFD")
		}
		return legacyToUTF8(string(b))
	}
	r, err := charset.Reader(cs, bytes.NewReader(b))
	if err != nil {
		return legacyToUTF8(string(b))
	}
	out, err := io.ReadAll(r)
	if err != nil {
		return legacyToUTF8(string(b))
	}
	return strings.ToValidUTF8(string(out), "\uFFFD")
}

// DecodeText returns the text of a text/* part as UTF-8: the transfer
// encoding (RFC 2045 §6: base64, quoted-printable) is undone and the
// charset parameter converted. HTML and other subtypes are returned as
// they are. Decoding is lenient; an error means the part is not text or
// its offsets do not fit raw.
func DecodeText(raw []byte, p *Part) (string, error) {
	if p == nil {
		return "", fmt.Errorf("decode text: nil part: %w", ErrNotText)
	}
	if p.Type != "text" {
		return "", fmt.Errorf("decode text: %s/%s: %w", p.Type, p.Subtype, ErrNotText)
	}
	if p.BodyStart < 0 || p.BodyStart > p.End || p.End > int64(len(raw)) {
		return "", fmt.Errorf("decode text: offsets [%d,%d) outside message of %d bytes", p.BodyStart, p.End, len(raw))
	}
	body := DecodeTransfer(raw[p.BodyStart:p.End], p.Encoding)
	return charsetToUTF8(body, p.Param("charset")), nil
}

// DecodeTransfer undoes a Content-Transfer-Encoding (RFC 2045 §6). Unknown
// encodings and 7bit/8bit/binary return body itself.
func DecodeTransfer(body []byte, encoding string) []byte {
	switch normalizeEncoding(encoding) {
	case "base64":
		return decodeBase64(body)
	case "quoted-printable":
		return decodeQP(body)
	}
	return body
}

// normalizeEncoding lower-cases an encoding and drops junk after it
// ("base64;" and "quoted-printable (x)" are seen in the wild).
func normalizeEncoding(e string) string {
	e = strings.TrimSpace(e)
	if i := strings.IndexAny(e, "; \t("); i >= 0 {
		e = e[:i]
	}
	return strings.ToLower(e)
}

// decodeBase64 decodes base64 leniently (RFC 2045 §6.8: characters outside
// the alphabet are ignored); decoding stops at the first padding character.
func decodeBase64(body []byte) []byte {
	clean := make([]byte, len(body))
	n := 0
	for _, c := range body {
		switch b64Class[c] {
		case b64Digit:
			clean[n] = c
			n++
		case b64Pad:
			goto done
		}
	}
done:
	clean = clean[:n]
	if len(clean)%4 == 1 {
		clean = clean[:len(clean)-1]
	}
	out := make([]byte, base64.RawStdEncoding.DecodedLen(len(clean)))
	// On a corrupt tail Decode reports how much it decoded; keep that.
	m, _ := base64.RawStdEncoding.Decode(out, clean)
	return out[:m]
}

// b64Class sorts bytes for decodeBase64: alphabet digits are kept, "="
// ends the data, anything else (line breaks, stray bytes) is skipped.
var b64Class = func() (t [256]uint8) {
	for _, c := range []byte("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/") {
		t[c] = b64Digit
	}
	t['='] = b64Pad
	return t
}()

const (
	b64Skip = iota
	b64Digit
	b64Pad
)

// decodeQP decodes quoted-printable leniently (RFC 2045 §6.7): "=XX" in
// either case, soft line breaks with trailing white space, trailing white
// space on lines removed (rule 3); a malformed "=" is kept literally.
func decodeQP(body []byte) []byte {
	out := make([]byte, 0, len(body))
	for len(body) > 0 {
		var line []byte
		nl := bytes.IndexByte(body, '\n')
		eol := ""
		if nl < 0 {
			line, body = body, nil
		} else {
			line, body = body[:nl], body[nl+1:]
			eol = "\n"
			if len(line) > 0 && line[len(line)-1] == '\r' {
				line = line[:len(line)-1]
				eol = "\r\n"
			}
		}
		for len(line) > 0 && isWSP(line[len(line)-1]) {
			line = line[:len(line)-1]
		}
		soft := false
		if len(line) > 0 && line[len(line)-1] == '=' {
			line = line[:len(line)-1]
			soft = true
		}
		for i := 0; i < len(line); i++ {
			c := line[i]
			if c == '=' && i+2 < len(line) {
				h, ok1 := unhex(line[i+1])
				l, ok2 := unhex(line[i+2])
				if ok1 && ok2 {
					out = append(out, h<<4|l)
					i += 2
					continue
				}
			}
			out = append(out, c)
		}
		if !soft {
			out = append(out, eol...)
		}
	}
	return out
}
