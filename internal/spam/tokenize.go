package spam

import (
	"strconv"
	"strings"
	"sync"
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
	t := getTokenSet()
	defer putTokenSet(t)
	t.tokenize(analyze(raw, p))
	out := make([]string, len(t.hashes))
	for i := range out {
		out[i] = t.token(i)
	}
	return out
}

// tokenSet collects a message's distinct tokens without a string per
// token: each token is written into one growing byte arena, hashed there
// (64-bit FNV-1a, the model's key) and kept only if its hash is new. The
// text stays available for the few tokens shown as clues. Sets are pooled,
// so a message costs a handful of allocations however many words it has.
type tokenSet struct {
	seen   hashSet
	hashes []uint64
	ends   []int32 // end of token i in text; it starts at ends[i-1]
	text   []byte
	word   []byte // the word being read
	cjk    int
	// letters and upper count the letters and capitals of the body text
	// read (words with no prefix), for the rules; visible counts its
	// characters that are not spaces, for the shape tokens.
	letters, upper, visible int
	// Counted in body text for the rules and scriptTokens (script.go):
	// invisible characters, words mixing Latin with Cyrillic or Greek
	// letters, letters per script. wordOther marks the word being read
	// as holding a Cyrillic or Greek letter.
	invisible, mixedWords int
	scripts               scriptCounts
	wordOther             bool
}

var tokenSets = sync.Pool{New: func() any {
	return &tokenSet{seen: hashSet{slots: make([]uint64, 2048)}, hashes: make([]uint64, 0, 1024),
		ends: make([]int32, 0, 1024), text: make([]byte, 0, 16<<10), word: make([]byte, 0, 128)}
}}

func getTokenSet() *tokenSet { return tokenSets.Get().(*tokenSet) }

func putTokenSet(t *tokenSet) {
	if cap(t.text) > 256<<10 {
		return // a freak message: let it go
	}
	t.seen.reset()
	t.hashes, t.ends, t.text, t.word, t.cjk = t.hashes[:0], t.ends[:0], t.text[:0], t.word[:0], 0
	t.letters, t.upper, t.visible = 0, 0, 0
	t.invisible, t.mixedWords, t.scripts, t.wordOther = 0, 0, scriptCounts{}, false
	tokenSets.Put(t)
}

func (t *tokenSet) full() bool { return len(t.hashes) >= maxTokens }

// addMeta adds a token even when the set is full (a few message-shape
// tokens that come after the words).
func (t *tokenSet) addMeta(a, b string) {
	start := len(t.text)
	t.text = append(t.text, a...)
	t.text = append(t.text, b...)
	t.keep(start)
}

// token returns the text of token i.
func (t *tokenSet) token(i int) string {
	start := int32(0)
	if i > 0 {
		start = t.ends[i-1]
	}
	return string(t.text[start:t.ends[i]])
}

// FNV-1a, 64 bit (the same as hash/fnv's New64a, which the model files use).
const (
	fnvOffset = 14695981039346656037
	fnvPrime  = 1099511628211
)

func hashToken(tok string) uint64 { return fnvMore(fnvOffset, tok) }

// fnvMore continues the hash h over b.
func fnvMore[S ~string | ~[]byte](h uint64, b S) uint64 {
	for i := 0; i < len(b); i++ {
		h = (h ^ uint64(b[i])) * fnvPrime
	}
	return h
}

// commit keeps the token written at text[start:] if it is new and the set
// is not full.
func (t *tokenSet) commit(start int) {
	if t.full() {
		t.text = t.text[:start]
		return
	}
	t.keep(start)
}

// keep keeps the token written at text[start:] if it is new.
func (t *tokenSet) keep(start int) {
	if !t.insert(fnvMore(fnvOffset, t.text[start:])) {
		t.text = t.text[:start]
		return
	}
	t.ends = append(t.ends, int32(len(t.text)))
}

// insert records the hash h of a token and reports whether it is new; the
// caller then ends the token's text.
func (t *tokenSet) insert(h uint64) bool {
	if !t.seen.add(h) {
		return false
	}
	t.hashes = append(t.hashes, h)
	return true
}

