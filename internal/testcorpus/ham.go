package testcorpus

import (
	"fmt"
	"strings"

	"golang.org/x/text/encoding/charmap"
	"golang.org/x/text/encoding/japanese"
)

// ham returns the i-th legitimate message. The kinds cycle so that every
// shape appears many times.
func ham(i int) []byte {
	r := newRand("ham", i)
	from, to := newPerson(r, hamDomains), newPerson(r, hamDomains)
	date := msgDate(r)
	host := "mail." + domainOf(from.addr)
	topic := sentence(r, hamWords, 3+r.IntN(4))
	subject := strings.TrimRight(topic, ".?!")
	m := &msg{}
	switch i % 12 {
	case 0: // plain text, 7bit
		stdHeader(m, r, from, to, subject, date, host)
		m.add("Content-Type", "text/plain; charset=us-ascii")
		m.add("Content-Transfer-Encoding", "7bit")
		m.body = "Hi " + strings.Fields(to.name)[0] + ",\n\n" + body(r, hamWords, 2+r.IntN(3)) + "\n\n" + strings.Fields(from.name)[0] + "\n"
	case 1: // text and HTML alternatives, quoted-printable
		stdHeader(m, r, from, to, subject, date, host)
		b := boundary(r)
		m.add("Content-Type", `multipart/alternative; boundary="`+b+`"`)
		paras := []string{paragraph(r, hamWords, 3), paragraph(r, hamWords, 2) + " Grüße, " + from.name}
		m.body = multipart(b, "", part{[]string{"Content-Type: text/plain; charset=utf-8", "Content-Transfer-Encoding: quoted-printable"},
			qp([]byte(strings.Join(paras, "\n\n")))},
			part{[]string{"Content-Type: text/html; charset=utf-8", "Content-Transfer-Encoding: quoted-printable"},
				qp([]byte(htmlOf(subject, paras, `<p style="color:#555">Sent from my desk</p>`+"\n")))})
	case 2: // ISO-8859-1, quoted-printable, encoded-word subject
		stdHeader(m, r, from, to, "", date, host)
		text := pick(r, [][]string{germanText, frenchText})
		m.hdr[4] = "Subject: " + encodedWord("iso-8859-1", true, encodeCharset(charmap.ISO8859_1, runes(pick(r, text), 20)))
		m.add("Content-Type", "text/plain; charset=ISO-8859-1")
		m.add("Content-Transfer-Encoding", "quoted-printable")
		m.body = qp(encodeCharset(charmap.ISO8859_1, strings.Join(text, "\n\n")+"\n\n"+paragraph(r, hamWords, 2)))
	case 3: // a reply: quoted text, threading fields, format=flowed
		stdHeader(m, r, from, to, "Re: "+subject, date, host)
		parent := fmt.Sprintf("<%d.%x@mail.%s>", date.Unix()-3600, r.Uint32(), domainOf(to.addr))
		m.add("In-Reply-To", parent)
		m.add("References", parent)
		m.add("Content-Type", "text/plain; charset=utf-8; format=flowed")
		m.add("Content-Transfer-Encoding", "8bit")
		quoted := strings.ReplaceAll(body(r, hamWords, 2), "\n", "\n> ")
		m.body = "On " + rfc5322(date.Add(-time1h)) + ", " + to.name + " wrote:\n> " + quoted + "\n\n" + body(r, hamWords, 1) + "\n\n-- \n" + from.name + "\n"
	case 4: // attachments: a PDF, a CSV and an image, RFC 2231 file name
		stdHeader(m, r, from, to, subject, date, host)
		b := boundary(r)
		m.add("Content-Type", `multipart/mixed; boundary="`+b+`"`)
		csv := "date,item,amount\n"
		for k := range 5 + r.IntN(20) {
			csv += fmt.Sprintf("2020-%02d-%02d,%s,%d.%02d\n", 1+k%12, 1+k%28, pick(r, hamWords), r.IntN(1000), r.IntN(100))
		}
		m.body = multipart(b, "This is a multi-part message in MIME format.",
			part{[]string{"Content-Type: text/plain; charset=utf-8"}, body(r, hamWords, 2)},
			part{[]string{"Content-Type: application/pdf; name=\"report.pdf\"", "Content-Transfer-Encoding: base64",
				"Content-Disposition: attachment; filename=\"report.pdf\""}, b64(pdfLike(r, 2000+r.IntN(20000)))},
			part{[]string{"Content-Type: text/csv; charset=utf-8", "Content-Disposition: attachment;\n filename*=UTF-8''%C3%9Cbersicht%202020.csv"}, csv},
			part{[]string{"Content-Type: image/png", "Content-Transfer-Encoding: base64",
				"Content-Disposition: inline; filename=\"photo.png\""}, b64(pngImage(r, 32+r.IntN(64), 32))})
	case 5: // a newsletter the reader subscribed to
		from = person{"The " + pick(r, lastNames) + " Gazette", "news@lists.example.net"}
		stdHeader(m, r, from, to, "Newsletter: "+subject, date, "lists.example.net")
		m.add("List-Id", "<gazette.lists.example.net>")
		m.add("List-Unsubscribe", "<https://lists.example.net/unsubscribe?u=1234>, <mailto:leave@lists.example.net>")
		m.add("Precedence", "list")
		b := boundary(r)
		m.add("Content-Type", "multipart/alternative; boundary="+b)
		var paras []string
		for range 3 + r.IntN(4) {
			paras = append(paras, "<b>"+sentence(r, hamWords, 4)+"</b> "+paragraph(r, hamWords, 3)+
				` <a href="https://news.example.net/a/`+fmt.Sprint(r.IntN(9999))+`">Read more</a>`)
		}
		m.body = multipart(b, "",
			part{[]string{"Content-Type: text/plain; charset=utf-8"}, body(r, hamWords, 3)},
			part{[]string{"Content-Type: text/html; charset=utf-8", "Content-Transfer-Encoding: quoted-printable"},
				qp([]byte(htmlOf(subject, paras, `<img src="https://news.example.net/pixel.gif" width="1" height="1">`+"\n")))})
	case 6: // Russian: KOI8-R, base64, encoded-word
		stdHeader(m, r, from, to, "", date, host)
		m.hdr[4] = "Subject: " + encodedWord("koi8-r", false, encodeCharset(charmap.KOI8R, runes(pick(r, russianText), 24)))
		m.add("Content-Type", "text/plain; charset=koi8-r")
		m.add("Content-Transfer-Encoding", "base64")
		m.body = b64(encodeCharset(charmap.KOI8R, strings.Join(russianText, "\n")+"\n"))
	case 7: // old-style mail: undeclared 8-bit Latin-1 body
		stdHeader(m, r, from, to, subject, date, host)
		m.hdr = m.hdr[:len(m.hdr)-1] // no MIME-Version
		m.add("X-Mailer", "Mutt/1.2.5i")
		m.body = string(encodeCharset(charmap.ISO8859_1, pick(r, germanText)+"\n\n"+body(r, hamWords, 2))) + "\n"
	case 8: // Japanese: ISO-2022-JP, 7bit
		stdHeader(m, r, from, to, "", date, host)
		m.hdr[4] = "Subject: " + encodedWord("ISO-2022-JP", false, encodeCharset(japanese.ISO2022JP, runes(japaneseText[0], 8)))
		m.add("Content-Type", "text/plain; charset=ISO-2022-JP")
		m.add("Content-Transfer-Encoding", "7bit")
		m.body = string(encodeCharset(japanese.ISO2022JP, strings.Join(japaneseText, "\n"))) + "\n"
	case 9: // a forwarded message attached as message/rfc822
		stdHeader(m, r, from, to, "Fwd: "+subject, date, host)
		b := boundary(r)
		m.add("Content-Type", "multipart/mixed; boundary=\""+b+"\"")
		inner := ham(i + 1)
		m.body = multipart(b, "", part{[]string{"Content-Type: text/plain; charset=utf-8"}, "See below.\n\n" + body(r, hamWords, 1)},
			part{[]string{"Content-Type: message/rfc822", "Content-Disposition: inline"}, string(inner)})
	case 10: // HTML written on one line of more than 4,000 octets (some mailers do)
		stdHeader(m, r, from, to, subject, date, host)
		m.add("Content-Type", "text/html; charset=utf-8")
		var paras []string
		for range 60 {
			paras = append(paras, paragraph(r, hamWords, 4))
		}
		m.body = strings.ReplaceAll(htmlOf(subject, paras, ""), "\n", "") + "\n"
	default: // a calendar invitation
		stdHeader(m, r, from, to, "Invitation: "+subject, date, host)
		b := boundary(r)
		m.add("Content-Type", "multipart/mixed; boundary=\""+b+"\"")
		start := date.AddDate(0, 0, 7).UTC()
		ics := strings.Join([]string{"BEGIN:VCALENDAR", "VERSION:2.0", "PRODID:-//pimail testcorpus//EN", "METHOD:REQUEST",
			"BEGIN:VEVENT", fmt.Sprintf("UID:%x@%s", r.Uint64(), host), "DTSTART:" + start.Format("20060102T150405Z"),
			"DTEND:" + start.Add(time1h).Format("20060102T150405Z"), "SUMMARY:" + subject,
			"ORGANIZER:mailto:" + from.addr, "ATTENDEE;RSVP=TRUE:mailto:" + to.addr, "END:VEVENT", "END:VCALENDAR"}, "\n")
		m.body = multipart(b, "", part{[]string{"Content-Type: text/plain; charset=utf-8"}, "You are invited: " + subject + "\n"},
			part{[]string{"Content-Type: text/calendar; charset=utf-8; method=REQUEST", "Content-Disposition: attachment; filename=invite.ics"}, ics})
	}
	return m.bytes()
}
