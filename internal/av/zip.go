package av

import (
	"archive/zip"
	"bytes"
	"io"
	"path"
	"strings"
)

// archiveBudget is the uncompressed bytes still allowed to be read from
// archives of one message.
type archiveBudget struct{ bytes int64 }

// sniffLen is how much of an archive entry is read to recognise it.
const sniffLen = 4096

// checkZip opens a zip archive (APPNOTE.TXT) and checks each entry's name
// and, unless it is encrypted, its first bytes. Nested zips and Compound
// Files are read whole, within the budget. An archive that exceeds the
// entry count, the nesting depth or the byte budget, or whose entries
// declare an absurd compression ratio, is refused as a zip bomb: no limit
// can be exceeded without the archive being unusual by construction.
func (p *Policy) checkZip(label string, data []byte, depth int, b *archiveBudget) *Finding {
	if depth >= p.cfg.MaxArchiveDepth {
		return &Finding{File: label, Reason: "archive-too-deep"}
	}
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return nil // not a readable zip; clamd, when configured, looks further
	}
	if len(zr.File) > p.cfg.MaxArchiveEntries {
		return &Finding{File: label, Reason: "archive-too-many-entries"}
	}
	for _, f := range zr.File {
		inner := label + "/" + f.Name
		if fd := p.checkName(f.Name); fd != nil {
			fd.File = inner
			return fd
		}
		// An OOXML package keeps its VBA project in vbaProject.bin
		// (ECMA-376 Part 1, [MS-OFFMACRO2]), whatever the file is called.
		if !p.cfg.AllowMacros && strings.EqualFold(path.Base(f.Name), "vbaProject.bin") {
			return &Finding{File: label, Reason: "macro-document"}
		}
		if f.FileInfo().IsDir() || f.Flags&0x1 != 0 { // bit 0: encrypted (APPNOTE §4.4.4)
			continue
		}
		if f.UncompressedSize64 > uint64(b.bytes) && f.UncompressedSize64 > 64<<20 ||
			f.CompressedSize64 > 0 && f.UncompressedSize64 > 1<<20 && f.UncompressedSize64/f.CompressedSize64 > 1000 {
			return &Finding{File: inner, Reason: "archive-bomb"}
		}
		content, over := readEntry(f, b)
		if over {
			return &Finding{File: inner, Reason: "archive-bomb"}
		}
		if fd := p.checkContent(inner, content, depth+1, b); fd != nil {
			return fd
		}
	}
	return nil
}

// readEntry reads the first sniffLen bytes of an entry, or all of it when
// it is an archive or a Compound File that needs reading whole. over is
// true when the budget ran out.
func readEntry(f *zip.File, b *archiveBudget) (data []byte, over bool) {
	rc, err := f.Open()
	if err != nil {
		return nil, false
	}
	defer rc.Close()
	head := make([]byte, sniffLen)
	n, _ := io.ReadFull(rc, head)
	head = head[:n]
	b.bytes -= int64(n)
	if b.bytes < 0 {
		return nil, true
	}
	if k := sniff(head); k != kindZip && k != kindOLE {
		return head, false
	}
	rest, err := io.ReadAll(io.LimitReader(rc, b.bytes+1))
	if err != nil {
		return head, false // a damaged entry: judge what could be read
	}
	b.bytes -= int64(len(rest))
	if b.bytes < 0 {
		return nil, true
	}
	return append(head, rest...), false
}
