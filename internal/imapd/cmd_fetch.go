package imapd

import (
	"fmt"
	"strconv"

	"pimail/internal/imapwire"
	"pimail/internal/message"
	"pimail/internal/store"
)

// fetchChunk is how many messages one store round trip covers.
const fetchChunk = 256

// fetchPlan says what the attributes of one FETCH need.
type fetchPlan struct {
	atts    []imapwire.FetchAtt
	parsed  bool // MIME structure or envelope
	blob    bool // message bytes
	setSeen bool // a non-PEEK body fetch (RFC 9051 §6.4.5)
	size    bool // RFC822.SIZE
	path    fetchPath
	// changedSince, when set, limits the answer to messages with a
	// greater MODSEQ (RFC 7162 §3.1.4).
	changedSince    uint64
	hasChangedSince bool
}

func planFetch(atts []imapwire.FetchAtt, uid bool, mods imapwire.FetchModifiers) fetchPlan {
	p := fetchPlan{changedSince: mods.ChangedSince, hasChangedSince: mods.HasChangedSince}
	hasUID, hasModSeq := false, false
	for _, a := range atts {
		switch a.Name {
		case "UID":
			hasUID = true
		case "MODSEQ":
			hasModSeq = true
		case "RFC822.SIZE":
			p.size = true
		case "ENVELOPE", "BODY", "BODYSTRUCTURE":
			p.parsed = true
		case "RFC822", "RFC822.TEXT":
			p.blob, p.parsed, p.setSeen = true, true, true
		case "RFC822.HEADER":
			p.blob, p.parsed = true, true
		case "BODY[]", "BINARY[]", "BINARY.SIZE[]":
			p.blob = true
			if len(a.Section.Part) > 0 || a.Section.Text != "" || a.Name != "BODY[]" {
				p.parsed = true
			}
			if !a.Peek {
				p.setSeen = true
			}
		}
	}
	// RFC 9051 §6.4.8: UID FETCH always returns the UID.
	if uid && !hasUID {
		atts = append([]imapwire.FetchAtt{{Name: "UID"}}, atts...)
	}
	// RFC 7162 §3.1.4: CHANGEDSINCE implies the MODSEQ data item.
	if mods.HasChangedSince && !hasModSeq {
		atts = append(atts, imapwire.FetchAtt{Name: "MODSEQ"})
	}
	p.atts = atts
	p.path = choosePath(atts)
	return p
}

// cmdFetch implements FETCH and UID FETCH (RFC 9051 §6.4.5, §6.4.8) with
// the CHANGEDSINCE and VANISHED modifiers (RFC 7162 §3.1.4, §3.2.6).
func cmdFetch(s *session, cmd *command) (string, string, error) {
	if (len(cmd.args) != 2 && len(cmd.args) != 3) || cmd.args[0].Kind != imapwire.KindAtom {
		return "", "", bad("FETCH needs a set and attributes")
	}
	var mods imapwire.FetchModifiers
	if len(cmd.args) == 3 {
		var err error
		if mods, err = imapwire.ParseFetchModifiers(cmd.args[2]); err != nil {
			return "", "", bad("invalid FETCH modifiers")
		}
		// RFC 7162 §3.2.6: VANISHED needs UID FETCH, CHANGEDSINCE and
		// an enabled QRESYNC.
		if mods.Vanished && (!cmd.uid || !mods.HasChangedSince || !s.qresync) {
			return "", "", bad("VANISHED needs UID FETCH with CHANGEDSINCE and QRESYNC enabled")
		}
	}
	set, err := imapwire.ParseSeqSet(cmd.args[0].Str)
	if err != nil {
		return "", "", bad("invalid sequence set")
	}
	atts, err := imapwire.ParseFetchAtts(cmd.args[1])
	if err != nil {
		return "", "", bad("invalid fetch attributes")
	}
	v := s.sel
	idx, err := v.resolve(set, cmd.uid)
	if err != nil {
		return "", "", err
	}
	plan := planFetch(atts, cmd.uid, mods)
	if v.readOnly {
		plan.setSeen = false
	}
	for _, a := range plan.atts {
		if a.Name == "MODSEQ" {
			s.enableCondStore() // RFC 7162 §3.1: a CONDSTORE enabling command
		}
	}
	if mods.Vanished {
		ch, err := s.srv.st.Changes(s.ctx, v.mb.ID, mods.ChangedSince)
		if err != nil {
			return "", "", fmt.Errorf("fetch vanished: %w", err)
		}
		s.writeVanishedEarlier(ch.Expunged, &set)
	}
	if err := s.fetchChunks(idx, plan); err != nil {
		return "", "", err
	}
	return "", "", nil
}

