package imapd

import (
	"fmt"
	"strings"
	"time"

	"pimail/internal/imapwire"
	"pimail/internal/message"
	"pimail/internal/store"
)

// candidate is one message under evaluation; the blob and decoded texts
// are loaded on first use.
type candidate struct {
	ev     *evaluator
	seq    uint32
	uid    uint32
	flags  msgFlags
	recent bool
	meta   *store.MessageMeta

	raw      []byte
	rawDone  bool
	fields   []message.Field
	bodyText *string
}

func (c *candidate) blob() ([]byte, error) {
	if !c.rawDone {
		c.rawDone = true
		raw, err := c.ev.s.srv.st.ReadBlob(c.ev.s.ctx, c.meta.BlobID)
		if err != nil {
			return nil, fmt.Errorf("search: reading message %d: %w", c.uid, err)
		}
		c.raw = raw
	}
	return c.raw, nil
}

func (c *candidate) headerFields() ([]message.Field, error) {
	if c.fields == nil {
		raw, err := c.blob()
		if err != nil {
			return nil, err
		}
		c.fields = message.HeaderFields(headerBytes(raw, rootPart(c.meta, raw)))
		if c.fields == nil {
			c.fields = []message.Field{}
		}
	}
	return c.fields, nil
}

// text returns the decoded text of all text/* parts, nested messages included.
func (c *candidate) text() (string, error) {
	if c.bodyText == nil {
		raw, err := c.blob()
		if err != nil {
			return "", err
		}
		var b strings.Builder
		collectText(&b, raw, rootPart(c.meta, raw), 0)
		t := strings.ToLower(b.String())
		c.bodyText = &t
	}
	return *c.bodyText, nil
}

func collectText(b *strings.Builder, raw []byte, p *message.Part, depth int) {
	if p == nil || depth > maxStructureDepth {
		return
	}
	switch {
	case p.Type == "multipart":
		for _, c := range p.Parts {
			collectText(b, raw, c, depth+1)
		}
	case p.Message != nil:
		for _, f := range message.HeaderFields(slice(raw, p.Message.HeaderStart, p.Message.BodyStart)) {
			b.WriteString(message.DecodeHeaderValue(f.Unfolded()))
			b.WriteByte('\n')
		}
		collectText(b, raw, p.Message, depth+1)
	case p.Type == "text":
		if t, err := message.DecodeText(raw, p); err == nil {
			b.WriteString(t)
			b.WriteByte('\n')
		}
	}
}

// contains is the case-insensitive substring match of RFC 9051 §6.4.4.
func contains(hay, needle string) bool {
	return strings.Contains(strings.ToLower(hay), strings.ToLower(needle))
}

// addressText is the searchable form of an address header: the store's
// decoded string, or the envelope's addresses when that is empty.
func addressText(decoded string, list []message.Address) string {
	if decoded != "" || len(list) == 0 {
		return decoded
	}
	var parts []string
	for _, a := range list {
		if a.Group != "" || a.End {
			continue
		}
		parts = append(parts, message.DecodeHeaderValue(a.Name)+" <"+a.Mailbox+"@"+a.Host+">")
	}
	return strings.Join(parts, ", ")
}

// day returns the calendar date of t in its own zone, as midnight UTC,
// for the date comparisons of RFC 9051 §6.4.4 (time and zone disregarded).
func day(t time.Time) time.Time {
	y, m, d := t.Date()
	return time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
}

func compareDay(op string, t, want time.Time) bool {
	d := day(t)
	switch op {
	case "BEFORE", "SENTBEFORE":
		return d.Before(want)
	case "ON", "SENTON":
		return d.Equal(want)
	}
	return !d.Before(want) // SINCE, SENTSINCE
}

func (c *candidate) hasFlag(f store.Flags) bool { return c.flags.flags&f != 0 }

func (c *candidate) hasKeyword(k string) bool {
	for _, sf := range systemFlags {
		if strings.EqualFold(sf.name, k) {
			return c.hasFlag(sf.bit)
		}
	}
	for _, kw := range c.flags.keywords {
		if strings.EqualFold(kw, k) {
			return true
		}
	}
	return false
}