// hashSet is a set of token hashes: open addressing with linear probing,
// at most half full. Every word of a message is looked up in it; a Go map
// took a fifth of the spam check's CPU time for that under SMTP load, and
// this set a quarter of what the map took (CPU profiles of closed-50). A
// Fibonacci multiply spreads the hashes over the table.
type hashSet struct {
	slots []uint64 // 0: empty; the length is a power of two
	n     int
	zero  bool // the hash 0, which cannot go in a slot
}

// add adds h and reports whether it was new.
func (s *hashSet) add(h uint64) bool {
	if h == 0 {
		added := !s.zero
		s.zero = true
		return added
	}
	if 2*(s.n+1) > len(s.slots) {
		s.grow()
	}
	mask := uint64(len(s.slots) - 1)
	for i := (h * 0x9e3779b97f4a7c15) >> 32 & mask; ; i = (i + 1) & mask {
		switch s.slots[i] {
		case 0:
			s.slots[i] = h
			s.n++
			return true
		case h:
			return false
		}
	}
}

func (s *hashSet) grow() {
	old := s.slots
	s.slots, s.n = make([]uint64, 2*len(old)), 0
	for _, h := range old {
		if h != 0 {
			s.add(h)
		}
	}
}

func (s *hashSet) reset() {
	clear(s.slots)
	s.n, s.zero = 0, false
}

func (t *tokenSet) add(tok string) {
	start := len(t.text)
	t.text = append(t.text, tok...)
	t.commit(start)
}

// add2 adds the token a+b without building the string.
func (t *tokenSet) add2(a, b string) {
	start := len(t.text)
	t.text = append(t.text, a...)
	t.text = append(t.text, b...)
	t.commit(start)
}

func (t *tokenSet) add3(a, b, c string) {
	start := len(t.text)
	t.text = append(t.text, a...)
	t.text = append(t.text, b...)
	t.text = append(t.text, c...)
	t.commit(start)
}

func (t *tokenSet) tokenize(a *analysis) {
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
		if f.Mailbox != "" {
			t.add3("fa:"+strings.ToLower(f.Mailbox), "@", strings.ToLower(f.Host))
		}
		if h := strings.ToLower(f.Host); h != "" {
			t.add2("fd:", h)
			t.add2("fd:", registrable(h))
		}
	} else {
		t.add("meta:no-from")
	}
	if rt := p.Envelope.ReplyTo; len(rt) > 0 && rt[0].Host != "" {
		t.add2("rd:", registrable(strings.ToLower(rt[0].Host)))
	}
	for _, name := range []string{"x-mailer", "user-agent"} {
		if v := a.header(name); v != "" {
			t.words(v, "xm:")
		}
	}
	if n := len(p.Envelope.To) + len(p.Envelope.Cc); n == 0 {
		t.add("meta:no-to")
	} else {
		t.add2("meta:rcpts:", bucket(n))
	}
	t.add2("ct:", p.Body.MIMEType())
	t.headerTokens(a, list)
	for _, cs := range a.charsets {
		t.add2("cs:", cs)
	}
	p.Body.Walk(func(part *message.Part) bool {
		if enc := strings.ToLower(part.Encoding); enc != "" && enc != "7bit" {
			t.add3("cte:"+part.Type, ":", enc)
		}
		return !t.full()
	})
	for _, at := range a.attachments {
		t.add2("att:", at.mime)
		if ext := extension(at.name); ext != "" {
			t.add2("att-ext:", ext)
		}
	}
	if a.hasHTML && !a.hasPlain {
		t.add("meta:html-only")
	}
	for i, h := range a.hosts {
		if h != "" {
			t.urlTokens(a.urls[i], h)
		}
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
	t.shapeTokens(a)
	t.scriptTokens()
}