// fetchChunk answers FETCH for a run of view indexes, given what the
// store returned for them (fetchMetas).
func (s *session) fetchChunk(idx []int, plan fetchPlan, metas []store.MessageMeta, headers [][]byte) error {
	v := s.sel
	var err error
	byUID := matchMetas(s.sel, idx, plan, metas, headers)
	// Set \Seen first so that the FLAGS we send are the new ones.
	var upOf map[uint32]store.FlagUpdate // the rows that got \Seen now
	if plan.setSeen {
		var set store.UIDSet
		for k := range idx {
			if m := byUID[k].meta; m != nil && m.Flags&store.FlagSeen == 0 {
				set = append(set, store.UIDRange{Start: m.UID, Stop: m.UID})
			}
		}
		if len(set) > 0 {
			ups, err := s.srv.st.StoreFlags(s.ctx, v.mb.ID, set, store.FlagsAdd, store.FlagSeen, nil)
			if err != nil {
				return fmt.Errorf("setting \\Seen: %w", err)
			}
			v.dirty = true
			upOf = make(map[uint32]store.FlagUpdate, len(ups))
			for _, u := range ups {
				if i, ok := v.index(u.UID); ok {
					v.flags[i] = msgFlags{u.Flags, u.Keywords, u.ModSeq}
				}
				upOf[u.UID] = u
			}
		}
	}
	for k, i := range idx {
		m := byUID[k].meta
		if m == nil {
			continue // expunged meanwhile; its EXPUNGE is pending
		}
		u, seenNow := upOf[m.UID]
		if seenNow {
			m.Flags, m.Keywords, m.ModSeq = u.Flags, u.Keywords, u.ModSeq
		}
		var raw []byte
		if headers != nil {
			raw = byUID[k].header
		} else if plan.blob {
			raw, err = s.srv.st.ReadBlob(s.ctx, m.BlobID)
			if err != nil {
				return fmt.Errorf("reading message %d: %w", m.UID, err)
			}
		}
		s.writeFetch(i, m, raw, headers != nil, plan, seenNow)
	}
	return nil
}

// fetched is what the store returned for one view index of a chunk.
type fetched struct {
	meta   *store.MessageMeta // nil: not returned (expunged meanwhile, or not changed since CHANGEDSINCE)
	header []byte             // on the header path
}

// matchMetas pairs the view indexes of a chunk with the store's rows
// (both in UID order, as resolve and the store return them: one walk; a
// map otherwise). Rows not changed since plan.changedSince are left out
// (RFC 7162 §3.1.4).
func matchMetas(v *mailboxView, idx []int, plan fetchPlan, metas []store.MessageMeta, headers [][]byte) []fetched {
	out := make([]fetched, len(idx))
	keep := func(j int) bool { return !plan.hasChangedSince || metas[j].ModSeq > plan.changedSince }
	set := func(k, j int) {
		out[k].meta = &metas[j]
		if headers != nil {
			out[k].header = headers[j]
		}
	}
	ordered := true
	for k := 1; k < len(idx) && ordered; k++ {
		ordered = v.uids[idx[k-1]] < v.uids[idx[k]]
	}
	for j := 1; j < len(metas) && ordered; j++ {
		ordered = metas[j-1].UID < metas[j].UID
	}
	if !ordered {
		at := make(map[uint32]int, len(metas))
		for j := range metas {
			at[metas[j].UID] = j
		}
		for k, i := range idx {
			if j, ok := at[v.uids[i]]; ok && keep(j) {
				set(k, j)
			}
		}
		return out
	}
	j := 0
	for k, i := range idx {
		uid := v.uids[i]
		for j < len(metas) && metas[j].UID < uid {
			j++
		}
		if j == len(metas) {
			break
		}
		if metas[j].UID == uid && keep(j) {
			set(k, j)
		}
	}
	return out
}

