package imapd

import (
	"net"
	"strconv"
	"strings"

	"pimail/internal/imapwire"
)

// capabilities lists what the session may use now (RFC 9051 §6.1.1):
// STARTTLS only before TLS, AUTH= and LOGIN only where allowed.
func (s *session) capabilities() string {
	caps := []string{"IMAP4rev1", "IMAP4rev2"}
	if s.state == stateNotAuth {
		if s.srv.cfg.TLS != nil && !s.tls {
			caps = append(caps, "STARTTLS")
		}
		if s.authAllowed() {
			caps = append(caps, s.authMechanisms()...) // cmd_auth.go
			caps = append(caps, "SASL-IR")
		} else {
			caps = append(caps, "LOGINDISABLED")
		}
	}
	caps = append(caps, "LITERAL+", "MULTIAPPEND", "CATENATE", "ID", "ENABLE", "IDLE", "NOTIFY", "NAMESPACE", "UNSELECT", "UIDPLUS",
		"MOVE", "CHILDREN", "SPECIAL-USE", "LIST-EXTENDED", "LIST-STATUS", "ESEARCH",
		"STATUS=SIZE", "BINARY", "UTF8=ACCEPT", "CONDSTORE", "QRESYNC", "SEARCHRES",
		"SORT", "SORT=DISPLAY", "ESORT", "CONTEXT=SEARCH", "CONTEXT=SORT", "THREAD=ORDEREDSUBJECT", "THREAD=REFERENCES",
		"COMPRESS=DEFLATE", "CREATE-SPECIAL-USE", "OBJECTID",
		"APPENDLIMIT="+strconv.FormatInt(s.srv.cfg.MaxLiteralSize, 10))
	caps = append(caps, s.quotaCapabilities()...) // quota.go
	return strings.Join(caps, " ")
}

// authAllowed reports whether passwords may be sent on this connection:
// over TLS, from loopback when the configuration trusts it (nothing crosses
// a network there), or anywhere when the configuration allows it.
func (s *session) authAllowed() bool {
	if s.tls || s.srv.cfg.AllowInsecureAuth {
		return true
	}
	ip := net.ParseIP(s.remoteIP)
	return s.srv.cfg.AllowLoopbackAuth && ip != nil && ip.IsLoopback()
}

func cmdCapability(s *session, cmd *command) (string, string, error) {
	if len(cmd.args) != 0 {
		return "", "", bad("CAPABILITY takes no arguments")
	}
	if s.acct.ID != 0 {
		// The limit may have changed since the login (quota.go).
		if limit, _, err := s.srv.st.Quota(s.ctx, s.acct.ID); err == nil {
			s.acct.QuotaBytes = limit
		}
	}
	s.w.Untagged("CAPABILITY " + s.capabilities())
	return "", "", nil
}

func cmdNoop(s *session, cmd *command) (string, string, error) {
	if len(cmd.args) != 0 {
		return "", "", bad("%s takes no arguments", cmd.name)
	}
	return "", "", nil
}

func cmdLogout(s *session, cmd *command) (string, string, error) {
	if len(cmd.args) != 0 {
		return "", "", bad("LOGOUT takes no arguments")
	}
	s.w.Untagged("BYE Logging out")
	s.state = stateLogout
	return "", "", nil
}

// cmdID answers RFC 2971 ID; the client's fields are logged, not kept.
func cmdID(s *session, cmd *command) (string, string, error) {
	if len(cmd.args) != 1 {
		return "", "", bad("ID takes one argument")
	}
	a := cmd.args[0]
	if !a.IsNIL() {
		if a.Kind != imapwire.KindList || len(a.List)%2 != 0 || len(a.List) > 60 {
			return "", "", bad("ID needs NIL or a list of field-value pairs")
		}
		var kv []any
		for i := 0; i+1 < len(a.List); i += 2 {
			k, ok1 := a.List[i].AString()
			v, ok2 := a.List[i+1].AString()
			if !ok1 || !ok2 {
				return "", "", bad("ID fields must be strings")
			}
			if len(k) <= 30 && len(v) <= 1024 {
				kv = append(kv, "id_"+k, v)
			}
		}
		s.log.Debug("imap client id", kv...)
	}
	s.w.Raw(`* ID ("name" "pimail" "vendor" "pimail")`).CRLF()
	return "", "", nil
}

// cmdEnable implements ENABLE (RFC 5161, RFC 9051 §6.3.1) for IMAP4rev2,
// UTF8=ACCEPT, CONDSTORE and QRESYNC (RFC 7162 §3.1, §3.2.3).
func cmdEnable(s *session, cmd *command) (string, string, error) {
	if len(cmd.args) == 0 {
		return "", "", bad("ENABLE needs a capability")
	}
	var enabled []string
	for _, a := range cmd.args {
		if a.Kind != imapwire.KindAtom {
			return "", "", bad("ENABLE takes atoms")
		}
		switch upperASCII(a.Str) {
		case "IMAP4REV2":
			if !s.rev2 {
				s.rev2 = true
				enabled = append(enabled, "IMAP4rev2")
			}
		case "CONDSTORE":
			if !s.condstore {
				s.enableCondStore()
				enabled = append(enabled, "CONDSTORE")
			}
		case "QRESYNC":
			// RFC 7162 §3.2.3: QRESYNC implies CONDSTORE.
			if !s.qresync {
				s.qresync = true
				s.enableCondStore()
				enabled = append(enabled, "QRESYNC")
			}
		case "UTF8=ACCEPT":
			if !s.utf8 {
				s.utf8 = true
				s.w.UTF8 = true
				enabled = append(enabled, "UTF8=ACCEPT")
			}
		}
	}
	s.w.Raw("* ENABLED")
	for _, e := range enabled {
		s.w.SP().Raw(e)
	}
	s.w.CRLF()
	return "", "", nil
}

// cmdNamespace: one personal namespace, no others (RFC 2342, RFC 9051 §6.3.10).
func cmdNamespace(s *session, cmd *command) (string, string, error) {
	if len(cmd.args) != 0 {
		return "", "", bad("NAMESPACE takes no arguments")
	}
	s.w.Untagged(`NAMESPACE (("" "/")) NIL NIL`)
	return "", "", nil
}
