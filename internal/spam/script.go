package spam

// Scripts and invisible characters of the body text. A user who never
// gets mail in Cyrillic or Chinese learns that from one token per script
// (script:cyrillic), whatever words the next such spam uses; a word that
// mixes Latin letters with Cyrillic or Greek look-alikes ("pаypal" with a
// Cyrillic а) and text stuffed with zero-width characters are written to
// get past word filters, and honest mail has neither.

// Scripts counted (Latin is the letters not in another).
const (
	scriptCyrillic = iota
	scriptGreek
	scriptArabic
	scriptHebrew
	scriptThai
	scriptCJK
	scriptHangul
	numScripts
)

var scriptNames = [numScripts]string{"cyrillic", "greek", "arabic", "hebrew", "thai", "cjk", "hangul"}

// scriptCounts counts letters per script.
type scriptCounts [numScripts]int32

// scriptOf classes a non-ASCII letter by its code point block, -1 for
// Latin and anything else.
func scriptOf(r rune) int {
	switch {
	case r < 0x370:
		return -1
	case r < 0x400:
		return scriptGreek
	case r < 0x530:
		return scriptCyrillic
	case r >= 0x590 && r < 0x600:
		return scriptHebrew
	case r >= 0x600 && r < 0x700:
		return scriptArabic
	case r >= 0xE00 && r < 0xE80:
		return scriptThai
	case r >= 0x1100 && r < 0x1200, r >= 0xAC00 && r < 0xD7B0, r >= 0x3130 && r < 0x3190:
		return scriptHangul
	case r >= 0x2E80 && r < 0xA000, r >= 0xF900 && r < 0xFB00, r >= 0xFF00 && r < 0xFFF0:
		return scriptCJK
	}
	return -1
}

// isInvisible reports format characters that show nothing: zero-width
// space, joiners and marks, word joiner and invisible operators, the
// byte order mark inside text, the soft hyphen and the combining
// grapheme joiner. The tokenizer skips them inside words, so "fr\u200bee"
// is read as "free", and counts them.
func isInvisible(r rune) bool {
	switch {
	case r == 0xAD, r == 0x34F, r == 0xFEFF:
		return true
	case r >= 0x200B && r <= 0x200F, r >= 0x2060 && r <= 0x2064:
		return true
	}
	return false
}

// dominant is the script with most letters when it has at least
// minScriptLetters and a fifth of all letters, else "".
func (s *scriptCounts) dominant(letters int) string {
	best, n := -1, int32(0)
	for i, c := range s {
		if c > n {
			best, n = i, c
		}
	}
	if best < 0 || n < minScriptLetters || int(n)*5 < letters {
		return ""
	}
	return scriptNames[best]
}

const minScriptLetters = 20

// scriptTokens adds the body's dominant script other than Latin, and a
// token each for invisible characters and mixed-script words.
func (t *tokenSet) scriptTokens() {
	if d := t.scripts.dominant(t.letters); d != "" {
		t.addMeta("script:", d)
	}
	if t.invisible >= minInvisible {
		t.addMeta("meta:invisible-chars", "")
	}
	if t.mixedWords > 0 {
		t.addMeta("meta:mixed-script-words", "")
	}
}

// Rule bounds: a few invisible characters come from copy and paste.
const (
	minInvisible  = 10
	minMixedWords = 2
)

func ruleInvisibleChars(c *ruleCtx) bool { return c.a.invisible >= minInvisible }

func ruleMixedScript(c *ruleCtx) bool { return c.a.mixedWords >= minMixedWords }

func ruleUndeclared8bit(c *ruleCtx) bool { return c.a.undeclared8bit }

// has8bit reports a byte ≥ 0x80 in the first 96 KB of b.
func has8bit(b []byte) bool {
	for _, c := range b[:min(len(b), 3*maxTextPerPart)] {
		if c >= 0x80 {
			return true
		}
	}
	return false
}
