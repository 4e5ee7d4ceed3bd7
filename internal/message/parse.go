package message

import (
	"bytes"
	"strings"
)

// Limits that keep hostile input from exhausting the stack or memory.
const (
	// MaxDepth is the deepest nesting of multipart and message/rfc822
	// parts that is parsed; deeper containers become opaque
	// application/octet-stream leaves.
	MaxDepth = 50
	// MaxParts is the most parts described per message; later parts are
	// left out of the tree (their bytes stay in the message).
	MaxParts = 10000
)

// recoverPanics is the last line of defence for Parse; tests switch it off
// so that the fuzzer sees real panics.
var recoverPanics = true

// Parse describes a raw message. It never fails and never returns nil:
// broken structure is described as well as it can be, and in the worst case
// the message is one text/plain part. raw is neither modified nor retained;
// no string in the result shares its memory.
//
// Lines may end in CRLF or a bare LF. How broken input is read:
//   - A header ends at the first empty line, or at the end of the entity
//     when there is none (the body is then empty). Lines inside it that are
//     not fields (an mbox "From " line, junk) are skipped. A MIME part whose
//     first line is neither a field nor empty has no header.
//   - The first occurrence of a repeated field counts.
//   - An invalid Content-Type means text/plain; charset=us-ascii (RFC 2045
//     §5.2), as does a multipart without a boundary. A multipart whose
//     boundary never occurs gets one header-less text part covering its
//     body; a missing close delimiter ends the last part at the parent's
//     end.
//   - Containers nested deeper than MaxDepth, or met after MaxParts parts,
//     become application/octet-stream leaves.
func Parse(raw []byte) (res *Parsed) {
	res = &Parsed{}
	if recoverPanics {
		defer func() {
			if r := recover(); r != nil {
				*res = Parsed{Body: fallbackPart(raw)}
			}
		}()
	}
	p := parser{raw: raw}
	var env envFields
	res.Body = p.part(0, len(raw), 0, false, &env)
	res.Envelope = env.envelope()
	fb := headerFallbackCharset(res.Body)
	res.Subject = decodeHeader(res.Envelope.Subject, fb)
	res.From = formatAddresses(res.Envelope.From, fb)
	res.To = formatAddresses(res.Envelope.To, fb)
	res.Cc = formatAddresses(res.Envelope.Cc, fb)
	res.Bcc = formatAddresses(res.Envelope.Bcc, fb)
	if env.references != nil {
		res.References = parseMsgIDs(unfold(env.references))
	}
	if t, ok := ParseDate(res.Envelope.Date); ok {
		res.Date = t
	}
	return res
}

// headerFallbackCharset returns the charset of the first text part, the
// best guess for raw 8-bit header text that is not UTF-8 (mailers that
// write such headers usually use the body's charset).
func headerFallbackCharset(body *Part) string {
	cs := ""
	body.Walk(func(p *Part) bool {
		if p.Type == "text" {
			cs = p.Param("charset")
			return false
		}
		return p.Type == "multipart"
	})
	switch strings.ToLower(cs) {
	case "us-ascii", "utf-8", "utf8":
		return ""
	}
	return cs
}

// fallbackPart describes raw as a single text/plain part with an empty
// header.
func fallbackPart(raw []byte) *Part {
	n := int64(len(raw))
	return &Part{
		Type: "text", Subtype: "plain",
		Params:   []Param{{Name: "charset", Value: "us-ascii"}},
		Encoding: "7bit",
		Size:     n, Lines: countLines(raw),
		End: n,
	}
}

type parser struct {
	raw   []byte
	parts int // parts created so far, bounded by MaxParts
}

// partFields are the MIME header fields of one part (RFC 2045 §3, RFC
// 2183, RFC 3066, RFC 2557), first occurrence of each, still folded.
type partFields struct {
	contentType, encoding, id, description, md5 []byte
	disposition, language, location             []byte
	hasType                                     bool
}

