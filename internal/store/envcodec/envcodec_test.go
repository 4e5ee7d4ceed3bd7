package envcodec

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"pimail/internal/message"
	"pimail/internal/testcorpus"
)

// samples have groups, quotes, encoded words, invalid UTF-8, no header.
var samples = []string{
	"From: \"A \\\"q\\\" B\" <a@example.org>\r\nTo: undisclosed:;, g: x@y.z, w@v.u;\r\nSubject: =?utf-8?q?h=C3=A9llo?= <tag> & \"x\"\r\nDate: Tue, 5 Mar 2024 10:00:00 +0100\r\nMessage-ID: <m1@x>\r\nIn-Reply-To: <p@x>\r\n\r\nbody\r\n",
	"From: J\xc3\xb6rg <j@example.net>, =?iso-8859-1?q?J=FCrgen?= <juergen@example.de>\r\nSender: s@example.net\r\nReply-To: r@example.net\r\nCc: c@example.org\r\nBcc: b@example.org\r\n\r\n",
	"From: bad \xff utf8 <x@example.org>\nSubject: bad \xff utf8\n\nlf only\n",
	"From: Routed <@relay.example,@other.example:a@example.org>\r\nTo: plain@example.org\r\n\r\nsource route\r\n",
	"\r\nno header at all\r\n",
	"",
}

// TestCompactEnvelope checks that the compact envelope decodes to the
// envelope the parser produced, and that truncated input is an error, never a panic.
func TestCompactEnvelope(t *testing.T) {
	var raws [][]byte
	for _, s := range samples {
		raws = append(raws, []byte(s))
	}
	// The edge cases and the first hundred ham messages of the test corpus.
	dir, err := testcorpus.Dir()
	if err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "edge", "*"))
	more, _ := filepath.Glob(filepath.Join(dir, "ham", "ham-0*"))
	for _, f := range append(files, more...) {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		raws = append(raws, b)
	}
	withAddrs := 0
	for i, raw := range raws {
		env := message.Parse(raw).Envelope
		enc := Encode(&env)
		got, err := Decode(enc)
		if err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
		// What the stored parse says: JSON coerces strings to UTF-8.
		j, _ := json.Marshal(env)
		env = message.Envelope{}
		if err := json.Unmarshal(j, &env); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, env) {
			t.Fatalf("message %d: decoded\n%+v\nwant\n%+v", i, got, env)
		}
		if irt, mid, err := IDs(enc); err != nil || irt != env.InReplyTo || mid != env.MessageID {
			t.Fatalf("message %d: IDs %q %q %v, want %q %q", i, irt, mid, err, env.InReplyTo, env.MessageID)
		}
		if len(env.From) > 0 {
			withAddrs++
		}
		for n := range len(enc) {
			if _, err := Decode(enc[:n]); err == nil {
				t.Fatalf("message %d: a prefix of %d of %d bytes decoded", i, n, len(enc))
			}
		}
	}
	if withAddrs < 3 {
		t.Fatalf("only %d samples with a From address", withAddrs)
	}
}
