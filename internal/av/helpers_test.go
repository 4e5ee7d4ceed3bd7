package av

import (
	"archive/zip"
	"bytes"
	"encoding/base64"
	"fmt"
	"strings"
	"testing"
)

// eicar is the EICAR anti-virus test file (eicar.org), harmless by design.
const eicar = `X5O!P%@AP[4\PZX54(P^)7CC)7}$EICAR-STANDARD-ANTIVIRUS-TEST-FILE!$H+H*`

// mail builds a multipart message with one base64 attachment.
func mail(name, ctype string, content []byte) []byte {
	var b strings.Builder
	b.WriteString("From: a@example.org\r\nTo: b@example.com\r\nSubject: files\r\nMIME-Version: 1.0\r\n")
	b.WriteString("Content-Type: multipart/mixed; boundary=\"XX\"\r\n\r\n")
	b.WriteString("--XX\r\nContent-Type: text/plain\r\n\r\nsee attached\r\n")
	fmt.Fprintf(&b, "--XX\r\nContent-Type: %s; name=\"%s\"\r\nContent-Disposition: attachment; filename=\"%s\"\r\nContent-Transfer-Encoding: base64\r\n\r\n", ctype, name, name)
	enc := base64.StdEncoding.EncodeToString(content)
	for len(enc) > 76 {
		b.WriteString(enc[:76] + "\r\n")
		enc = enc[76:]
	}
	b.WriteString(enc + "\r\n--XX--\r\n")
	return []byte(b.String())
}

type zipEntry struct {
	name string
	data []byte
}

func makeZip(t *testing.T, entries ...zipEntry) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, e := range entries {
		w, err := zw.Create(e.name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write(e.data); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// peBytes starts like a Windows program.
var peBytes = append([]byte("MZ\x90\x00\x03\x00\x00\x00"), bytes.Repeat([]byte{0}, 120)...)

// oleWithVBA imitates a Compound File whose directory names a VBA project.
func oleWithVBA() []byte {
	b := []byte{0xd0, 0xcf, 0x11, 0xe0, 0xa1, 0xb1, 0x1a, 0xe1}
	b = append(b, bytes.Repeat([]byte{0}, 504)...)
	return append(b, utf16("_VBA_PROJECT")...)
}
