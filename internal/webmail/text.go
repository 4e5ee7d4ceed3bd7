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
// lines of the same quoting form one text segment. Segments are substrings
// of text (line ends as they are: TextHTML writes CRLF as LF), and the
// regular expression runs only on lines that hold one of the strings a
// link starts with.
func linkify(text string) []segment {
	var (
		out      []segment
		runStart int  // the current text run is text[runStart:…]
		runQ     bool // … and is quoted
		links    int
		cand     candidates
	)
	cand.init(text)
	flushTo := func(end int) {
		if end > runStart {
			out = append(out, segment{Text: text[runStart:end], Quote: runQ})
		}
		runStart = end
	}
	for off := 0; off < len(text); {
		end := len(text)
		if i := strings.IndexByte(text[off:], '\n'); i >= 0 {
			end = off + i + 1
		}
		line := text[off:end]
		if quote := line[0] == '>'; quote != runQ {
			flushTo(off)
			runQ = quote
		}
		if links < maxLinks && cand.before(off, end) {
			for _, m := range linkRE.FindAllStringIndex(line, -1) {
				if links >= maxLinks {
					break
				}
				u := strings.TrimRight(line[m[0]:m[1]], ".,;:!?)]}")
				if e := m[0] + len(u); strings.Count(u, "(") > strings.Count(u, ")") && e < len(line) && line[e] == ')' {
					u += ")"
				}
				flushTo(off + m[0])
				href := u
				if strings.HasPrefix(strings.ToLower(u), "www.") {
					href = "https://" + u
				}
				out = append(out, segment{Text: u, URL: href, Quote: runQ})
				runStart = off + m[0] + len(u)
				links++
			}
		}
		off = end
	}
	flushTo(len(text))
	return out
}

// linkStarts are the strings every match of linkRE contains (the
// expression is case-insensitive; www. and mailto: in other mixed cases
// are not made links, as before).
var linkStarts = [...]string{"://", "www.", "WWW.", "mailto:", "MAILTO:"}

// candidates finds, in one pass over the text per string, where the
// strings a link needs occur.
type candidates struct {
	text string
	next [len(linkStarts)]int // next occurrence at or after the last query, -1 for none
}

func (c *candidates) init(text string) {
	c.text = text
	for i, s := range linkStarts {
		c.next[i] = strings.Index(text, s)
	}
}

// before reports whether one of the strings occurs in text[from:to];
// calls come with ascending from.
func (c *candidates) before(from, to int) bool {
	found := false
	for i, s := range linkStarts {
		for c.next[i] >= 0 && c.next[i] < from {
			j := strings.Index(c.text[from:], s)
			if j < 0 {
				c.next[i] = -1
			} else {
				c.next[i] = from + j
			}
		}
		if n := c.next[i]; n >= 0 && n+len(s) <= to {
			found = true
		}
	}
	return found
}
