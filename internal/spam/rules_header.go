package spam

import (
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"pimail/internal/message"
)

func ruleMissingDate(c *ruleCtx) bool { return !c.a.has("date") }

func ruleDateBad(c *ruleCtx) bool {
	return c.a.has("date") && c.a.parsed.Date.IsZero()
}

func ruleDateFuture(c *ruleCtx) bool {
	d := c.a.parsed.Date
	return !d.IsZero() && d.Sub(c.now) > 12*time.Hour
}

func ruleDatePast(c *ruleCtx) bool {
	d := c.a.parsed.Date
	return !d.IsZero() && c.now.Sub(d) > 5*24*time.Hour
}

func ruleMissingFrom(c *ruleCtx) bool {
	for _, a := range c.a.parsed.Envelope.From {
		if a.Mailbox != "" && a.Host != "" {
			return false
		}
	}
	return true
}

func ruleMissingMsgID(c *ruleCtx) bool { return !c.a.has("message-id") }

// ruleMsgIDMalformed checks the msg-id form "<" id-left "@" id-right ">"
// of RFC 5322 §3.6.4, leniently: one @, something on each side, no spaces.
func ruleMsgIDMalformed(c *ruleCtx) bool {
	v := strings.TrimSpace(c.a.header("message-id"))
	if v == "" {
		return false
	}
	if !strings.HasPrefix(v, "<") || !strings.HasSuffix(v, ">") {
		return true
	}
	id := v[1 : len(v)-1]
	at := strings.LastIndexByte(id, '@')
	return at <= 0 || at == len(id)-1 || strings.ContainsAny(id, " \t<>")
}

func ruleMissingTo(c *ruleCtx) bool { return !c.a.has("to") && !c.a.has("cc") }

func ruleMissingSubject(c *ruleCtx) bool {
	return strings.TrimSpace(c.a.parsed.Subject) == ""
}

// ruleSubjectCaps: at least 10 letters, at least 90 % of them capitals.
func ruleSubjectCaps(c *ruleCtx) bool {
	up, letters := caseCounts(c.a.parsed.Subject)
	return letters >= 10 && up*10 >= letters*9
}

// caseCounts counts letters and capitals; ASCII through a table.
func caseCounts(s string) (upper, letters int) {
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			i++
			if asciiClass[c] == classWord && c > '9' && c != '$' {
				letters++
				if c <= 'Z' {
					upper++
				}
			}
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		i += size
		if unicode.IsLetter(r) {
			letters++
			if unicode.IsUpper(r) {
				upper++
			}
		}
	}
	return
}

func ruleSubjectShout(c *ruleCtx) bool {
	s := strings.ToLower(c.a.parsed.Subject)
	return strings.Contains(s, "$$") || strings.Contains(s, "!!!") ||
		strings.Contains(s, "% off") || strings.Contains(s, "%off")
}

func ruleFakeReply(c *ruleCtx) bool {
	s := strings.ToLower(strings.TrimSpace(c.a.parsed.Subject))
	if !strings.HasPrefix(s, "re:") && !strings.HasPrefix(s, "re :") {
		return false
	}
	return !c.a.has("in-reply-to") && !c.a.has("references")
}

// ruleFromNameAddr: "service@bank.example" <x@elsewhere.test>.
func ruleFromNameAddr(c *ruleCtx) bool {
	from := c.a.parsed.Envelope.From
	if len(from) == 0 || from[0].Host == "" {
		return false
	}
	name := strings.ToLower(message.DecodeHeaderValue(from[0].Name))
	at := strings.IndexByte(name, '@')
	if at < 0 {
		return false
	}
	host := name[at+1:]
	if k := strings.IndexFunc(host, func(r rune) bool { return !(unicode.IsLetter(r) || unicode.IsDigit(r) || r == '.' || r == '-') }); k >= 0 {
		host = host[:k]
	}
	host = strings.Trim(host, ".")
	if !strings.Contains(host, ".") {
		return false
	}
	return registrable(host) != registrable(strings.ToLower(from[0].Host))
}

func ruleFromDigits(c *ruleCtx) bool {
	from := c.a.parsed.Envelope.From
	if len(from) == 0 {
		return false
	}
	digits := 0
	for _, r := range from[0].Mailbox {
		if r >= '0' && r <= '9' {
			digits++
		}
	}
	return digits >= 5
}

func fromDomain(a *analysis) string {
	from := a.parsed.Envelope.From
	if len(from) == 0 || from[0].Host == "" {
		return ""
	}
	return registrable(strings.ToLower(from[0].Host))
}

func ruleReplyToDiffers(c *ruleCtx) bool {
	rt := c.a.parsed.Envelope.ReplyTo
	fd := fromDomain(c.a)
	if len(rt) == 0 || rt[0].Host == "" || fd == "" {
		return false
	}
	return registrable(strings.ToLower(rt[0].Host)) != fd
}

func ruleEnvFromDiffers(c *ruleCtx) bool {
	at := strings.LastIndexByte(c.in.MailFrom, '@')
	fd := fromDomain(c.a)
	if at < 0 || fd == "" {
		return false
	}
	return registrable(strings.ToLower(c.in.MailFrom[at+1:])) != fd
}

// ruleHeader8bit: RFC 5322 header text is ASCII; without SMTPUTF8
// (RFC 6532) other text must be RFC 2047 encoded words.
func ruleHeader8bit(c *ruleCtx) bool {
	for _, name := range []string{"subject", "from"} {
		for _, v := range c.a.fields[name] {
			for i := 0; i < len(v); i++ {
				if v[i] >= 0x80 {
					return true
				}
			}
		}
	}
	return false
}

// ruleMIMENoVersion: a multipart or encoded body needs MIME-Version
// (RFC 2045 §4) to be MIME at all.
func ruleMIMENoVersion(c *ruleCtx) bool {
	if c.a.mimeVersion {
		return false
	}
	b := c.a.parsed.Body
	return b.Type == "multipart" || strings.EqualFold(b.Encoding, "base64") || strings.EqualFold(b.Encoding, "quoted-printable")
}

// receivedTime is the date of the topmost Received field (RFC 5321 §4.4:
// the date follows the last ";"), the moment this server took the message;
// zero when there is none.
func receivedTime(a *analysis) time.Time {
	v := a.header("received")
	i := strings.LastIndexByte(v, ';')
	if i < 0 {
		return time.Time{}
	}
	t, ok := message.ParseDate(strings.TrimSpace(v[i+1:]))
	if !ok {
		return time.Time{}
	}
	return t
}
