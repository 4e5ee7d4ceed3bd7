package testcorpus

import (
	"fmt"
	"math/rand/v2"
	"strings"

	"golang.org/x/text/encoding/charmap"
	"golang.org/x/text/encoding/simplifiedchinese"
)

// spamURL is a link of the kind spam carries.
func spamURL(r *rand.Rand) string {
	return fmt.Sprintf("http://%s/%s?id=%x", pick(r, spamDomains), pick(r, []string{"offer", "claim", "login", "verify", "buy", "r"}), r.Uint32())
}

// spam returns the i-th unwanted message.
func spam(i int) []byte {
	r := newRand("spam", i)
	from, to := newPerson(r, spamDomains), newPerson(r, hamDomains)
	date := msgDate(r)
	host := pick(r, []string{"mx", "smtp", "relay", "dsl-pool"}) + fmt.Sprint(r.IntN(99)) + "." + domainOf(from.addr)
	subject := strings.ToUpper(pick(r, spamWords)) + "! " + strings.TrimRight(sentence(r, spamWords, 3+r.IntN(4)), ".?!")
	m := &msg{}
	switch i % 10 {
	case 0: // HTML only, base64
		stdHeader(m, r, from, to, subject, date, host)
		m.add("Content-Type", "text/html; charset=\"utf-8\"")
		m.add("Content-Transfer-Encoding", "base64")
		var paras []string
		for range 2 + r.IntN(3) {
			paras = append(paras, paragraph(r, spamWords, 2)+` <a href="`+spamURL(r)+`"><b>CLICK HERE</b></a>`)
		}
		m.body = b64([]byte(htmlOf(subject, paras, `<p style="font-size:8px;color:#fff">`+paragraph(r, hamWords, 3)+"</p>\n")))
	case 1: // Chinese, GB2312, base64
		stdHeader(m, r, from, to, "", date, host)
		m.hdr[4] = "Subject: " + encodedWord("gb2312", false, encodeCharset(simplifiedchinese.GBK, pick(r, chineseSpam)))
		m.add("Content-Type", "text/plain; charset=\"gb2312\"")
		m.add("Content-Transfer-Encoding", "base64")
		m.body = b64(encodeCharset(simplifiedchinese.GBK, strings.Join(chineseSpam, "\n")+"\n"+spamURL(r)+"\n"))
	case 2: // Russian, Windows-1251, undeclared 8-bit transfer
		stdHeader(m, r, from, to, "", date, host)
		m.hdr[4] = "Subject: " + encodedWord("windows-1251", false, encodeCharset(charmap.Windows1251, pick(r, russianSpam)))
		m.add("Content-Type", "text/plain; charset=windows-1251")
		m.body = string(encodeCharset(charmap.Windows1251, strings.Join(russianSpam, "\n"))) + "\n" + spamURL(r) + "\n"
	case 3: // pharmacy, obfuscated words, many links
		stdHeader(m, r, from, to, "V1@gra C1al1s - "+subject, date, host)
		m.add("Content-Type", "text/plain; charset=us-ascii")
		var b strings.Builder
		for range 4 + r.IntN(4) {
			fmt.Fprintf(&b, "%s - only $%d.%02d per pill\n%s\n\n", pick(r, []string{"V-i-a-g-r-a", "C1alis", "Lev1tra", "Xan@x", "Phentermine"}), r.IntN(5), r.IntN(100), spamURL(r))
		}
		b.WriteString(body(r, spamWords, 1) + "\n")
		m.body = b.String()
	case 4: // advance-fee fraud
		from.name = pick(r, []string{"Barrister", "Dr.", "Mrs."}) + " " + from.name
		stdHeader(m, r, from, to, "URGENT BUSINESS PROPOSAL", date, host)
		m.add("Reply-To", fmt.Sprintf("%s%d@freemail.invalid", strings.ToLower(pick(r, lastNames)), r.IntN(999)))
		m.add("Content-Type", "text/plain; charset=iso-8859-1")
		m.add("Content-Transfer-Encoding", "7bit")
		m.body = "DEAR FRIEND,\n\n" + strings.ToUpper(body(r, spamWords, 3)) + "\n\nI AWAIT YOUR URGENT REPLY.\n"
	case 5: // phishing: a bank's name, a form-like link
		from = person{"Security Team", "no-reply@secure-verify.invalid"}
		stdHeader(m, r, from, to, "Your account has been suspended", date, host)
		b := boundary(r)
		m.add("Content-Type", "multipart/alternative; boundary=\""+b+"\"")
		link := spamURL(r)
		m.body = multipart(b, "", part{[]string{"Content-Type: text/plain; charset=utf-8"},
			"Dear customer,\n\nWe noticed unusual activity. Verify your account within 24 hours: " + link + "\n"},
			part{[]string{"Content-Type: text/html; charset=utf-8", "Content-Transfer-Encoding: quoted-printable"},
				qp([]byte(htmlOf("Security alert", []string{"Dear customer,", paragraph(r, spamWords, 3),
					`<a href="` + link + `">https://www.bank.example/login</a>`}, "")))})
	case 6: // an image with little text: multipart/related
		stdHeader(m, r, from, to, subject, date, host)
		b := boundary(r)
		m.add("Content-Type", "multipart/related; type=\"text/html\"; boundary=\""+b+"\"")
		m.body = multipart(b, "", part{[]string{"Content-Type: text/html; charset=us-ascii"},
			`<html><body><a href="` + spamURL(r) + `"><img src="cid:img1@offer"></a></body></html>`},
			part{[]string{"Content-Type: image/png; name=offer.png", "Content-Transfer-Encoding: base64", "Content-ID: <img1@offer>"},
				b64(pngImage(r, 120, 40))})
	case 7: // crypto, emoji, UTF-8 encoded-word subject
		stdHeader(m, r, from, to, "", date, host)
		m.hdr[4] = "Subject: " + encodedWord("utf-8", false, []byte("🚀💰 "+subject+" 💰🚀"))
		m.add("Content-Type", "text/plain; charset=utf-8")
		m.add("Content-Transfer-Encoding", "quoted-printable")
		m.body = qp([]byte("🔥 " + body(r, spamWords, 3) + "\n\n👉 " + spamURL(r) + "\n"))
	case 8: // a fake invoice attached, base64 in one line of over 4,000 octets
		stdHeader(m, r, from, to, fmt.Sprintf("Invoice #%d overdue", 10000+r.IntN(90000)), date, host)
		b := boundary(r)
		m.add("Content-Type", "multipart/mixed; boundary=\""+b+"\"")
		doc := pdfLike(r, 40000+r.IntN(10000))
		m.body = multipart(b, "", part{[]string{"Content-Type: text/plain; charset=us-ascii"}, "Please find the invoice attached and pay today.\n" + spamURL(r)},
			part{[]string{"Content-Type: application/octet-stream; name=\"invoice.pdf\"", "Content-Transfer-Encoding: base64",
				"Content-Disposition: attachment; filename=\"invoice.pdf\""}, strings.ReplaceAll(b64(doc), "\n", "")})
	default: // Windows-1252 text with smart quotes, undeclared transfer encoding
		stdHeader(m, r, from, to, subject, date, host)
		m.add("Content-Type", "text/plain; charset=windows-1252")
		m.add("X-Priority", "1 (Highest)")
		txt := "\u201c" + sentence(r, spamWords, 6) + "\u201d \u2013 " + body(r, spamWords, 2) + "\n\u2022 " + spamURL(r) + "\n"
		m.body = string(encodeCharset(charmap.Windows1252, txt))
	}
	return m.bytes()
}
