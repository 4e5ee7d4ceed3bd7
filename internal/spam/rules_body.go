package spam

import (
	"net/netip"
	"slices"
	"strings"
)

func ruleHTMLOnly(c *ruleCtx) bool { return c.a.hasHTML && !c.a.hasPlain }

func ruleImageHeavy(c *ruleCtx) bool {
	if !c.a.hasHTML || c.a.hasPlain {
		return false
	}
	imgs, letters := 0, 0
	for _, d := range c.a.html {
		imgs += d.images
		letters += countLetters(d.text)
	}
	return imgs > 0 && letters < 200*imgs && letters < 400
}

func ruleHiddenText(c *ruleCtx) bool {
	for _, d := range c.a.html {
		if d.hiddenText >= 20 {
			return true
		}
	}
	return false
}

func ruleForm(c *ruleCtx) bool {
	for _, d := range c.a.html {
		if d.forms > 0 {
			return true
		}
	}
	return false
}

func ruleTextBase64(c *ruleCtx) bool { return c.a.b64Text }

// ruleBodyCaps: more than 60 % capitals over at least 200 letters.
func ruleBodyCaps(c *ruleCtx) bool {
	return c.a.letters >= 200 && c.a.upper*10 > c.a.letters*6
}

// isIPHost reports whether a URL host is an IP literal. Only strings of
// the right characters are parsed (a failed parse allocates an error).
func isIPHost(h string) bool {
	h = strings.Trim(h, "[]")
	if h == "" {
		return false
	}
	for i := 0; i < len(h); i++ {
		c := h[i]
		if !(c >= '0' && c <= '9' || c == '.' || c == ':' || isHex(c)) {
			return false
		}
	}
	_, err := netip.ParseAddr(h)
	return err == nil
}

func ruleURLIP(c *ruleCtx) bool {
	for _, h := range c.a.hosts {
		if h != "" && isIPHost(h) {
			return true
		}
	}
	return false
}

// ruleAnchorMismatch: the visible text of a link is itself a URL or a
// domain name, and it names another registrable domain than the target:
// the classic phishing disguise.
func ruleAnchorMismatch(c *ruleCtx) bool {
	for _, l := range c.a.links {
		target := urlHost(l.href)
		if target == "" {
			continue
		}
		text := strings.ToLower(strings.TrimSpace(l.text))
		if strings.ContainsAny(text, " \t\n") || !strings.Contains(text, ".") {
			continue
		}
		shown := urlHost(text)
		if shown == "" && looksLikeDomain(text) {
			shown = strings.TrimRight(strings.SplitN(text, "/", 2)[0], ".")
		}
		if shown == "" {
			continue
		}
		if registrable(shown) != registrable(target) {
			return true
		}
	}
	return false
}

// looksLikeDomain: letters, digits, dots and dashes, a dot, and a final
// label of letters ("paypal.com", not "3.5" or "e.g.").
func looksLikeDomain(s string) bool {
	s = strings.SplitN(s, "/", 2)[0]
	if len(s) < 4 || !strings.Contains(s, ".") {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '.' || r == '-') {
			return false
		}
	}
	labels := strings.Split(strings.TrimRight(s, "."), ".")
	tld := labels[len(labels)-1]
	if len(tld) < 2 || len(labels) < 2 || labels[len(labels)-2] == "" {
		return false
	}
	for _, r := range tld {
		if r < 'a' || r > 'z' {
			return false
		}
	}
	return true
}

func ruleManyHosts(c *ruleCtx) bool {
	var seen [9]string
	n := 0
	for _, h := range c.a.hosts {
		if h == "" {
			continue
		}
		r := registrable(h)
		if !slices.Contains(seen[:n], r) {
			if n == len(seen) {
				return true // more than 8
			}
			seen[n] = r
			n++
		}
	}
	return false
}

// execExtensions are file name extensions that run code when opened on
// common desktops. The virus step (internal/av) enforces its own list;
// here they only add points.
var execExtensions = map[string]bool{
	"exe": true, "scr": true, "com": true, "pif": true, "bat": true, "cmd": true,
	"vbs": true, "vbe": true, "js": true, "jse": true, "wsf": true, "wsh": true,
	"hta": true, "cpl": true, "msi": true, "jar": true, "ps1": true, "lnk": true,
}

func ruleExecName(c *ruleCtx) bool {
	for _, at := range c.a.attachments {
		if execExtensions[extension(at.name)] {
			return true
		}
	}
	return false
}
