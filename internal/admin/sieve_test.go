package admin

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// TestAdminSeesAndResetsSieve: the administrator reads an account's
// scripts (escaped) and resets them.
func TestAdminSeesAndResetsSieve(t *testing.T) {
	f := newFixture(t)
	f.srv.cfg.Sieve = f.st
	ctx := ctxT(t)
	id := f.ids["user@example.com"]
	script := "# <b>hi</b>\r\ndiscard;\r\n"
	if err := f.st.PutSieveScript(ctx, id, "rules", script); err != nil {
		t.Fatal(err)
	}
	if err := f.st.SetActiveSieveScript(ctx, id, "rules"); err != nil {
		t.Fatal(err)
	}
	c := f.adminClient(t)
	code, body := c.get("/admin/sieve?account=user@example.com")
	if code != http.StatusOK {
		t.Fatalf("sieve page: %d", code)
	}
	mustContain(t, body, "Sieve scripts of user@example.com", "rules", "active", "# &lt;b&gt;hi&lt;/b&gt;", "discard;")
	if strings.Contains(body, "<b>hi</b>") {
		t.Error("the script is not escaped")
	}
	if code, _ := c.get("/admin/sieve?account=nobody@example.com"); code != http.StatusNotFound {
		t.Errorf("unknown account: %d", code)
	}
	code, body = c.action("/admin/sieve?account=user@example.com", "/admin/sieve", url.Values{"account": {"user@example.com"}, "confirm": {"yes"}})
	if code != http.StatusSeeOther {
		t.Fatalf("reset: %d %s", code, body)
	}
	mustContain(t, body, "The account&#39;s filters were reset.", `id="no-scripts"`)
	if list, err := f.st.SieveScripts(ctx, id); err != nil || len(list) != 0 {
		t.Fatalf("scripts after reset: %v %v", list, err)
	}
	// Users are not administrators.
	u := f.client(t)
	u.login("user@example.com", testPassword)
	if code, _ := u.get("/admin/sieve?account=user@example.com"); code == http.StatusOK {
		t.Error("a user sees the admin's sieve page")
	}
}
