package mailimport

import (
	"bytes"
	"strconv"
	"strings"

	"pimail/internal/store"
)

// metaHeaders are the mbox bookkeeping fields written by mail clients and
// servers (mutt, Thunderbird, Dovecot, UW imapd). They describe the state of
// the message in that mailbox, not the message, so import turns them into
// flags and removes them.
var metaHeaders = map[string]bool{
	"status":            true,
	"x-status":          true,
	"x-keywords":        true,
	"x-mozilla-status":  true,
	"x-mozilla-status2": true,
	"x-mozilla-keys":    true,
	"x-uid":             true,
	"x-imap":            true,
	"x-imapbase":        true,
}

// Thunderbird's X-Mozilla-Status bits (nsMsgMessageFlags).
const (
	mozRead      = 0x0001
	mozReplied   = 0x0002
	mozMarked    = 0x0004
	mozExpunged  = 0x0008
	mozForwarded = 0x1000
)

// KeywordForwarded is the IMAP keyword for a forwarded message (RFC 5788
// registry), which Maildir's P flag and Thunderbird's 0x1000 bit mean.
const KeywordForwarded = "$Forwarded"

// takeStatusHeaders removes the metadata fields from the header of raw and
// returns the message without them and the flags and keywords they set.
// raw is returned unchanged (not copied) when it has none.
func takeStatusHeaders(raw []byte) ([]byte, store.Flags, []string) {
	var flags store.Flags
	var kws []string
	var out []byte // nil until a field is removed
	pos := 0
	for pos < len(raw) {
		end := fieldEnd(raw, pos)
		if end == pos { // the empty line that ends the header
			break
		}
		field := raw[pos:end]
		name, value, ok := splitField(field)
		if ok && metaHeaders[strings.ToLower(name)] {
			if out == nil {
				out = make([]byte, 0, len(raw))
				out = append(out, raw[:pos]...)
			}
			f, k := statusFlags(strings.ToLower(name), value)
			flags |= f
			kws = append(kws, k...)
		} else if out != nil {
			out = append(out, field...)
		}
		pos = end
	}
	if out == nil {
		return raw, flags, kws
	}
	return append(out, raw[pos:]...), flags, kws
}

// fieldEnd returns the end of the header field starting at pos: after its
// last continuation line (RFC 5322 §2.2.3 folding). At an empty line it
// returns pos.
func fieldEnd(raw []byte, pos int) int {
	if raw[pos] == '\n' || raw[pos] == '\r' && pos+1 < len(raw) && raw[pos+1] == '\n' {
		return pos
	}
	end := pos
	for {
		nl := bytes.IndexByte(raw[end:], '\n')
		if nl < 0 {
			return len(raw)
		}
		end += nl + 1
		if end >= len(raw) || (raw[end] != ' ' && raw[end] != '\t') {
			return end
		}
	}
}

// splitField splits "Name: value" and unfolds the value.
func splitField(field []byte) (name, value string, ok bool) {
	i := bytes.IndexByte(field, ':')
	if i <= 0 {
		return "", "", false
	}
	name = strings.TrimRight(string(field[:i]), " \t")
	if strings.ContainsAny(name, " \t\r\n") {
		return "", "", false
	}
	v := strings.NewReplacer("\r\n", "", "\n", "").Replace(string(field[i+1:]))
	return name, strings.TrimSpace(v), true
}

// statusFlags interprets one metadata field.
func statusFlags(name, value string) (store.Flags, []string) {
	var f store.Flags
	switch name {
	case "status":
		if strings.ContainsRune(value, 'R') {
			f |= store.FlagSeen
		}
	case "x-status":
		for _, c := range value {
			switch c {
			case 'A':
				f |= store.FlagAnswered
			case 'F':
				f |= store.FlagFlagged
			case 'T':
				f |= store.FlagDraft
			case 'D':
				f |= store.FlagDeleted
			}
		}
	case "x-mozilla-status":
		n, err := strconv.ParseUint(value, 16, 32)
		if err != nil {
			return 0, nil
		}
		var kws []string
		if n&mozRead != 0 {
			f |= store.FlagSeen
		}
		if n&mozReplied != 0 {
			f |= store.FlagAnswered
		}
		if n&mozMarked != 0 {
			f |= store.FlagFlagged
		}
		if n&mozExpunged != 0 {
			f |= store.FlagDeleted
		}
		if n&mozForwarded != 0 {
			kws = append(kws, KeywordForwarded)
		}
		return f, kws
	case "x-keywords", "x-mozilla-keys":
		return 0, strings.FieldsFunc(value, func(r rune) bool { return r == ' ' || r == ',' || r == '\t' })
	}
	return f, nil
}
