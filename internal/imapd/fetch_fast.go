package imapd

import (
	"pimail/internal/imapwire"
	"pimail/internal/message"
	"pimail/internal/store"
)

// fetchPath is how one FETCH gets its data from the store.
type fetchPath int

const (
	pathFull     fetchPath = iota // Fetch (with Parsed when needed) and ReadBlob per message
	pathEnvelope                  // store.HeaderReader's FetchEnvelopesBuffered: ENVELOPE without the MIME tree
	pathHeader                    // store.HeaderReader's FetchHeadersBuffered: sections of the top-level header only
)

// choosePath picks the cheapest path that has everything the attributes
// need: a client listing a mailbox asks for ENVELOPE or for the top-level
// header (BODY.PEEK[HEADER], BODY.PEEK[HEADER.FIELDS (...)], RFC822.HEADER;
// RFC 9051 §6.4.5) beside the flags and sizes, which every path has.
func choosePath(atts []imapwire.FetchAtt) fetchPath {
	env, hdr := false, false
	for _, a := range atts {
		switch a.Name {
		case "UID", "FLAGS", "INTERNALDATE", "RFC822.SIZE", "MODSEQ", "EMAILID", "THREADID":
		case "ENVELOPE":
			env = true
		case "RFC822.HEADER":
			hdr = true
		case "BODY[]":
			switch a.Section.Text {
			case "HEADER", "HEADER.FIELDS", "HEADER.FIELDS.NOT":
				if len(a.Section.Part) > 0 {
					return pathFull
				}
				hdr = true
			default:
				return pathFull
			}
		default:
			return pathFull
		}
	}
	switch {
	case env && !hdr:
		return pathEnvelope
	case hdr && !env:
		return pathHeader
	}
	return pathFull
}

// noRelease is the release of a chunk that holds no store buffers.
func noRelease() {}

// fetchMetas returns the metadata of the messages in uids and, on the
// header path, their headers (nil otherwise). release (never nil) gives
// the store's buffers back once the chunk is sent.
func (s *session) fetchMetas(mailboxID int64, uids store.UIDSet, plan fetchPlan) (metas []store.MessageMeta, headers [][]byte, release func(), err error) {
	switch plan.path {
	case pathEnvelope:
		metas, release, err := s.srv.st.FetchEnvelopesBuffered(s.ctx, mailboxID, uids)
		return metas, nil, release, err
	case pathHeader:
		// Parsed stays nil: writeFetch knows that raw is the header.
		return s.srv.st.FetchHeadersBuffered(s.ctx, mailboxID, uids, plan.size)
	}
	metas, err = s.srv.st.Fetch(s.ctx, mailboxID, uids, store.FetchOptions{Parsed: plan.parsed})
	return metas, nil, noRelease, err
}

// appendEnvelope appends an ENVELOPE (RFC 9051 §7.5.2) to a buffer: the
// FETCH of a whole mailbox formats thousands (writeEnvelope writes one).
func (s *session) appendEnvelope(b []byte, e *message.Envelope) []byte {
	w := s.w
	b = append(b, '(')
	b = w.AppendNString(b, e.Date)
	b = append(b, ' ')
	b = w.AppendNString(b, e.Subject)
	b = append(b, ' ')
	from := e.From
	sender, replyTo := e.Sender, e.ReplyTo
	// RFC 9051 §7.5.2: absent Sender and Reply-To default to From.
	if len(sender) == 0 {
		sender = from
	}
	if len(replyTo) == 0 {
		replyTo = from
	}
	for _, l := range [...][]message.Address{from, sender, replyTo, e.To, e.Cc, e.Bcc} {
		b = s.appendAddresses(b, l)
		b = append(b, ' ')
	}
	b = w.AppendNString(b, e.InReplyTo)
	b = append(b, ' ')
	b = w.AppendNString(b, e.MessageID)
	return append(b, ')')
}

// appendAddresses appends an address list, with RFC 5322 groups as the
// start/end markers of RFC 9051 §7.5.2.
func (s *session) appendAddresses(b []byte, list []message.Address) []byte {
	w := s.w
	if len(list) == 0 {
		return append(b, "NIL"...)
	}
	b = append(b, '(')
	for _, a := range list {
		switch {
		case a.Group != "":
			b = append(b, "(NIL NIL "...)
			b = w.AppendString(b, a.Group)
			b = append(b, " NIL)"...)
		case a.End:
			b = append(b, "(NIL NIL NIL NIL)"...)
		default:
			b = append(b, '(')
			b = w.AppendNString(b, a.Name)
			b = append(b, ' ')
			b = w.AppendNString(b, a.Route) // the obsolete route as adl (RFC 9051 §7.5.2), as Dovecot keeps it
			b = append(b, ' ')
			b = w.AppendNString(b, a.Mailbox)
			b = append(b, ' ')
			b = w.AppendNString(b, a.Host)
			b = append(b, ')')
		}
	}
	return append(b, ')')
}

// appendFlags appends a flag list (RFC 9051 §2.3.2); \Recent only for
// IMAP4rev1 sessions (RFC 9051 removed it).
func (s *session) appendFlags(b []byte, f msgFlags, recent bool) []byte {
	b = append(b, '(')
	n := len(b)
	for _, sf := range systemFlags {
		if f.flags&sf.bit != 0 {
			if len(b) > n {
				b = append(b, ' ')
			}
			b = append(b, sf.name...)
		}
	}
	if recent && !s.rev2 {
		if len(b) > n {
			b = append(b, ' ')
		}
		b = append(b, `\Recent`...)
	}
	for _, k := range f.keywords {
		if validKeyword(k) {
			if len(b) > n {
				b = append(b, ' ')
			}
			b = append(b, k...)
		}
	}
	return append(b, ')')
}
