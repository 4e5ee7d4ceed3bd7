package imapd

import (
	"context"
	"strings"
	"testing"

	"pimail/internal/store"
)

func TestCreateSpecialUse(t *testing.T) {
	e := newTestEnv(t, Config{})
	r := e.raw()
	r.login()
	if res := r.cmd("c", "CAPABILITY"); !strings.Contains(res[0], " CREATE-SPECIAL-USE") {
		t.Fatalf("capability: %q", res)
	}
	if l := last(r.cmd("a", `CREATE Old/2023 (USE (\archive))`)); !strings.HasPrefix(l, "a OK") {
		t.Fatalf("CREATE USE: %q", l)
	}
	mb, err := e.st.Mailbox(context.Background(), e.acct.ID, "Old/2023")
	if err != nil || mb.SpecialUse != store.SpecialArchive {
		t.Fatalf("stored special use %q, %v", mb.SpecialUse, err)
	}
	parent, err := e.st.Mailbox(context.Background(), e.acct.ID, "Old")
	if err != nil || parent.SpecialUse != store.SpecialNone {
		t.Fatalf("parent special use %q, %v", parent.SpecialUse, err)
	}
	if res := r.cmd("l", `LIST "" Old/2023`); !strings.Contains(res[0], `\Archive`) {
		t.Fatalf("LIST: %q", res)
	}
	if l := last(r.cmd("b", `CREATE X (USE (\Flagged))`)); !strings.HasPrefix(l, "b NO [USEATTR]") {
		t.Fatalf("unsupported use: %q", l)
	}
	if l := last(r.cmd("b2", `CREATE Y (USE (\Sent \Junk))`)); !strings.HasPrefix(l, "b2 NO [USEATTR]") {
		t.Fatalf("two uses: %q", l)
	}
	if l := last(r.cmd("b3", `CREATE Z (FOO (\Sent))`)); !strings.HasPrefix(l, "b3 BAD") {
		t.Fatalf("bad parameter: %q", l)
	}
	if l := last(r.cmd("d", `CREATE Plain (USE ())`)); !strings.HasPrefix(l, "d OK") {
		t.Fatalf("empty USE: %q", l)
	}
}

func TestQuota(t *testing.T) {
	e := newTestEnv(t, Config{})
	r := e.raw()
	r.login()
	if res := r.cmd("c", "CAPABILITY"); !strings.Contains(res[0], " QUOTA") || strings.Contains(res[0], "QUOTA=RES-") {
		t.Fatalf("capability: %q", res)
	}
	res := r.cmd("q", "GETQUOTAROOT INBOX")
	if len(res) != 3 || res[0] != `* QUOTAROOT INBOX ""` || res[1] != `* QUOTA "" ()` {
		t.Fatalf("GETQUOTAROOT: %q", res)
	}
	if res := r.cmd("g", `GETQUOTA ""`); len(res) != 2 || res[0] != `* QUOTA "" ()` {
		t.Fatalf("GETQUOTA: %q", res)
	}
	if l := last(r.cmd("n", `GETQUOTA "other"`)); !strings.HasPrefix(l, "n NO") {
		t.Fatalf("unknown root: %q", l)
	}
	if l := last(r.cmd("m", "GETQUOTAROOT Nowhere")); !strings.HasPrefix(l, "m NO") {
		t.Fatalf("missing mailbox: %q", l)
	}
}
