package spam

import (
	"slices"
	"strings"
	"testing"
	"time"

	"pimail/internal/message"
)

const goodHeader = "Received: from mx.example.org by mail.example.com; Mon, 2 Jan 2006 15:04:05 +0000\r\n" +
	"From: Ann Example <ann@example.org>\r\nTo: bob@example.com\r\nSubject: lunch on friday\r\n" +
	"Date: Mon, 2 Jan 2006 15:00:00 +0000\r\nMessage-ID: <abc.123@example.org>\r\n"

func ruleHits(t *testing.T, raw string, in Input) []string {
	t.Helper()
	in.Raw = []byte(raw)
	a := analyze(in.Raw, message.Parse(in.Raw))
	putTokenSet(readTokens(a))
	rc := &ruleCtx{a: a, in: &in, now: receivedTime(a)}
	if rc.now.IsZero() {
		rc.now = time.Date(2006, 1, 2, 15, 4, 5, 0, time.UTC)
	}
	// Rules whose default weight is 0 are classifier tokens only; turn
	// them on to see them hit.
	on := map[string]float64{}
	for _, r := range rules {
		if r.score == 0 {
			on[r.name] = 1
		}
	}
	var names []string
	for _, h := range runRules(rc, on, 3) {
		names = append(names, h.Name)
	}
	return names
}

func TestRulesCleanMessage(t *testing.T) {
	if h := ruleHits(t, goodHeader+"\r\nSee you at noon.\r\n", Input{MailFrom: "ann@example.org"}); len(h) != 0 {
		t.Fatalf("clean message hit %v", h)
	}
}

func TestRules(t *testing.T) {
	repl := func(old, new string) string { return strings.Replace(goodHeader, old, new, 1) }
	html := "MIME-Version: 1.0\r\nContent-Type: text/html\r\n\r\n"
	tests := []struct {
		rule, raw string
		in        Input
	}{
		{"MISSING_DATE", repl("Date: Mon, 2 Jan 2006 15:00:00 +0000\r\n", "") + "\r\nx\r\n", Input{}},
		{"DATE_IN_FUTURE", repl("2 Jan 2006 15:00:00", "9 Jan 2006 15:00:00") + "\r\nx\r\n", Input{}},
		{"DATE_LONG_BEFORE", repl("2 Jan 2006 15:00:00", "2 Dec 2005 15:00:00") + "\r\nx\r\n", Input{}},
		{"DATE_UNPARSEABLE", repl("Mon, 2 Jan 2006 15:00:00 +0000", "yesterday") + "\r\nx\r\n", Input{}},
		{"MISSING_MESSAGE_ID", repl("Message-ID: <abc.123@example.org>\r\n", "") + "\r\nx\r\n", Input{}},
		{"MESSAGE_ID_MALFORMED", repl("<abc.123@example.org>", "abc123") + "\r\nx\r\n", Input{}},
		{"MISSING_FROM", repl("From: Ann Example <ann@example.org>\r\n", "") + "\r\nx\r\n", Input{}},
		{"MISSING_TO", repl("To: bob@example.com\r\n", "") + "\r\nx\r\n", Input{}},
		{"SUBJECT_ALL_CAPS", repl("lunch on friday", "FREE MONEY WAITING NOW") + "\r\nx\r\n", Input{}},
		{"SUBJECT_MONEY_SHOUT", repl("lunch on friday", "win $$$ today") + "\r\nx\r\n", Input{}},
		{"FAKE_REPLY", repl("lunch on friday", "Re: your order") + "\r\nx\r\n", Input{}},
		{"FROM_NAME_OTHER_ADDRESS", repl("Ann Example", `"service@bank.example"`) + "\r\nx\r\n", Input{}},
		{"REPLYTO_OTHER_DOMAIN", goodHeader + "Reply-To: x@elsewhere.test\r\n\r\nx\r\n", Input{}},
		{"ENVFROM_OTHER_DOMAIN", goodHeader + "\r\nx\r\n", Input{MailFrom: "bounce@bulk.test"}},
		{"HEADER_8BIT", repl("lunch on friday", "d\xe9jeuner") + "\r\nx\r\n", Input{}},
		{"MIME_NO_VERSION", goodHeader + "Content-Type: multipart/mixed; boundary=b\r\n\r\n--b\r\n\r\nx\r\n--b--\r\n", Input{}},
		{"HTML_ONLY", goodHeader + html + "<p>hello there</p>\r\n", Input{}},
		{"HTML_IMAGE_HEAVY", goodHeader + html + "<img src=\"http://img.test/a.png\">buy\r\n", Input{}},
		{"HTML_HIDDEN_TEXT", goodHeader + html + "<p>hi</p><div style=\"display: none\">lorem ipsum dolor sit amet consectetur</div>\r\n", Input{}},
		{"URL_IP_LITERAL", goodHeader + "\r\nlog in at http://192.0.2.7/login now\r\n", Input{}},
		{"URL_TEXT_MISMATCH", goodHeader + html + "<a href=\"http://evil.test/x\">www.mybank.example</a>\r\n", Input{}},
		{"URL_TEXT_MISMATCH", goodHeader + html + "<a href=\"http://evil.test/x\">https://mybank.example/login</a>\r\n", Input{}},
		{"BODY_SHOUTING", goodHeader + "\r\n" + strings.Repeat("THIS IS THE BEST OFFER EVER MADE ", 10) + "\r\n", Input{}},
		{"SPF_FAIL", goodHeader + "\r\nx\r\n", Input{SPF: "fail"}},
		{"DMARC_FAIL_REJECT", goodHeader + "\r\nx\r\n", Input{DMARC: "fail", DMARCPolicy: "reject"}},
		{"DNSBL_zen", goodHeader + "\r\nx\r\n", Input{DNSBL: []DNSBLHit{{"zen", 3}}}},
	}
	for _, tc := range tests {
		if h := ruleHits(t, tc.raw, tc.in); !slices.Contains(h, tc.rule) {
			t.Errorf("%s not hit; hits %v", tc.rule, h)
		}
	}
	// Link text that is the same site, or not a domain at all, is fine.
	for _, body := range []string{
		"<a href=\"https://www.example.org/a\">example.org</a>",
		"<a href=\"http://evil.test/x\">click here</a>",
		"<a href=\"http://evil.test/x\">version 3.5</a>",
	} {
		if h := ruleHits(t, goodHeader+html+body+"\r\n", Input{}); slices.Contains(h, "URL_TEXT_MISMATCH") {
			t.Errorf("mismatch on %s", body)
		}
	}
}

func TestRuleWeightsOverride(t *testing.T) {
	raw := []byte(strings.Replace(goodHeader, "Message-ID: <abc.123@example.org>\r\n", "", 1) + "\r\nx\r\n")
	a := analyze(raw, nil)
	in := &Input{Raw: raw}
	hits := runRules(&ruleCtx{a: a, in: in, now: receivedTime(a)}, map[string]float64{"MISSING_MESSAGE_ID": 0}, 3)
	if len(hits) != 0 {
		t.Fatalf("weight 0 did not turn the rule off: %v", hits)
	}
	hits = runRules(&ruleCtx{a: a, in: in, now: receivedTime(a)}, map[string]float64{"MISSING_MESSAGE_ID": 7}, 3)
	if len(hits) != 1 || hits[0].Score != 7 {
		t.Fatalf("override: %v", hits)
	}
}
