package spam

import (
	"math"
	"sort"
	"time"
)

// Hit is one reason a message scored: a rule name and its points
// (negative points speak for ham).
type Hit struct {
	Name  string
	Score float64
}

// rule is one header or structure test. Its default weight can be
// overridden by name in Config.RuleScores.
type rule struct {
	name  string
	score float64
	desc  string
	test  func(c *ruleCtx) bool
	// transaction marks rules that read the SMTP transaction or the time
	// of receipt rather than the message alone; they are not classifier
	// tokens (see ruleTokens).
	transaction bool
}

// ruleCtx is what the rules look at.
type ruleCtx struct {
	a   *analysis
	in  *Input
	now time.Time // when the message was received
}

// rules is the table of built-in tests, in report order. The weights are
// this project's own, set so that no single structural oddity files a
// message as spam: it takes several, or the classifier's agreement.
var rules = []rule{
	// RFC 5322 §3.6: Date and From are required; Message-ID should be there.
	{"MISSING_DATE", 1.2, "no Date field (RFC 5322 §3.6 requires one)", ruleMissingDate, false},
	{"DATE_IN_FUTURE", 2.0, "Date more than 12 hours after receipt", ruleDateFuture, true},
	{"DATE_LONG_BEFORE", 0.2, "Date more than 5 days before receipt", ruleDatePast, true},
	{"DATE_UNPARSEABLE", 0.8, "Date field does not parse (RFC 5322 §3.3)", ruleDateBad, false},
	{"MISSING_FROM", 2.0, "no From field or no address in it", ruleMissingFrom, false},
	{"MISSING_MESSAGE_ID", 1.0, "no Message-ID field (RFC 5322 §3.6.4)", ruleMissingMsgID, false},
	{"MESSAGE_ID_MALFORMED", 1.5, "Message-ID is not <left@right> (RFC 5322 §3.6.4)", ruleMsgIDMalformed, false},
	{"MISSING_TO", 0, "no To or Cc field", ruleMissingTo, false},
	{"MISSING_SUBJECT", 0.4, "no or empty Subject", ruleMissingSubject, false},
	{"SUBJECT_ALL_CAPS", 1.0, "Subject written in capitals", ruleSubjectCaps, false},
	{"SUBJECT_MONEY_SHOUT", 0.7, "Subject with $$, !!! or percent-off", ruleSubjectShout, false},
	{"FAKE_REPLY", 0.1, "Subject says Re: but there is no In-Reply-To or References", ruleFakeReply, false},
	{"FROM_NAME_OTHER_ADDRESS", 1.5, "From display name holds an address of another domain", ruleFromNameAddr, false},
	{"FROM_LOCAL_MANY_DIGITS", 1.0, "From local part with many digits", ruleFromDigits, false},
	{"REPLYTO_OTHER_DOMAIN", 0, "Reply-To in another domain than From", ruleReplyToDiffers, false},
	{"ENVFROM_OTHER_DOMAIN", 0.2, "envelope sender in another domain than From", ruleEnvFromDiffers, true},
	{"HEADER_8BIT", 1.0, "raw 8-bit bytes in Subject or From (RFC 2047 wanted)", ruleHeader8bit, false},
	{"MIME_NO_VERSION", 0.8, "MIME structure without MIME-Version (RFC 2045 §4)", ruleMIMENoVersion, false},
	{"HTML_ONLY", 0.7, "HTML body without a text alternative", ruleHTMLOnly, false},
	{"HTML_IMAGE_HEAVY", 0.5, "HTML with images and almost no text", ruleImageHeavy, false},
	{"HTML_HIDDEN_TEXT", 1.2, "text styled invisible", ruleHiddenText, false},
	{"HTML_FORM", 0.3, "HTML form in a message", ruleForm, false},
	{"TEXT_BASE64", 0.5, "body text sent as base64", ruleTextBase64, false},
	{"BODY_SHOUTING", 0.8, "most letters of the body are capitals", ruleBodyCaps, false},
	{"URL_IP_LITERAL", 0.5, "link to a numeric IP address", ruleURLIP, false},
	{"URL_TEXT_MISMATCH", 1.0, "link text shows another domain than its target", ruleAnchorMismatch, false},
	{"URL_MANY_HOSTS", 0.1, "links to more than 8 different hosts", ruleManyHosts, false},
	{"URL_SHORTENER", 0.5, "link through a URL shortener: the target is hidden", ruleURLShortener, false},
	{"URL_USERINFO", 2.0, "link with a name before an @ in its host part (RFC 3986 §3.2.1)", ruleURLUserinfo, false},
	{"TEXT_INVISIBLE", 1.5, "text stuffed with zero-width or other invisible characters", ruleInvisibleChars, false},
	{"TEXT_MIXED_SCRIPT", 2.0, "words mixing Latin letters with Cyrillic or Greek look-alikes", ruleMixedScript, false},
	{"CHARSET_UNDECLARED_8BIT", 1.0, "8-bit text in a part that declares no charset or us-ascii (RFC 2046 §4.1.2)", ruleUndeclared8bit, false},
	{"RCVD_NO_RDNS", 0.8, "the originating relay has no reverse DNS name", ruleRcvdNoRDNS, false},
	{"RCVD_DYNAMIC", 0.4, "the originating relay's reverse name is an address pool's", ruleRcvdDynamic, false},
	{"ATTACH_EXEC_NAME", 2.5, "attachment name of a program or script", ruleExecName, false},
	// Results of earlier steps, when the input carries them.
	{"SPF_FAIL", 2.5, "SPF fail (RFC 7208 §2.6.4)", func(c *ruleCtx) bool { return c.in.SPF == "fail" }, true},
	{"SPF_SOFTFAIL", 0.8, "SPF softfail (RFC 7208 §2.6.5)", func(c *ruleCtx) bool { return c.in.SPF == "softfail" }, true},
	{"DKIM_FAIL", 1.0, "DKIM signature present but failing (RFC 6376 §6.1)", func(c *ruleCtx) bool { return c.in.DKIM == "fail" }, true},
	{"DKIM_PASS", -0.3, "valid DKIM signature", func(c *ruleCtx) bool { return c.in.DKIM == "pass" }, true},
	{"DMARC_FAIL_REJECT", 4.0, "DMARC fail, domain policy reject (RFC 7489 §6.3)", func(c *ruleCtx) bool { return c.in.DMARC == "fail" && c.in.DMARCPolicy == "reject" }, true},
	{"DMARC_FAIL", 1.5, "DMARC fail, policy quarantine or none", func(c *ruleCtx) bool { return c.in.DMARC == "fail" && c.in.DMARCPolicy != "reject" }, true},
	{"DMARC_PASS", -0.5, "DMARC pass", func(c *ruleCtx) bool { return c.in.DMARC == "pass" }, true},
}

// RuleNames lists the built-in rules with their default weight and a
// description, for documentation and `pimail spam check`.
func RuleNames() []Hit {
	out := make([]Hit, len(rules))
	for i, r := range rules {
		out[i] = Hit{r.name, r.score}
	}
	return out
}

// runRules evaluates the table. weights overrides default scores by name;
// a weight of 0 turns a rule off. Each blocklist that listed the client
// adds its weight times dnsblPoints, as DNSBL_<list>.
func runRules(c *ruleCtx, weights map[string]float64, dnsblPoints float64) []Hit {
	var hits []Hit
	for _, r := range rules {
		w := r.score
		if o, ok := weights[r.name]; ok {
			w = o
		}
		if w == 0 || !r.test(c) {
			continue
		}
		hits = append(hits, Hit{r.name, w})
	}
	for _, d := range c.in.DNSBL {
		if pts := math.Round(d.Weight*dnsblPoints*100) / 100; pts != 0 {
			hits = append(hits, Hit{"DNSBL_" + d.List, pts})
		}
	}
	sort.SliceStable(hits, func(i, j int) bool { return hits[i].Score > hits[j].Score })
	return hits
}
