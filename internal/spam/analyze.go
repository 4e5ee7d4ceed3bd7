package spam

import (
	"strings"

	"pimail/internal/message"
)

// Bounds of the content analysis. Scoring cost grows with what is read,
// so a 10 MB message costs about as much as a 300 KB one.
const (
	maxTextPerPart = 32 << 10 // decoded bytes of one text part
	maxTextTotal   = 64 << 10 // decoded bytes of all text parts
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
	hosts       []string // urlHost of each of urls ("" if none)
	// Letters and capitals of the body text the tokenizer read (list
	// footers aside), counted while it reads; set by Check for the rules.
	letters, upper int
	links          []link
	parts          int
	b64Text        bool // a text part in base64
	charsets       []string
	mimeVersion    bool
	// origin is the originating relay's trace (origin.go).
	origin origin
	// Counted by the tokenizer while it reads the body text (see
	// tokenSet): invisible format characters, words that mix Latin
	// letters with Cyrillic or Greek look-alikes, and letters per script.
	invisible, mixedWords int
	scripts               scriptCounts
	// undeclared8bit: a text part has 8-bit bytes but declares no
	// charset or us-ascii (RFC 2045 §5.2, RFC 2046 §4.1.2).
	undeclared8bit bool
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
	a.origin = findOrigin(a.fields["received"])

	seenURL := map[string]bool{}
	addURL := func(u string) {
		if len(a.urls) < maxURLs && !seenURL[u] {
			seenURL[u] = true
			a.urls = append(a.urls, u)
			a.hosts = append(a.hosts, urlHost(u))
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
		} else if cs := part.Param("charset"); (cs == "" || strings.EqualFold(cs, "us-ascii")) && has8bit(raw[min(part.BodyStart, part.End):part.End]) {
			a.undeclared8bit = true
		}
		// Decode no more of the part than can give maxTextPerPart of text
		// (base64 is 4/3 of its bytes; quoted-printable can be 3×).
		bounded := *part
		bounded.End = min(bounded.End, bounded.BodyStart+3*maxTextPerPart)
		text, err := message.DecodeText(raw, &bounded)
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

// plainURLs finds http(s):// and www. URLs in plain text, at most n,
// without a lower-cased copy; each of urlStarts' two searches reads the
// text once.
func plainURLs(text string, n int) []string {
	var out []string
	next := urlStarts{text: text, http: -1, www: -1}
	for i := 0; i < len(text) && len(out) < n; {
		start := next.from(i)
		if start < 0 {
			break
		}
		u, end := urlAt(text, start)
		if len(u) > 7 {
			out = append(out, u)
		}
		i = max(end, start+1)
	}
	return out
}

// urlAt returns the URL that starts at text[start:], without trailing
// punctuation, and the end of its bytes.
func urlAt(text string, start int) (string, int) {
	end := start
	for end < len(text) && end-start < 2048 && isURLByte(text[end]) {
		end++
	}
	return strings.TrimRight(text[start:end], ".,;:!?)]}'\""), end
}

// urlStarts finds where URLs start in text: "http://", "https://" or
// "www." in any case. It looks for "://" and "." with package strings'
// fast searches and checks the letters before them, instead of stopping
// at every h and w of the text, and it remembers the next match of each
// kind, since from only grows.
type urlStarts struct {
	text                  string
	http, www             int // the next match of each kind from the last i on; -1 at first
	httpSearch, wwwSearch int // where each search for its separator goes on
}

// from returns the first URL start at or after i, or -1.
func (u *urlStarts) from(i int) int {
	t := u.text
	if u.http != len(t) && u.http < i {
		u.http = u.next(i, "://", 4, &u.httpSearch, func(p int) int {
			if p >= 5 && hasPrefixFold(t[p-5:], "https://") {
				return p - 5
			}
			if hasPrefixFold(t[p-4:], "http://") {
				return p - 4
			}
			return -1
		})
	}
	if u.www != len(t) && u.www < i {
		u.www = u.next(i, ".", 3, &u.wwwSearch, func(p int) int {
			if hasPrefixFold(t[p-3:], "www.") {
				return p - 3
			}
			return -1
		})
	}
	if start := min(u.http, u.www); start < len(t) {
		return start
	}
	return -1
}

// next returns the first URL start at or after i that start finds before
// an occurrence of sep (at least lead bytes after i), or len(text).
// *search is where the search goes on: occurrences before it were looked
// at for a smaller i, and a start they did not give then they never give.
func (u *urlStarts) next(i int, sep string, lead int, search *int, start func(p int) int) int {
	t := u.text
	for p := max(i+lead, *search); p < len(t); p++ {
		k := strings.Index(t[p:], sep)
		if k < 0 {
			break
		}
		p += k
		*search = p
		if s := start(p); s >= i {
			return s
		}
	}
	*search = len(t)
	return len(t)
}

// hasPrefixFold is strings.HasPrefix ignoring ASCII case; prefix is lower case.
func hasPrefixFold(s, prefix string) bool {
	if len(s) < len(prefix) {
		return false
	}
	for i := 0; i < len(prefix); i++ {
		if s[i]|asciiLower(s[i]) != prefix[i] {
			return false
		}
	}
	return true
}

func isURLByte(c byte) bool {
	return c > ' ' && c < 0x7f && c != '<' && c != '>' && c != '"' && c != '\''
}

// urlHost returns the lower-case host of an http(s) URL or bare "www."
// reference, "" when there is none (mailto:, relative links). It reads
// the authority by hand (RFC 3986 §3.2): what stands between "//" and the
// first / ? # or \, without userinfo and port; broken URLs still name a
// host this way.
func urlHost(raw string) string {
	s := strings.TrimSpace(raw)
	switch {
	case hasPrefixFold(s, "http://"):
		s = s[7:]
	case hasPrefixFold(s, "https://"):
		s = s[8:]
	case hasPrefixFold(s, "www."):
	default:
		return ""
	}
	if k := strings.IndexAny(s, "/?#\\"); k >= 0 {
		s = s[:k]
	}
	if k := strings.LastIndexByte(s, '@'); k >= 0 {
		s = s[k+1:]
	}
	if strings.HasPrefix(s, "[") { // IPv6 literal
		if k := strings.IndexByte(s, ']'); k > 0 {
			return strings.ToLower(s[1:k])
		}
		return ""
	}
	if k := strings.LastIndexByte(s, ':'); k >= 0 {
		s = s[:k]
	}
	s = strings.TrimSuffix(s, ".")
	if decoded, ok := unescapeHost(s); ok {
		s = decoded
	}
	return lowerASCII(s)
}

// unescapeHost decodes %XX escapes in a host (RFC 3986 §3.2.2 allows
// them; spammers use them to hide names).
func unescapeHost(s string) (string, bool) {
	if strings.IndexByte(s, '%') < 0 {
		return s, false
	}
	b := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && i+2 < len(s) && isHex(s[i+1]) && isHex(s[i+2]) {
			b = append(b, unhex(s[i+1])<<4|unhex(s[i+2]))
			i += 2
			continue
		}
		b = append(b, s[i])
	}
	return string(b), true
}

func isHex(c byte) bool { return c >= '0' && c <= '9' || c|0x20 >= 'a' && c|0x20 <= 'f' }

func unhex(c byte) byte {
	if c <= '9' {
		return c - '0'
	}
	return c | 0x20 - 'a' + 10
}

// lowerASCII lower-cases ASCII letters, allocating only when there is one
// to change.
func lowerASCII(s string) string {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c >= 'A' && c <= 'Z' {
			return strings.ToLower(s)
		}
	}
	return s
}
