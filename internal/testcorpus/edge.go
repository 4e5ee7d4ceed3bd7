package testcorpus

import (
	"fmt"
	"strings"
)

type edgeCase struct {
	name string
	raw  []byte
}

// edgeCases returns malformed and unusual messages, each kind in four
// variants (different identifiers, and where it matters sizes), so that
// samples of the folder find many of them (the black-box tests take 100
// that SMTP can carry).
func edgeCases() []edgeCase {
	var out []edgeCase
	for v := range 4 {
		for _, k := range edgeKinds {
			out = append(out, edgeCase{fmt.Sprintf("%s-%d", k.name, v+1), []byte(k.make(v))})
		}
	}
	return out
}

// hdrs is the header every edge case starts with unless the case is about
// it.
func hdrs(v int, subject string) string {
	return fmt.Sprintf("From: Edge Case <edge@example.org>\nTo: Tester <tester@example.net>\nSubject: %s (%d)\n"+
		"Date: Tue, 1%d Mar 2022 09:0%d:00 +0100\nMessage-ID: <edge-%s-%d@example.org>\nMIME-Version: 1.0\n",
		subject, v+1, v, v, strings.ReplaceAll(subject, " ", "-"), v)
}

var edgeKinds = []struct {
	name string
	make func(v int) string
}{
	{"header-only", func(v int) string { return hdrs(v, "header only, no body") }},
	{"no-separator", func(v int) string {
		return hdrs(v, "no blank line") + "Content-Type: text/plain\nthis line was meant as body\nand so was this\n"
	}},
	{"body-only", func(v int) string { return "\nA body with no header at all, variant " + fmt.Sprint(v) + ".\n" }},
	{"boundary-missing", func(v int) string {
		return hdrs(v, "multipart without boundary") + "Content-Type: multipart/mixed\n\n--x\nContent-Type: text/plain\n\nhello\n--x--\n"
	}},
	{"boundary-unclosed", func(v int) string {
		return hdrs(v, "unclosed multipart") + "Content-Type: multipart/mixed; boundary=\"b\"\n\n--b\nContent-Type: text/plain\n\nfirst\n--b\nContent-Type: text/html\n\n<p>second, never closed"
	}},
	{"preamble-epilogue", func(v int) string {
		return hdrs(v, "preamble and epilogue") + "Content-Type: multipart/mixed; boundary=\"sep\"\n\nThis is the preamble.\n--not the boundary\n\n--sep\nContent-Type: text/plain\n\npart one\n--sep--\nThis is the epilogue.\n--sep\nafter the end\n"
	}},
	{"deep-nesting", func(v int) string {
		depth := 20 + 20*v
		var b strings.Builder
		b.WriteString(hdrs(v, "deep nesting"))
		b.WriteString("Content-Type: multipart/mixed; boundary=\"d0\"\n\n")
		for d := 1; d <= depth; d++ {
			fmt.Fprintf(&b, "--d%d\nContent-Type: multipart/mixed; boundary=\"d%d\"\n\n", d-1, d)
		}
		fmt.Fprintf(&b, "--d%d\nContent-Type: text/plain\n\ndeep\n", depth)
		for d := depth; d >= 0; d-- {
			fmt.Fprintf(&b, "--d%d--\n", d)
		}
		return b.String()
	}},
	{"many-parts", func(v int) string {
		var b strings.Builder
		b.WriteString(hdrs(v, "many parts"))
		b.WriteString("Content-Type: multipart/mixed; boundary=\"p\"\n\n")
		for i := range 100 * (v + 1) {
			fmt.Fprintf(&b, "--p\nContent-Type: text/plain; name=\"part%d.txt\"\n\npart %d\n", i, i)
		}
		b.WriteString("--p--\n")
		return b.String()
	}},
	{"nested-rfc822", func(v int) string {
		inner := "From: innermost@example.com\nSubject: innermost\n\ninnermost body\n"
		for l := range 3 + v {
			inner = fmt.Sprintf("From: level%d@example.com\nSubject: level %d\nMIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"l%d\"\n\n--l%d\nContent-Type: text/plain\n\nlevel %d\n--l%d\nContent-Type: message/rfc822\n\n%s--l%d--\n", l, l, l, l, l, l, inner, l)
		}
		return hdrs(v, "nested messages") + "Content-Type: message/rfc822\n\n" + inner
	}},
	{"truncated-rfc822", func(v int) string {
		return hdrs(v, "truncated enclosed message") + "Content-Type: message/rfc822\n\nFrom: cut@example.com\nSubject: cut off"
	}},
	{"bad-base64", func(v int) string {
		return hdrs(v, "bad base64") + "Content-Type: text/plain; charset=utf-8\nContent-Transfer-Encoding: base64\n\nSGVsbG8g!!!V29ybGQ=\n====\nnot base64 at all ☃\nQUJD\n"
	}},
	{"bad-qp", func(v int) string {
		return hdrs(v, "bad quoted-printable") + "Content-Type: text/plain; charset=iso-8859-1\nContent-Transfer-Encoding: quoted-printable\n\nsoft break=\n=ZZ bad escape =4 short =\xe9 raw 8-bit =E9t=E9\nends with equals=\n"
	}},
	{"unknown-charset", func(v int) string {
		return hdrs(v, "unknown charset") + "Content-Type: text/plain; charset=x-no-such-charset\nContent-Transfer-Encoding: 8bit\n\nbytes \xa4\xa2\xb0 in an unknown charset\n"
	}},
	{"bad-encoded-words", func(v int) string {
		return "From: =?utf-8?B?SW52YWxpZA?= <bad@example.org>\nTo: =?unknown?Q?x?= <to@example.net>\n" +
			"Subject: =?utf-8?Q?unterminated =?utf-8?B?w6k=?= =?iso-8859-1?Q?caf=E9?==?utf-8?X?bad-enc?=\n" +
			fmt.Sprintf("Date: Wed, 02 Feb 2022 10:00:0%d +0000\nMessage-ID: <ew-%d@example.org>\n\nbody\n", v, v)
	}},
	{"raw-8bit-header", func(v int) string {
		return fmt.Sprintf("From: Jürgen Größe <jg@example.org>\nTo: Zoë \xe9l\xe8ve <zoe@example.net>\nSubject: Grüße, naïve café %d, 日本語\nDate: Thu, 03 Feb 2022 11:00:00 +0100\nMessage-ID: <8bit-%d@example.org>\n\nbody\n", v, v)
	}},
	{"long-header", func(v int) string {
		long := strings.Repeat("word ", 300*(v+1))
		return hdrs(v, "long headers") + "X-Folded: " + strings.ReplaceAll(long, "word word word word word word word word word word ", "word word word word word word word word word word\n\t") +
			"\nX-Unfolded: " + long + "\nReferences: " + strings.Repeat("<ref@example.org> ", 100) + "\n\nbody\n"
	}},
	{"duplicate-fields", func(v int) string {
		return "From: first@example.org\nFrom: second@example.org\nSubject: one\nSubject: two\nDate: Fri, 04 Feb 2022 12:00:00 +0000\nDate: Sat, 05 Feb 2022 12:00:00 +0000\n" +
			fmt.Sprintf("Message-ID: <dup-%d@example.org>\nMessage-ID: <dup2-%d@example.org>\nTo: a@example.net\n\nbody\n", v, v)
	}},
	{"missing-fields", func(v int) string { return fmt.Sprintf("X-Only: %d\n\nno From, no Date, no Message-ID\n", v) }},
	{"odd-dates", func(v int) string {
		dates := []string{"yesterday", "32 Feb 2020 25:61:00 +9999", "Mon, 7 Mar 22 10:00 EST", "Tue, 8 Mar 2022 10:00:00 GMT+2", "8 Mar 2022 10:00:00", "Tuesday, 08-Mar-2022 10:00:00 UT"}
		return fmt.Sprintf("From: d@example.org\nDate: %s\nResent-Date: %s\nSubject: odd date %d\nMessage-ID: <date-%d@example.org>\n\nbody\n", dates[v%len(dates)], dates[(v+3)%len(dates)], v, v)
	}},
	{"odd-addresses", func(v int) string {
		return "From: \"Quoted, Name\" <\"odd local\"@example.org>\n" +
			"To: undisclosed-recipients:;, Team: a@example.net, b@example.net;, <@route.example:c@example.net>\n" +
			"Cc: d@example.net (a comment), \"unterminated <e@example.net, f@bücher.example, 用户@例子.example\n" +
			"Bcc: <missing-bracket@example.net, @, plain\n" +
			fmt.Sprintf("Reply-To: <>\nSubject: odd addresses %d\nDate: Sun, 06 Feb 2022 12:00:00 +0000\nMessage-ID: <addr-%d@example.org>\n\nbody\n", v, v)
	}},
	{"mixed-line-endings", func(v int) string {
		return strings.ReplaceAll(hdrs(v, "mixed line endings"), "Subject", "X-CRLF: yes\r\nSubject") + "\r\nline with CRLF\r\nline with LF\nline with CRLF again\r\n"
	}},
	{"bare-cr", func(v int) string { return hdrs(v, "bare CR") + "\nline with a bare\rCR inside\nand \r at the end\r\n" }},
	{"nul-byte", func(v int) string { return hdrs(v, "NUL byte") + "\nbefore\x00after NUL\n" }},
	{"rfc2231-params", func(v int) string {
		return hdrs(v, "RFC 2231 parameters") + "Content-Type: multipart/mixed; boundary=\"r\"\n\n--r\nContent-Type: application/octet-stream;\n name*0*=UTF-8''%E2%82%AC%20long%20;\n name*1*=file%20name;\n name*2=\".bin\"\nContent-Disposition: attachment; filename*=iso-8859-1'de'%FCber.bin\nContent-Transfer-Encoding: base64\n\nAAECAwQF\n--r--\n"
	}},
	{"odd-content-types", func(v int) string {
		return hdrs(v, "odd content types") + "Content-Type: MULTIPART/Alternative; BOUNDARY=XYZ; charset\n\n--XYZ\nContent-Type: text\n\nno subtype\n--XYZ\nContent-Type: /html\n\nno type\n--XYZ\nContent-Type: text/plain; ; ;charset=\"utf-8\n\nunterminated quote\n--XYZ--\n"
	}},
	{"header-syntax", func(v int) string {
		return " continuation first\nSubject : space before colon\nno colon on this line\n: empty name\nX-Empty:\nX-Tab:\tvalue\n" +
			fmt.Sprintf("From: hs@example.org\nMessage-ID: <hs-%d@example.org>\n\nbody\n", v)
	}},
	{"uuencode", func(v int) string {
		return hdrs(v, "uuencoded attachment") + "Content-Type: application/octet-stream; name=a.txt\nContent-Transfer-Encoding: x-uuencode\n\nbegin 644 a.txt\n#86)C\n`\nend\n"
	}},
	{"hostile-html", func(v int) string {
		return hdrs(v, "hostile HTML") + "Content-Type: text/html; charset=utf-8\n\n<html><head><script>alert(1)</script><style>body{background:url(javascript:alert(2))}</style></head>" +
			"<body onload=\"alert(3)\"><iframe src=\"https://evil.invalid/\"></iframe><a href=\"javascript:alert(4)\">x</a><img src=x onerror=alert(5)>" +
			"<form action=\"https://evil.invalid/steal\"><input name=p type=password></form><svg><script>alert(6)</script></svg>" +
			"<meta http-equiv=\"refresh\" content=\"0;url=https://evil.invalid/\"><object data=\"x.swf\"></object></body></html>\n"
	}},
	{"remote-images", func(v int) string {
		return hdrs(v, "remote images") + "Content-Type: text/html; charset=utf-8\n\n<p>Hello</p><img src=\"https://tracker.invalid/pixel.gif?u=1\" width=1 height=1>" +
			"<div style=\"background-image:url('https://tracker.invalid/bg.png')\">styled</div><link rel=stylesheet href=\"https://tracker.invalid/s.css\">\n"
	}},
	{"long-line", func(v int) string {
		return hdrs(v, "very long line") + "Content-Type: text/plain\n\n" + strings.Repeat("x", 20000*(v+1)) + "\n"
	}},
	{"boundary-prefix", func(v int) string {
		return hdrs(v, "boundary prefix") + "Content-Type: multipart/mixed; boundary=\"ab\"\n\n--ab\nContent-Type: multipart/alternative; boundary=\"abc\"\n\n--abc\nContent-Type: text/plain\n\ninner\n--abc--\n--ab\nContent-Type: text/plain\n\n--abcd is not a boundary line\n--ab--\n"
	}},
	{"digest", func(v int) string {
		return hdrs(v, "digest") + "Content-Type: multipart/digest; boundary=\"dg\"\n\n--dg\n\nFrom: one@example.org\nSubject: first digested\n\none\n--dg\n\nFrom: two@example.org\nSubject: second digested\n\ntwo\n--dg--\n"
	}},
	{"signed", func(v int) string {
		return hdrs(v, "signed") + "Content-Type: multipart/signed; micalg=pgp-sha256; protocol=\"application/pgp-signature\"; boundary=\"s\"\n\n--s\nContent-Type: text/plain\n\nsigned text\n--s\nContent-Type: application/pgp-signature; name=\"signature.asc\"\n\n-----BEGIN PGP SIGNATURE-----\n\niQEzBAEBCAAdFiEEAAAAAAAAAAAAAAAAAAAAAAAAAAAFAmIAAAAACgkQAAAAAAAAAAA=\n=AAAA\n-----END PGP SIGNATURE-----\n--s--\n"
	}},
	{"dsn", func(v int) string {
		return strings.Replace(hdrs(v, "delivery status"), "From: Edge Case <edge@example.org>", "From: Mail Delivery System <MAILER-DAEMON@mx.example.org>", 1) +
			"Content-Type: multipart/report; report-type=delivery-status; boundary=\"r\"\n\n--r\nContent-Type: text/plain\n\nYour message could not be delivered.\n" +
			"--r\nContent-Type: message/delivery-status\n\nReporting-MTA: dns; mx.example.org\n\nFinal-Recipient: rfc822; gone@example.net\nAction: failed\nStatus: 5.1.1\n" +
			"--r\nContent-Type: text/rfc822-headers\n\nFrom: edge@example.org\nTo: gone@example.net\nSubject: lost\n--r--\n"
	}},
	{"tnef", func(v int) string {
		return hdrs(v, "TNEF") + "Content-Type: multipart/mixed; boundary=\"t\"\n\n--t\nContent-Type: text/plain\n\nsee attachment\n--t\nContent-Type: application/ms-tnef; name=\"winmail.dat\"\nContent-Transfer-Encoding: base64\n\neJ8+IgAAAAAAAAAAAAAAAAAAAAAAAAAA\n--t--\n"
	}},
	{"mbox-from-line", func(v int) string {
		return fmt.Sprintf("From edge@example.org Mon Mar  7 10:00:0%d 2022\n", v) + hdrs(v, "mbox From_ line first") + "\nbody\n"
	}},
	{"bom", func(v int) string { return "\xef\xbb\xbf" + hdrs(v, "byte order mark") + "\nbody after a BOM\n" }},
	{"empty-subject", func(v int) string {
		return strings.Replace(hdrs(v, "x"), fmt.Sprintf("Subject: x (%d)", v+1), "Subject:"+strings.Repeat(" ", v), 1) + "\nempty subject\n"
	}},
	{"dot-lines", func(v int) string {
		return hdrs(v, "dot lines") + "\n.\n..\n.leading dot\n. \nFrom the start of a line\n>From quoted\n"
	}},
	{"inline-filename", func(v int) string {
		return hdrs(v, "inline with a file name") + "Content-Type: multipart/mixed; boundary=\"i\"\n\n--i\nContent-Type: text/plain; name=\"notes.txt\"\nContent-Disposition: inline; filename=\"notes.txt\"\n\ninline text file\n--i\nContent-Type: application/octet-stream; name=\"../../etc/passwd\"\n\npath in a name\n--i--\n"
	}},
	{"empty-file", func(v int) string {
		if v == 0 {
			return "\n"
		}
		return strings.Repeat("\n", v+1)
	}},
}
