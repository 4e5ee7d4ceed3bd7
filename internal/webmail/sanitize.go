package webmail

import (
	"container/list"
	"html"
	"net/url"
	"regexp"
	"strings"
	"sync"

	"github.com/microcosm-cc/bluemonday"
)

// sanitizer turns mail HTML into HTML that cannot run code, submit forms or
// (unless remote content is allowed) fetch anything: a bluemonday
// allow-list policy. The result is shown only inside a sandboxed iframe
// without allow-scripts, under its own CSP (see bodyCSP), so a policy gap
// alone is not enough to run script.
type sanitizer struct {
	strict *bluemonday.Policy // remote images blanked
	remote *bluemonday.Policy // remote images kept (http/https only)
	cache  *htmlCache
}

var (
	// textElements carry no URLs and no behaviour.
	textElements = []string{
		"p", "br", "div", "span", "b", "i", "u", "s", "strike", "strong", "em", "small", "big",
		"sub", "sup", "blockquote", "pre", "code", "tt", "kbd", "samp", "var", "hr",
		"h1", "h2", "h3", "h4", "h5", "h6", "ul", "ol", "li", "dl", "dt", "dd",
		"table", "thead", "tbody", "tfoot", "tr", "td", "th", "caption", "colgroup", "col",
		"center", "font", "abbr", "address", "cite", "q", "del", "ins", "mark",
		"figure", "figcaption", "section", "article", "header", "footer", "main", "wbr",
	}
	// presentational attributes that carry no URLs.
	layoutAttrs = []string{
		"align", "valign", "width", "height", "bgcolor", "border", "cellpadding",
		"cellspacing", "colspan", "rowspan", "nowrap", "color", "face", "size", "dir", "lang", "title",
	}
	// styleProps can hold no url(), image-set() or similar fetch.
	styleProps = []string{
		"color", "background-color", "font-size", "font-weight", "font-style", "font-family",
		"text-align", "text-decoration", "text-transform", "line-height", "letter-spacing",
		"margin", "margin-top", "margin-bottom", "margin-left", "margin-right",
		"padding", "padding-top", "padding-bottom", "padding-left", "padding-right",
		"border", "border-top", "border-bottom", "border-left", "border-right",
		"border-color", "border-style", "border-width", "border-collapse", "border-spacing", "border-radius",
		"width", "height", "max-width", "min-width", "vertical-align", "white-space", "display", "list-style-type",
	}
	dataImageRE = regexp.MustCompile(`^image/(png|gif|jpeg|webp);base64,[A-Za-z0-9+/=\s]*$`)
)

func newPolicy(allowRemote bool) *bluemonday.Policy {
	p := bluemonday.NewPolicy()
	p.AllowElements(textElements...)
	p.AllowAttrs(layoutAttrs...).Globally()
	p.AllowStyles(styleProps...).Globally()
	p.AllowAttrs("href").OnElements("a")
	p.AllowAttrs("src", "alt", "width", "height").OnElements("img")
	p.RequireParseableURLs(true)
	p.AllowRelativeURLs(false)
	p.AllowURLSchemes("http", "https", "mailto", "cid")
	p.AllowURLSchemeWithCustomPolicy("data", func(u *url.URL) bool {
		return dataImageRE.MatchString(u.Opaque)
	})
	p.RequireNoReferrerOnLinks(true)
	p.AddTargetBlankToFullyQualifiedLinks(true)
	p.RewriteSrc(func(u *url.URL) {
		switch strings.ToLower(u.Scheme) {
		case "data", "cid":
			return
		case "http", "https":
			if allowRemote {
				return
			}
		}
		*u = url.URL{}
	})
	return p
}

func newSanitizer() *sanitizer {
	return &sanitizer{
		strict: newPolicy(false),
		remote: newPolicy(true),
		cache:  newHTMLCache(htmlCacheBytes),
	}
}

var cidSrcRE = regexp.MustCompile(`src="cid:([^"]*)"`)

// sanitize returns safe HTML for body. inline maps Content-IDs (without
// angle brackets) to data: URIs of inline images; unknown cid: references
// are blanked.
func (z *sanitizer) sanitize(body string, allowRemote bool, inline map[string]string) string {
	p := z.strict
	if allowRemote {
		p = z.remote
	}
	out := p.Sanitize(body)
	if strings.Contains(out, `src="cid:`) {
		out = cidSrcRE.ReplaceAllStringFunc(out, func(m string) string {
			id := html.UnescapeString(cidSrcRE.FindStringSubmatch(m)[1])
			if u, err := url.PathUnescape(id); err == nil {
				id = u
			}
			if d, ok := inline[id]; ok && dataImageRE.MatchString(strings.TrimPrefix(d, "data:")) {
				return `src="` + d + `"`
			}
			return `src=""`
		})
	}
	return out
}

// remoteRefRE finds references to remote resources in raw HTML, to tell
// the user that something was blocked.
var remoteRefRE = regexp.MustCompile(`(?i)(src|background|poster|srcset)\s*=\s*["']?\s*(https?:)?//|url\(\s*["']?\s*(https?:)?//|@import`)

func hasRemoteContent(body string) bool { return remoteRefRE.MatchString(body) }

// htmlCache keeps sanitised bodies: blobs are immutable (content-addressed),
// so a key of blob id, part and remote flag never goes stale. Bounded in
// total bytes, least recently used out first.
type htmlCache struct {
	mu    sync.Mutex
	max   int
	size  int
	ll    *list.List
	items map[htmlKey]*list.Element
}

type htmlKey struct {
	blob   int64
	part   string
	remote bool
}

type htmlEntry struct {
	key htmlKey
	val string
}

func newHTMLCache(max int) *htmlCache {
	return &htmlCache{max: max, ll: list.New(), items: map[htmlKey]*list.Element{}}
}

func (c *htmlCache) get(k htmlKey) (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.items[k]; ok {
		c.ll.MoveToFront(e)
		return e.Value.(*htmlEntry).val, true
	}
	return "", false
}

func (c *htmlCache) put(k htmlKey, v string) {
	if len(v) > c.max/4 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.items[k]; ok {
		c.size -= len(e.Value.(*htmlEntry).val)
		e.Value.(*htmlEntry).val = v
		c.size += len(v)
		c.ll.MoveToFront(e)
	} else {
		c.items[k] = c.ll.PushFront(&htmlEntry{key: k, val: v})
		c.size += len(v)
	}
	for c.size > c.max && c.ll.Len() > 0 {
		e := c.ll.Back()
		ent := e.Value.(*htmlEntry)
		c.ll.Remove(e)
		delete(c.items, ent.key)
		c.size -= len(ent.val)
	}
}
