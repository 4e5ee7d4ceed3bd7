package smtpserver

import (
	"bytes"
	"strconv"
	"strings"
)

// splitCommand splits a command line into its verb and the rest (RFC 5321
// §4.1.1: verb, space, arguments; verbs are case-insensitive).
func splitCommand(line []byte) (verb, args []byte) {
	if i := bytes.IndexByte(line, ' '); i >= 0 {
		return line[:i], bytes.TrimLeft(line[i+1:], " ")
	}
	return line, nil
}

// cutPrefixFold cuts prefix from s, ignoring ASCII case.
func cutPrefixFold(s []byte, prefix string) ([]byte, bool) {
	if len(s) < len(prefix) || !bytes.EqualFold(s[:len(prefix)], []byte(prefix)) {
		return s, false
	}
	return s[len(prefix):], true
}

// mailParams are the ESMTP parameters of MAIL FROM this server knows.
type mailParams struct {
	size int64 // SIZE= (RFC 1870 §6), -1 when absent
	utf8 bool  // SMTPUTF8 (RFC 6531 §3.4)
}

// parsePathArg reads "FROM:<path> params" or "TO:<path> params" (RFC 5321
// §4.1.1.2, §4.1.1.3): the keyword, an optional space (which many clients
// send), the path in angle brackets, then space-separated parameters. The
// null path "<>" is allowed only where nullOK.
func parsePathArg(args []byte, keyword string, nullOK bool) (addr string, params []byte, ok bool) {
	rest, found := cutPrefixFold(args, keyword)
	if !found {
		return "", nil, false
	}
	rest = bytes.TrimLeft(rest, " ")
	if len(rest) == 0 || rest[0] != '<' {
		return "", nil, false
	}
	end := closingBracket(rest)
	if end < 0 {
		return "", nil, false
	}
	path := rest[1:end]
	params = bytes.TrimLeft(rest[end+1:], " ")
	if len(rest) > end+1 && rest[end+1] != ' ' {
		return "", nil, false
	}
	if len(path) == 0 {
		return "", params, nullOK
	}
	addr, ok = parseMailbox(path)
	return addr, params, ok
}

// closingBracket finds the ">" that ends a path, skipping quoted strings
// (a quoted local part may hold ">").
func closingBracket(s []byte) int {
	quoted := false
	for i := 1; i < len(s); i++ {
		switch {
		case quoted && s[i] == '\\':
			i++
		case s[i] == '"':
			quoted = !quoted
		case !quoted && s[i] == '>':
			return i
		}
	}
	return -1
}

// parseMailbox reads a Path's content: an optional source route
// ("@a,@b:", RFC 5321 §4.1.2, which a server must accept and may ignore:
// it is ignored), then Local-part "@" Domain. A quoted local part is
// returned unquoted (its backslash escapes resolved), so that the roles
// see the address another server would deliver to; the roles refuse the
// forms that read two ways (an "@" inside the local part). Non-ASCII is
// allowed here; MAIL without SMTPUTF8 refuses it.
func parseMailbox(path []byte) (string, bool) {
	if path[0] == '@' {
		i := bytes.IndexByte(path, ':')
		if i < 0 {
			return "", false
		}
		path = path[i+1:]
	}
	var local []byte
	if len(path) > 0 && path[0] == '"' {
		var b []byte
		i := 1
		for ; i < len(path) && path[i] != '"'; i++ {
			if path[i] == '\\' && i+1 < len(path) {
				i++
			}
			if path[i] < ' ' || path[i] == 0x7f {
				return "", false
			}
			b = append(b, path[i])
		}
		if i >= len(path) {
			return "", false
		}
		local, path = b, path[i+1:]
		if len(path) == 0 || path[0] != '@' {
			return "", false
		}
	} else {
		at := bytes.LastIndexByte(path, '@')
		if at <= 0 {
			// RFC 5321 §4.1.1.3: "Postmaster" alone, without a domain.
			if bytes.EqualFold(path, []byte("postmaster")) {
				return string(path), true
			}
			return "", false
		}
		local, path = path[:at], path[at:]
		for _, c := range local {
			if c <= ' ' || c == 0x7f || bytes.IndexByte([]byte(`()<>[]:;\,"`), c) >= 0 {
				return "", false
			}
		}
	}
	domain := path[1:]
	if len(local) == 0 || !validDomain(domain) {
		return "", false
	}
	return string(local) + "@" + string(domain), true
}

// validDomain accepts a Domain (dot-separated labels of letters, digits
// and hyphens, RFC 5321 §4.1.2; non-ASCII labels for SMTPUTF8) or an
// address literal in brackets.
func validDomain(d []byte) bool {
	if len(d) == 0 || len(d) > 255 {
		return false
	}
	if d[0] == '[' {
		return d[len(d)-1] == ']' && bytes.IndexAny(d[1:len(d)-1], "[] \t") < 0
	}
	for _, label := range bytes.Split(d, []byte(".")) {
		if len(label) == 0 || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for _, c := range label {
			if !(c == '-' || c >= 0x80 || ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z') || ('0' <= c && c <= '9')) {
				return false
			}
		}
	}
	return true
}

// isASCII reports whether s has no byte above 0x7f.
func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

// parseMailParams reads MAIL's parameters (RFC 5321 §4.1.1.11): SIZE
// (RFC 1870), BODY (RFC 6152: 7BIT or 8BITMIME), SMTPUTF8 (RFC 6531) and
// AUTH (RFC 4954 §5, accepted and not used). Anything else gets 555
// (RFC 5321 §4.1.1.11), as does a known one with a bad value.
func parseMailParams(params []byte) (mailParams, *reply) {
	p := mailParams{size: -1}
	for _, f := range bytes.Fields(params) {
		key, value, hasValue := bytes.Cut(f, []byte("="))
		switch strings.ToUpper(string(key)) {
		case "SIZE":
			n, err := strconv.ParseInt(string(value), 10, 64)
			if !hasValue || err != nil || n < 0 {
				return p, replySyntax
			}
			p.size = n
		case "BODY":
			switch strings.ToUpper(string(value)) {
			case "7BIT", "8BITMIME":
			default:
				return p, replyParam
			}
		case "SMTPUTF8":
			if hasValue {
				return p, replySyntax
			}
			p.utf8 = true
		case "AUTH":
		default:
			return p, replyParam
		}
	}
	return p, nil
}
