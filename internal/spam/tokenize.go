package spam

import (
	"net/netip"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"pimail/internal/message"
)

// Tokenizer bounds.
const (
	minWordLen   = 3
	maxWordLen   = 24
	maxTokens    = 3000 // distinct tokens kept per message
	maxCJKTokens = 600
)

// Tokens returns the distinct features of a message that the Bayesian
// classifier counts: words of the decoded subject and text (HTML reduced to
// its visible text), a few header features, URL hosts, attachment types.
// Header fields that a filter or mail store adds (X-Spam-*, Status, Lines…)
// are not read, so that the model learns the mail and not who handled it.
func Tokens(raw []byte, p *message.Parsed) []string {
	return tokenize(analyze(raw, p))
}

type tokenSet struct {
	seen map[string]struct{}
	list []string
	cjk  int
}

func (t *tokenSet) add(tok string) {
	if len(t.list) >= maxTokens {
		return
	}
	if _, ok := t.seen[tok]; ok {
		return
	}
	t.seen[tok] = struct{}{}
	t.list = append(t.list, tok)
}

func tokenize(a *analysis) []string {
	t := &tokenSet{seen: make(map[string]struct{}, 512)}
	p := a.parsed

	list := a.isList()
	// Subject words, prefixed: the same word weighs differently there.
	subject := p.Subject
	if list {
		t.add("meta:list")
		subject = stripListTag(subject)
	}
	t.words(subject, "s:")
	// From: display name words and the address' domain.
	if len(p.Envelope.From) > 0 {
		f := p.Envelope.From[0]
		t.words(message.DecodeHeaderValue(f.Name), "fn:")
		if h := strings.ToLower(f.Host); h != "" {
			t.add("fd:" + h)
			t.add("fd:" + registrable(h))
		}
	} else {
		t.add("meta:no-from")
	}
	if rt := p.Envelope.ReplyTo; len(rt) > 0 && rt[0].Host != "" {
		t.add("rd:" + registrable(strings.ToLower(rt[0].Host)))
	}
	for _, name := range []string{"x-mailer", "user-agent"} {
		if v := a.header(name); v != "" {
			t.words(v, "xm:")
		}
	}
	if n := len(p.Envelope.To) + len(p.Envelope.Cc); n == 0 {
		t.add("meta:no-to")
	} else {
		t.add("meta:rcpts:" + bucket(n))
	}
	t.add("ct:" + p.Body.MIMEType())
	t.headerTokens(a, list)
	for _, cs := range a.charsets {
		t.add("cs:" + cs)
	}
	p.Body.Walk(func(part *message.Part) bool {
		if enc := strings.ToLower(part.Encoding); enc != "" && enc != "7bit" {
			t.add("cte:" + part.Type + ":" + enc)
		}
		return len(t.list) < maxTokens
	})
	for _, at := range a.attachments {
		t.add("att:" + at.mime)
		if ext := extension(at.name); ext != "" {
			t.add("att-ext:" + ext)
		}
	}
	if a.hasHTML && !a.hasPlain {
		t.add("meta:html-only")
	}
	t.shapeTokens(a)
	for _, u := range a.urls {
		h := urlHost(u)
		if h == "" {
			continue
		}
		if _, err := netip.ParseAddr(strings.Trim(h, "[]")); err == nil {
			t.add("url:ip")
			continue
		}
		t.add("url:" + h)
		t.add("url:" + registrable(h))
	}
	for _, txt := range a.plain {
		if list {
			if isFooterPart(txt) {
				continue
			}
			txt = stripListFooter(txt)
		}
		t.words(txt, "")
	}
	for _, d := range a.html {
		t.words(d.text, "")
	}
	return t.list
}

