package av

import (
	"fmt"
	"strings"

	"pimail/internal/message"
)

// PolicyConfig is the built-in attachment policy. Zero values take the
// defaults.
type PolicyConfig struct {
	// BlockedExtensions are file name extensions refused anywhere in a
	// message or archive, lower case without the dot. Nil means
	// DefaultBlockedExtensions; an empty non-nil list blocks none.
	BlockedExtensions []string
	// BlockedTypes are declared content types refused. Nil means
	// DefaultBlockedTypes.
	BlockedTypes []string
	// AllowMacros lets macro-enabled Office documents through.
	AllowMacros bool
	// AllowScripts lets "#!" scripts through (they are blocked by their
	// magic bytes otherwise).
	AllowScripts bool
	// Archive limits (zip): entries per archive (default 10000), nesting
	// depth (default 3), and uncompressed bytes read in total (default
	// 100 MiB). Exceeding one is treated as a zip bomb and refused.
	MaxArchiveEntries int
	MaxArchiveDepth   int
	MaxArchiveBytes   int64
}

// DefaultBlockedExtensions run code when opened on common desktops, or are
// containers (disk images, shortcuts) used to carry such code.
var DefaultBlockedExtensions = []string{
	"exe", "com", "scr", "pif", "bat", "cmd", "cpl", "msi", "msp", "msc", "dll",
	"vbs", "vbe", "js", "jse", "wsf", "wsh", "wsc", "hta", "ps1", "psm1",
	"jar", "lnk", "reg", "inf", "scf", "url", "application", "gadget",
	"iso", "img", "vhd", "vhdx", "appx", "msix", "appref-ms",
	// Macro-enabled Office formats (the "m" in the OOXML extension).
	"docm", "dotm", "xlsm", "xltm", "xlam", "pptm", "potm", "ppam", "ppsm", "sldm",
}

// DefaultBlockedTypes are content types of programs and scripts.
var DefaultBlockedTypes = []string{
	"application/x-msdownload", "application/x-msdos-program", "application/x-dosexec",
	"application/x-executable", "application/x-ms-installer", "application/x-msi",
	"application/hta", "application/x-ms-shortcut", "application/javascript",
	"application/x-javascript", "text/javascript", "application/x-sh", "application/x-csh",
	"application/vnd.ms-word.document.macroenabled.12", "application/vnd.ms-excel.sheet.macroenabled.12",
	"application/vnd.ms-powerpoint.presentation.macroenabled.12", "application/java-archive",
}

// macroExtensions identify OOXML macro-enabled files (ECMA-376 Part 2
// content types ending in macroEnabled), which AllowMacros lets through.
var macroExtensions = map[string]bool{
	"docm": true, "dotm": true, "xlsm": true, "xltm": true, "xlam": true,
	"pptm": true, "potm": true, "ppam": true, "ppsm": true, "sldm": true,
}

// Policy applies a PolicyConfig to messages.
type Policy struct {
	cfg   PolicyConfig
	exts  map[string]bool
	types map[string]bool
}

// NewPolicy returns a policy with cfg's defaults filled in.
func NewPolicy(cfg PolicyConfig) *Policy {
	if cfg.BlockedExtensions == nil {
		cfg.BlockedExtensions = DefaultBlockedExtensions
	}
	if cfg.BlockedTypes == nil {
		cfg.BlockedTypes = DefaultBlockedTypes
	}
	if cfg.MaxArchiveEntries <= 0 {
		cfg.MaxArchiveEntries = 10000
	}
	if cfg.MaxArchiveDepth <= 0 {
		cfg.MaxArchiveDepth = 3
	}
	if cfg.MaxArchiveBytes <= 0 {
		cfg.MaxArchiveBytes = 100 << 20
	}
	p := &Policy{cfg: cfg, exts: map[string]bool{}, types: map[string]bool{}}
	for _, e := range cfg.BlockedExtensions {
		e = strings.ToLower(strings.TrimPrefix(e, "."))
		if cfg.AllowMacros && macroExtensions[e] {
			continue
		}
		p.exts[e] = true
	}
	for _, t := range cfg.BlockedTypes {
		t = strings.ToLower(t)
		if cfg.AllowMacros && strings.Contains(t, "macroenabled") {
			continue
		}
		p.types[t] = true
	}
	return p
}

