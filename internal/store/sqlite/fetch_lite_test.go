package sqlite

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"pimail/internal/message"
	"pimail/internal/store"
	"pimail/internal/testcorpus"
)

// liteSamples are messages whose stored parse exercises the decoders:
// groups, encoded words, quotes and backslashes, non-ASCII, no header.
var liteSamples = []string{
	"From: \"A \\\"q\\\" B\" <a@example.org>\r\nTo: undisclosed:;, g: x@y.z, w@v.u;\r\nSubject: =?utf-8?q?h=C3=A9llo?= <tag> & \"x\"\r\nDate: Tue, 5 Mar 2024 10:00:00 +0100\r\nMessage-ID: <m1@x>\r\nIn-Reply-To: <p@x>\r\n\r\nbody\r\n",
	"Subject: caf\xc3\xa9 \\ back\tslash\r\nContent-Type: multipart/mixed; boundary=b\r\n\r\n--b\r\nContent-Type: text/plain\r\n\r\nx\r\n--b--\r\n",
	"\r\nno header at all\r\n",
	"Subject: bad \xff utf8\n\nlf only\n",
	"",
}

// TestLiteDecoders checks that the partial decoders agree with a full
// decode of what Deliver stores, on the samples and on the corpus.
func TestLiteDecoders(t *testing.T) {
	raws := [][]byte{}
	for _, s := range liteSamples {
		raws = append(raws, []byte(s))
	}
	raws = append(raws, corpusRaws(t)...)
	for i, raw := range raws {
		p := message.Parse(raw)
		pj, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		env, err := decodeEnvelope(pj)
		if err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
		var full message.Parsed
		if err := json.Unmarshal(pj, &full); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(env, full.Envelope) {
			t.Errorf("message %d: envelope\n got %+v\nwant %+v", i, env, full.Envelope)
		}
		var fast message.Envelope
		if v, _ := jsonMember(pj, "env"); !fastEnvelope(v, &fast) {
			t.Errorf("message %d: the fast envelope decoder gave up on %s", i, v)
		}
		bs, err := decodeBodyStart(pj)
		if err != nil || bs != p.Body.BodyStart {
			t.Errorf("message %d: body start %d, %v; want %d", i, bs, err, p.Body.BodyStart)
		}
	}
}

// TestFetchLite checks FetchEnvelopes and FetchHeaders against Fetch and
// ReadBlob, and that a UID set limits them; the Migrated variant on a
// database written at schema version 4 and then migrated (migration 5
// fills blob_fetch and blob_addrs from the stored parses).
func TestFetchLite(t *testing.T)         { testFetchLite(t, false) }
func TestFetchLiteMigrated(t *testing.T) { testFetchLite(t, true) }

