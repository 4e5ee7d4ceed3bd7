package message

import (
	"fmt"
	"os"
	"testing"
	"time"
)

// FuzzParse checks that Parse never panics and that its offsets are always
// consistent, and that decoding any text part does not fail.
func FuzzParse(f *testing.F) {
	f.Add([]byte(nestedMsg))
	f.Add([]byte(crlf(nestedMsg)))
	f.Add([]byte("Content-Type: multipart/digest; boundary=d\n\n--d\n\nSubject: x\n\ny\n--d--\n"))
	f.Add([]byte("Content-Type: text/plain; name*0*=utf-8''%E2%82; name*1*=%AC\nContent-Transfer-Encoding: quoted-printable\n\n=E2=82=AC=\n"))
	f.Add([]byte("To: group: a@b, \"q\" <c@d>;\nSubject: =?utf-8?q?=C3=A4?=\n"))
	for i, name := range corpusFiles(f, "edge/*.eml") {
		if i%8 != 0 {
			continue
		}
		if b, err := os.ReadFile(name); err == nil && len(b) < 16<<10 {
			f.Add(b)
		}
	}
	recoverPanics = false
	f.Fuzz(func(t *testing.T, raw []byte) {
		// Parsing is linear; a few seconds means a loop that does not end.
		watchdog := time.AfterFunc(5*time.Second, func() { panic(fmt.Sprintf("Parse hangs on %q", raw)) })
		defer watchdog.Stop()
		p := Parse(raw)
		if err := checkInvariants(raw, p); err != nil {
			t.Fatal(err)
		}
		p.Body.Walk(func(pt *Part) bool {
			if pt.Type == "text" {
				if _, err := DecodeText(raw, pt); err != nil {
					t.Fatalf("DecodeText: %v", err)
				}
			}
			return true
		})
	})
}
