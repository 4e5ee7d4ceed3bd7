package testcorpus

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"regexp"
	"strings"
	"time"
)

// listAddr is the mailing list of the generated mailbox.
const listAddr = "port-mips@lists.example.org"

type listMsg struct {
	id, subject string
	refs        []string
}

// mailbox returns n messages of a mailing list about a kernel port, in
// threads, as an mboxrd file (From_ lines in UTC, ">From " quoting, an
// empty line after each message), and its index: seq, the From_ line's
// date, the message's size and its Message-ID. A few messages carry what
// sync clients cannot store (a NUL, a bare CR), as real archives do.
func mailbox(n int) (mbox, index []byte) {
	r := newRand("mailbox", 0)
	var members []person
	for range 60 {
		members = append(members, newPerson(r, hamDomains))
	}
	var threads []listMsg
	var out, idx bytes.Buffer
	idx.WriteString("seq\tdate_utc\tbytes\tmessage_id\n")
	t := time.Date(1996, 2, 24, 10, 21, 36, 0, time.UTC)
	for i := range n {
		t = t.Add(time.Duration(20+r.IntN(3000)) * time.Minute)
		from := pick(r, members)
		var m listMsg
		if len(threads) > 0 && r.IntN(3) > 0 {
			parent := threads[len(threads)-1-r.IntN(min(len(threads), 40))]
			m.subject = parent.subject
			if !strings.HasPrefix(m.subject, "Re: ") {
				m.subject = "Re: " + m.subject
			}
			m.refs = append(append([]string{}, parent.refs...), parent.id)
			if len(m.refs) > 8 {
				m.refs = m.refs[len(m.refs)-8:]
			}
		} else {
			m.subject = listSubject(r)
		}
		m.id = fmt.Sprintf("<%s.%s%05d@%s>", t.Format("200601021504"), strings.ToUpper(fmt.Sprintf("%x", r.Uint32()))[:4], i, "mail."+domainOf(from.addr))
		threads = append(threads, m)
		raw := listMessage(r, i, from, m, t)
		fmt.Fprintf(&out, "From %s %s\n", from.addr, t.Format(time.ANSIC))
		out.Write(mboxrdQuote(raw))
		out.WriteByte('\n')
		fmt.Fprintf(&idx, "%d\t%s\t%d\t%s\n", i+1, t.Format(time.RFC3339), len(raw), m.id)
	}
	return out.Bytes(), idx.Bytes()
}

var mboxrdFrom = regexp.MustCompile(`(?m)^(>*From )`)

// mboxrdQuote adds a ">" to every line that starts with any number of ">"
// and "From ".
func mboxrdQuote(raw []byte) []byte { return mboxrdFrom.ReplaceAll(raw, []byte(">$1")) }

func listSubject(r *rand.Rand) string {
	switch r.IntN(4) {
	case 0:
		return fmt.Sprintf("[PATCH] %s: %s", strings.TrimSuffix(strings.TrimPrefix(pick(r, patchFiles), "arch/mips/"), ".c"), strings.TrimRight(sentence(r, listWords, 4), ".?!"))
	case 1:
		return strings.TrimRight(sentence(r, listWords, 3+r.IntN(3)), ".!") + "?"
	default:
		return strings.TrimRight(sentence(r, listWords, 3+r.IntN(4)), ".?!")
	}
}

