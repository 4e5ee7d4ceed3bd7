package blackbox

import (
	"bytes"
	"fmt"
	"strings"
)

// traceFields are the header fields the server may prepend to a delivered
// message: the trace fields of RFC 5321 §4.4, the authentication results a
// receiving MX adds (RFC 8601, RFC 7208 §9.1), and the spam and virus
// filters' verdicts.
var traceFields = map[string]bool{
	"received":               true,
	"return-path":            true,
	"authentication-results": true,
	"received-spf":           true,
	"x-spam-status":          true,
	"x-spam-score":           true,
	"x-virus-status":         true,
}

// checkDelivered reports why got is not want with only trace header fields
// prepended (including at least one Received:). eol is the line ending
// both use ("\r\n" over IMAP, "\n" in a Maildir written by a client).
func checkDelivered(got, want []byte, eol string) error {
	if !bytes.HasSuffix(got, want) {
		return fmt.Errorf("delivered message (%d bytes) does not end with the sent one (%d bytes): %s",
			len(got), len(want), firstDifference(got, want))
	}
	prefix := string(got[:len(got)-len(want)])
	if prefix == "" {
		return fmt.Errorf("no Received: field was prepended (RFC 5321 §4.4)")
	}
	if !strings.HasSuffix(prefix, eol) {
		return fmt.Errorf("prepended header does not end with a line break: %q", clip(prefix, 200))
	}
	sawReceived := false
	for _, line := range strings.Split(strings.TrimSuffix(prefix, eol), eol) {
		if line != "" && (line[0] == ' ' || line[0] == '\t') {
			continue // folded continuation
		}
		name, _, ok := strings.Cut(line, ":")
		name = strings.ToLower(name)
		if !ok || !traceFields[name] {
			return fmt.Errorf("server prepended a non-trace line %q", clip(line, 200))
		}
		sawReceived = sawReceived || name == "received"
	}
	if !sawReceived {
		return fmt.Errorf("no Received: field was prepended (RFC 5321 §4.4): %q", clip(prefix, 200))
	}
	return nil
}

// firstDifference describes where got and want differ, comparing them
// aligned at their ends (the delivered copy has a longer header).
func firstDifference(got, want []byte) string {
	n := 0
	for n < len(got) && n < len(want) && got[len(got)-1-n] == want[len(want)-1-n] {
		n++
	}
	if n == len(want) {
		return "identical tails"
	}
	gi, wi := len(got)-n, len(want)-n
	return fmt.Sprintf("last %d bytes agree; before that sent %q, delivered %q",
		n, clip(string(want[max(0, wi-40):wi]), 60), clip(string(got[max(0, gi-40):gi]), 60))
}

func clip(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// toCRLF turns any mix of LF and CRLF line endings into CRLF and makes
// sure the message ends with one, as it is on the wire.
func toCRLF(b []byte) []byte {
	b = bytes.ReplaceAll(b, []byte("\r\n"), []byte("\n"))
	b = bytes.ReplaceAll(b, []byte("\n"), []byte("\r\n"))
	if !bytes.HasSuffix(b, []byte("\r\n")) {
		b = append(b, '\r', '\n')
	}
	return b
}

// toLF turns CRLF line endings into LF.
func toLF(b []byte) []byte { return bytes.ReplaceAll(b, []byte("\r\n"), []byte("\n")) }

// headerValue returns the first value of a header field in a raw message,
// unfolded and trimmed, or "".
func headerValue(msg []byte, field string) string {
	head, _, _ := bytes.Cut(toLF(msg), []byte("\n\n"))
	lines := strings.Split(string(head), "\n")
	for i, line := range lines {
		name, val, ok := strings.Cut(line, ":")
		if !ok || !strings.EqualFold(strings.TrimSpace(name), field) || strings.HasPrefix(line, " ") {
			continue
		}
		for _, cont := range lines[i+1:] {
			if cont == "" || (cont[0] != ' ' && cont[0] != '\t') {
				break
			}
			val += " " + strings.TrimSpace(cont)
		}
		return strings.TrimSpace(val)
	}
	return ""
}

// matchAll checks that the delivered messages are exactly the sent ones
// (each once, in any order), allowing trace fields in front.
func matchAll(got, want map[string][]byte, eol string) []error {
	var errs []error
	used := map[string]bool{}
	for wname, w := range want {
		found := false
		var lastErr error
		for gname, g := range got {
			if used[gname] {
				continue
			}
			if err := checkDelivered(g, w, eol); err != nil {
				if bytes.HasSuffix(g, w) {
					lastErr = fmt.Errorf("%s: %w", gname, err)
				}
				continue
			}
			used[gname], found = true, true
			break
		}
		if !found {
			if lastErr == nil {
				lastErr = explainMissing(got, w)
			}
			errs = append(errs, fmt.Errorf("sent %s (%d bytes): %w", wname, len(w), lastErr))
		}
	}
	for gname, g := range got {
		if !used[gname] {
			errs = append(errs, fmt.Errorf("unexpected delivered message %s (%d bytes, Subject %q)",
				gname, len(g), headerValue(g, "Subject")))
		}
	}
	return errs
}

// explainMissing says why no delivered message matched w, comparing it with
// a delivered message that has the same Message-ID, if there is one.
func explainMissing(got map[string][]byte, w []byte) error {
	id := headerValue(w, "Message-ID")
	for gname, g := range got {
		if id != "" && headerValue(g, "Message-ID") == id {
			return fmt.Errorf("%s has its Message-ID but differs: %s", gname, firstDifference(g, w))
		}
	}
	return fmt.Errorf("no delivered message has its Message-ID %q or ends with it", id)
}
