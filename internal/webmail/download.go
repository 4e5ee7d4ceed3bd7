package webmail

import (
	"fmt"
	"mime"
	"net/http"
	"path"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"pimail/internal/message"
)

// passiveTypes are served with their own Content-Type; everything else
// (HTML, SVG, XML, scripts, PDF, unknown) goes out as
// application/octet-stream so no browser renders it on our origin.
var passiveTypes = map[string]bool{
	"image/png": true, "image/jpeg": true, "image/gif": true, "image/webp": true,
	"text/plain": true, "text/csv": true, "application/zip": true,
	"audio/mpeg": true, "audio/ogg": true, "video/mp4": true,
}

// safeFilename makes a file name from a mail part harmless: no control or
// format characters (CR, LF, NUL, bidi overrides), no path, no leading dots,
// bounded length; a name is made up when none is left.
func safeFilename(name string, p *message.Part) string {
	name = strings.Map(func(r rune) rune {
		switch {
		case r == '/' || r == '\\':
			return '_'
		case unicode.IsControl(r) || unicode.Is(unicode.Cf, r) || r == utf8.RuneError:
			return -1
		}
		return r
	}, name)
	name = path.Base("/" + name)
	name = strings.TrimLeft(strings.TrimSpace(name), ".")
	if len(name) > 200 {
		ext := path.Ext(name)
		if len(ext) > 20 {
			ext = ""
		}
		cut := 200 - len(ext)
		for cut > 0 && !utf8.RuneStart(name[cut]) {
			cut--
		}
		name = name[:cut] + ext
	}
	if name == "" || name == "/" {
		name = "attachment"
		if p != nil {
			if exts, _ := mime.ExtensionsByType(p.MIMEType()); len(exts) > 0 {
				name += exts[0]
			}
		}
	}
	return name
}

// contentDisposition returns an attachment disposition with an ASCII
// fallback filename and the exact UTF-8 name in filename* (RFC 6266 §4.3,
// RFC 8187).
func contentDisposition(name string) string {
	ascii := strings.Map(func(r rune) rune {
		if r < 0x20 || r > 0x7e || r == '"' || r == '\\' || r == '%' || r == ';' {
			return '_'
		}
		return r
	}, name)
	return fmt.Sprintf(`attachment; filename="%s"; filename*=UTF-8''%s`, ascii, extValue(name))
}

// extValue percent-encodes s for an RFC 8187 ext-value: every octet but
// attr-char is escaped.
func extValue(s string) string {
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || strings.IndexByte("!#$&+-.^_`|~", c) >= 0 {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hex[c>>4])
		b.WriteByte(hex[c&15])
	}
	return b.String()
}

func (s *Server) downloadPart(w http.ResponseWriter, r *http.Request, sess *session) {
	l, ok := s.loadOr404(w, r, sess)
	if !ok {
		return
	}
	n, err := strconv.Atoi(r.PathValue("part"))
	p := partAt(l.meta.Parsed.Body, n)
	if err != nil || p == nil || p.Type == "multipart" || p.BodyStart < 0 || p.End > int64(len(l.raw)) || p.BodyStart > p.End {
		s.httpError(w, r, http.StatusNotFound, "No such attachment.", nil)
		return
	}
	data := message.DecodeTransfer(l.raw[p.BodyStart:p.End], p.Encoding)
	ctype := "application/octet-stream"
	if passiveTypes[p.MIMEType()] {
		ctype = p.MIMEType()
		if p.Type == "text" {
			if cs := p.Param("charset"); cs != "" && isToken(cs) {
				ctype += "; charset=" + cs
			}
		}
	}
	h := w.Header()
	h.Set("Content-Type", ctype)
	h.Set("Content-Disposition", contentDisposition(safeFilename(p.Filename(), p)))
	h.Set("Content-Security-Policy", "default-src 'none'; sandbox")
	h.Set("Content-Length", strconv.Itoa(len(data)))
	_, _ = w.Write(data)
}

func (s *Server) downloadRaw(w http.ResponseWriter, r *http.Request, sess *session) {
	l, ok := s.loadOr404(w, r, sess)
	if !ok {
		return
	}
	name := safeFilename(l.meta.Parsed.Subject, nil)
	if len(name) > 80 {
		name = name[:80]
	}
	h := w.Header()
	h.Set("Content-Type", "message/rfc822")
	h.Set("Content-Disposition", contentDisposition(strings.ToValidUTF8(name, "_")+".eml"))
	h.Set("Content-Security-Policy", "default-src 'none'; sandbox")
	h.Set("Content-Length", strconv.Itoa(len(l.raw)))
	_, _ = w.Write(l.raw)
}

func isToken(s string) bool {
	if len(s) > 40 {
		return false
	}
	for _, c := range s {
		if !(c == '-' || c == '_' || c == '.' || c == ':' || (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) {
			return false
		}
	}
	return true
}
