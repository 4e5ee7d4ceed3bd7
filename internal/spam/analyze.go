package spam

import (
	"net/url"
	"strings"

	"pimail/internal/message"
)

// Bounds of the content analysis. Scoring cost grows with what is read,
// so a 10 MB message costs about as much as a 300 KB one.
const (
	maxTextPerPart = 128 << 10 // decoded bytes of one text part
	maxTextTotal   = 256 << 10 // decoded bytes of all text parts
	maxTextParts   = 20
	maxURLs        = 300
	maxHeaderVals  = 8 // values kept per header field name
)

// analysis is one message taken apart once for the rules and the
// tokenizer.
type analysis struct {
	raw    []byte
	parsed *message.Parsed
	// fields maps a lower-case field name to its unfolded values, in
	// order; only the top-level header.
	fields map[string][]string
	// rawHeader is the top-level header block as received.
	rawHeader []byte

	plain     []string // decoded text/plain bodies (not attachments)
	html      []htmlDoc
	hasPlain  bool
	hasHTML   bool
	textBytes int

	attachments []attachment
	urls        []string // every URL seen, plain text and HTML, deduplicated
	links       []link
	parts       int
	b64Text     bool // a text part in base64
	charsets    []string
	mimeVersion bool
}

type attachment struct {
	name string
	mime string
	size int64
}

// analyze decodes what the filter needs from a parsed message.
func analyze(raw []byte, p *message.Parsed) *analysis {
	a := &analysis{raw: raw, parsed: p, fields: map[string][]string{}}
	if p == nil || p.Body == nil {
		p = message.Parse(raw)
		a.parsed = p
	}
	hdrEnd := min(max(int(p.Body.BodyStart), 0), len(raw))
	a.rawHeader = raw[:hdrEnd]
	for _, f := range message.HeaderFields(a.rawHeader) {
		k := strings.ToLower(f.Name)
		if len(a.fields[k]) < maxHeaderVals {
			a.fields[k] = append(a.fields[k], f.Unfolded())
		}
	}
	_, a.mimeVersion = a.fields["mime-version"]

	seenURL := map[string]bool{}
	addURL := func(u string) {
		if len(a.urls) < maxURLs && !seenURL[u] {
			seenURL[u] = true
			a.urls = append(a.urls, u)
		}
	}
	seenCS := map[string]bool{}
	p.Body.Walk(func(part *message.Part) bool {
		a.parts++
		if cs := strings.ToLower(part.Param("charset")); cs != "" && !seenCS[cs] && len(a.charsets) < 10 {
			seenCS[cs] = true
			a.charsets = append(a.charsets, cs)
		}
		if part.Type == "multipart" || part.Message != nil {
			return true
		}
		if part.IsAttachment() || (part.Type != "text" && part.Filename() != "") {
			if len(a.attachments) < 50 {
				a.attachments = append(a.attachments, attachment{name: part.Filename(), mime: part.MIMEType(), size: part.Size})
			}
			return true
		}
		if part.Type != "text" || (part.Subtype != "plain" && part.Subtype != "html") {
			return true
		}
		if len(a.plain)+len(a.html) >= maxTextParts || a.textBytes >= maxTextTotal {
			return true
		}
		if strings.EqualFold(part.Encoding, "base64") {
			a.b64Text = true
		}
		text, err := message.DecodeText(raw, part)
		if err != nil {
			return true
		}
		if len(text) > maxTextPerPart {
			text = text[:maxTextPerPart]
		}
		a.textBytes += len(text)
		if part.Subtype == "html" {
			a.hasHTML = true
			d := reduceHTML(text)
			for _, u := range d.urls {
				addURL(u)
			}
			a.links = append(a.links, d.links...)
			a.html = append(a.html, d)
		} else {
			a.hasPlain = true
			a.plain = append(a.plain, text)
			for _, u := range plainURLs(text, 100) {
				addURL(u)
			}
		}
		return true
	})
	return a
}

// header returns the first value of a top-level field, "" when absent.
func (a *analysis) header(name string) string {
	if v := a.fields[name]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// has reports whether the top-level header has the field.
func (a *analysis) has(name string) bool { return len(a.fields[name]) > 0 }

// bodyText is all decoded body text, plain and HTML-reduced.
func (a *analysis) bodyText() string {
	var b strings.Builder
	for _, t := range a.plain {
		b.WriteString(t)
		b.WriteByte('\n')
	}
	for _, d := range a.html {
		b.WriteString(d.text)
		b.WriteByte('\n')
	}
	return b.String()
}

// plainURLs finds http(s):// and www. URLs in plain text, at most n.
func plainURLs(text string, n int) []string {
	var out []string
	lower := strings.ToLower(text)
	for i := 0; i < len(lower) && len(out) < n; {
		j := indexURLStart(lower[i:])
		if j < 0 {
			break
		}
		start := i + j
		end := start
		for end < len(text) && end-start < 2048 && isURLByte(text[end]) {
			end++
		}
		u := strings.TrimRight(text[start:end], ".,;:!?)]}'\"")
		if len(u) > 7 {
			out = append(out, u)
		}
		i = max(end, start+1)
	}
	return out
}

func indexURLStart(s string) int {
	best := -1
	for _, p := range []string{"http://", "https://", "www."} {
		if k := strings.Index(s, p); k >= 0 && (best < 0 || k < best) {
			best = k
		}
	}
	return best
}

func isURLByte(c byte) bool {
	return c > ' ' && c < 0x7f && c != '<' && c != '>' && c != '"' && c != '\''
}

// urlHost returns the lower-case host of a URL or bare "www." reference,
// "" when there is none (mailto:, relative links).
func urlHost(raw string) string {
	s := strings.TrimSpace(raw)
	ls := strings.ToLower(s)
	if strings.HasPrefix(ls, "www.") {
		s = "http://" + s
	} else if !strings.HasPrefix(ls, "http://") && !strings.HasPrefix(ls, "https://") {
		return ""
	}
	u, err := url.Parse(s)
	if err != nil {
		// Broken URLs still name a host: take what stands before the path.
		rest := s[strings.Index(s, "//")+2:]
		if k := strings.IndexAny(rest, "/?#"); k >= 0 {
			rest = rest[:k]
		}
		if k := strings.LastIndexByte(rest, '@'); k >= 0 {
			rest = rest[k+1:]
		}
		return strings.ToLower(rest)
	}
	return strings.TrimSuffix(strings.ToLower(u.Hostname()), ".")
}
