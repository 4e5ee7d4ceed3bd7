package main

import "testing"

func TestParseSize(t *testing.T) {
	good := map[string]int64{
		"0": 0, "1024": 1024, "500M": 500 << 20, "2G": 2 << 30, "2g": 2 << 30,
		"100K": 100 << 10, "1T": 1 << 40, "500MB": 500 << 20, "500MiB": 500 << 20, " 7 ": 7,
	}
	for in, want := range good {
		if got, err := parseSize(in); err != nil || got != want {
			t.Errorf("parseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "M", "-1", "1.5G", "12X", "G5", "9999999999999T", "99999999999999999999"} {
		if got, err := parseSize(in); err == nil {
			t.Errorf("parseSize(%q) = %d; want an error", in, got)
		}
	}
}