// envFields are the message header fields an envelope needs (RFC 3501
// §7.4.2) plus References, first occurrence of each, still folded.
type envFields struct {
	date, subject, from, sender, replyTo, to, cc, bcc []byte
	inReplyTo, messageID, references                  []byte
}

func (e *envFields) envelope() Envelope {
	return Envelope{
		Date:      unfold(e.date),
		Subject:   unfold(e.subject),
		From:      addressField(e.from),
		Sender:    addressField(e.sender),
		ReplyTo:   addressField(e.replyTo),
		To:        addressField(e.to),
		Cc:        addressField(e.cc),
		Bcc:       addressField(e.bcc),
		InReplyTo: unfold(e.inReplyTo),
		MessageID: unfold(e.messageID),
	}
}

func addressField(v []byte) []Address {
	if len(v) == 0 {
		return nil
	}
	return ParseAddressList(unfold(v))
}

// setFirst stores v in *dst unless the field was seen before. A field that
// is present but empty is remembered as an empty non-nil slice.
func setFirst(dst *[]byte, v []byte) {
	if *dst == nil {
		if v == nil {
			v = []byte{}
		}
		*dst = v
	}
}

// collect files a header field under the part or envelope field it feeds.
func collect(name, value []byte, pf *partFields, env *envFields) {
	if len(name) < 2 || len(name) > 25 {
		return
	}
	switch name[0] | 0x20 {
	case 'c':
		switch {
		case bytes.EqualFold(name, []byte("content-type")):
			setFirst(&pf.contentType, value)
			pf.hasType = true
		case bytes.EqualFold(name, []byte("content-transfer-encoding")):
			setFirst(&pf.encoding, value)
		case bytes.EqualFold(name, []byte("content-id")):
			setFirst(&pf.id, value)
		case bytes.EqualFold(name, []byte("content-description")):
			setFirst(&pf.description, value)
		case bytes.EqualFold(name, []byte("content-md5")):
			setFirst(&pf.md5, value)
		case bytes.EqualFold(name, []byte("content-disposition")):
			setFirst(&pf.disposition, value)
		case bytes.EqualFold(name, []byte("content-language")):
			setFirst(&pf.language, value)
		case bytes.EqualFold(name, []byte("content-location")):
			setFirst(&pf.location, value)
		case env != nil && bytes.EqualFold(name, []byte("cc")):
			setFirst(&env.cc, value)
		}
		return
	}
	if env == nil {
		return
	}
	switch name[0] | 0x20 {
	case 'd':
		if bytes.EqualFold(name, []byte("date")) {
			setFirst(&env.date, value)
		}
	case 's':
		if bytes.EqualFold(name, []byte("subject")) {
			setFirst(&env.subject, value)
		} else if bytes.EqualFold(name, []byte("sender")) {
			setFirst(&env.sender, value)
		}
	case 'f':
		if bytes.EqualFold(name, []byte("from")) {
			setFirst(&env.from, value)
		}
	case 'r':
		if bytes.EqualFold(name, []byte("reply-to")) {
			setFirst(&env.replyTo, value)
		} else if bytes.EqualFold(name, []byte("references")) {
			setFirst(&env.references, value)
		}
	case 't':
		if bytes.EqualFold(name, []byte("to")) {
			setFirst(&env.to, value)
		}
	case 'b':
		if bytes.EqualFold(name, []byte("bcc")) {
			setFirst(&env.bcc, value)
		}
	case 'i':
		if bytes.EqualFold(name, []byte("in-reply-to")) {
			setFirst(&env.inReplyTo, value)
		}
	case 'm':
		if bytes.EqualFold(name, []byte("message-id")) {
			setFirst(&env.messageID, value)
		}
	}
}

