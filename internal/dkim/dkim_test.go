package dkim

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	msgdkim "github.com/emersion/go-msgauth/dkim"

	"pimail/internal/store"
	"pimail/internal/store/sqlite"
)

func openStore(t *testing.T) store.Store {
	t.Helper()
	st, err := sqlite.Open(t.TempDir(), sqlite.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), CollectInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

const testMsg = "From: Alice <alice@example.org>\r\n" +
	"To: bob@example.net\r\n" +
	"Subject: Hello\r\n" +
	"Date: Tue, 02 Jan 2024 15:04:05 +0100\r\n" +
	"Message-ID: <1@example.org>\r\n" +
	"MIME-Version: 1.0\r\n" +
	"Content-Type: text/plain; charset=utf-8\r\n" +
	"\r\n" +
	"Hello Bob,\r\n  see you.\r\n"

// lookup serves the published records, as a DNS resolver would.
func lookup(t *testing.T, st store.Store, domain string) func(string) ([]string, error) {
	ks, err := st.DKIMKeys(context.Background(), domain)
	if err != nil {
		t.Fatal(err)
	}
	recs := map[string][]string{}
	for _, k := range ks {
		r, err := PublicRecord(k)
		if err != nil {
			t.Fatal(err)
		}
		// As DNS delivers it: several strings, concatenated by the client.
		recs[r.Name] = []string{strings.Join(r.Strings(), "")}
	}
	return func(name string) ([]string, error) {
		if v, ok := recs[name]; ok {
			return v, nil
		}
		return nil, fmt.Errorf("no TXT record for %s", name)
	}
}

func verify(t *testing.T, raw []byte, look func(string) ([]string, error)) []*msgdkim.Verification {
	t.Helper()
	vs, err := msgdkim.VerifyWithOptions(bytes.NewReader(raw), &msgdkim.VerifyOptions{LookupTXT: look})
	if err != nil {
		t.Fatalf("verify: %v", err)
	}
	return vs
}

func TestSignVerifies(t *testing.T) {
	st := openStore(t)
	s := NewSigner(st, slog.New(slog.NewTextHandler(io.Discard, nil)))
	ctx := context.Background()
	signed, err := s.SignMessage(ctx, "Example.ORG", []byte(testMsg))
	if err != nil {
		t.Fatal(err)
	}
	ks, _ := st.DKIMKeys(ctx, "example.org")
	if len(ks) != 2 {
		t.Fatalf("keys generated: %d, want 2 (rsa and ed25519)", len(ks))
	}
	look := lookup(t, st, "example.org")
	vs := verify(t, signed, look)
	if len(vs) != 2 {
		t.Fatalf("%d signatures, want 2", len(vs))
	}
	for _, v := range vs {
		if v.Err != nil || v.Domain != "example.org" {
			t.Fatalf("signature %+v: %v", v, v.Err)
		}
		keys := strings.ToLower(strings.Join(v.HeaderKeys, ":"))
		if !strings.HasPrefix(keys, "from:from:to:to:cc:subject:subject:date:date:reply-to:sender:message-id:message-id:in-reply-to:references:mime-version:mime-version:content-type:content-type:content-transfer-encoding") {
			t.Fatalf("signed headers %q", keys)
		}
	}
	if !bytes.Contains(signed, []byte("c=relaxed/relaxed")) || !bytes.Contains(signed, []byte("a=ed25519-sha256")) ||
		!bytes.Contains(signed, []byte("a=rsa-sha256")) {
		t.Fatalf("signature fields:\n%s", signed[:bytes.Index(signed, []byte("From:"))])
	}

	// Relaxed canonicalization survives whitespace changes in transit.
	relaxed := bytes.Replace(signed, []byte("Subject: Hello"), []byte("Subject:   Hello"), 1)
	for _, v := range verify(t, relaxed, look) {
		if v.Err != nil {
			t.Fatalf("relaxed variant failed: %v", v.Err)
		}
	}
	// A changed body, a changed From or an added From breaks every signature.
	for name, bad := range map[string][]byte{
		"body":       bytes.Replace(signed, []byte("see you"), []byte("send money"), 1),
		"from":       bytes.Replace(signed, []byte("alice@example.org"), []byte("mallory@example.org"), 1),
		"added from": append([]byte("From: mallory@evil.example\r\n"), signed...),
		// A relay adding what the author did not write (issue 22).
		"added reply-to": append([]byte("Reply-To: mallory@evil.example\r\n"), signed...),
		"second subject": append([]byte("Subject: Urgent: new bank details\r\n"), signed...),
		"added sender":   append([]byte("Sender: mallory@evil.example\r\n"), signed...),
		"added cte":      bytes.Replace(signed, []byte("MIME-Version: 1.0\r\n"), []byte("MIME-Version: 1.0\r\nContent-Transfer-Encoding: base64\r\n"), 1),
	} {
		for _, v := range verify(t, bad, look) {
			if v.Err == nil {
				t.Errorf("%s: tampered message verified", name)
			}
		}
	}

	// Keys are generated once and reused, also by a new signer.
	again, err := NewSigner(st, nil).SignMessage(ctx, "example.org", []byte(testMsg))
	if err != nil {
		t.Fatal(err)
	}
	if ks2, _ := st.DKIMKeys(ctx, "example.org"); len(ks2) != 2 {
		t.Fatalf("keys after second signer: %d", len(ks2))
	}
	for _, v := range verify(t, again, look) {
		if v.Err != nil {
			t.Fatalf("second signer: %v", v.Err)
		}
	}
}

func TestPublicRecord(t *testing.T) {
	now := time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC)
	k, err := NewKey("example.org", store.DKIMRSA, now)
	if err != nil {
		t.Fatal(err)
	}
	r, err := PublicRecord(k)
	if err != nil {
		t.Fatal(err)
	}
	if r.Name != "pm202604rsa._domainkey.example.org" || !strings.HasPrefix(r.Value, "v=DKIM1; k=rsa; p=MII") {
		t.Fatalf("record %+v", r)
	}
	parts := r.Strings()
	if len(parts) < 2 || strings.Join(parts, "") != r.Value {
		t.Fatalf("RSA-2048 record not split into strings: %d parts", len(parts))
	}
	for _, p := range parts {
		if len(p) > 255 {
			t.Fatalf("string of %d octets", len(p))
		}
	}
	if !strings.Contains(r.ZoneLine(), `IN TXT ( "v=DKIM1`) {
		t.Fatalf("zone line %q", r.ZoneLine())
	}
	e, _ := NewKey("example.org", store.DKIMEd25519, now)
	er, _ := PublicRecord(e)
	if er.Name != "pm202604ed._domainkey.example.org" || !strings.HasPrefix(er.Value, "v=DKIM1; k=ed25519; p=") || len(er.Strings()) != 1 {
		t.Fatalf("ed25519 record %+v", er)
	}
	if _, err := NewKey("example.org", "dsa", now); err == nil {
		t.Fatal("unknown algorithm accepted")
	}
}