// words adds the words of s with a prefix. A word is a run of letters,
// digits and the joiners ' - . $ ! that starts with a letter, digit or $;
// trailing joiners are cut. Words are folded to lower case; words that are
// too long become a length-class token; CJK text, which has no spaces,
// becomes character bigrams. ASCII is read a byte at a time through a
// table; only other text is decoded as runes. A word is hashed as it is
// read, and its text is copied into the set only if the hash is new.
func (t *tokenSet) words(s, prefix string) {
	var prevCJK rune
	runes := 0 // runes in t.word
	body := prefix == ""
	// h is the hash of prefix and t.word; hw the same up to the word's
	// last letter or digit, which is the token's hash once flush has cut
	// the trailing joiners. (Words of more than maxWordBytes are never
	// kept as they are, so bytes left out of t.word do not matter.)
	ph := fnvMore(fnvOffset, prefix)
	h, hw := ph, ph
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			i++
			prevCJK = 0
			if body && c > ' ' {
				t.visible++
			}
			switch k := asciiClass[c]; {
			case k == classWord:
				if body && c >= 'A' {
					t.letters++
					if c <= 'Z' {
						t.upper++
					}
				}
				c |= asciiLower(c)
				t.wordByte(c, &runes)
				h = (h ^ uint64(c)) * fnvPrime
				hw = h
			case k == classJoiner && runes > 0:
				t.wordByte(c, &runes)
				h = (h ^ uint64(c)) * fnvPrime
			case runes > 0:
				t.flush(prefix, runes, hw)
				runes, h, hw = 0, ph, ph
				if t.full() {
					return
				}
			}
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		i += size
		if isInvisible(r) {
			// Shown as nothing: read through it, as the reader does.
			if body {
				t.invisible++
			}
			continue
		}
		if body {
			t.visible++
		}
		if isCJK(r) {
			if body {
				t.scripts[scriptCJK]++
			}
			if runes > 0 {
				t.flush(prefix, runes, hw)
				runes, h, hw = 0, ph, ph
			}
			if prevCJK != 0 && t.cjk < maxCJKTokens {
				t.cjk++
				start := len(t.text)
				t.text = append(t.text, prefix...)
				t.text = utf8.AppendRune(t.text, prevCJK)
				t.text = utf8.AppendRune(t.text, r)
				t.commit(start)
				if t.full() {
					return
				}
			}
			prevCJK = r
			continue
		}
		prevCJK = 0
		if unicode.IsLetter(r) || unicode.IsDigit(r) {
			if body && unicode.IsLetter(r) {
				t.letters++
				if unicode.IsUpper(r) {
					t.upper++
				}
				if sc := scriptOf(r); sc >= 0 {
					t.scripts[sc]++
				}
			}
			if r >= 0x370 && r < 0x530 { // Greek or Cyrillic
				t.wordOther = true
			}
			runes++
			if n := len(t.word); n < maxWordBytes {
				t.word = utf8.AppendRune(t.word, unicode.ToLower(r))
				h = fnvMore(h, t.word[n:])
				hw = h
			}
		} else if runes > 0 {
			t.flush(prefix, runes, hw)
			runes, h, hw = 0, ph, ph
			if t.full() {
				return
			}
		}
	}
	if runes > 0 {
		t.flush(prefix, runes, hw)
	}
}

// hasASCIILetter reports an ASCII letter in w.
func hasASCIILetter(w []byte) bool {
	for _, c := range w {
		if c >= 'a' && c <= 'z' {
			return true
		}
	}
	return false
}

// maxWordBytes bounds the bytes kept of one word; longer words only count
// their length (they become a skip: token anyway).
const maxWordBytes = 4*maxWordLen + 8

func (t *tokenSet) wordByte(c byte, runes *int) {
	*runes++
	if len(t.word) < maxWordBytes {
		t.word = append(t.word, c)
	}
}

// flush adds the word in t.word (runes long; h is the hash of prefix and
// the word without trailing joiners) and empties it.
func (t *tokenSet) flush(prefix string, runes int, h uint64) {
	w := t.word
	t.word = t.word[:0]
	if t.wordOther {
		t.wordOther = false
		if hasASCIILetter(w) {
			t.mixedWords++
		}
	}
	for len(w) > 0 && asciiClass[w[len(w)-1]] == classJoiner {
		w = w[:len(w)-1]
		runes--
	}
	switch {
	case runes < minWordLen:
		return
	case runes > maxWordLen:
		start := len(t.text)
		t.text = append(t.text, prefix...)
		t.text = append(t.text, "skip:"...)
		t.text = append(t.text, w[0])
		t.text = strconv.AppendInt(t.text, int64(runes/10*10), 10)
		t.commit(start)
		return
	case isYear(w):
		t.add2(prefix, "num:year")
		return
	case hasYear(w):
		// A date or a span of years ("2007-04-11", "1997-2002"): its
		// shape, not its value. Dates name the week a message was sent;
		// learned as words they teach the classifier the corpus' years.
		start := len(t.text)
		t.text = append(t.text, prefix...)
		t.text = append(t.text, "num:"...)
		for _, c := range w {
			if c >= '0' && c <= '9' {
				c = 'd'
			}
			t.text = append(t.text, c)
		}
		t.commit(start)
		return
	}
	if t.full() || !t.insert(h) {
		return
	}
	t.text = append(t.text, prefix...)
	t.text = append(t.text, w...)
	t.ends = append(t.ends, int32(len(t.text)))
}