// writeFetch writes one "* n FETCH (...)" response. The simple items
// and the envelope are appended to the output buffer in place
// (imapwire.Writer.AvailableBuffer); the others go through the writer.
// With rawIsHeader (the header path), raw is the message's header and
// nothing else, and m has no Parsed.
func (s *session) writeFetch(i int, m *store.MessageMeta, raw []byte, rawIsHeader bool, plan fetchPlan, seenNow bool) {
	v := s.sel
	w := s.w
	root := func() *message.Part {
		if rawIsHeader {
			n := int64(len(raw))
			return &message.Part{BodyStart: n, End: n}
		}
		return rootPart(m, raw)
	}
	s.announceKeywords(m.Keywords) // before the buffer is taken: it may write FLAGS
	b := w.AvailableBuffer()
	b = append(b, "* "...)
	b = strconv.AppendUint(b, uint64(i+1), 10)
	b = append(b, " FETCH ("...)
	flagsSent, uidSent, modseqSent := false, false, false
	for n, a := range plan.atts {
		if n > 0 {
			b = append(b, ' ')
		}
		switch a.Name {
		case "UID":
			b = append(b, "UID "...)
			b = strconv.AppendUint(b, uint64(m.UID), 10)
			uidSent = true
			continue
		case "FLAGS":
			b = append(b, "FLAGS "...)
			b = s.appendFlags(b, msgFlags{m.Flags, m.Keywords, m.ModSeq}, v.isRecent(m.UID))
			flagsSent = true
			continue
		case "INTERNALDATE":
			b = append(b, "INTERNALDATE \""...)
			b = imapwire.AppendDateTime(b, m.InternalDate)
			b = append(b, '"')
			continue
		case "RFC822.SIZE":
			b = append(b, "RFC822.SIZE "...)
			b = strconv.AppendUint(b, uint64(max(m.Size, 0)), 10)
			continue
		case "MODSEQ":
			b = append(b, "MODSEQ ("...)
			b = strconv.AppendUint(b, m.ModSeq, 10)
			b = append(b, ')')
			modseqSent = true
			continue
		case "EMAILID": // RFC 8474 §5.1 (objectid.go)
			b = append(b, "EMAILID ("...)
			b = append(b, emailObjectID(m.BlobID)...)
			b = append(b, ')')
			continue
		case "THREADID": // RFC 8474 §5.2: no threads kept
			b = append(b, "THREADID NIL"...)
			continue
		case "ENVELOPE":
			b = append(b, "ENVELOPE "...)
			b = s.appendEnvelope(b, envelopeOf(m))
			continue
		case "BODY[]":
			if a.Section.Text == "HEADER" && len(a.Section.Part) == 0 && a.Partial == nil {
				// BODY.PEEK[HEADER], what clients list a mailbox with.
				hdr := raw
				if !rawIsHeader {
					hdr = headerBytes(raw, rootPart(m, raw))
				}
				b = append(b, "BODY[HEADER] {"...)
				b = strconv.AppendUint(b, uint64(len(hdr)), 10)
				b = append(b, "}\r\n"...)
				w.Bytes(b).Bytes(hdr)
				b = w.AvailableBuffer()
				continue
			}
		}
		w.Bytes(b)
		switch a.Name {
		case "BODY", "BODYSTRUCTURE":
			w.Raw(a.Name).SP()
			s.writeBodyStructure(root(), a.Name == "BODYSTRUCTURE")
		case "RFC822":
			w.Raw("RFC822 ").Literal(raw)
		case "RFC822.HEADER":
			w.Raw("RFC822.HEADER ").Literal(headerBytes(raw, root()))
		case "RFC822.TEXT":
			w.Raw("RFC822.TEXT ").Literal(textBytes(raw, root()))
		case "BODY[]":
			s.writeBodySection(a, raw, root())
		case "BINARY[]", "BINARY.SIZE[]":
			s.writeBinary(a, raw, root())
		default:
			w.Raw(a.Name).Raw(" NIL")
		}
		b = w.AvailableBuffer()
	}
	if seenNow && !flagsSent {
		// RFC 9051 §6.4.5: the implicit \Seen change is reported.
		b = append(b, " FLAGS "...)
		b = s.appendFlags(b, msgFlags{m.Flags, m.Keywords, m.ModSeq}, v.isRecent(m.UID))
	}
	if seenNow && s.condstore {
		// RFC 7162 §3.1: a flag change carries UID and MODSEQ.
		if !uidSent {
			b = append(b, " UID "...)
			b = strconv.AppendUint(b, uint64(m.UID), 10)
		}
		if !modseqSent {
			b = append(b, " MODSEQ ("...)
			b = strconv.AppendUint(b, m.ModSeq, 10)
			b = append(b, ')')
		}
	}
	b = append(b, ")\r\n"...)
	w.Bytes(b)
}
