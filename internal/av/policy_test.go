package av

import (
	"bytes"
	"testing"

	"pimail/internal/message"
)

func check(p *Policy, raw []byte) *Finding { return p.Check(raw, message.Parse(raw)) }

func TestPolicyRefuses(t *testing.T) {
	p := NewPolicy(PolicyConfig{})
	docx := makeZip(t, zipEntry{"[Content_Types].xml", []byte("<Types/>")}, zipEntry{"word/vbaProject.bin", oleWithVBA()})
	inner := makeZip(t, zipEntry{"setup.exe", []byte("x")})
	tests := []struct {
		name, file, ctype string
		data              []byte
		reason            string
	}{
		{"exe by name", "setup.exe", "application/octet-stream", []byte("hello"), "blocked-extension"},
		{"name case and trailing dot", "SETUP.EXE.", "application/octet-stream", []byte("hello"), "blocked-extension"},
		{"double extension", "invoice.pdf.scr", "application/pdf", []byte("%PDF"), "double-extension"},
		{"exe by magic under a harmless name", "photo.jpg", "image/jpeg", peBytes, "executable"},
		{"elf by magic", "data.bin", "application/octet-stream", []byte("\x7fELF\x02\x01\x01"), "executable"},
		{"script by magic", "notes.txt", "text/plain", []byte("#!/bin/sh\nrm -rf ~\n"), "script"},
		{"declared type", "file", "application/x-msdownload", []byte("abc"), "blocked-type"},
		{"macro docm by name", "report.docm", "application/octet-stream", []byte("abc"), "macro-document"},
		{"macro in legacy doc", "report.doc", "application/msword", oleWithVBA(), "macro-document"},
		{"macro in renamed docx", "report.docx", "application/octet-stream", docx, "macro-document"},
		{"exe in zip", "a.zip", "application/zip", makeZip(t, zipEntry{"readme.txt", []byte("hi")}, zipEntry{"tool.exe", []byte("x")}), "blocked-extension"},
		{"exe magic in zip", "a.zip", "application/zip", makeZip(t, zipEntry{"pic.jpg", peBytes}), "executable"},
		{"exe in nested zip", "a.zip", "application/zip", makeZip(t, zipEntry{"b.zip", inner}), "blocked-extension"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := check(p, mail(tc.file, tc.ctype, tc.data))
			if f == nil || f.Reason != tc.reason {
				t.Fatalf("finding %v, want reason %s", f, tc.reason)
			}
		})
	}
}

func TestPolicyPasses(t *testing.T) {
	p := NewPolicy(PolicyConfig{})
	docx := makeZip(t, zipEntry{"[Content_Types].xml", []byte("<Types/>")}, zipEntry{"word/document.xml", []byte("<w:document/>")})
	for _, tc := range []struct {
		file, ctype string
		data        []byte
	}{
		{"report.pdf", "application/pdf", []byte("%PDF-1.4\n")},
		{"report.docx", "application/vnd.openxmlformats-officedocument.wordprocessingml.document", docx},
		{"photos.zip", "application/zip", makeZip(t, zipEntry{"a.jpg", []byte("\xff\xd8\xff")}, zipEntry{"notes.txt", []byte("hi")})},
		{"MZ-notes.txt", "text/plain", []byte("MZ is where this text starts, but it is text")},
	} {
		raw := mail(tc.file, tc.ctype, tc.data)
		if tc.file == "MZ-notes.txt" {
			// A text body (no file name) is never sniffed.
			raw = []byte("From: a@example.org\r\nSubject: x\r\n\r\nMZ is how it starts\r\n")
		}
		if f := check(p, raw); f != nil {
			t.Errorf("%s refused: %v", tc.file, f)
		}
	}
}

func TestPolicyConfigurable(t *testing.T) {
	raw := mail("macro.xlsm", "application/octet-stream", []byte("x"))
	if f := check(NewPolicy(PolicyConfig{}), raw); f == nil {
		t.Fatal("xlsm passed with defaults")
	}
	if f := check(NewPolicy(PolicyConfig{AllowMacros: true}), raw); f != nil {
		t.Fatalf("xlsm refused with AllowMacros: %v", f)
	}
	if f := check(NewPolicy(PolicyConfig{BlockedExtensions: []string{"pdf"}}), mail("a.pdf", "application/pdf", []byte("%PDF"))); f == nil {
		t.Fatal("pdf passed although configured as blocked")
	}
}

