package spam

import (
	"strings"

	"golang.org/x/net/html"
)

// Limits of the HTML reduction: a hostile part cannot make it loop or
// allocate without bound.
const (
	maxHTMLTokens = 200000
	maxLinks      = 200
)

// link is one <a href> with the text shown for it.
type link struct {
	href string
	text string
}

// htmlDoc is an HTML part reduced to what the filter looks at.
type htmlDoc struct {
	text   string // visible text, tags removed, entities decoded
	links  []link
	urls   []string // href and src values (links included), at most maxLinks
	images int
	// cidImages are images shown from a part of the message itself
	// (src="cid:…", RFC 2392), the usual way of image spam.
	cidImages int
	forms     int
	// hiddenText counts letters in elements styled invisible (display:none,
	// font-size:0, color equal to a white background is not detected).
	hiddenText int
}

// reduceHTML turns an HTML body into text and its links. Script and style
// content is dropped. It never fails: broken markup is read as well as the
// tokenizer can (the HTML5 tokenizer rules).
func reduceHTML(src string) htmlDoc {
	var doc htmlDoc
	var b strings.Builder
	b.Grow(len(src) / 2)
	z := html.NewTokenizer(strings.NewReader(src))
	skip := 0   // inside <script>/<style>
	hidden := 0 // inside an element styled invisible
	var anchor *link
	var anchorText strings.Builder
	for range maxHTMLTokens {
		tt := z.Next()
		if tt == html.ErrorToken {
			break
		}
		switch tt {
		case html.TextToken:
			if skip > 0 {
				continue
			}
			t := z.Text()
			if hidden > 0 {
				doc.hiddenText += countLetters(t)
				continue
			}
			b.Write(t)
			if anchor != nil && anchorText.Len() < 500 {
				anchorText.Write(t)
			}
		case html.StartTagToken, html.SelfClosingTagToken:
			name, hasAttr := z.TagName()
			tag := string(name)
			var href, src, style string
			for hasAttr {
				var k, v []byte
				k, v, hasAttr = z.TagAttr()
				switch string(k) {
				case "href":
					href = strings.TrimSpace(string(v))
				case "src":
					src = strings.TrimSpace(string(v))
				case "style":
					style = strings.ToLower(string(v))
				}
			}
			switch tag {
			case "script", "style":
				if tt == html.StartTagToken {
					skip++
				}
			case "a":
				if href != "" {
					doc.addURL(href)
					anchor = &link{href: href}
					anchorText.Reset()
				}
			case "img":
				doc.images++
				if len(src) > 4 && strings.EqualFold(src[:4], "cid:") {
					doc.cidImages++
				}
				if src != "" {
					doc.addURL(src)
				}
			case "form":
				doc.forms++
			case "br", "p", "div", "tr", "li", "td", "h1", "h2", "h3", "table":
				b.WriteByte(' ')
			}
			if tt == html.StartTagToken && isHiddenStyle(style) && tag != "br" && tag != "img" {
				hidden++
			}
		case html.EndTagToken:
			name, _ := z.TagName()
			switch string(name) {
			case "script", "style":
				if skip > 0 {
					skip--
				}
			case "a":
				if anchor != nil && len(doc.links) < maxLinks {
					anchor.text = strings.TrimSpace(anchorText.String())
					doc.links = append(doc.links, *anchor)
				}
				anchor = nil
			case "span", "div", "font", "p", "td":
				// Close of a hidden element: a rough count, since the
				// tokenizer does not pair tags; it only needs to be bounded.
				if hidden > 0 {
					hidden--
				}
			}
			b.WriteByte(' ')
		}
	}
	doc.text = b.String()
	return doc
}

func (d *htmlDoc) addURL(u string) {
	if len(d.urls) < maxLinks {
		d.urls = append(d.urls, u)
	}
}

// isHiddenStyle reports inline styles that hide text from the reader, a
// way to stuff innocent words for statistical filters.
func isHiddenStyle(style string) bool {
	if style == "" {
		return false
	}
	s := strings.ReplaceAll(style, " ", "")
	return strings.Contains(s, "display:none") || strings.Contains(s, "visibility:hidden") ||
		strings.Contains(s, "font-size:0") || strings.Contains(s, "font-size:1px")
}

// countLetters counts the characters that are not spaces or controls
// (UTF-8 continuation bytes are not counted).
func countLetters[S ~string | ~[]byte](s S) int {
	n := 0
	for i := 0; i < len(s); i++ {
		if c := s[i]; c > ' ' && (c < 0x80 || c >= 0xC0) {
			n++
		}
	}
	return n
}