// ASCII classes for words.
const (
	classOther  = 0
	classWord   = 1 // letters, digits, $
	classJoiner = 2 // ' - . ! inside a word
)

var asciiClass = func() (t [256]byte) {
	for c := '0'; c <= '9'; c++ {
		t[c] = classWord
	}
	for c := 'a'; c <= 'z'; c++ {
		t[c] = classWord
		t[c-32] = classWord
	}
	t['$'] = classWord
	for _, c := range "'-.!" {
		t[c] = classJoiner
	}
	return t
}()

// asciiLower is the bit that folds an ASCII capital to lower case (0 for
// other bytes).
func asciiLower(c byte) byte {
	if c >= 'A' && c <= 'Z' {
		return 0x20
	}
	return 0
}

// urlPath adds the words of a URL's path and query with the prefix up:
// (a script name, "remove", "unsubscribe", tracking parameters), at most
// 256 bytes of it.
func (t *tokenSet) urlPath(u string) {
	if k := strings.Index(u, "//"); k >= 0 {
		u = u[k+2:]
	}
	k := strings.IndexAny(u, "/?#")
	if k < 0 {
		return
	}
	p := u[k:]
	if len(p) > 256 {
		p = p[:256]
	}
	t.words(p, "up:")
}

func isCJK(r rune) bool {
	return r >= 0x2E80 && (unicode.Is(unicode.Han, r) || unicode.Is(unicode.Hiragana, r) ||
		unicode.Is(unicode.Katakana, r) || unicode.Is(unicode.Hangul, r))
}

// registrable approximates the registrable domain: the last two labels, or
// three when the second-level label is short (co.uk, com.au).
func registrable(host string) string {
	last := strings.LastIndexByte(host, '.')
	if last < 0 {
		return host
	}
	second := strings.LastIndexByte(host[:last], '.')
	if second < 0 {
		return host
	}
	if last-second-1 <= 3 && len(host)-last-1 == 2 {
		if third := strings.LastIndexByte(host[:second], '.'); third >= 0 {
			return host[third+1:]
		}
		return host
	}
	return host[second+1:]
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
func isYear[S ~string | ~[]byte](w S) bool {
	return len(w) == 4 && (w[0] == '1' && w[1] == '9' || w[0] == '2' && w[1] == '0') && w[2] >= '0' && w[2] <= '9' && w[3] >= '0' && w[3] <= '9'
}

// hasYear reports whether w holds a run of exactly four digits from 1900
// to 2099 and no letters.
func hasYear(w []byte) bool {
	run, year := 0, false
	for i, c := range w {
		switch {
		case c >= '0' && c <= '9':
			run++
			continue
		case c >= 'a' && c <= 'z' || c >= 0x80:
			return false
		}
		if run == 4 && isYear(w[i-4:i]) {
			year = true
		}
		run = 0
	}
	return year || run == 4 && isYear(w[len(w)-4:])
}

// shapeTokens describe the message's make-up rather than its words: how
// much text, how many images and whether they come from the message
// itself. Image spam pads a picture with words copied from news to look
// like ham to a word counter; its shape gives it away.
func (t *tokenSet) shapeTokens(a *analysis) {
	var imgs, cid int
	for _, d := range a.html {
		imgs += d.images
		cid += d.cidImages
	}
	letters := t.visible // counted while the words were read
	t.addMeta("meta:letters:", sizeBucket(letters))
	if imgs > 0 {
		t.addMeta("meta:img:", bucket(imgs))
	}
	if cid > 0 {
		t.addMeta("meta:cid-img", "")
		t.addMeta("meta:cid-img-letters:", sizeBucket(letters))
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
