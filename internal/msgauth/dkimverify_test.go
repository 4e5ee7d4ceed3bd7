package msgauth

import (
	"bytes"
	"context"
	"crypto"
	"strings"
	"testing"

	"github.com/emersion/go-msgauth/dkim"
)

func sign(t *testing.T, msg, domain, selector string, key crypto.Signer) string {
	t.Helper()
	var out bytes.Buffer
	err := dkim.Sign(&out, strings.NewReader(msg), &dkim.SignOptions{
		Domain: domain, Selector: selector, Signer: key,
		HeaderKeys: []string{"From", "To", "Subject", "Date"},
	})
	if err != nil {
		t.Fatal(err)
	}
	return out.String()
}

const plainMsg = "From: Alice <alice@a.test>\r\nTo: bob@b.test\r\nSubject: hello\r\nDate: Mon, 2 Jan 2006 15:04:05 +0000\r\n\r\nHello Bob.\r\n"

// verifyDKIM runs the Checker's DKIM step alone.
func verifyDKIM(ctx context.Context, r Resolver, raw []byte, max int) []DKIMResult {
	c, err := New(Config{Resolver: r, AuthservID: "mx.b.test", MaxSignatures: max, CacheSize: -1})
	if err != nil {
		panic(err)
	}
	return c.verifyDKIM(ctx, raw)
}

// TestDKIMVerify checks messages signed by go-msgauth, an independent
// implementation.
func TestDKIMVerify(t *testing.T) {
	key, rec := edKey(t)
	other, _ := edKey(t)
	z := newZone(t,
		txt("s1._domainkey.a.test", rec),
		txt("s2._domainkey.a.test", rec),
		txt("revoked._domainkey.a.test", "v=DKIM1; k=ed25519; p="),
	)
	z.failing("down._domainkey.a.test")
	r := z.resolver(t)
	ctx := context.Background()

	signed := sign(t, plainMsg, "a.test", "s1", key)
	got := verifyDKIM(ctx, r, []byte(signed), DefaultMaxSignatures)
	if len(got) != 1 || got[0].Result != "pass" || got[0].Domain != "a.test" || got[0].Selector != "s1" ||
		got[0].Algorithm != "ed25519-sha256" || len(got[0].BPrefix) != 8 {
		t.Fatalf("signed message: %+v", got)
	}

	cases := []struct {
		name, msg, want string
	}{
		{"body changed", strings.Replace(signed, "Hello Bob.", "Hello Eve.", 1), "fail"},
		{"signed header changed", strings.Replace(signed, "Subject: hello", "Subject: pay now", 1), "fail"},
		{"wrong key", sign(t, plainMsg, "a.test", "s2", other), "fail"},
		{"no key", sign(t, plainMsg, "a.test", "missing", key), "permerror"},
		{"revoked key", sign(t, plainMsg, "a.test", "revoked", key), "permerror"},
		{"dns down", sign(t, plainMsg, "a.test", "down", key), "temperror"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := verifyDKIM(ctx, r, []byte(c.msg), DefaultMaxSignatures)
			if len(got) != 1 || got[0].Result != c.want {
				t.Fatalf("got %+v, want %s", got, c.want)
			}
		})
	}

	if got := verifyDKIM(ctx, r, []byte(plainMsg), DefaultMaxSignatures); len(got) != 0 || aggregateDKIM(got) != "none" {
		t.Fatalf("unsigned: %+v", got)
	}

	// Two signatures, one broken: both reported, in header order; the
	// summary is pass.
	two := sign(t, sign(t, plainMsg, "a.test", "s1", key), "a.test", "missing", key)
	got = verifyDKIM(ctx, r, []byte(two), DefaultMaxSignatures)
	if len(got) != 2 || got[0].Selector != "missing" || got[0].Result != "permerror" || got[1].Result != "pass" || aggregateDKIM(got) != "pass" {
		t.Fatalf("two signatures: %+v", got)
	}
	// The bound on signatures holds.
	if got := verifyDKIM(ctx, r, []byte(two), 1); len(got) != 1 {
		t.Fatalf("max 1 signature: %d results", len(got))
	}
}
