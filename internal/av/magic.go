package av

import "bytes"

// Content kinds recognised by their first bytes.
type kind int

const (
	kindOther  kind = iota
	kindPE          // Windows executable: "MZ" (PE/COFF spec, MS-DOS stub)
	kindELF         // "\x7fELF" (System V ABI)
	kindMachO       // Mach-O magic numbers, 32/64-bit, either byte order, and fat binaries
	kindScript      // "#!" interpreter line
	kindOLE         // Compound File Binary (MS-CFB §2.2): legacy Office documents, MSI
	kindZip         // "PK\x03\x04" local file header (APPNOTE.TXT §4.3.7); OOXML, ODF, JAR too
)

var machoMagics = [][]byte{
	{0xfe, 0xed, 0xfa, 0xce}, {0xce, 0xfa, 0xed, 0xfe},
	{0xfe, 0xed, 0xfa, 0xcf}, {0xcf, 0xfa, 0xed, 0xfe},
	{0xca, 0xfe, 0xba, 0xbe},
}

func sniff(b []byte) kind {
	switch {
	case len(b) >= 2 && b[0] == 'M' && b[1] == 'Z':
		return kindPE
	case bytes.HasPrefix(b, []byte("\x7fELF")):
		return kindELF
	case bytes.HasPrefix(b, []byte("#!")):
		return kindScript
	case bytes.HasPrefix(b, []byte{0xd0, 0xcf, 0x11, 0xe0, 0xa1, 0xb1, 0x1a, 0xe1}):
		return kindOLE
	case bytes.HasPrefix(b, []byte("PK\x03\x04")):
		return kindZip
	}
	for _, m := range machoMagics {
		if bytes.HasPrefix(b, m) {
			// 0xcafebabe is also a Java class file; those have a small
			// major version where fat Mach-O has an arch count.
			if m[0] == 0xca && len(b) >= 8 && b[7] > 20 {
				return kindOther
			}
			return kindMachO
		}
	}
	return kindOther
}

func (k kind) executable() bool { return k == kindPE || k == kindELF || k == kindMachO }

// utf16 encodes ASCII s as UTF-16LE, as CFB directory entry names are
// stored (MS-CFB §2.6.1).
func utf16(s string) []byte {
	out := make([]byte, 0, 2*len(s))
	for i := 0; i < len(s); i++ {
		out = append(out, s[i], 0)
	}
	return out
}

var vbaMarkers = [][]byte{utf16("_VBA_PROJECT"), utf16("VBA"), utf16("Macros")}

// oleHasMacros reports whether a Compound File holds a VBA project: its
// directory then names a "VBA" storage and a "_VBA_PROJECT" stream
// ([MS-OVBA] §2.2). The directory sectors are searched for those names,
// which is cheap and does not need the whole CFB structure.
func oleHasMacros(b []byte) bool {
	for _, m := range vbaMarkers[:1] {
		if bytes.Contains(b, m) {
			return true
		}
	}
	return bytes.Contains(b, vbaMarkers[1]) && bytes.Contains(b, utf16("dir"))
}
