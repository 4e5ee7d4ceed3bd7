package testcorpus

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"hash/fnv"
	"image"
	"image/color"
	"image/png"
	"math/rand/v2"
	"mime/quotedprintable"
	"strings"
	"time"

	"golang.org/x/text/encoding"
)

// newRand returns the generator of one message: the same kind and number
// always give the same bytes.
func newRand(kind string, n int) *rand.Rand {
	h := fnv.New64a()
	h.Write([]byte(kind))
	return rand.New(rand.NewPCG(h.Sum64(), uint64(n)))
}

func pick[T any](r *rand.Rand, xs []T) T { return xs[r.IntN(len(xs))] }

// sentence makes a sentence of n words from words, capitalised, with a
// full stop.
func sentence(r *rand.Rand, words []string, n int) string {
	ws := make([]string, n)
	for i := range ws {
		ws[i] = pick(r, words)
	}
	s := strings.Join(ws, " ")
	return strings.ToUpper(s[:1]) + s[1:] + pick(r, []string{".", ".", ".", "?", "!"})
}

// paragraph makes n sentences of 5 to 16 words.
func paragraph(r *rand.Rand, words []string, n int) string {
	ss := make([]string, n)
	for i := range ss {
		ss[i] = sentence(r, words, 5+r.IntN(12))
	}
	return strings.Join(ss, " ")
}

// wrap breaks s into lines of at most width characters at spaces.
func wrap(s string, width int) string {
	var b strings.Builder
	col := 0
	for i, w := range strings.Fields(s) {
		if i > 0 {
			if col+1+len([]rune(w)) > width {
				b.WriteString("\n")
				col = 0
			} else {
				b.WriteString(" ")
				col++
			}
		}
		b.WriteString(w)
		col += len([]rune(w))
	}
	return b.String()
}

// body makes n wrapped paragraphs.
func body(r *rand.Rand, words []string, n int) string {
	ps := make([]string, n)
	for i := range ps {
		ps[i] = wrap(paragraph(r, words, 2+r.IntN(4)), 72)
	}
	return strings.Join(ps, "\n\n")
}

// person is a display name and an address.
type person struct{ name, addr string }

func (p person) String() string {
	if p.name == "" {
		return "<" + p.addr + ">"
	}
	if strings.ContainsAny(p.name, ".,@") {
		return fmt.Sprintf("%q <%s>", p.name, p.addr)
	}
	return p.name + " <" + p.addr + ">"
}

func newPerson(r *rand.Rand, domains []string) person {
	first, last := pick(r, firstNames), pick(r, lastNames)
	local := strings.ToLower(first)
	switch r.IntN(4) {
	case 0:
		local += "." + strings.ToLower(last)
	case 1:
		local = strings.ToLower(first[:1] + last)
	case 2:
		local += fmt.Sprint(r.IntN(100))
	}
	return person{first + " " + last, asciiLocal(local) + "@" + pick(r, domains)}
}

// asciiLocal drops what an address's local part should not carry here.
func asciiLocal(s string) string {
	var b strings.Builder
	for _, c := range s {
		if c < 0x80 && c != ' ' && c != '\'' {
			b.WriteRune(c)
		}
	}
	return b.String()
}

// msgDate is a date between 2015 and 2024 in one of a few zones.
func msgDate(r *rand.Rand) time.Time {
	base := time.Date(2015, 1, 1, 0, 0, 0, 0, time.UTC)
	t := base.Add(time.Duration(r.Int64N(int64(9 * 365 * 24 * time.Hour))))
	zone := pick(r, []int{0, 1, 2, -5, -8, 9, 5*60 + 30, -3})
	mins := zone * 60
	if zone == 5*60+30 {
		mins = zone
	}
	return t.In(time.FixedZone("", mins*60)).Truncate(time.Second)
}

func rfc5322(t time.Time) string { return t.Format("Mon, 02 Jan 2006 15:04:05 -0700") }

// msg builds a message: header fields in order, then the body.
type msg struct {
	hdr  []string
	body string
}

func (m *msg) add(name, value string) { m.hdr = append(m.hdr, name+": "+value) }

// bytes returns the message with LF line endings, as mail is kept on disk.
func (m *msg) bytes() []byte {
	var b bytes.Buffer
	for _, h := range m.hdr {
		b.WriteString(h)
		b.WriteByte('\n')
	}
	b.WriteByte('\n')
	b.WriteString(m.body)
	if !strings.HasSuffix(m.body, "\n") {
		b.WriteByte('\n')
	}
	return b.Bytes()
}

