package imapd

import (
	"errors"
	"strings"
	"unicode/utf8"

	"pimail/internal/imapwire"
	"pimail/internal/store"
)

const sep = store.HierarchySeparator

// utf8Names reports whether mailbox names travel as UTF-8 (IMAP4rev2,
// RFC 9051 §5.1; UTF8=ACCEPT, RFC 6855 §3) rather than modified UTF-7.
func (s *session) utf8Names() bool { return s.rev2 || s.utf8 }

// decodeName turns a mailbox name from the wire into the store's UTF-8
// form: modified UTF-7 decoded for IMAP4rev1 clients, INBOX (any case)
// canonicalised, a trailing separator dropped.
func (s *session) decodeName(a imapwire.Arg) (string, error) {
	raw, ok := a.AString()
	if !ok {
		return "", bad("mailbox name must be a string")
	}
	name := raw
	if !s.utf8Names() {
		if d, err := imapwire.DecodeMUTF7(raw); err == nil {
			name = d
		}
	}
	if !utf8.ValidString(name) {
		return "", bad("mailbox name is not valid UTF-8")
	}
	return canonicalName(name), nil
}

// canonicalName upper-cases an INBOX first level and trims a trailing separator.
func canonicalName(name string) string {
	if len(name) > 1 {
		name = strings.TrimSuffix(name, sep)
	}
	first, rest, hasRest := strings.Cut(name, sep)
	if strings.EqualFold(first, "INBOX") {
		if hasRest {
			return "INBOX" + sep + rest
		}
		return "INBOX"
	}
	return name
}

// validNewName checks a name for CREATE and RENAME.
func validNewName(name string) error {
	if name == "" || len(name) > 1000 {
		return bad("invalid mailbox name")
	}
	for _, level := range strings.Split(name, sep) {
		if level == "" {
			return bad("empty hierarchy level in mailbox name")
		}
	}
	for _, r := range name {
		if r < 0x20 || r == 0x7f || r == '*' || r == '%' {
			return bad("invalid character in mailbox name")
		}
	}
	return nil
}

// writeName writes a mailbox name in the session's encoding.
func (s *session) writeName(name string) {
	if !s.utf8Names() {
		name = imapwire.EncodeMUTF7(name)
	}
	s.w.AString(name)
}

// storeErr maps store errors on mailboxes to IMAP responses (RFC 5530 codes).
func storeErr(err error, what string) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, store.ErrNotFound):
		return no("NONEXISTENT", "%s does not exist", what)
	case errors.Is(err, store.ErrExists):
		return no("ALREADYEXISTS", "%s already exists", what)
	case errors.Is(err, store.ErrMailboxInUse):
		return no("INUSE", "%s cannot be changed: it is special or has children", what)
	case errors.Is(err, store.ErrInvalid):
		return no("CANNOT", "invalid request for %s", what)
	case errors.Is(err, store.ErrQuotaExceeded):
		return no("OVERQUOTA", "quota exceeded")
	}
	return err
}
