package mailthread

import "strings"

// BaseSubject extracts the base subject of RFC 5256 §2.1 from a decoded
// subject, and reports whether the subject marked a reply or forward
// (a removed "Re:"/"Fwd:" leader or "[fwd: ...]" wrapper), which THREAD
// REFERENCES needs (RFC 5256 §4 step 5).
func BaseSubject(s string) (string, bool) {
	// Step 1: whitespace runs (tabs, folding) become one space.
	s = strings.Join(strings.Fields(s), " ")
	reply := false
	for round := 0; round < 100; round++ {
		// Step 2: trailing "(fwd)" and whitespace.
		for {
			t := strings.TrimRight(s, " ")
			if n := len(t); n >= 5 && strings.EqualFold(t[n-5:], "(fwd)") {
				t = t[:n-5]
			}
			if t == s {
				break
			}
			s = t
		}
		// Steps 3-5: leaders and blobs, until neither matches.
		for i := 0; i < 1000; i++ {
			if t, ok := cutLeader(s); ok {
				s, reply = t, true
				continue
			}
			if t := strings.TrimLeft(s, " "); t != s {
				s = t
				continue
			}
			if t, ok := cutBlob(s); ok && t != "" {
				s = t
				continue
			}
			break
		}
		// Step 6: "[fwd: ...]" wraps a forwarded subject.
		if len(s) >= 6 && strings.EqualFold(s[:5], "[fwd:") && s[len(s)-1] == ']' {
			s, reply = s[5:len(s)-1], true
			continue
		}
		break
	}
	return s, reply
}

// cutBlob removes a leading subj-blob: "[" *BLOBCHAR "]" *WSP.
func cutBlob(s string) (string, bool) {
	if !strings.HasPrefix(s, "[") {
		return s, false
	}
	end := strings.IndexAny(s[1:], "[]")
	if end < 0 || s[1+end] != ']' {
		return s, false
	}
	return strings.TrimLeft(s[end+2:], " "), true
}

// cutLeader removes one leading *subj-blob subj-refwd, where subj-refwd is
// ("re" / ("fw" ["d"])) *WSP [subj-blob] ":".
func cutLeader(s string) (string, bool) {
	t := s
	for i := 0; i < 100; i++ {
		u, ok := cutBlob(t)
		if !ok {
			break
		}
		t = u
	}
	switch {
	case hasPrefixFold(t, "re"):
		t = t[2:]
	case hasPrefixFold(t, "fwd"):
		t = t[3:]
	case hasPrefixFold(t, "fw"):
		t = t[2:]
	default:
		return s, false
	}
	t = strings.TrimLeft(t, " ")
	if u, ok := cutBlob(t); ok {
		t = u
	}
	if !strings.HasPrefix(t, ":") {
		return s, false
	}
	return t[1:], true
}

func hasPrefixFold(s, p string) bool {
	return len(s) >= len(p) && strings.EqualFold(s[:len(p)], p)
}

// FoldASCII upper-cases ASCII letters for the i;ascii-casemap collation
// (RFC 4790 §9.2) that SORT and THREAD compare strings with.
func FoldASCII(s string) string {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c >= 'a' && c <= 'z' {
			b := []byte(s)
			for j := i; j < len(b); j++ {
				if b[j] >= 'a' && b[j] <= 'z' {
					b[j] -= 32
				}
			}
			return string(b)
		}
	}
	return s
}