func (c *candidate) match(k imapwire.SearchKey, depth int) (bool, error) {
	if depth > 100 {
		return false, bad("search program too deep")
	}
	p := c.meta
	var parsed *message.Parsed
	if p != nil {
		parsed = p.Parsed
	}
	if parsed == nil {
		parsed = &message.Parsed{}
	}
	switch k.Op {
	case "AND":
		for _, ch := range k.Children {
			ok, err := c.match(ch, depth+1)
			if err != nil || !ok {
				return false, err
			}
		}
		return true, nil
	case "OR":
		ok, err := c.match(k.Children[0], depth+1)
		if err != nil || ok {
			return ok, err
		}
		return c.match(k.Children[1], depth+1)
	case "NOT":
		ok, err := c.match(k.Children[0], depth+1)
		return !ok, err
	case "ALL":
		return true, nil
	case "SEQSET", "UID":
		if k.Set.Saved {
			return c.ev.s.sel.inSaved(c.uid), nil // RFC 5182 §2.1
		}
		if k.Op == "SEQSET" {
			return k.Set.Contains(c.seq, uint32(len(c.ev.s.sel.uids))), nil
		}
		return k.Set.Contains(c.uid, c.ev.s.sel.maxUID()), nil
	case "ANSWERED", "UNANSWERED":
		return c.hasFlag(store.FlagAnswered) == (k.Op == "ANSWERED"), nil
	case "DELETED", "UNDELETED":
		return c.hasFlag(store.FlagDeleted) == (k.Op == "DELETED"), nil
	case "DRAFT", "UNDRAFT":
		return c.hasFlag(store.FlagDraft) == (k.Op == "DRAFT"), nil
	case "FLAGGED", "UNFLAGGED":
		return c.hasFlag(store.FlagFlagged) == (k.Op == "FLAGGED"), nil
	case "SEEN", "UNSEEN":
		return c.hasFlag(store.FlagSeen) == (k.Op == "SEEN"), nil
	case "RECENT", "UNRECENT":
		return c.recent == (k.Op == "RECENT"), nil
	case "NEW":
		return c.recent && !c.hasFlag(store.FlagSeen), nil
	case "OLD":
		return !c.recent, nil
	case "KEYWORD", "UNKEYWORD":
		return c.hasKeyword(k.Str) == (k.Op == "KEYWORD"), nil
	case "MODSEQ":
		// RFC 7162 §3.1.5: messages with a MODSEQ of at least the value;
		// per-flag entry names are answered with the message's MODSEQ,
		// which is never lower than any of its flags'.
		return p.ModSeq >= uint64(k.Num), nil
	case "LARGER":
		return p.Size > k.Num, nil
	case "SMALLER":
		return p.Size < k.Num, nil
	case "BEFORE", "ON", "SINCE":
		return compareDay(k.Op, p.InternalDate, k.Date), nil
	case "SENTBEFORE", "SENTON", "SENTSINCE":
		sent := parsed.Date
		if sent.IsZero() {
			sent = p.InternalDate // no usable Date: header
		}
		return compareDay(k.Op, sent, k.Date), nil
	case "SUBJECT":
		subj := parsed.Subject
		if subj == "" {
			subj = message.DecodeHeaderValue(parsed.Envelope.Subject)
		}
		return contains(subj, k.Str), nil
	case "FROM":
		return contains(addressText(parsed.From, parsed.Envelope.From), k.Str), nil
	case "TO":
		return contains(addressText(parsed.To, parsed.Envelope.To), k.Str), nil
	case "CC":
		return contains(addressText(parsed.Cc, parsed.Envelope.Cc), k.Str), nil
	case "BCC":
		return contains(addressText(parsed.Bcc, parsed.Envelope.Bcc), k.Str), nil
	case "HEADER":
		fields, err := c.headerFields()
		if err != nil {
			return false, err
		}
		for _, f := range fields {
			if strings.EqualFold(f.Name, k.Field) && (k.Str == "" || contains(message.DecodeHeaderValue(f.Unfolded()), k.Str)) {
				return true, nil
			}
		}
		return false, nil
	case "BODY", "TEXT":
		needle := strings.ToLower(k.Str)
		if k.Op == "TEXT" {
			fields, err := c.headerFields()
			if err != nil {
				return false, err
			}
			for _, f := range fields {
				if contains(message.DecodeHeaderValue(f.Unfolded()), needle) {
					return true, nil
				}
			}
		}
		t, err := c.text()
		if err != nil {
			return false, err
		}
		return strings.Contains(t, needle), nil
	}
	return false, bad("unsupported search key %s", k.Op)
}
