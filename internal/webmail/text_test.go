package webmail

import "testing"

func TestLinkify(t *testing.T) {
	segs := linkify("see https://a.example/x?y=1, and (www.b.example/p) or mailto:x@y.example.\n> quoted javascript:alert(1)\nend")
	var links []string
	for _, s := range segs {
		if s.URL != "" {
			links = append(links, s.URL)
		}
	}
	want := []string{"https://a.example/x?y=1", "https://www.b.example/p", "mailto:x@y.example"}
	if len(links) != len(want) {
		t.Fatalf("links %q, want %q", links, want)
	}
	for i := range want {
		if links[i] != want[i] {
			t.Errorf("link %d = %q, want %q", i, links[i], want[i])
		}
	}
	quoted := false
	for _, s := range segs {
		if s.Quote && s.URL == "" && s.Text == "> quoted javascript:alert(1)\n" {
			quoted = true
		}
	}
	if !quoted {
		t.Errorf("quoted line not kept as quoted text: %+v", segs)
	}
}
