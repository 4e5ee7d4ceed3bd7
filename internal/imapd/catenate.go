package imapd

import (
	"fmt"

	"pimail/internal/imapwire"
	"pimail/internal/store"
)

// This file implements CATENATE (RFC 4469): an APPEND whose message is
// put together from literal text and IMAP URLs (RFC 5092) of messages
// or parts in the user's own mailboxes, so that a client can forward or
// edit a draft without downloading the parts it keeps.

// maxCatenateParts bounds the parts of one CATENATE.
const maxCatenateParts = 100

// catenatePart is one TEXT or URL part of a CATENATE list.
type catenatePart struct {
	text []byte
	url  string // when not TEXT
}

// parseCatenate parses the list after CATENATE (RFC 4469 §5).
func parseCatenate(a imapwire.Arg) ([]catenatePart, error) {
	if a.Kind != imapwire.KindList || len(a.List) == 0 || len(a.List)%2 != 0 || len(a.List) > 2*maxCatenateParts {
		return nil, bad("CATENATE needs a list of TEXT and URL parts")
	}
	var parts []catenatePart
	for i := 0; i < len(a.List); i += 2 {
		k, v := a.List[i], a.List[i+1]
		if k.Kind != imapwire.KindAtom {
			return nil, bad("invalid CATENATE part")
		}
		switch upperASCII(k.Str) {
		case "TEXT":
			if v.Kind != imapwire.KindLiteral {
				return nil, bad("CATENATE TEXT needs a literal")
			}
			parts = append(parts, catenatePart{text: v.Lit})
		case "URL":
			u, ok := v.AString()
			if !ok || u == "" {
				return nil, bad("CATENATE URL needs a string")
			}
			parts = append(parts, catenatePart{url: u})
		default:
			return nil, bad("invalid CATENATE part")
		}
	}
	return parts, nil
}

// catenate puts the message together, refusing it whole with BADURL
// when a URL names nothing this user can read (RFC 4469 §5) and with
// TOOBIG when it outgrows the literal limit.
func (s *session) catenate(parts []catenatePart) ([]byte, error) {
	var out []byte
	for _, p := range parts {
		data := p.text
		if p.url != "" {
			var err error
			if data, err = s.urlData(p.url); err != nil {
				return nil, err
			}
		}
		if int64(len(out)+len(data)) > s.srv.cfg.MaxLiteralSize {
			return nil, no("TOOBIG", "message too big")
		}
		out = append(out, data...)
	}
	return out, nil
}

// urlData returns the octets an IMAP URL names in this user's mailboxes.
func (s *session) urlData(raw string) ([]byte, error) {
	badURL := func() error {
		// RFC 4469 §6: BADURL names the URL, as a quoted string when it
		// can be one.
		code := "BADURL"
		if q := s.w.AppendString(nil, raw); q[0] == '"' {
			code += " " + string(q)
		}
		return no(code, "invalid or unknown URL")
	}
	u, err := imapwire.ParseIMAPURL(raw)
	if err != nil {
		return nil, badURL()
	}
	mb, err := s.srv.st.Mailbox(s.ctx, s.acct.ID, canonicalName(u.Mailbox))
	if err != nil || u.UIDValidity != 0 && u.UIDValidity != mb.UIDValidity {
		return nil, badURL()
	}
	metas, err := s.srv.st.Fetch(s.ctx, mb.ID, store.UIDSet{{Start: u.UID, Stop: u.UID}}, store.FetchOptions{Parsed: u.Section != nil})
	if err != nil {
		return nil, fmt.Errorf("catenate fetch: %w", err)
	}
	if len(metas) != 1 {
		return nil, badURL()
	}
	data, err := s.srv.st.ReadBlob(s.ctx, metas[0].BlobID)
	if err != nil {
		return nil, fmt.Errorf("catenate read: %w", err)
	}
	if u.Section != nil {
		sec, ok := sectionBytes(data, rootPart(&metas[0], data), u.Section)
		if !ok {
			return nil, badURL()
		}
		data = sec
	}
	return applyPartial(data, u.Partial), nil
}
