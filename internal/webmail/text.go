package webmail

import (
	"regexp"
	"strings"
)

// segment is a run of plain text or a link in a text body. Templates
// render both escaped; a link's URL passes html/template's URL filter too.
type segment struct {
	Text  string
	URL   string
	Quote bool // the line starts with '>'
}

// maxLinks bounds the links made in one message.
const maxLinks = 2000

var linkRE = regexp.MustCompile(`(?i)\b(?:https?://|www\.)[^\s<>"'\x60]+|\bmailto:[^\s<>"'\x60]+@[^\s<>"'\x60]+`)

// linkify splits text into segments, making http(s), www. and mailto:
// references into links. Trailing punctuation stays text. Consecutive
// lines of the same quoting form one text segment.
func linkify(text string) []segment {
	text = strings.ReplaceAll(text, "\r\n", "\n")
	var (
		out   []segment
		run   strings.Builder
		runQ  bool
		links int
	)
	flush := func() {
		if run.Len() > 0 {
			out = append(out, segment{Text: run.String(), Quote: runQ})
			run.Reset()
		}
	}
	addText := func(t string, quote bool) {
		if t == "" {
			return
		}
		if quote != runQ {
			flush()
			runQ = quote
		}
		run.WriteString(t)
	}
	for line := range strings.Lines(text) {
		quote := strings.HasPrefix(line, ">")
		pos := 0
		if links < maxLinks && mayHaveLink(line) {
			for _, m := range linkRE.FindAllStringIndex(line, -1) {
				if links >= maxLinks {
					break
				}
				u := strings.TrimRight(line[m[0]:m[1]], ".,;:!?)]}")
				if end := m[0] + len(u); strings.Count(u, "(") > strings.Count(u, ")") && end < len(line) && line[end] == ')' {
					u += ")"
				}
				addText(line[pos:m[0]], quote)
				flush()
				href := u
				if strings.HasPrefix(strings.ToLower(u), "www.") {
					href = "https://" + u
				}
				out = append(out, segment{Text: u, URL: href, Quote: quote})
				pos = m[0] + len(u)
				links++
			}
		}
		addText(line[pos:], quote)
	}
	flush()
	return out
}

// mayHaveLink is a cheap test that spares the regular expression on lines
// that cannot match it.
func mayHaveLink(line string) bool {
	return strings.Contains(line, "://") || strings.Contains(line, "www.") || strings.Contains(line, "WWW.") ||
		strings.Contains(line, "mailto:") || strings.Contains(line, "MAILTO:")
}
