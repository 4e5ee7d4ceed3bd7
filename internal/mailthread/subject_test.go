package mailthread

import "testing"

func TestBaseSubject(t *testing.T) {
	cases := []struct {
		in    string
		base  string
		reply bool
	}{
		{"Hello", "Hello", false},
		{"Re: Hello", "Hello", true},
		{"RE:  re:Hello   (fwd)", "Hello", true},
		{"Fwd: [list] Re: Hello\t world", "Hello world", true},
		{"[list] Hello", "Hello", false},
		{"[list]", "[list]", false},
		{"[Fwd: Re: Hello]", "Hello", true},
		{"Re [2]: Hello (fwd) (FWD)", "Hello", true},
		{"Fw: Fwd:", "", true},
		{"Reply: x", "Reply: x", false},
		{"  [a][b] [c] Re[x]: y", "y", true},
		{"", "", false},
	}
	for _, c := range cases {
		base, reply := BaseSubject(c.in)
		if base != c.base || reply != c.reply {
			t.Errorf("BaseSubject(%q) = %q, %v; want %q, %v", c.in, base, reply, c.base, c.reply)
		}
	}
}
