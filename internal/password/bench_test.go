package password

import "testing"

// BenchmarkVerifyDefault measures one login's hashing cost with
// DefaultParams.
func BenchmarkVerifyDefault(b *testing.B) {
	h, err := Hash("benchmark password")
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if ok, err := Verify(h, "benchmark password"); !ok || err != nil {
			b.Fatal(ok, err)
		}
	}
}