func testFetchLite(t *testing.T, migrate bool) {
	ctx := context.Background()
	dir := t.TempDir()
	orig := migrations
	if migrate {
		migrations, testSchema = orig[:4], 4
		defer func() { migrations, testSchema = orig, 0 }()
	}
	s, err := Open(dir, testOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { s.Close() }()
	if _, err := s.AddDomain(ctx, "example.org"); err != nil {
		t.Fatal(err)
	}
	acct, err := s.AddAccount(ctx, "lite@example.org", "pw")
	if err != nil {
		t.Fatal(err)
	}
	for _, raw := range liteSamples {
		if raw == "" {
			continue // Deliver refuses an empty message
		}
		if _, err := s.Deliver(ctx, store.Delivery{Raw: []byte(raw), InternalDate: time.Unix(1700000000, 0),
			Recipients: []store.Recipient{{AccountID: acct.ID}}}); err != nil {
			t.Fatal(err)
		}
	}
	if migrate {
		var n int
		if err := s.rdb.QueryRow("SELECT count(*) FROM sqlite_schema WHERE name = 'blob_fetch'").Scan(&n); err != nil || n != 0 {
			t.Fatalf("blob_fetch before the migration: %d, %v", n, err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		migrations, testSchema = orig, 0
		if s, err = Open(dir, testOptions()); err != nil {
			t.Fatalf("Open after upgrade: %v", err)
		}
		var blobs, rows, addrs int
		if err := s.rdb.QueryRow("SELECT (SELECT count(*) FROM blobs), (SELECT count(*) FROM blob_fetch), (SELECT count(*) FROM blob_addrs)").Scan(&blobs, &rows, &addrs); err != nil {
			t.Fatal(err)
		}
		if blobs == 0 || rows != blobs || addrs != blobs {
			t.Fatalf("after migration: %d blobs, %d blob_fetch rows, %d blob_addrs rows", blobs, rows, addrs)
		}
		res, err := s.Search(ctx, mustInbox(t, s, acct.ID), store.SearchQuery{Op: store.SearchFrom, Text: "A@EXAMPLE"})
		if err != nil || len(res.UIDs) != 1 {
			t.Fatalf("SEARCH FROM after migration: %v, %v; want one message", res.UIDs, err)
		}
	}
	mb, err := s.Mailbox(ctx, acct.ID, "INBOX")
	if err != nil {
		t.Fatal(err)
	}
	full, err := s.Fetch(ctx, mb.ID, nil, store.FetchOptions{Parsed: true})
	if err != nil {
		t.Fatal(err)
	}
	envs, err := s.FetchEnvelopes(ctx, mb.ID, nil)
	if err != nil {
		t.Fatal(err)
	}
	metas, headers, err := s.FetchHeaders(ctx, mb.ID, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(envs) != len(full) || len(metas) != len(full) || len(headers) != len(full) {
		t.Fatalf("got %d envelopes, %d headers, want %d", len(envs), len(metas), len(full))
	}
	for i, m := range full {
		if envs[i].UID != m.UID || envs[i].Size != m.Size || envs[i].Flags != m.Flags || !envs[i].InternalDate.Equal(m.InternalDate) {
			t.Errorf("uid %d: metadata %+v, want %+v", m.UID, envs[i], m)
		}
		if !reflect.DeepEqual(envs[i].Parsed.Envelope, m.Parsed.Envelope) {
			t.Errorf("uid %d: envelope %+v, want %+v", m.UID, envs[i].Parsed.Envelope, m.Parsed.Envelope)
		}
		raw, err := s.ReadBlob(ctx, m.BlobID)
		if err != nil {
			t.Fatal(err)
		}
		if want := raw[:m.Parsed.Body.BodyStart]; string(headers[i]) != string(want) || metas[i].UID != m.UID {
			t.Errorf("uid %d: header %q, want %q", m.UID, headers[i], want)
		}
	}
	// Every header is in blob_headers: written at delivery, or after a
	// migration by the first FetchHeaders, in the background.
	var want, have int
	for range 100 {
		if err := s.rdb.QueryRow("SELECT (SELECT count(*) FROM blob_fetch WHERE header_size > 0), (SELECT count(*) FROM blob_headers)").Scan(&want, &have); err != nil {
			t.Fatal(err)
		}
		if have == want {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if have != want || want == 0 {
		t.Fatalf("blob_headers holds %d headers, want %d", have, want)
	}
	// Again: the same answers.
	envs2, err := s.FetchEnvelopes(ctx, mb.ID, nil)
	if err != nil {
		t.Fatal(err)
	}
	metas2, headers2, err := s.FetchHeaders(ctx, mb.ID, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(envs2, envs) || !reflect.DeepEqual(metas2, metas) || !reflect.DeepEqual(headers2, headers) {
		t.Error("the second answers differ from the first ones")
	}
	one := store.UIDSet{{Start: full[1].UID, Stop: full[1].UID}}
	if m, h, err := s.FetchHeaders(ctx, mb.ID, one); err != nil || len(m) != 1 || len(h) != 1 || m[0].UID != full[1].UID {
		t.Errorf("FetchHeaders of one UID: %d metas, %v", len(m), err)
	}
	if _, _, err := s.FetchHeaders(ctx, 999999, nil); err == nil {
		t.Error("FetchHeaders of a missing mailbox succeeded")
	}
}

// TestJSONString checks the fast string decoder against encoding/json.
func TestJSONString(t *testing.T) {
	for _, s := range []string{"", "plain", "<id@x> & \"q\" \\ /", "tab\tnl\ncr\r\x01\x1f", "é😀\u2028", "bad \xff"} {
		enc, _ := json.Marshal(s)
		var want string
		json.Unmarshal(enc, &want)
		if got, ok := jsonString(enc); !ok || got != want {
			t.Errorf("%q (%s): got %q %v, want %q", s, enc, got, ok, want)
		}
	}
	for _, enc := range []string{`"\ud83d\ude00"`, `"\/\b\f"`, `"\u00e9"`} {
		var want string
		json.Unmarshal([]byte(enc), &want)
		if got, ok := jsonString([]byte(enc)); !ok || got != want {
			t.Errorf("%s: got %q %v, want %q", enc, got, ok, want)
		}
	}
	for _, bad := range []string{`"\x"`, `"\u12"`, `x`, `"`} {
		if _, ok := jsonString([]byte(bad)); ok {
			t.Errorf("%s accepted", bad)
		}
	}
}

// TestLiteDecodersTruncated feeds every prefix of a stored parse to the
// partial decoders: they may fail but must not panic or loop.
func TestLiteDecodersTruncated(t *testing.T) {
	p := message.Parse([]byte(liteSamples[0] + "--b\r\n"))
	pj, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	for n := range len(pj) {
		decodeEnvelope(pj[:n])
		decodeBodyStart(pj[:n])
		var env message.Envelope
		if v, ok := jsonMember(pj[:n], "env"); ok {
			fastEnvelope(v, &env)
		}
	}
}

func mustInbox(t *testing.T, s *Store, accountID int64) int64 {
	t.Helper()
	mb, err := s.Mailbox(context.Background(), accountID, "INBOX")
	if err != nil {
		t.Fatal(err)
	}
	return mb.ID
}

// corpusRaws reads the edge cases and the first hundred ham messages of the
// test corpus (testdata/corpus).
func corpusRaws(t *testing.T) [][]byte {
	t.Helper()
	dir, err := testcorpus.Dir()
	if err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "edge", "*"))
	more, _ := filepath.Glob(filepath.Join(dir, "ham", "ham-0*"))
	var raws [][]byte
	for _, f := range append(files, more...) {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		raws = append(raws, b)
	}
	return raws
}