// stdHeader adds the fields most mail has.
func stdHeader(m *msg, r *rand.Rand, from, to person, subject string, date time.Time, host string) {
	hop := date.Add(-time.Duration(1+r.IntN(90)) * time.Second)
	m.add("Return-Path", "<"+from.addr+">")
	m.add("Received", fmt.Sprintf("from %s (%s [192.0.2.%d])\n\tby mx.%s with ESMTPS id %X\n\tfor <%s>; %s",
		host, host, 1+r.IntN(250), domainOf(to.addr), r.Uint32(), to.addr, rfc5322(hop)))
	m.add("From", from.String())
	m.add("To", to.String())
	m.add("Subject", subject)
	m.add("Date", rfc5322(date))
	m.add("Message-ID", fmt.Sprintf("<%d.%x@%s>", date.Unix(), r.Uint32(), host))
	m.add("MIME-Version", "1.0")
}

func domainOf(addr string) string { return addr[strings.LastIndexByte(addr, '@')+1:] }

// qp encodes text as quoted-printable (RFC 2045 §6.7) with LF line ends.
func qp(text []byte) string {
	var b bytes.Buffer
	w := quotedprintable.NewWriter(&b)
	w.Write(text)
	w.Close()
	return strings.ReplaceAll(b.String(), "\r\n", "\n")
}

// b64 encodes data as base64 in lines of 76 characters (RFC 2045 §6.8).
func b64(data []byte) string {
	s := base64.StdEncoding.EncodeToString(data)
	var b strings.Builder
	for len(s) > 76 {
		b.WriteString(s[:76] + "\n")
		s = s[76:]
	}
	b.WriteString(s)
	return b.String()
}

// encodeCharset converts UTF-8 text into a legacy charset.
func encodeCharset(enc encoding.Encoding, s string) []byte {
	b, err := enc.NewEncoder().Bytes([]byte(s))
	if err != nil {
		panic(fmt.Sprintf("testcorpus: encode %q: %v", s, err))
	}
	return b
}

// encodedWord is an RFC 2047 encoded-word of raw bytes in charset.
func encodedWord(charset string, q bool, raw []byte) string {
	if q {
		return qWord(charset, raw)
	}
	return "=?" + charset + "?B?" + base64.StdEncoding.EncodeToString(raw) + "?="
}

// qWord is the Q encoding (RFC 2047 §4.2) of raw bytes.
func qWord(charset string, raw []byte) string {
	var b strings.Builder
	b.WriteString("=?" + charset + "?Q?")
	for _, c := range raw {
		switch {
		case c == ' ':
			b.WriteByte('_')
		case c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '.' || c == ',':
			b.WriteByte(c)
		default:
			fmt.Fprintf(&b, "=%02X", c)
		}
	}
	b.WriteString("?=")
	return b.String()
}

// part is one MIME body part.
type part struct {
	hdr  []string
	body string
}

// multipart joins parts under boundary, with an optional preamble.
func multipart(boundary, preamble string, parts ...part) string {
	var b strings.Builder
	if preamble != "" {
		b.WriteString(preamble + "\n\n")
	}
	for _, p := range parts {
		b.WriteString("--" + boundary + "\n")
		for _, h := range p.hdr {
			b.WriteString(h + "\n")
		}
		b.WriteString("\n" + strings.TrimSuffix(p.body, "\n") + "\n")
	}
	b.WriteString("--" + boundary + "--\n")
	return b.String()
}

func boundary(r *rand.Rand) string {
	return pick(r, []string{"----=_Part_", "=_", "b1_", "------------", "Apple-Mail="}) + fmt.Sprintf("%08x%08x", r.Uint32(), r.Uint32())
}

// htmlOf renders paragraphs as a simple HTML document.
func htmlOf(title string, paras []string, extra string) string {
	var b strings.Builder
	b.WriteString("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>" + title + "</title></head>\n<body>\n")
	for _, p := range paras {
		b.WriteString("<p>" + p + "</p>\n")
	}
	b.WriteString(extra)
	b.WriteString("</body></html>\n")
	return b.String()
}

// pngImage is a small deterministic PNG.
func pngImage(r *rand.Rand, w, h int) []byte {
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	c1 := color.RGBA{uint8(r.IntN(256)), uint8(r.IntN(256)), uint8(r.IntN(256)), 255}
	c2 := color.RGBA{uint8(r.IntN(256)), uint8(r.IntN(256)), uint8(r.IntN(256)), 255}
	for y := range h {
		for x := range w {
			if (x/8+y/8)%2 == 0 {
				img.Set(x, y, c1)
			} else {
				img.Set(x, y, c2)
			}
		}
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		panic(err)
	}
	return b.Bytes()
}

// pdfLike is a small document that starts like a PDF.
func pdfLike(r *rand.Rand, n int) []byte {
	b := []byte("%PDF-1.4\n%\xe2\xe3\xcf\xd3\n1 0 obj\n<< /Type /Catalog >>\nendobj\nstream\n")
	for len(b) < n {
		b = append(b, byte(r.IntN(256)))
	}
	return append(b, "\nendstream\n%%EOF\n"...)
}

const time1h = time.Hour

// runes returns the first n characters of s.
func runes(s string, n int) string {
	rs := []rune(s)
	return string(rs[:min(n, len(rs))])
}
