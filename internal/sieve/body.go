package sieve

import (
	"html"
	"strings"

	"pimail/internal/message"
)

// The body test (RFC 5173).

// maxBodyText bounds the body text one body test looks at; mail larger
// than this is tested on its first part only.
const maxBodyText = 1 << 20

type bodyTransform uint8

const (
	bodyText    bodyTransform = iota // :text, the default
	bodyRaw                          // :raw
	bodyContent                      // :content <types>
)

type bodyTest struct {
	pos       Pos
	transform bodyTransform
	types     strList // :content
	m         matcher
}

func (t *bodyTest) eval(r *run) (bool, error) {
	if err := r.step(t.pos); err != nil {
		return false, err
	}
	var vals []string
	body := r.in.Parsed.Body
	switch t.transform {
	case bodyRaw:
		// RFC 5173 §5.1: the body as it is, no decoding.
		start := len(r.in.Raw)
		if body != nil && int(body.BodyStart) <= start {
			start = int(body.BodyStart)
		}
		raw := r.in.Raw[start:]
		if len(raw) > maxBodyText {
			raw = raw[:maxBodyText]
		}
		vals = []string{string(raw)}
	case bodyContent:
		vals = r.bodyParts(r.expandList(t.types), false)
	default:
		vals = r.bodyParts(nil, true)
	}
	return r.match(&t.m, vals), nil
}

// bodyParts returns the decoded leaf parts whose type matches one of
// types (RFC 5173 §5.2: "" matches every type, "text" every text/*
// subtype, "text/html" only that). With text set, it returns the parts
// that are text (RFC 5173 §5.3): text/* decoded, HTML with its markup
// removed, attachments left out.
func (r *run) bodyParts(types []string, text bool) []string {
	var vals []string
	total := 0
	if r.in.Parsed.Body == nil {
		return nil
	}
	r.in.Parsed.Body.Walk(func(p *message.Part) bool {
		if total >= maxBodyText || len(p.Parts) > 0 || p.Message != nil {
			return total < maxBodyText
		}
		if text {
			if p.Type != "text" || p.IsAttachment() {
				return true
			}
		} else if !typeMatches(types, p.Type, p.Subtype) {
			return true
		}
		s, err := message.DecodeText(r.in.Raw, p)
		if err != nil { // not text: the transfer encoding undone only
			end := min(p.End, int64(len(r.in.Raw)))
			s = string(message.DecodeTransfer(r.in.Raw[p.BodyStart:end], p.Encoding))
		}
		if text && p.Subtype == "html" {
			s = htmlText(s)
		}
		if len(s) > maxBodyText-total {
			s = s[:maxBodyText-total]
		}
		total += len(s)
		vals = append(vals, s)
		return true
	})
	return vals
}

func typeMatches(types []string, typ, sub string) bool {
	for _, t := range types {
		t = lowerASCII(strings.TrimSpace(t))
		if t == "" {
			return true
		}
		if m, s, ok := strings.Cut(t, "/"); ok {
			if m == typ && s == sub {
				return true
			}
		} else if t == typ {
			return true
		}
	}
	return false
}

// htmlText is the text of an HTML body: tags, scripts and styles removed,
// entities decoded, runs of white space made one space.
func htmlText(s string) string {
	var b strings.Builder
	lower := strings.ToLower(s)
	for i := 0; i < len(s); {
		if s[i] != '<' {
			j := strings.IndexByte(s[i:], '<')
			if j < 0 {
				j = len(s) - i
			}
			b.WriteString(s[i : i+j])
			i += j
			continue
		}
		for _, skip := range []string{"script", "style"} {
			if strings.HasPrefix(lower[i+1:], skip) {
				if end := strings.Index(lower[i:], "</"+skip); end >= 0 {
					i += end
				}
			}
		}
		end := strings.IndexByte(s[i:], '>')
		if end < 0 {
			break
		}
		i += end + 1
		b.WriteByte(' ')
	}
	return strings.Join(strings.Fields(html.UnescapeString(b.String())), " ")
}
