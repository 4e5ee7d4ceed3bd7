package spam

import (
	"strings"
)

// Mailing lists. A list wraps every post, ham or spam, in the same header
// fields, subject tag and footer. Learned as words, that wrapping says
// "this list", and since most list traffic is ham it pulls the spam posted
// to a list towards ham. So the tokenizer reduces the wrapping to one
// feature (meta:list) and reads only what the poster wrote.

// listMarkers are fields whose presence makes a message list traffic:
// RFC 2369 and RFC 2919 fields and the private fields of common list
// managers.
var listMarkers = []string{
	"list-id", "list-post", "list-help", "list-subscribe", "list-unsubscribe",
	"list-archive", "list-owner", "mailing-list", "x-mailing-list",
	"x-beenthere", "x-mailman-version", "x-list", "x-listname", "x-ezmlm-version",
}

// listFieldPrefixes are fields a list manager adds. Their names are not
// tokens of list traffic (they are meta:list).
var listFieldPrefixes = []string{
	"list-", "x-list", "mailing-list", "x-mailing-list", "x-beenthere", "x-mailman",
	"errors-to", "precedence", "sender", "x-loop", "x-original-date", "x-egroups",
	"x-yahoo", "x-apparently-to", "x-unsubscription-info", "x-acceptable-languages",
	"x-original-sender", "x-ezmlm", "x-ml-", "old-subject", "old-return-path",
	"resent-", "x-topica", "x-lyris", "x-mailer-list", "x-sequence", "x-no-archive",
}

// receivingPrefixes are fields that the receiving side adds: mail stores,
// filters, virus scanners, MTAs' trace notes. They tell where a message
// was kept and how someone else judged it, not what it is, and a model
// that learns them learns the corpus' collector.
var receivingPrefixes = []string{
	"x-spam", "x-virus", "x-antivirus", "x-amavis", "x-mailscanner", "x-barracuda",
	"x-asg-", "x-old-spam", "x-rc-", "x-miltered", "x-uuid", "x-greylist",
	"x-bogosity", "x-dspam", "x-crm114", "x-scanned", "x-scanner", "received-spf",
	"authentication-results", "arc-", "delivery-date", "x-authentication-warning",
	"x-original-to", "x-envelope-", "x-delivery-agent", "x-ham-report",
	"x-razor", "x-filtered", "x-uidl", "x-imap", "x-keywords", "x-status",
}

func hasPrefixAny(name string, prefixes []string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// isList reports whether the message came through a mailing list.
func (a *analysis) isList() bool {
	for _, f := range listMarkers {
		if a.has(f) {
			return true
		}
	}
	return false
}

// stripListTag removes a list's "[tag]" from the start of a subject (after
// any Re:/Fwd: prefixes): "Re: [ILUG] help" becomes "Re: help".
func stripListTag(subj string) string {
	s := strings.TrimSpace(subj)
	var prefix string
	for range 4 {
		l := strings.ToLower(s)
		switch {
		case strings.HasPrefix(l, "re:"), strings.HasPrefix(l, "aw:"):
			prefix, s = prefix+s[:3]+" ", strings.TrimSpace(s[3:])
		case strings.HasPrefix(l, "fwd:"):
			prefix, s = prefix+s[:4]+" ", strings.TrimSpace(s[4:])
		case strings.HasPrefix(s, "["):
			end := strings.IndexByte(s, ']')
			if end < 0 || end > 40 {
				return prefix + s
			}
			s = strings.TrimSpace(s[end+1:])
		default:
			return prefix + s
		}
	}
	return prefix + s
}

// Footer detection bounds.
const (
	maxFooterLines  = 30 // a block longer than this is content, not a footer
	maxFooterBlocks = 3  // footers stacked by nested lists or list + provider
)

// footerWords mark a trailing block as a list footer.
var footerWords = []string{
	"listinfo", "mailing list", "unsubscribe", "subscription", "list maintainer",
	"groups sponsor", "to post to", "list archive", "mailman", "majordomo",
	"listserv", "digest", "list-request", "subscribe",
}

// stripListFooter removes the footers a list appended to a text part: the
// trailing blocks, each after a separator line ("-- " or a rule of _ - = *
// ~), that name subscription business. The poster's own signature is kept
// unless it talks about lists.
func stripListFooter(text string) string {
	for range maxFooterBlocks {
		trimmed := strings.TrimRight(text, " \t\r\n")
		cut := lastSeparator(trimmed)
		if cut < 0 {
			return text
		}
		block := strings.ToLower(trimmed[cut:])
		if strings.Count(block, "\n") > maxFooterLines || !containsAny(block, footerWords) {
			return text
		}
		text = trimmed[:cut]
	}
	return text
}

// lastSeparator returns the offset of the last separator line within the
// final maxFooterLines lines of text, or -1.
func lastSeparator(text string) int {
	end := len(text)
	for range maxFooterLines {
		start := strings.LastIndexByte(text[:end], '\n') + 1
		if isSeparator(text[start:end]) {
			return start
		}
		if start == 0 {
			return -1
		}
		end = start - 1
	}
	return -1
}

func isSeparator(line string) bool {
	line = strings.TrimRight(line, "\r")
	if line == "-- " || line == "--" {
		return true
	}
	t := strings.TrimSpace(line)
	if len(t) < 10 {
		return false
	}
	rule := 0
	for i := 0; i < len(t); i++ {
		switch t[i] {
		case '_', '-', '=', '*', '~':
			rule++
		}
	}
	// "----- Yahoo! Groups Sponsor -----" counts: mostly rule characters.
	return rule*10 >= len(t)*6
}

func containsAny(s string, words []string) bool {
	for _, w := range words {
		if strings.Contains(s, w) {
			return true
		}
	}
	return false
}

// isFooterPart reports whether a whole text part is a list footer, as list
// managers that do not touch the poster's part add one: a few lines about
// subscriptions.
func isFooterPart(text string) bool {
	t := strings.TrimSpace(text)
	return strings.Count(t, "\n") < 8 && containsAny(strings.ToLower(t), footerWords)
}