// words adds the words of s with a prefix. A word is a run of letters,
// digits and the joiners ' - . $ ! that starts with a letter, digit or $;
// trailing joiners are cut. Words are folded to lower case; words that are
// too long become a length-class token; CJK text, which has no spaces,
// becomes character bigrams.
func (t *tokenSet) words(s, prefix string) {
	var cur strings.Builder
	var prevCJK rune
	flush := func() {
		w := strings.TrimRight(cur.String(), "'-.!")
		cur.Reset()
		n := utf8.RuneCountInString(w)
		switch {
		case n < minWordLen:
			return
		case n > maxWordLen:
			w = "skip:" + w[:1] + strconv.Itoa(n/10*10)
		case isYear(w):
			w = "num:year"
		}
		t.add(prefix + w)
	}
	for _, r := range s {
		if len(t.list) >= maxTokens {
			return
		}
		if isCJK(r) {
			if cur.Len() > 0 {
				flush()
			}
			if prevCJK != 0 && t.cjk < maxCJKTokens {
				t.cjk++
				t.add(prefix + string([]rune{prevCJK, r}))
			}
			prevCJK = r
			continue
		}
		prevCJK = 0
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '$':
			if cur.Len() < 4*maxWordLen+8 {
				cur.WriteRune(unicode.ToLower(r))
			} else {
				cur.WriteRune('x') // keep counting the length cheaply
			}
		case (r == '\'' || r == '-' || r == '.' || r == '!') && cur.Len() > 0:
			cur.WriteRune(r)
		default:
			if cur.Len() > 0 {
				flush()
			}
		}
	}
	if cur.Len() > 0 {
		flush()
	}
}

func isCJK(r rune) bool {
	return r >= 0x2E80 && (unicode.Is(unicode.Han, r) || unicode.Is(unicode.Hiragana, r) ||
		unicode.Is(unicode.Katakana, r) || unicode.Is(unicode.Hangul, r))
}

// registrable approximates the registrable domain: the last two labels, or
// three when the second-level label is short (co.uk, com.au).
func registrable(host string) string {
	labels := strings.Split(host, ".")
	n := len(labels)
	if n <= 2 {
		return host
	}
	if len(labels[n-2]) <= 3 && len(labels[n-1]) == 2 {
		return strings.Join(labels[n-3:], ".")
	}
	return strings.Join(labels[n-2:], ".")
}

// extension returns the lower-case last extension of a file name, "" if none.
func extension(name string) string {
	i := strings.LastIndexByte(name, '.')
	if i < 0 || i == len(name)-1 || len(name)-i > 10 {
		return ""
	}
	return strings.ToLower(name[i+1:])
}

func bucket(n int) string {
	switch {
	case n <= 1:
		return "1"
	case n <= 3:
		return "2-3"
	case n <= 10:
		return "4-10"
	default:
		return "many"
	}
}

// isYear reports whether w is a year from 1900 to 2099. Years are one
// token: the corpus' sources are years apart, and a filter that learns
// the year a message was written learns nothing about next year's mail.
func isYear(w string) bool {
	return len(w) == 4 && (w[:2] == "19" || w[:2] == "20") && w[2] >= '0' && w[2] <= '9' && w[3] >= '0' && w[3] <= '9'
}

// shapeTokens describe the message's make-up rather than its words: how
// much text, how many images and whether they come from the message
// itself. Image spam pads a picture with words copied from news to look
// like ham to a word counter; its shape gives it away.
func (t *tokenSet) shapeTokens(a *analysis) {
	var imgs, cid, letters int
	for _, d := range a.html {
		imgs += d.images
		cid += d.cidImages
		letters += countLetters(d.text)
	}
	for _, p := range a.plain {
		letters += countLetters(p)
	}
	t.add("meta:letters:" + sizeBucket(letters))
	if imgs > 0 {
		t.add("meta:img:" + bucket(imgs))
	}
	if cid > 0 {
		t.add("meta:cid-img")
		t.add("meta:cid-img-letters:" + sizeBucket(letters))
	}
}

// sizeBucket classes a count roughly by factors of three.
func sizeBucket(n int) string {
	for _, b := range []struct {
		max  int
		name string
	}{{100, "<100"}, {300, "<300"}, {1000, "<1k"}, {3000, "<3k"}, {10000, "<10k"}} {
		if n < b.max {
			return b.name
		}
	}
	return "more"
}
