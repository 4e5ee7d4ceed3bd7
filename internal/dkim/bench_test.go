package dkim

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"pimail/internal/store"
	"pimail/internal/store/sqlite"
)

// BenchmarkSign signs an 8 KB message with the domain's RSA-2048 and
// Ed25519 keys, as the outbound queue does for every message:
//
//	go test ./internal/dkim -run XXX -bench BenchmarkSign
func BenchmarkSign(b *testing.B) {
	st := openStoreB(b)
	s := NewSigner(st, slog.New(slog.DiscardHandler))
	ctx := context.Background()
	raw := []byte("From: Alice <alice@example.org>\r\nTo: bob@example.net\r\nSubject: Hello\r\n" +
		"Date: Tue, 02 Jan 2024 15:04:05 +0100\r\nMessage-ID: <1@example.org>\r\nMIME-Version: 1.0\r\n" +
		"Content-Type: text/plain; charset=utf-8\r\n\r\n" + strings.Repeat("some body text of a message, about eight kilobytes\r\n", 160))
	if _, err := s.Sign(ctx, "example.org", raw); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(raw)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Sign(ctx, "example.org", raw); err != nil {
			b.Fatal(err)
		}
	}
}

func openStoreB(b *testing.B) store.Store {
	st, err := sqlite.Open(b.TempDir(), sqlite.Options{Logger: slog.New(slog.DiscardHandler), CollectInterval: -1})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	return st
}