// listMessage is one message of the list, with LF line endings.
func listMessage(r *rand.Rand, i int, from person, m listMsg, t time.Time) []byte {
	local := t.In(time.FixedZone("", pick(r, []int{-8, -7, 1, 2, 0})*3600))
	msg := &msg{}
	msg.add("Received", fmt.Sprintf("from lists.example.org (lists.example.org [192.0.2.25])\n\tby archive.example.org id %X; %s", r.Uint32(), rfc5322(t)))
	msg.add("Date", rfc5322(local))
	msg.add("From", from.String())
	if i%17 == 5 { // an encoded-word display name
		msg.hdr[len(msg.hdr)-1] = "From: " + encodedWord("iso-8859-1", true, []byte("J\xfcrgen M\xfcller")) + " <" + from.addr + ">"
	}
	msg.add("To", listAddr)
	if r.IntN(4) == 0 {
		msg.add("Cc", pick(r, []string{"Ralf <ralf@mips.example.org>", "linux-kernel@lists.example.org", "Indy Hackers <indy@sgi.example.com>"}))
	}
	msg.add("Subject", m.subject)
	msg.add("Message-ID", m.id)
	if len(m.refs) > 0 {
		msg.add("In-Reply-To", m.refs[len(m.refs)-1])
		msg.add("References", strings.Join(m.refs, "\n\t"))
	}
	msg.add("Sender", "owner-port-mips@lists.example.org")
	msg.add("Precedence", "bulk")
	if r.IntN(3) == 0 {
		msg.add("X-Mailer", pick(r, []string{"Mutt 0.95.4us", "ELM [version 2.4 PL25]", "Pine 4.10", "Gnus v5.7"}))
	}
	var b strings.Builder
	switch {
	case strings.HasPrefix(m.subject, "[PATCH]"):
		b.WriteString(body(r, listWords, 1) + "\n\n")
		writePatch(&b, r, from)
	case strings.HasPrefix(m.subject, "Re: "):
		fmt.Fprintf(&b, "On %s, someone wrote:\n", local.Add(-3*time.Hour).Format("Mon, Jan 2, 2006 at 15:04"))
		for _, l := range strings.Split(body(r, listWords, 1+r.IntN(2)), "\n") {
			b.WriteString("> " + l + "\n")
		}
		b.WriteString("\n" + body(r, listWords, 1+r.IntN(3)) + "\n")
	default:
		b.WriteString(body(r, listWords, 2+r.IntN(4)) + "\n")
	}
	if r.IntN(9) == 0 { // a line that an mbox writer must quote
		b.WriteString("\nFrom what I can tell, this is the same problem.\n>From the old thread:\n")
	}
	if i%97 == 13 {
		b.WriteString("\nGrüße aus Köln, naïve café — UTF-8 undeclared\n")
	}
	switch i % 331 {
	case 100:
		b.WriteString("\ncore dump excerpt: \x00\x01\x02 end\n")
	case 200:
		b.WriteString("\npasted from a terminal\rwith a bare CR\n")
	}
	b.WriteString("\n-- \n" + from.name + "\n")
	msg.body = b.String()
	return msg.bytes()
}

// writePatch writes a patch in the shape of git format-patch output, whose
// "From <sha1> <date>" line an mbox must quote.
func writePatch(b *strings.Builder, r *rand.Rand, from person) {
	file := pick(r, patchFiles)
	fmt.Fprintf(b, "From %040x Mon Sep 17 00:00:00 2001\nFrom: %s\nSubject: [PATCH] fix %s\n\n---\n", r.Uint64(), from, file)
	fmt.Fprintf(b, "diff --git a/%s b/%s\n--- a/%s\n+++ b/%s\n", file, file, file, file)
	line := 100 + r.IntN(900)
	for range 1 + r.IntN(3) {
		fmt.Fprintf(b, "@@ -%d,7 +%d,7 @@\n", line, line)
		for k := range 7 {
			ident := pick(r, []string{"flush_cache_all", "tlb_refill", "set_context", "probe_tlb", "cpu_data", "irq_desc", "prom_printf"})
			switch k {
			case 3:
				fmt.Fprintf(b, "-\t%s(%d);\n+\t%s(%d, flags);\n", ident, r.IntN(64), ident, r.IntN(64))
			default:
				fmt.Fprintf(b, " \t/* %s */\n", strings.ToLower(sentence(r, listWords, 4)))
			}
		}
		line += 40 + r.IntN(200)
	}
	b.WriteString("-- \n2.1.0\n")
}