// Finding is why the policy refuses a message.
type Finding struct {
	File   string // file name as given (inside an archive: "a.zip/b.exe"), or the part's type
	Reason string // short reason name, e.g. "blocked-extension"
}

func (f *Finding) String() string { return fmt.Sprintf("%s (%s)", f.Reason, f.File) }

// Check returns the first finding in the message, or nil when it passes.
// It looks at every leaf part: the declared type, the file name and, after
// undoing the transfer encoding, the content's magic bytes; zip archives
// are opened and checked the same way, within the archive limits.
func (p *Policy) Check(raw []byte, parsed *message.Parsed) *Finding {
	if parsed == nil || parsed.Body == nil {
		parsed = message.Parse(raw)
	}
	var found *Finding
	budget := &archiveBudget{bytes: p.cfg.MaxArchiveBytes}
	parsed.Body.Walk(func(part *message.Part) bool {
		if part.Type == "multipart" || part.Message != nil {
			return true
		}
		name := part.Filename()
		label := name
		if label == "" {
			label = part.MIMEType()
		}
		if f := p.checkName(name); f != nil {
			found = f
			return false
		}
		if p.types[part.MIMEType()] {
			found = &Finding{File: label, Reason: "blocked-type"}
			return false
		}
		// Body text that is not an attachment cannot run; skip the decode.
		if part.Type == "text" && name == "" {
			return true
		}
		if part.BodyStart < 0 || part.End > int64(len(raw)) || part.BodyStart > part.End {
			return true
		}
		found = p.checkContent(label, sniffDecode(raw[part.BodyStart:part.End], part.Encoding), 0, budget)
		return found == nil
	})
	return found
}

// sniffPrefix is how much of an encoded body sniffDecode decodes first:
// enough for the magic numbers sniff reads (8 bytes) after any encoding.
const sniffPrefix = 512

// sniffDecode returns what checkContent needs of a part's encoded body:
// the whole decoded body for a compound file or a zip archive, whose
// contents it inspects, and otherwise only the decoded start, whose magic
// number decides (an image or a PDF is not decoded whole just to learn
// that it is not an executable).
func sniffDecode(body []byte, encoding string) []byte {
	if len(body) <= sniffPrefix {
		return message.DecodeTransfer(body, encoding)
	}
	head := message.DecodeTransfer(body[:sniffPrefix], encoding)
	if len(head) < 16 { // mostly white space: decide on the whole
		return message.DecodeTransfer(body, encoding)
	}
	switch sniff(head) {
	case kindOLE, kindZip:
		return message.DecodeTransfer(body, encoding)
	}
	return head
}

// checkName refuses blocked extensions; a blocked extension behind another
// one ("invoice.pdf.exe") is reported as a double extension.
func (p *Policy) checkName(name string) *Finding {
	n := strings.ToLower(strings.TrimRight(name, " ."))
	if n == "" {
		return nil
	}
	dot := strings.LastIndexByte(n, '.')
	if dot < 0 {
		return nil
	}
	ext := n[dot+1:]
	if !p.exts[ext] {
		return nil
	}
	reason := "blocked-extension"
	if strings.Contains(strings.TrimRight(n[:dot], " "), ".") {
		reason = "double-extension"
	}
	if macroExtensions[ext] {
		reason = "macro-document"
	}
	return &Finding{File: name, Reason: reason}
}

// checkContent looks at decoded bytes.
func (p *Policy) checkContent(label string, data []byte, depth int, b *archiveBudget) *Finding {
	switch k := sniff(data); {
	case k.executable():
		return &Finding{File: label, Reason: "executable"}
	case k == kindScript && !p.cfg.AllowScripts:
		return &Finding{File: label, Reason: "script"}
	case k == kindOLE && !p.cfg.AllowMacros && oleHasMacros(data):
		return &Finding{File: label, Reason: "macro-document"}
	case k == kindZip:
		return p.checkZip(label, data, depth, b)
	}
	return nil
}
