package arc

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"testing"
	"time"

	"pimail/internal/dkim"
)

// FuzzVerify feeds arbitrary messages (a sealed one, changed at will) to
// ARC validation, DKIM verification and sealing: no panic, a status of
// the three, and no signature passes without a published key.
func FuzzVerify(f *testing.F) {
	key, _ := rsa.GenerateKey(rand.Reader, 1024) // small: each fuzz worker makes one
	z := zone{}
	sealed, err := Seal([]byte(testMsg), SealOptions{Domain: "fwd.test", Selector: "arc", Signer: key,
		AuthResults: "mx.fwd.test; spf=pass", Chain: Result{Status: None}, Time: time.Now()})
	if err != nil {
		f.Fatal(err)
	}
	f.Add([]byte(sealed + testMsg))
	f.Add([]byte("ARC-Seal: i=1; cv=none\r\nARC-Seal: i=x\r\n\r\n"))
	f.Add([]byte("DKIM-Signature: v=1; a=rsa-sha256; d=x.test; s=s; h=from; bh=; b=;\r\nFrom: a@x.test\r\n"))
	f.Fuzz(func(t *testing.T, raw []byte) {
		r := z.resolver(t)
		res := Verify(context.Background(), r, raw)
		switch res.Status {
		case None, Pass, Fail:
		default:
			t.Fatalf("status %q", res.Status)
		}
		for _, v := range dkim.Verify(context.Background(), r, raw, 5, time.Now()) {
			if v.Result == dkim.Pass {
				t.Fatalf("a signature passed without a published key: %+v", v)
			}
		}
		_, _ = Seal(raw, SealOptions{Domain: "fwd.test", Selector: "arc", Signer: key, AuthResults: "x; spf=none", Chain: res, Time: time.Now()})
	})
}
