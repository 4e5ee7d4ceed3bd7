package webmail

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"mime"
	"mime/quotedprintable"
	"net/mail"
	"pimail/internal/message"
	"strings"
	"time"
	"unicode"

	"pimail/internal/websession"
)

// maxRecipients bounds To+Cc+Bcc of one message.
const maxRecipients = 100

var errHeaderBreak = errors.New("line breaks are not allowed here")

// outPart is one attachment of an outgoing message.
type outPart struct {
	Name string
	Type string // validated media type, no parameters
	Data []byte
}

// outgoing is a message composed in the webmail. Every field is checked or
// encoded when the message is built: nothing a user types can start a new
// header line.
type outgoing struct {
	From        mail.Address
	To, Cc, Bcc []*mail.Address
	Subject     string
	Body        string   // the text
	HTML        string   // the formatted body (sanitized), "" for plain text only
	InReplyTo   string   // "<id>" or ""
	References  []string // "<id>" each
	Attachments []outPart
	Date        time.Time
	MessageID   string // "<id>"
	Received    string // optional trace field value
}

// parseRecipients parses a comma-separated address list as typed in a form
// field (RFC 5322 syntax, display names allowed) with the message
// toolkit's strict reading (message.ParseMailboxList: a local part and a
// domain, nothing left over, no route, no group). CR or LF
// anywhere is an error, not something to clean up: it is an injection
// attempt. net/mail's Address only writes the result (RFC 2047 names).
func parseRecipients(field string) ([]*mail.Address, error) {
	if strings.ContainsAny(field, "\r\n\x00") {
		return nil, fmt.Errorf("recipients: %w", errHeaderBreak)
	}
	field = strings.TrimSpace(strings.Trim(strings.TrimSpace(field), ",;"))
	if field == "" {
		return nil, nil
	}
	field = strings.ReplaceAll(field, ";", ",")
	parsed, err := message.ParseMailboxList(field)
	if err != nil {
		return nil, fmt.Errorf("recipients: %w", err)
	}
	var list []*mail.Address
	for _, a := range parsed {
		if err := checkAddress(a.Addr()); err != nil {
			return nil, err
		}
		list = append(list, &mail.Address{Name: cleanHeaderText(message.DecodeHeaderValue(a.Name)), Address: a.Addr()})
	}
	return list, nil
}

// checkAddress rejects addresses that parse but could not be delivered or
// that carry characters nothing legitimate needs.
func checkAddress(addr string) error {
	at := strings.LastIndexByte(addr, '@')
	if at <= 0 || at == len(addr)-1 || len(addr) > 254 {
		return fmt.Errorf("address %q: not a valid mail address", addr)
	}
	domain := addr[at+1:]
	for _, r := range domain {
		if !(r == '.' || r == '-' || unicode.IsLetter(r) || unicode.IsDigit(r)) {
			return fmt.Errorf("address %q: invalid domain", addr)
		}
	}
	for _, r := range addr {
		if unicode.IsControl(r) || unicode.IsSpace(r) {
			return fmt.Errorf("address %q: invalid character", addr)
		}
	}
	return nil
}

// cleanHeaderText turns control characters (CR, LF, TAB…) into spaces and
// trims, for text that becomes part of a header.
func cleanHeaderText(s string) string {
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || r == '\u2028' || r == '\u2029' {
			return ' '
		}
		return r
	}, s)
	return strings.TrimSpace(s)
}

// cleanMsgIDs keeps only well-formed "<id>" tokens from s.
func cleanMsgIDs(s string) []string {
	var out []string
	for _, f := range strings.Fields(strings.NewReplacer("\r", " ", "\n", " ", "\t", " ").Replace(s)) {
		if len(f) > 2 && len(f) < 250 && f[0] == '<' && f[len(f)-1] == '>' && strings.Count(f, "<") == 1 && strings.Count(f, ">") == 1 && isPrintableASCII(f) {
			out = append(out, f)
		}
	}
	return out
}

func isPrintableASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] > '~' {
			return false
		}
	}
	return true
}

func newMessageID(host string) string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return "<" + hex.EncodeToString(b) + "@" + host + ">"
}

// header writes one field, folded at spaces to keep lines near 78 octets
// (RFC 5322 §2.2.3). value must contain no CR or LF; callers guarantee it.
func header(b *bytes.Buffer, name, value string) {
	line := name + ": "
	col := len(line)
	b.WriteString(line)
	for i, word := range strings.Split(value, " ") {
		if i > 0 {
			if col+1+len(word) > 78 && col > len(name)+2 {
				b.WriteString("\r\n ")
				col = 1
			} else {
				b.WriteByte(' ')
				col++
			}
		}
		b.WriteString(word)
		col += len(word)
	}
	b.WriteString("\r\n")
}

