package pop3d

import (
	"fmt"
	"testing"
)

func TestUIDSet(t *testing.T) {
	for _, tc := range []struct {
		in   []uint32
		want string
	}{
		{[]uint32{5}, "[{5 5}]"},
		{[]uint32{1, 2, 3, 7, 9, 10}, "[{1 3} {7 7} {9 10}]"},
	} {
		if got := fmt.Sprint(uidSet(tc.in)); got != tc.want {
			t.Errorf("uidSet(%v) = %s, want %s", tc.in, got, tc.want)
		}
	}
}

func TestParseNumber(t *testing.T) {
	for in, want := range map[string]int{"0": 0, "1": 1, "007": 7, "123456789": 123456789} {
		if got, err := parseNumber(in); err != nil || got != want {
			t.Errorf("parseNumber(%q) = %d, %v", in, got, err)
		}
	}
	for _, in := range []string{"", "-1", "+1", "1x", " 1", "1234567890", "１"} {
		if _, err := parseNumber(in); err == nil {
			t.Errorf("parseNumber(%q) accepted", in)
		}
	}
}
