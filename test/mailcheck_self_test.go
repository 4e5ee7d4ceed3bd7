package blackbox

import (
	"strings"
	"testing"
)

// TestCheckDelivered makes sure the comparison the round-trip tests rely
// on catches what it must: changed bytes, non-trace fields in front, no
// Received: field, and a changed line ending.
func TestCheckDelivered(t *testing.T) {
	t.Parallel()
	sent := []byte("Received: from original\r\nSubject: hi\r\n\r\nbody\r\n")
	trace := "Return-Path: <a@example.org>\r\nReceived: from client.example\r\n\tby test.local; Mon, 2 Jan 2006 15:04:05 +0000\r\n"
	for _, c := range []struct {
		name string
		got  string
		ok   bool
	}{
		{"trace prepended", trace + string(sent), true},
		{"only Received", "Received: by x\r\n" + string(sent), true},
		{"nothing prepended", string(sent), false},
		{"no Received", "Return-Path: <a@example.org>\r\n" + string(sent), false},
		{"other field", trace + "X-Spam: yes\r\n" + string(sent), false},
		{"body changed", trace + strings.Replace(string(sent), "body", "bodY", 1), false},
		{"header changed", trace + strings.Replace(string(sent), "hi", "Hi", 1), false},
		{"LF endings", toLFString(trace) + string(toLF(sent)), false},
		{"truncated", trace + string(sent[:len(sent)-2]), false},
	} {
		err := checkDelivered([]byte(c.got), sent, "\r\n")
		if (err == nil) != c.ok {
			t.Errorf("%s: checkDelivered = %v, want ok=%v", c.name, err, c.ok)
		}
	}
	got := map[string][]byte{"uid:1": []byte(trace + string(sent))}
	if errs := matchAll(got, map[string][]byte{"a": sent}, "\r\n"); len(errs) != 0 {
		t.Errorf("matchAll on a match: %v", errs)
	}
	if errs := matchAll(got, map[string][]byte{"a": sent, "b": []byte("Subject: other\r\n\r\nx\r\n")}, "\r\n"); len(errs) != 1 {
		t.Errorf("matchAll with a missing message: %v, want one error", errs)
	}
	if errs := matchAll(map[string][]byte{"uid:1": got["uid:1"], "uid:2": got["uid:1"]}, map[string][]byte{"a": sent}, "\r\n"); len(errs) != 1 {
		t.Errorf("matchAll with a duplicate: %v, want one error", errs)
	}
}

func toLFString(s string) string { return strings.ReplaceAll(s, "\r\n", "\n") }

func TestDotStuff(t *testing.T) {
	t.Parallel()
	got := string(dotStuff([]byte(".a\r\nb\r\n..c\r\n")))
	if want := "..a\r\nb\r\n...c\r\n.\r\n"; got != want {
		t.Errorf("dotStuff = %q, want %q", got, want)
	}
}