// part describes raw[start:end] as one MIME entity. digest selects the
// multipart/digest default type (RFC 2046 §5.1.5). env, when not nil,
// receives the message header fields (the top level and message/rfc822
// bodies).
func (p *parser) part(start, end, depth int, digest bool, env *envFields) *Part {
	p.parts++
	pt := &Part{HeaderStart: int64(start)}
	var pf partFields
	h := headerReader{buf: p.raw, pos: start, end: end, noHeaderIfGarbage: env == nil}
	for {
		f, ok := h.next()
		if !ok {
			break
		}
		collect(f.name, f.value, &pf, env)
	}
	bodyStart := h.bodyStart
	pt.BodyStart, pt.End = int64(bodyStart), int64(end)
	pt.Size = int64(end - bodyStart)
	p.describe(pt, &pf, digest)

	switch {
	case pt.Type == "multipart":
		if depth+1 >= MaxDepth || p.parts >= MaxParts {
			opaque(pt)
			break
		}
		if b := paramValue(pt.Params, "boundary"); b != "" {
			p.multipart(pt, b, depth)
		} else {
			// RFC 2046 §5.1.1 requires a boundary; without one the body
			// cannot be split, so it is described as text (RFC 2045 §5.2).
			pt.Type, pt.Subtype = "text", "plain"
			pt.Params = []Param{{Name: "charset", Value: "us-ascii"}}
		}
	case isMessageType(pt.Type, pt.Subtype):
		if depth+1 >= MaxDepth || p.parts >= MaxParts {
			opaque(pt)
			break
		}
		// RFC 2046 §5.2.1: the body is a complete message.
		var inner envFields
		pt.Message = p.part(bodyStart, end, depth+1, false, &inner)
		e := inner.envelope()
		pt.Envelope = &e
	}
	if pt.Type == "text" || isMessageType(pt.Type, pt.Subtype) {
		pt.Lines = countLines(p.raw[bodyStart:end])
	}
	return pt
}

func isMessageType(typ, sub string) bool {
	return typ == "message" && (sub == "rfc822" || sub == "global")
}

// opaque turns a container that is too deep or over the part budget into
// a leaf that protocols can still describe and fetch.
func opaque(pt *Part) {
	pt.Type, pt.Subtype = "application", "octet-stream"
	pt.Params = nil
}

// describe fills the MIME fields of pt from its header.
func (p *parser) describe(pt *Part, pf *partFields, digest bool) {
	ok := false
	if pf.hasType {
		pt.Type, pt.Subtype, pt.Params, ok = parseMediaType(unfold(pf.contentType))
	}
	if !ok {
		// RFC 2045 §5.2 default, RFC 2046 §5.1.5 in a digest.
		if digest && !pf.hasType {
			pt.Type, pt.Subtype, pt.Params = "message", "rfc822", nil
		} else {
			pt.Type, pt.Subtype = "text", "plain"
			pt.Params = []Param{{Name: "charset", Value: "us-ascii"}}
		}
	}
	pt.Encoding = unfold(pf.encoding)
	if pt.Encoding == "" {
		pt.Encoding = "7bit" // RFC 2045 §6.1
	}
	pt.ID = unfold(pf.id)
	pt.Description = unfold(pf.description)
	pt.MD5 = unfold(pf.md5)
	pt.Location = unfold(pf.location)
	if pf.disposition != nil {
		pt.Disposition, pt.DispParams = parseDisposition(unfold(pf.disposition))
	}
	if pf.language != nil {
		for _, l := range strings.Split(unfold(pf.language), ",") {
			if l = strings.TrimSpace(l); l != "" && len(pt.Language) < maxParams {
				pt.Language = append(pt.Language, l)
			}
		}
	}
}

