package password

import (
	"bytes"
	"testing"

	"github.com/xdg-go/scram"
)

// The keys must be exactly what a SCRAM client derives from the password.
func TestSCRAMKeysMatchClient(t *testing.T) {
	salt := []byte("0123456789abcdef")
	got, err := SCRAMKeysWith("pässword", salt, 4096)
	if err != nil {
		t.Fatal(err)
	}
	c, err := scram.SHA256.NewClient("user", "pässword", "")
	if err != nil {
		t.Fatal(err)
	}
	want := c.GetStoredCredentials(scram.KeyFactors{Salt: string(salt), Iters: 4096})
	if !bytes.Equal(got.StoredKey, want.StoredKey) || !bytes.Equal(got.ServerKey, want.ServerKey) {
		t.Fatalf("keys differ from the client's derivation")
	}
	other, _ := SCRAMKeysWith("password", salt, 4096)
	if bytes.Equal(other.StoredKey, got.StoredKey) {
		t.Fatal("different passwords gave the same key")
	}
	a, err := SCRAMKeys("x")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := SCRAMKeys("x")
	if bytes.Equal(a.Salt, b.Salt) || a.Iterations != SCRAMIterations {
		t.Fatalf("SCRAMKeys: salts not random or wrong iterations: %+v", a)
	}
}
