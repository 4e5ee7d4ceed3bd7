package sqlite

import (
	"bytes"
	"encoding/json"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"

	"pimail/internal/message"
)

// fastEnvelope decodes the JSON form of a message.Envelope (as
// encoding/json writes it) without reflection. It reports false on
// anything unexpected, and the caller then uses encoding/json.
func fastEnvelope(data []byte, env *message.Envelope) bool {
	ok := true
	wellFormed := eachMember(data, func(k, v []byte) bool {
		switch string(k) {
		case "date":
			env.Date, ok = jsonString(v)
		case "subject":
			env.Subject, ok = jsonString(v)
		case "in_reply_to":
			env.InReplyTo, ok = jsonString(v)
		case "message_id":
			env.MessageID, ok = jsonString(v)
		case "from":
			env.From, ok = jsonAddresses(v)
		case "sender":
			env.Sender, ok = jsonAddresses(v)
		case "reply_to":
			env.ReplyTo, ok = jsonAddresses(v)
		case "to":
			env.To, ok = jsonAddresses(v)
		case "cc":
			env.Cc, ok = jsonAddresses(v)
		case "bcc":
			env.Bcc, ok = jsonAddresses(v)
		default:
			ok = false
		}
		return ok
	})
	return ok && wellFormed
}

// jsonAddresses decodes a JSON array of message.Address.
func jsonAddresses(data []byte) ([]message.Address, bool) {
	if string(data) == "null" {
		return nil, true
	}
	var out []message.Address
	ok := true
	wellFormed := eachElement(data, func(v []byte) bool {
		var a message.Address
		okObj := eachMember(v, func(k, v []byte) bool {
			switch string(k) {
			case "n":
				a.Name, ok = jsonString(v)
			case "m":
				a.Mailbox, ok = jsonString(v)
			case "h":
				a.Host, ok = jsonString(v)
			case "g":
				a.Group, ok = jsonString(v)
			case "r":
				a.Route, ok = jsonString(v)
			case "e":
				switch string(v) {
				case "true":
					a.End = true
				case "false":
				default:
					ok = false
				}
			default:
				ok = false
			}
			return ok
		})
		out = append(out, a)
		return ok && okObj
	})
	return out, ok && wellFormed
}

// jsonString decodes a JSON string (RFC 8259 §7); the common case without
// escapes is a plain copy.
func jsonString(v []byte) (string, bool) {
	if len(v) < 2 || v[0] != '"' || v[len(v)-1] != '"' {
		return "", false
	}
	if bytes.IndexByte(v, '\\') < 0 {
		return string(v[1 : len(v)-1]), true
	}
	if s, ok := unescapeJSON(v[1 : len(v)-1]); ok {
		return s, true
	}
	var s string
	if err := json.Unmarshal(v, &s); err != nil {
		return "", false
	}
	return s, true
}

// unescapeJSON undoes the escapes of a JSON string's contents (RFC 8259
// §7) except surrogate pairs, for which it reports false.
func unescapeJSON(in []byte) (string, bool) {
	out := make([]byte, 0, len(in))
	for i := 0; i < len(in); i++ {
		c := in[i]
		if c != '\\' {
			out = append(out, c)
			continue
		}
		i++
		if i >= len(in) {
			return "", false
		}
		switch in[i] {
		case '"', '\\', '/':
			out = append(out, in[i])
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			if i+4 >= len(in) {
				return "", false
			}
			r, err := strconv.ParseUint(string(in[i+1:i+5]), 16, 32)
			if err != nil || utf16.IsSurrogate(rune(r)) {
				return "", false
			}
			out = utf8.AppendRune(out, rune(r))
			i += 4
		default:
			return "", false
		}
	}
	return string(out), true
}