func TestPolicyArchiveLimits(t *testing.T) {
	// Depth: zips nested deeper than the limit.
	z := makeZip(t, zipEntry{"a.txt", []byte("a")})
	for i := 0; i < 4; i++ {
		z = makeZip(t, zipEntry{"n.zip", z})
	}
	if f := check(NewPolicy(PolicyConfig{}), mail("deep.zip", "application/zip", z)); f == nil || f.Reason != "archive-too-deep" {
		t.Fatalf("deep nesting: %v", f)
	}
	// Budget: every archive read (whole nested zips, 4 KiB of other
	// entries) counts against the uncompressed byte limit.
	big := makeZip(t, zipEntry{"zeros.dat", bytes.Repeat([]byte{0}, 300<<10)})
	var entries []zipEntry
	for i := 0; i < 40; i++ {
		entries = append(entries, zipEntry{"x" + string(rune('a'+i%26)) + string(rune('a'+i/26)) + ".zip", big})
	}
	bomb := mail("bomb.zip", "application/zip", makeZip(t, entries...))
	if f := check(NewPolicy(PolicyConfig{MaxArchiveBytes: 64 << 10}), bomb); f == nil || f.Reason != "archive-bomb" {
		t.Fatalf("budget: %v", f)
	}
	if f := check(NewPolicy(PolicyConfig{}), bomb); f != nil {
		t.Fatalf("same archive within the default budget: %v", f)
	}
	// Ratio: a 4 MiB entry of zeros compresses more than 1000:1.
	ratio := makeZip(t, zipEntry{"zeros.dat", bytes.Repeat([]byte{0}, 4<<20)})
	if f := check(NewPolicy(PolicyConfig{}), mail("r.zip", "application/zip", ratio)); f == nil || f.Reason != "archive-bomb" {
		t.Fatalf("ratio: %v", f)
	}
	// Entries.
	var many []zipEntry
	for i := 0; i < 30; i++ {
		many = append(many, zipEntry{"f" + string(rune('a'+i%26)) + string(rune('a'+i/26)) + ".txt", []byte("x")})
	}
	if f := check(NewPolicy(PolicyConfig{MaxArchiveEntries: 20}), mail("m.zip", "application/zip", makeZip(t, many...))); f == nil || f.Reason != "archive-too-many-entries" {
		t.Fatalf("entries: %v", f)
	}
}

// TestPolicyLargeAttachments: attachments longer than what sniffDecode
// decodes first are judged as the small ones are: by the magic number of
// their start, and archives and compound files by their whole content.
func TestPolicyLargeAttachments(t *testing.T) {
	p := NewPolicy(PolicyConfig{})
	pad := bytes.Repeat([]byte{0x5a, 0x17, 0xc3, 0x99, 0x01, 0xfe, 0x42, 0x88}, 1024) // 8 KiB, incompressible enough
	big := func(head []byte) []byte { return append(append([]byte(nil), head...), pad...) }
	for _, tc := range []struct {
		name, file, ctype string
		data              []byte
		reason            string // "" = passes
	}{
		{"exe by magic under a harmless name", "photo.jpg", "image/jpeg", big(peBytes), "executable"},
		{"exe at the end of a zip", "a.zip", "application/zip", makeZip(t, zipEntry{"pic.bin", pad}, zipEntry{"tool.exe", []byte("x")}), "blocked-extension"},
		{"exe magic in a zip", "a.zip", "application/zip", makeZip(t, zipEntry{"pic.bin", pad}, zipEntry{"pic.jpg", big(peBytes)}), "executable"},
		{"macro in a legacy doc", "report.doc", "application/msword", big(oleWithVBA()), "macro-document"},
		{"a photo", "photo.jpg", "image/jpeg", big([]byte("\xff\xd8\xff\xe0\x00\x10JFIF\x00")), ""},
		{"a zip of photos", "photos.zip", "application/zip", makeZip(t, zipEntry{"a.jpg", big([]byte("\xff\xd8\xff"))}), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := check(p, mail(tc.file, tc.ctype, tc.data))
			switch {
			case tc.reason == "" && f != nil:
				t.Fatalf("refused: %v", f)
			case tc.reason != "" && (f == nil || f.Reason != tc.reason):
				t.Fatalf("finding %v, want reason %s", f, tc.reason)
			}
		})
	}
}
