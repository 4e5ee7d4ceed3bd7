package msgauth

import (
	"context"
	"fmt"
	"strings"
	"testing"
)

// TestForgedFromBypasses: the ways issue 22 found a forged p=reject From
// to come through as dmarc=none, each now dmarc=fail with disposition
// reject. The domain evaluated is the one the message parser (IMAP
// ENVELOPE, the webmail) shows.
func TestForgedFromBypasses(t *testing.T) {
	z := newZone(t,
		txt("victim.test", "v=spf1 ip4:192.0.2.1 -all"),
		txt("_dmarc.victim.test", "v=DMARC1; p=reject"),
		txt("_dmarc.xn--bcher-kva.example", "v=DMARC1; p=reject"),
		txt("evil.test", "v=spf1 +all"),
	)
	c := checker(t, z.resolver(t), 0)
	filler := strings.Repeat("X-Filler: padding\r\n", 1000)
	var four, eleven []string
	for i := range 11 {
		d := fmt.Sprintf("d%d.test", i)
		if i == 3 {
			d = "victim.test"
		}
		if i < 4 {
			four = append(four, "From: x@"+d+"\r\n")
		}
		eleven = append(eleven, "u@"+d)
	}
	for name, raw := range map[string]string{
		"1000 fields before From":   filler + "From: CEO <ceo@victim.test>\r\n\r\nbody\r\n",
		"comment inside the domain": "From: CEO <ceo@(x)victim.test>\r\n\r\nbody\r\n",
		"four From fields":          strings.Join(four, "") + "\r\nbody\r\n",
		"four addresses":            "From: a@d0.test, b@d1.test, c@d2.test, CEO <ceo@victim.test>\r\n\r\nbody\r\n",
		"eleven From domains":       "From: " + strings.Join(eleven, ", ") + "\r\n\r\nbody\r\n",
		"IDN From domain":           "From: CEO <ceo@bücher.example>\r\n\r\nbody\r\n",
		"IDN From domain, upper":    "From: CEO <ceo@BÜCHER.example>\r\n\r\nbody\r\n",
		"trailing dot":              "From: ceo@victim.test.\r\n\r\nbody\r\n",
		"encoded display name":      "From: =?utf-8?q?CEO?= <ceo@victim.test>\r\n\r\nbody\r\n",
	} {
		res := c.Check(context.Background(), Input{Raw: []byte(raw), RemoteIP: "198.51.100.7", Helo: "evil.test", MailFrom: "x@evil.test"})
		v, ok := res.DMARCVerdict()
		if !ok || v.Result != "fail" || v.Disposition != PolicyReject {
			t.Errorf("%s: verdict %+v (all: %+v)\n%s", name, v, res.DMARC, res.Header)
		}
	}
}
