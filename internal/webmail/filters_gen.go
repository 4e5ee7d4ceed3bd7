package webmail

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
)

// The webmail's filter settings are a Sieve script (RFC 5228) that the
// webmail writes: one script, named filtersScript, holding the simple
// rules, forwarding and the vacation reply. Its first lines carry the
// settings as JSON in a comment, which is how the forms read them back;
// the rest is ordinary Sieve that the advanced editor shows and any
// ManageSieve client can read.

// filtersScript is the name of the script the webmail writes.
const filtersScript = "pimail-webmail"

// settingsMarker starts the comment line with the settings.
const settingsMarker = "# pimail-settings: "

// Limits of the forms.
const (
	maxFilterRules = 50
	maxFilterText  = 200
	maxVacationLen = 4000
)

// filterSettings are what the forms edit.
type filterSettings struct {
	Rules    []filterRule     `json:"rules,omitempty"`
	Forward  forwardSettings  `json:"forward"`
	Vacation vacationSettings `json:"vacation"`
}

// filterRule is one "if FIELD contains TEXT then ACTION TARGET" rule.
type filterRule struct {
	Field    string `json:"field"`    // from, to, subject
	Contains string `json:"contains"` // the text to look for
	Action   string `json:"action"`   // move, flag, forward
	Target   string `json:"target"`   // mailbox (move) or address (forward)
}

// forwardSettings send every message on to Address.
type forwardSettings struct {
	Address  string `json:"address,omitempty"`
	KeepCopy bool   `json:"keep_copy,omitempty"`
}

// vacationSettings is the automatic reply, between two dates when given.
type vacationSettings struct {
	Enabled bool   `json:"enabled,omitempty"`
	Subject string `json:"subject,omitempty"`
	Text    string `json:"text,omitempty"`
	Start   string `json:"start,omitempty"` // YYYY-MM-DD, "" open
	End     string `json:"end,omitempty"`
}

var (
	filterFields  = map[string]string{"from": "From", "to": "To", "subject": "Subject"}
	filterActions = map[string]bool{"move": true, "flag": true, "forward": true}
	dateRE        = regexp.MustCompile(`^\d{4}-\d{2}-\d{2}$`)
)

// sieveQuote writes s as a Sieve quoted string (RFC 5228 §2.4.2).
func sieveQuote(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s) + `"`
}

// generate writes the Sieve script for the settings. The vacation reply
// comes first (it never changes where the message goes), then forwarding
// (without a copy it ends the script), then the rules in their order.
func (f filterSettings) generate() (string, error) {
	meta, err := json.Marshal(f)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	b.WriteString("# Written by the pimail webmail (Settings, Filters). Saving the\n")
	b.WriteString("# filter forms there replaces this script.\n")
	b.WriteString(settingsMarker + string(meta) + "\n")
	b.WriteString(`require ["fileinto", "imap4flags", "copy", "vacation", "date", "relational"];` + "\n")
	if v := f.Vacation; v.Enabled {
		var conds []string
		if v.Start != "" {
			conds = append(conds, `currentdate :value "ge" "date" `+sieveQuote(v.Start))
		}
		if v.End != "" {
			conds = append(conds, `currentdate :value "le" "date" `+sieveQuote(v.End))
		}
		args := ""
		if v.Subject != "" {
			args = ":subject " + sieveQuote(v.Subject) + " "
		}
		action := "vacation :days 7 " + args + sieveQuote(v.Text) + ";"
		b.WriteString("# Vacation reply\n")
		if len(conds) > 0 {
			fmt.Fprintf(&b, "if allof (%s) {\n    %s\n}\n", strings.Join(conds, ", "), action)
		} else {
			b.WriteString(action + "\n")
		}
	}
	if a := f.Forward.Address; a != "" {
		b.WriteString("# Forwarding\n")
		if f.Forward.KeepCopy {
			fmt.Fprintf(&b, "redirect :copy %s;\n", sieveQuote(a))
		} else {
			fmt.Fprintf(&b, "redirect %s;\nstop;\n", sieveQuote(a))
		}
	}
	for i, r := range f.Rules {
		fmt.Fprintf(&b, "# Rule %d\nif header :contains %s %s {\n", i+1, sieveQuote(filterFields[r.Field]), sieveQuote(r.Contains))
		switch r.Action {
		case "move":
			fmt.Fprintf(&b, "    fileinto %s;\n    stop;\n", sieveQuote(r.Target))
		case "flag":
			b.WriteString("    addflag \"\\\\Flagged\";\n")
		case "forward":
			fmt.Fprintf(&b, "    redirect :copy %s;\n", sieveQuote(r.Target))
		}
		b.WriteString("}\n")
	}
	return b.String(), nil
}

// readSettings reads the settings back from a script the webmail wrote;
// ok is false for any other script.
func readSettings(script string) (filterSettings, bool) {
	var f filterSettings
	for _, line := range strings.SplitN(script, "\n", 5) {
		if rest, found := strings.CutPrefix(strings.TrimRight(line, "\r"), settingsMarker); found {
			return f, json.Unmarshal([]byte(rest), &f) == nil
		}
	}
	return f, false
}

// check validates the settings as the forms give them; the error is
// shown to the user.
func (f filterSettings) check(validAddress func(string) bool, mailboxes map[string]bool) error {
	if len(f.Rules) > maxFilterRules {
		return fmt.Errorf("At most %d rules.", maxFilterRules)
	}
	for i, r := range f.Rules {
		n := i + 1
		switch {
		case filterFields[r.Field] == "" || !filterActions[r.Action]:
			return fmt.Errorf("Rule %d: choose a field and an action.", n)
		case r.Contains == "" || len(r.Contains) > maxFilterText:
			return fmt.Errorf("Rule %d: the text to look for must have 1 to %d characters.", n, maxFilterText)
		case r.Action == "move" && !mailboxes[r.Target]:
			return fmt.Errorf("Rule %d: choose a folder to move to.", n)
		case r.Action == "forward" && !validAddress(r.Target):
			return fmt.Errorf("Rule %d: %q is not an email address.", n, r.Target)
		}
	}
	if a := f.Forward.Address; a != "" && !validAddress(a) {
		return fmt.Errorf("Forwarding: %q is not an email address.", a)
	}
	v := f.Vacation
	switch {
	case !v.Enabled:
	case strings.TrimSpace(v.Text) == "" || len(v.Text) > maxVacationLen:
		return fmt.Errorf("Vacation: the reply text must have 1 to %d characters.", maxVacationLen)
	case len(v.Subject) > maxFilterText || strings.ContainsAny(v.Subject, "\r\n"):
		return fmt.Errorf("Vacation: the subject must be one line of at most %d characters.", maxFilterText)
	case (v.Start != "" && !dateRE.MatchString(v.Start)) || (v.End != "" && !dateRE.MatchString(v.End)):
		return fmt.Errorf("Vacation: dates are written YYYY-MM-DD.")
	case v.Start != "" && v.End != "" && v.End < v.Start:
		return fmt.Errorf("Vacation: the last day is before the first.")
	}
	return nil
}
