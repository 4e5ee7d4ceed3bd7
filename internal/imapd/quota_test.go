package imapd

import (
	"context"
	"fmt"
	"strings"
	"testing"
)

// TestQuotaWithLimit: GETQUOTAROOT and GETQUOTA report STORAGE in KiB
// (RFC 9208 §5.1), QUOTA=RES-STORAGE is advertised, and an APPEND that
// would go over the limit is NO [OVERQUOTA] while a smaller one passes.
func TestQuotaWithLimit(t *testing.T) {
	e := newTestEnv(t, Config{})
	ctx := context.Background()
	if err := e.st.SetQuota(ctx, e.acct.Address, 10*1024); err != nil {
		t.Fatal(err)
	}
	msg := "Subject: q\r\n\r\n" + strings.Repeat("x", 3000) + "\r\n"
	e.deliver("INBOX", msg) // 3017 bytes: 3 KiB rounded up
	r := e.raw()
	// The capabilities in the login's OK come from the account read for
	// the login (RFC 3501 §7.1 CAPABILITY response code).
	if l := last(r.cmd("L", "LOGIN alice@example.org "+testPassword)); !strings.HasPrefix(l, "L OK [CAPABILITY ") || !strings.Contains(l, " QUOTA=RES-STORAGE") {
		t.Fatalf("login: %q", l)
	}
	if res := r.cmd("c", "CAPABILITY"); !strings.Contains(res[0], " QUOTA ") || !strings.Contains(res[0], " QUOTA=RES-STORAGE") {
		t.Fatalf("capability: %q", res)
	}
	res := r.cmd("q", "GETQUOTAROOT INBOX")
	if len(res) != 3 || res[0] != `* QUOTAROOT INBOX ""` || res[1] != `* QUOTA "" (STORAGE 3 10)` {
		t.Fatalf("GETQUOTAROOT: %q", res)
	}
	// Two more copies fit (9051 bytes), a third would not.
	for i := range 2 {
		res := r.cmd(fmt.Sprintf("a%d", i), fmt.Sprintf("APPEND Archive {%d+}\r\n%s", len(msg), msg))
		if l := last(res); !strings.HasPrefix(l, fmt.Sprintf("a%d OK [APPENDUID ", i)) {
			t.Fatalf("APPEND under quota: %q", res)
		}
	}
	if res := r.cmd("g", `GETQUOTA ""`); len(res) != 2 || res[0] != `* QUOTA "" (STORAGE 9 10)` {
		t.Fatalf("GETQUOTA: %q", res)
	}
	res = r.cmd("o", fmt.Sprintf("APPEND INBOX {%d+}\r\n%s", len(msg), msg))
	if l := last(res); !strings.HasPrefix(l, "o NO [OVERQUOTA] ") {
		t.Fatalf("APPEND over quota: %q", res)
	}
	if res := r.cmd("s", "STATUS INBOX (MESSAGES)"); res[0] != "* STATUS INBOX (MESSAGES 1)" {
		t.Fatalf("the refused APPEND stored something: %q", res)
	}
	// Lifting the limit: an empty resource list, no RES-STORAGE.
	if err := e.st.SetQuota(ctx, e.acct.Address, 0); err != nil {
		t.Fatal(err)
	}
	if res := r.cmd("g2", `GETQUOTA ""`); res[0] != `* QUOTA "" ()` {
		t.Fatalf("GETQUOTA without a limit: %q", res)
	}
	if res := r.cmd("c2", "CAPABILITY"); strings.Contains(res[0], "QUOTA=RES-") {
		t.Fatalf("capability without a limit: %q", res)
	}
	if l := last(r.cmd("o2", fmt.Sprintf("APPEND INBOX {%d+}\r\n%s", len(msg), msg))); !strings.HasPrefix(l, "o2 OK") {
		t.Fatalf("APPEND without a limit: %q", l)
	}
}

// TestQuotaCopyMove: a COPY that would go over the STORAGE limit is
// NO [OVERQUOTA] and copies nothing, not even the messages that would
// fit (RFC 9051 §6.4.7); a MOVE within the account, which does not change
// the usage, still works when the account is full.
func TestQuotaCopyMove(t *testing.T) {
	e := newTestEnv(t, Config{})
	ctx := context.Background()
	if err := e.st.SetQuota(ctx, e.acct.Address, 10*1024); err != nil {
		t.Fatal(err)
	}
	msg := "Subject: q\r\n\r\n" + strings.Repeat("x", 3000) + "\r\n" // 3017 bytes
	e.deliver("INBOX", msg)
	e.deliver("INBOX", msg)
	r := e.raw()
	r.login()
	r.cmd("s", "SELECT INBOX")
	// 2 × 3017 used; copying both (12068) would exceed 10240.
	if l := last(r.cmd("c1", "COPY 1:2 Archive")); !strings.HasPrefix(l, "c1 NO [OVERQUOTA] ") {
		t.Fatalf("COPY over quota: %q", l)
	}
	if res := r.cmd("st", "STATUS Archive (MESSAGES)"); res[0] != "* STATUS Archive (MESSAGES 0)" {
		t.Fatalf("the refused COPY copied something: %q", res)
	}
	if l := last(r.cmd("c2", "UID COPY 1 Archive")); !strings.HasPrefix(l, "c2 OK [COPYUID ") {
		t.Fatalf("COPY under quota: %q", l)
	}
	// Full now (9051 of 10240): one more copy does not fit.
	if l := last(r.cmd("c3", "COPY 1 Archive")); !strings.HasPrefix(l, "c3 NO [OVERQUOTA] ") {
		t.Fatalf("COPY over quota: %q", l)
	}
	if res := r.cmd("g", `GETQUOTA ""`); res[0] != `* QUOTA "" (STORAGE 9 10)` {
		t.Fatalf("GETQUOTA: %q", res)
	}
	if l := last(r.cmd("m", "MOVE 1 Archive")); !strings.HasPrefix(l, "m OK") {
		t.Fatalf("MOVE at quota: %q", l)
	}
	if res := r.cmd("st2", "STATUS Archive (MESSAGES)"); res[0] != "* STATUS Archive (MESSAGES 2)" {
		t.Fatalf("after MOVE: %q", res)
	}
	if res := r.cmd("g2", `GETQUOTA ""`); res[0] != `* QUOTA "" (STORAGE 9 10)` {
		t.Fatalf("GETQUOTA after MOVE: %q", res)
	}
}
