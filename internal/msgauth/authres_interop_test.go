package msgauth

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"

	"pimail/internal/arc"
)

// TestAuthResultsParsers writes Authentication-Results fields for hostile
// and unusual inputs (a "/" or "=" in a local part, quotes, backslashes,
// UTF-8, ";", control characters, domain literals, long values) and has
// Python's authres (python3-authres) and Perl's Mail::AuthenticationResults
// (libmail-authenticationresults-perl) parse every one, as receivers and
// mail readers do (issue 22: about one header in 64 was refused).
func TestAuthResultsParsers(t *testing.T) {
	if err := exec.Command("/usr/bin/python3", "-c", "import authres").Run(); err != nil {
		skipOrFail(t, "python3-authres", err)
	}
	if err := exec.Command("perl", "-MMail::AuthenticationResults::Parser", "-e", "1").Run(); err != nil {
		skipOrFail(t, "libmail-authenticationresults-perl", err)
	}
	odd := []string{"a/b=c@x.test", `"quoted"@x.test`, `back\slash@x.test`, "jösé@bücher.example", "a;b@x.test",
		"a b@x.test", "ctl\x01\r\n@x.test", "@x.test", "x.test", "[192.0.2.1]", "a@[192.0.2.1]", "(c)@x.test", "=?utf-8?q?x?=@x.test",
		strings.Repeat("long", 80) + "@x.test", "", "a@b@c", "user+tag@x.test", "first.last@sub.x.test"}
	var headers []string
	for i, s := range odd {
		r := &Result{
			MailFrom: s, Helo: s,
			SPF:  SPFResult{Result: "fail", Identity: []string{"mailfrom", "helo"}[i%2], Reason: "matched " + s},
			DKIM: []DKIMResult{{Result: "policy", Domain: s, Selector: s, Algorithm: "rsa-sha256", BPrefix: "ab/+=12" + s, Reason: s}},
			DMARC: []DMARCResult{{Result: "fail", FromDomain: s, Policy: PolicyReject, Disposition: PolicyReject, Reason: s},
				{Result: "none", FromDomain: s, Reason: "invalid From domain"}},
			ARC: arc.Result{Status: arc.Fail, Instances: 2, Domain: s, Reason: s},
		}
		headers = append(headers, formatAuthResults("mx.b.test", r))
	}
	headers = append(headers, formatAuthResults("mx.b.test", &Result{SPF: SPFResult{Result: "none", Identity: "mailfrom"}}))
	in, _ := json.Marshal(headers)

	py := `import sys, json, authres
for h in json.load(sys.stdin):
    v = h.split(":", 1)[1].replace("\r\n", "")
    try:
        authres.AuthenticationResultsHeader.parse("Authentication-Results:" + v)
        print("ok")
    except Exception as e:
        print("ERR", repr(h), e)
`
	pl := `use strict; use JSON::PP; use Mail::AuthenticationResults::Parser;
for my $h (@{decode_json(do { local $/; <STDIN> })}) {
  my ($v) = $h =~ /^[^:]*:(.*)$/s; $v =~ s/\r\n//g;
  eval { Mail::AuthenticationResults::Parser->new()->parse($v); 1 } ? print "ok\n" : print "ERR $h $@\n";
}`
	for name, cmd := range map[string]*exec.Cmd{"authres": exec.Command("/usr/bin/python3", "-c", py), "Mail::AuthenticationResults": exec.Command("perl", "-e", pl)} {
		cmd.Stdin = bytes.NewReader(in)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v\n%s", name, err, out)
		}
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		if len(lines) != len(headers) {
			t.Fatalf("%s: %d answers for %d fields:\n%s", name, len(lines), len(headers), out)
		}
		for _, l := range lines {
			if l != "ok" {
				t.Errorf("%s refuses: %s", name, l)
			}
		}
	}
}

func skipOrFail(t *testing.T, pkg string, err error) {
	t.Helper()
	if os.Getenv("PIMAIL_TEST_SKIP_CLIENTS") == "1" {
		t.Skipf("%s missing (PIMAIL_TEST_SKIP_CLIENTS=1): %v", pkg, err)
	}
	t.Fatalf("%s missing (test/all.sh installs it): %v", pkg, err)
}