func addrList(list []*mail.Address) string {
	parts := make([]string, len(list))
	for i, a := range list {
		parts[i] = a.String()
	}
	return strings.Join(parts, ", ")
}

// crlf normalises line endings to CRLF.
func crlf(s string) string {
	s = strings.ReplaceAll(s, "\r\n", "\n")
	s = strings.ReplaceAll(s, "\r", "\n")
	return strings.ReplaceAll(s, "\n", "\r\n")
}

// bytes renders the message. withBcc keeps the Bcc field (for the sender's
// own Sent and Drafts copies only).
func (o *outgoing) bytes(withBcc bool) []byte {
	var b bytes.Buffer
	if o.Received != "" {
		header(&b, "Received", cleanHeaderText(o.Received))
	}
	header(&b, "Date", o.Date.Format(time.RFC1123Z))
	from := o.From
	from.Name = cleanHeaderText(from.Name)
	header(&b, "From", from.String())
	if len(o.To) > 0 {
		header(&b, "To", addrList(o.To))
	}
	if len(o.Cc) > 0 {
		header(&b, "Cc", addrList(o.Cc))
	}
	if withBcc && len(o.Bcc) > 0 {
		header(&b, "Bcc", addrList(o.Bcc))
	}
	if subj := cleanHeaderText(o.Subject); subj != "" {
		header(&b, "Subject", mime.QEncoding.Encode("utf-8", subj))
	}
	header(&b, "Message-ID", o.MessageID)
	if ids := cleanMsgIDs(o.InReplyTo); len(ids) > 0 {
		header(&b, "In-Reply-To", ids[0])
	}
	if refs := cleanMsgIDs(strings.Join(o.References, " ")); len(refs) > 0 {
		header(&b, "References", strings.Join(refs, " "))
	}
	header(&b, "MIME-Version", "1.0")
	header(&b, "User-Agent", "pimail webmail")
	if len(o.Attachments) == 0 {
		o.writeBody(&b)
		return b.Bytes()
	}
	boundary := "=_pimail_" + websession.Token()[:24]
	header(&b, "Content-Type", mime.FormatMediaType("multipart/mixed", map[string]string{"boundary": boundary}))
	b.WriteString("\r\nThis is a multi-part message in MIME format.\r\n")
	b.WriteString("\r\n--" + boundary + "\r\n")
	o.writeBody(&b)
	for _, a := range o.Attachments {
		b.WriteString("\r\n--" + boundary + "\r\n")
		ctype := mime.FormatMediaType(a.Type, nil)
		if ctype == "" {
			ctype = "application/octet-stream"
		}
		header(&b, "Content-Type", ctype)
		header(&b, "Content-Transfer-Encoding", "base64")
		disp := mime.FormatMediaType("attachment", map[string]string{"filename": a.Name})
		if disp == "" {
			disp = "attachment"
		}
		header(&b, "Content-Disposition", disp)
		b.WriteString("\r\n")
		enc := base64.StdEncoding.EncodeToString(a.Data)
		for len(enc) > 76 {
			b.WriteString(enc[:76])
			b.WriteString("\r\n")
			enc = enc[76:]
		}
		b.WriteString(enc)
		b.WriteString("\r\n")
	}
	b.WriteString("\r\n--" + boundary + "--\r\n")
	return b.Bytes()
}

// writeBody writes the message's text: a text/plain part, or for a
// formatted message a multipart/alternative of the text and the HTML, the
// plainer form first (RFC 2046 §5.1.4).
func (o *outgoing) writeBody(b *bytes.Buffer) {
	if o.HTML == "" {
		writeTextPart(b, "text/plain; charset=utf-8", o.Body)
		return
	}
	boundary := "=_pimail_alt_" + websession.Token()[:24]
	header(b, "Content-Type", mime.FormatMediaType("multipart/alternative", map[string]string{"boundary": boundary}))
	b.WriteString("\r\n--" + boundary + "\r\n")
	writeTextPart(b, "text/plain; charset=utf-8", o.Body)
	b.WriteString("\r\n--" + boundary + "\r\n")
	writeTextPart(b, "text/html; charset=utf-8", htmlDocument(o.HTML))
	b.WriteString("\r\n--" + boundary + "--\r\n")
}

// writeTextPart writes the Content-* fields, blank line and body of a
// UTF-8 text part in quoted-printable.
func writeTextPart(b *bytes.Buffer, ctype, body string) {
	header(b, "Content-Type", ctype)
	header(b, "Content-Transfer-Encoding", "quoted-printable")
	b.WriteString("\r\n")
	qp := quotedprintable.NewWriter(b)
	_, _ = qp.Write([]byte(crlf(strings.ToValidUTF8(body, "\uFFFD"))))
	_ = qp.Close()
	b.WriteString("\r\n")
}
