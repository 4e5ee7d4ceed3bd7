package imapd

import (
	"pimail/internal/imapwire"
	"pimail/internal/mailthread"
	"pimail/internal/message"
)

// THREAD (RFC 5256 §4, §5) with the ORDEREDSUBJECT and REFERENCES
// algorithms of internal/mailthread, from the index's Message-ID,
// In-Reply-To, References, Subject and Date.

// writeThreadMembers writes what goes inside one thread-list's
// parentheses: a chain of single children inline, two or more children
// as nested lists (RFC 5256 §5 thread-members / thread-nested).
func (s *session) writeThreadMembers(items []sortItem, n *mailthread.Node, uid bool) {
	first := true
	for n != nil {
		if n.Index >= 0 {
			if !first {
				s.w.SP()
			}
			s.w.Number(uint64(s.msgNumber(items[n.Index].idx, uid)))
			first = false
		}
		switch len(n.Children) {
		case 0:
			return
		case 1:
			n = n.Children[0]
		default:
			if !first {
				s.w.SP()
			}
			for _, c := range n.Children {
				s.w.Byte('(')
				s.writeThreadMembers(items, c, uid)
				s.w.Byte(')')
			}
			return
		}
	}
}

// cmdThread implements THREAD and UID THREAD (RFC 5256 §4).
func cmdThread(s *session, cmd *command) (string, string, error) {
	if len(cmd.args) < 3 || cmd.args[0].Kind != imapwire.KindAtom {
		return "", "", bad("THREAD needs an algorithm, a charset and search keys")
	}
	alg := upperASCII(cmd.args[0].Str)
	if alg != "ORDEREDSUBJECT" && alg != "REFERENCES" {
		return "", "", bad("unknown threading algorithm")
	}
	sc, err := imapwire.ParseCharsetSearch(cmd.args[1:])
	if err != nil {
		return "", "", bad("%s", err.Error())
	}
	if err := checkCharset(sc.Charset); err != nil {
		return "", "", err
	}
	res, err := s.search(sc.Key)
	if err != nil {
		return "", "", err
	}
	items, err := s.loadSortItems(res.idx)
	if err != nil {
		return "", "", err
	}
	msgs := make([]mailthread.Message, len(items))
	for i := range items {
		p := items[i].meta.Parsed
		msgs[i] = mailthread.Message{MessageID: p.Envelope.MessageID, InReplyTo: p.Envelope.InReplyTo,
			References: p.References, Subject: subjectOf(p), Sent: items[i].sent}
	}
	var roots []*mailthread.Node
	if alg == "REFERENCES" {
		roots = mailthread.References(msgs)
	} else {
		roots = mailthread.OrderedSubject(msgs)
	}
	s.w.Raw("* THREAD")
	if len(roots) > 0 {
		s.w.SP()
	}
	for _, r := range roots {
		s.w.Byte('(')
		s.writeThreadMembers(items, r, cmd.uid)
		s.w.Byte(')')
	}
	s.w.CRLF()
	return "", "", nil
}

// subjectOf returns the decoded subject of a message.
func subjectOf(p *message.Parsed) string {
	if p == nil {
		return ""
	}
	if p.Subject != "" {
		return p.Subject
	}
	return message.DecodeHeaderValue(p.Envelope.Subject)
}
