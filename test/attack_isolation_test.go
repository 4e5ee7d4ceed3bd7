package blackbox

import (
	"fmt"
	"strings"
	"testing"
)

// bobSecret is in every message and mailbox name of the victim account;
// it must never reach the attacker's session.
const bobSecret = "BOBSECRET7319"

// bobMessages is how many messages each of the victim's mailboxes holds:
// a count the attacker's own mailboxes never reach, so a STATUS or EXISTS
// with it is the victim's.
const bobMessages = 23

// TestAttackMailboxIsolation logs in as one account and tries to reach
// another's mailboxes through names with "..", "/", "~", "%", "*",
// namespace prefixes ("#news.", "#shared/", "#user/", "Other Users/") and
// absolute paths, with every command that takes a mailbox name. No answer
// may carry the other account's data, and the other account's mail must
// be unchanged afterwards (DESIGN: accounts are isolated).
func TestAttackMailboxIsolation(t *testing.T) {
	t.Parallel()
	srv := NewServer(t, "")
	users := srv.AddAccounts("mallory", "bob")
	mallory, bob := users[0], users[1]
	srv.Start()

	victim := dialIMAP(t, srv.IMAP)
	victim.login(bob)
	victim.expectStatus("c1", "CREATE Private"+bobSecret, "OK")
	for i := range bobMessages {
		msg := generatedMessage(bobSecret, i, 800)
		for _, mb := range []string{"INBOX", "Private" + bobSecret} {
			if st, err := victim.appendMsg("a", mb, msg); err != nil || !strings.HasPrefix(st, "OK") {
				t.Fatalf("bob APPEND %s: %q %v", mb, st, err)
			}
		}
	}
	victim.expectStatus("c2", "LOGOUT", "OK")
	bobBefore := map[string]mailboxStatus{}
	{
		ic := dialIMAP(t, srv.IMAP)
		ic.login(bob)
		for _, mb := range []string{"INBOX", "Private" + bobSecret} {
			bobBefore[mb] = ic.status(t, mb)
		}
	}

	names := []string{
		"../" + bob + "/INBOX", "../bob/INBOX", "..", "../..", "../../../../etc/passwd",
		"/" + bob + "/INBOX", "/INBOX", "/etc/passwd", "/var/lib/pimail/pimail.db",
		bob + "/INBOX", "bob/INBOX", bob, "bob",
		"~bob", "~bob/INBOX", "~" + bob + "/INBOX", "~/../bob/INBOX",
		"#news.comp.mail", "#shared/bob/INBOX", "#user/bob/INBOX", "#user/" + bob + "/INBOX", "#public/INBOX",
		"Other Users/bob/INBOX", "Shared Folders/bob/INBOX",
		"INBOX/../Private" + bobSecret, "INBOX/../../bob/INBOX", "INBOX/../" + bob + "/INBOX",
		"Private" + bobSecret, "private" + strings.ToLower(bobSecret),
		"%", "*", "%/%", "*/INBOX", "INBOX\x00../bob",
		"..%2fbob%2fINBOX", "INBOX/./../bob",
	}
	ic := dialIMAP(t, srv.IMAP)
	ic.login(mallory)
	leaks := 0
	check := func(cmd string) {
		t.Helper()
		status, untagged, err := ic.command("x", cmd)
		if err != nil {
			t.Fatalf("%q: %v", cmd, err)
		}
		all := strings.Join(append(untagged, status), "\n")
		counted := strings.Contains(all, fmt.Sprintf("MESSAGES %d", bobMessages)) ||
			strings.Contains(all, fmt.Sprintf("* %d EXISTS", bobMessages))
		named := !strings.Contains(strings.ToUpper(cmd), bobSecret) && strings.Contains(strings.ToUpper(all), bobSecret)
		if counted || named || strings.Contains(all, "@blackbox.test") || strings.Contains(all, bob) && !strings.Contains(cmd, bob) {
			leaks++
			t.Errorf("%q leaked the other account's data: %q", cmd, clip(all, 400))
		}
		if strings.HasPrefix(cmd, "SELECT") || strings.HasPrefix(cmd, "EXAMINE") {
			if strings.HasPrefix(status, "OK") {
				// Whatever was selected must be mallory's own (empty) box.
				st2, u2, _ := ic.command("y", "FETCH 1:* (BODY.PEEK[])")
				if strings.Contains(strings.Join(append(u2, st2), "\n"), bobSecret) {
					leaks++
					t.Errorf("%q then FETCH returned the other account's mail", cmd)
				}
			}
		}
	}
	for _, n := range names {
		q := quoteIMAP(n)
		for _, cmd := range []string{
			"SELECT " + q, "EXAMINE " + q, "STATUS " + q + " (MESSAGES UIDNEXT UNSEEN)",
			`LIST "" ` + q, "LIST " + q + ` "*"`, `LIST "" ` + q + " RETURN (STATUS (MESSAGES))",
			// A subscription is mallory's own name (RFC 3501 §6.3.6: it
			// need not exist); it shows as \NonExistent, never as bob's
			// mailbox, and goes again so that later listings do not echo it.
			"LSUB " + q + ` "*"`, "SUBSCRIBE " + q, `LIST (SUBSCRIBED) "" ` + q + " RETURN (STATUS (MESSAGES))",
			"UNSUBSCRIBE " + q, "GETQUOTAROOT " + q,
			"DELETE " + q, "RENAME " + q + " Stolen", "APPEND " + q + " {5+}\r\nowned",
		} {
			check(cmd)
		}
		// COPY and MOVE from mallory's own INBOX into the name.
		check("SELECT INBOX")
		check("COPY 1:* " + q)
		check("UNSELECT")
	}
	check(`LIST "" "*"`)
	check(`LIST "" "%"`)
	check(`LIST (SUBSCRIBED) "" "*"`)
	check("NAMESPACE")
	t.Logf("%d names × 17 commands tried; %d leaks", len(names), leaks)

	// Bob's mail is untouched.
	b := dialIMAP(t, srv.IMAP)
	b.login(bob)
	for mb, before := range bobBefore {
		if after := b.status(t, mb); after != before {
			t.Errorf("bob's %s changed during the attack: %+v -> %+v", mb, before, after)
		}
	}
}

// quoteIMAP writes s as an IMAP quoted string, or a literal when it holds
// characters a quoted string cannot (RFC 9051 §4.3).
func quoteIMAP(s string) string {
	if strings.ContainsAny(s, "\x00\r\n") || !isASCII(s) {
		return fmt.Sprintf("{%d+}\r\n%s", len(s), s)
	}
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s) + `"`
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}