// multipart splits the body of pt at its boundary (RFC 2046 §5.1.1). A
// delimiter line is "--" boundary, optionally "--" (the close delimiter),
// then only white space. The line break before a delimiter belongs to the
// delimiter, not to the preceding part.
func (p *parser) multipart(pt *Part, boundary string, depth int) {
	raw := p.raw
	start, end := int(pt.BodyStart), int(pt.End)
	delim := make([]byte, 0, len(boundary)+3)
	delim = append(delim, '\n', '-', '-')
	delim = append(delim, boundary...)
	digest := pt.Subtype == "digest"

	partStart := -1 // start of the current part, -1 in the preamble
	pos := start
	for pos < end {
		// Find the next line that starts with "--boundary".
		var lineStart int
		if (pos == start || raw[pos-1] == '\n') && bytes.HasPrefix(raw[pos:end], delim[1:]) {
			lineStart = pos
		} else {
			i := bytes.Index(raw[pos:end], delim)
			if i < 0 {
				break
			}
			lineStart = pos + i + 1
		}
		after := lineStart + len(delim) - 1
		closing := false
		if after+1 < end && raw[after] == '-' && raw[after+1] == '-' {
			closing = true
			after += 2
		}
		lineEnd, next := lineAt(raw, after, end)
		if len(trimWSP(raw[after:lineEnd])) != 0 {
			// "--boundaryX": a longer boundary, not ours.
			pos = lineEnd
			if lineEnd >= end {
				break
			}
			continue
		}
		if partStart >= 0 {
			p.addChild(pt, partStart, bodyEndBefore(raw, partStart, lineStart), depth, digest)
		}
		if closing || p.parts >= MaxParts {
			partStart = -1
			break
		}
		partStart = next
		pos = next
		if next >= end {
			// A delimiter on the last line: an empty part follows.
			break
		}
	}
	if partStart >= 0 && p.parts < MaxParts {
		// No close delimiter: the last part runs to the end.
		p.addChild(pt, partStart, end, depth, digest)
	}
	if len(pt.Parts) == 0 {
		// No delimiter at all: IMAP needs at least one child, so the body
		// becomes one header-less text part.
		c := fallbackPart(raw[start:end])
		c.HeaderStart, c.BodyStart, c.End = int64(start), int64(start), int64(end)
		pt.Parts = append(pt.Parts, c)
	}
}

// bodyEndBefore returns the end of a part that is followed by a delimiter
// line at lineStart: the CRLF (or LF) before the delimiter is not part of
// the body (RFC 2046 §5.1.1).
func bodyEndBefore(raw []byte, partStart, lineStart int) int {
	e := lineStart
	if e > partStart && raw[e-1] == '\n' {
		e--
		if e > partStart && raw[e-1] == '\r' {
			e--
		}
	}
	return e
}

func (p *parser) addChild(pt *Part, start, end, depth int, digest bool) {
	if p.parts >= MaxParts {
		return
	}
	pt.Parts = append(pt.Parts, p.part(start, end, depth+1, digest, nil))
}

// countLines counts lines as IMAP reports them: line breaks, plus one for
// a last line without a break.
func countLines(b []byte) int64 {
	if len(b) == 0 {
		return 0
	}
	n := int64(bytes.Count(b, []byte{'\n'}))
	if b[len(b)-1] != '\n' {
		n++
	}
	return n
}

// paramValue returns the value of the named (lower-case) parameter.
func paramValue(ps []Param, name string) string {
	for _, p := range ps {
		if p.Name == name {
			return p.Value
		}
	}
	return ""
}

// parseMsgIDs extracts message ids from References or In-Reply-To (RFC
// 5322 §3.6.4), without the angle brackets. Values without brackets are
// split at white space.
func parseMsgIDs(s string) []string {
	var ids []string
	if !strings.Contains(s, "<") {
		for _, f := range strings.Fields(s) {
			if len(ids) >= maxAddresses {
				break
			}
			ids = append(ids, f)
		}
		return ids
	}
	for len(ids) < maxAddresses {
		i := strings.IndexByte(s, '<')
		if i < 0 {
			break
		}
		j := strings.IndexByte(s[i+1:], '>')
		if j < 0 {
			break
		}
		if id := strings.TrimSpace(s[i+1 : i+1+j]); id != "" {
			ids = append(ids, id)
		}
		s = s[i+1+j+1:]
	}
	return ids
}
