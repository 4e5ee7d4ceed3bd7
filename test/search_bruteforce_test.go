package blackbox

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"html"
	"io"
	"mime"
	"mime/multipart"
	"net/mail"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-message/charset"
)

// This file checks IMAP SEARCH (RFC 9051 §6.4.4: case-insensitive
// substring matching) on a real mailbox against a brute-force scan of the
// same messages written here, independent of pimail's parser and index:
// MIME is walked with the standard library's multipart reader, transfer
// encodings are undone here, charsets with go-message's charset package,
// headers are unfolded here and RFC 2047 decoded with the standard
// library.
//
// Where two reasonable readings of a message differ, the scan yields two
// answers: "must" (the strict reading: the decoded text of every text
// part, HTML reduced to its words, attached messages' header lines, and
// the top-level header's decoded lines) and "may" (any reading, down to
// the raw bytes: non-text attachments, PGP signatures, HTML tags, text
// in a Unicode form Go cannot decode). The server's answer must lie
// between them: must ⊆ result ⊆ may. For most criteria the two are the
// same set, so the answer must be exactly the brute-force one; the log
// gives both counts for every criterion.

// refMsg is one message as the brute-force scan sees it; all text is
// lower case.
type refMsg struct {
	raw      string // the whole message
	headers  []refHeader
	bodyMust string // decoded text parts
	bodyMay  string // the raw body and every decoded part
	date     time.Time
	dateOK   bool
	size     int
	uid      uint32          // also the sequence number: nothing is expunged
	internal time.Time       // INTERNALDATE's day (UTC)
	flags    map[string]bool // flags and keywords, as given
}

type refHeader struct {
	name    string // lower case
	decoded string // unfolded, RFC 2047 decoded, lower case
	raw     string // unfolded, lower case
	value   string // unfolded, as written
}

var wordDecoder = &mime.WordDecoder{CharsetReader: charset.Reader}

// newRefMsg parses raw (CRLF) for the scan.
func newRefMsg(raw []byte) *refMsg {
	r := &refMsg{raw: strings.ToLower(string(raw)), size: len(raw)}
	head, body := splitHeader(raw)
	r.headers = parseRefHeaders(head)
	for _, h := range r.headers {
		if h.name == "date" && !r.dateOK {
			r.date, r.dateOK = sentDate(h.raw)
		}
	}
	var must, may strings.Builder
	may.WriteString(strings.ToLower(string(body)))
	may.WriteByte('\n')
	walkPart(r.headers, body, 0, &must, &may)
	r.bodyMust, r.bodyMay = must.String(), may.String()
	return r
}

// splitHeader cuts a message or body part at the empty line after its
// header (all header when there is none).
func splitHeader(b []byte) (head, body []byte) {
	if bytes.HasPrefix(b, []byte("\r\n")) {
		return nil, b[2:]
	}
	head, body, ok := bytes.Cut(b, []byte("\r\n\r\n"))
	if !ok {
		return b, nil
	}
	return head, body
}

func headerGet(hs []refHeader, name string) string {
	for _, h := range hs {
		if h.name == name {
			return h.value
		}
	}
	return ""
}

// walkPart adds the text of a MIME entity to the scan's two readings
// (RFC 2045, RFC 2046): the decoded text of every text part except HTML
// (transfer encoding and charset undone, leniently) and the header lines
// of attached messages go to must; HTML, other parts and text in a
// charset Go cannot decode only to may.
func walkPart(hs []refHeader, body []byte, depth int, must, may *strings.Builder) {
	if depth > 20 {
		return
	}
	mt, params, err := mime.ParseMediaType(headerGet(hs, "content-type"))
	if err != nil || !strings.Contains(mt, "/") {
		mt, params = "text/plain", nil // missing or invalid: RFC 2045 §5.2
	}
	data := decodeCTE(headerGet(hs, "content-transfer-encoding"), body)
	switch {
	case strings.HasPrefix(mt, "multipart/"):
		mr := multipart.NewReader(bytes.NewReader(body), params["boundary"])
		for {
			p, err := mr.NextRawPart()
			if err != nil {
				return
			}
			b, err := io.ReadAll(p)
			if err != nil {
				return
			}
			var phs []refHeader
			for k, vs := range p.Header {
				for _, v := range vs {
					phs = append(phs, refHeader{name: strings.ToLower(k), raw: strings.ToLower(v), value: v})
				}
			}
			walkPart(phs, b, depth+1, must, may)
		}
	case mt == "message/rfc822" || mt == "message/global":
		ih, ib := splitHeader(data)
		for _, h := range parseRefHeaders(ih) {
			line := h.name + ": " + h.decoded + "\n"
			must.WriteString(line)
			may.WriteString(line)
		}
		walkPart(parseRefHeaders(ih), ib, depth+1, must, may)
	case strings.HasPrefix(mt, "text/"):
		text, ok := decodeCharset(params["charset"], data)
		text = strings.ToLower(text) + "\n"
		may.WriteString(text)
		if ok && mt == "text/html" {
			must.WriteString(htmlWords(text))
		} else if ok {
			must.WriteString(text)
		}
	default:
		may.WriteString(strings.ToLower(string(data)))
		may.WriteByte('\n')
	}
}

var (
	htmlHiddenRe = regexp.MustCompile(`(?is)<(script|style|head)\b.*?</(script|style|head)\s*>|<!--.*?-->`)
	htmlTagRe    = regexp.MustCompile(`(?s)<[a-z/!][^>]*>`)
)

// htmlWords is the text of an HTML part as a reader sees it, strictly:
// hidden elements and comments dropped, every tag a space (so that no
// word is made across a tag), character references decoded.
func htmlWords(s string) string {
	s = htmlHiddenRe.ReplaceAllString(s, " ")
	s = htmlTagRe.ReplaceAllString(s, " ")
	return strings.ToLower(html.UnescapeString(s)) + "\n"
}

// decodeCTE undoes a Content-Transfer-Encoding (RFC 2045 §6) leniently:
// base64 ignores characters outside its alphabet, quoted-printable keeps
// a malformed "=" as it is.
func decodeCTE(cte string, b []byte) []byte {
	switch strings.ToLower(strings.TrimSpace(cte)) {
	case "base64":
		clean := make([]byte, 0, len(b))
		for _, c := range b {
			if c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '+' || c == '/' {
				clean = append(clean, c)
			}
		}
		if len(clean)%4 == 1 { // not a whole number of octets
			clean = clean[:len(clean)-1]
		}
		out, _ := base64.RawStdEncoding.DecodeString(string(clean))
		return out
	case "quoted-printable":
		out := make([]byte, 0, len(b))
		for i := 0; i < len(b); i++ {
			c := b[i]
			if c != '=' {
				out = append(out, c)
				continue
			}
			switch {
			case i+2 < len(b) && b[i+1] == '\r' && b[i+2] == '\n':
				i += 2
			case i+1 < len(b) && b[i+1] == '\n':
				i++
			case i+2 < len(b) && isHex(b[i+1]) && isHex(b[i+2]):
				v, _ := strconv.ParseUint(string(b[i+1:i+3]), 16, 8)
				out = append(out, byte(v))
				i += 2
			default:
				out = append(out, c)
			}
		}
		return out
	}
	return b
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

var unicodeFormRe = regexp.MustCompile(`utf-?(7|16|32)|ucs|unicode`)

// decodeCharset converts text to UTF-8; ok is false when the text
// cannot be read (a Unicode form Go does not know, or a decoding error).
func decodeCharset(cs string, b []byte) (string, bool) {
	switch strings.ToLower(strings.TrimSpace(cs)) {
	case "", "us-ascii", "utf-8", "utf8":
		return string(b), true
	}
	r, err := charset.Reader(cs, bytes.NewReader(b))
	if err != nil {
		// An unknown name ("x-unknown", "unknown-8bit", "us_ascii"):
		// its ASCII is ASCII unless it names a Unicode form.
		return string(b), !unicodeFormRe.MatchString(strings.ToLower(cs))
	}
	out, err := io.ReadAll(r)
	if err != nil {
		return string(b), false
	}
	return string(out), true
}

var dateRe = regexp.MustCompile(`^\s*(?:[a-z]{3},?\s*)?(\d{1,2})\s+([a-z]{3})[a-z]*\s+(\d{2,4})\b`)

// sentDate is the date (day, month, year) a Date field's value names,
// read as written: the time and zone do not matter for SENTON and the
// like (RFC 9051 §6.4.4), so a field with a broken zone ("-3100", "S")
// still has a date. Two-digit years are read as RFC 5322 §4.3 says.
func sentDate(v string) (time.Time, bool) {
	if d, err := mail.ParseDate(v); err == nil {
		return time.Date(d.Year(), d.Month(), d.Day(), 0, 0, 0, 0, time.UTC), true
	}
	m := dateRe.FindStringSubmatch(strings.ToLower(v))
	if m == nil {
		return time.Time{}, false
	}
	day, _ := strconv.Atoi(m[1])
	year, _ := strconv.Atoi(m[3])
	switch {
	case len(m[3]) == 2 && year < 50:
		year += 2000
	case len(m[3]) <= 3:
		year += 1900
	}
	mon, err := time.Parse("Jan", strings.ToUpper(m[2][:1])+m[2][1:])
	if err != nil || day < 1 || day > 31 {
		return time.Time{}, false
	}
	return time.Date(year, mon.Month(), day, 0, 0, 0, 0, time.UTC), true
}

// parseRefHeaders unfolds a header block (RFC 5322 §2.2.3) and decodes
// each value (RFC 2047).
func parseRefHeaders(head []byte) []refHeader {
	var out []refHeader
	for _, line := range strings.Split(string(head), "\r\n") {
		if line != "" && (line[0] == ' ' || line[0] == '\t') && len(out) > 0 {
			last := &out[len(out)-1]
			last.raw += line
			continue
		}
		name, val, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		out = append(out, refHeader{name: strings.ToLower(strings.TrimSpace(name)), raw: val})
	}
	for i := range out {
		h := &out[i]
		v := strings.TrimSpace(h.raw)
		dec, err := wordDecoder.DecodeHeader(v)
		if err != nil {
			dec = v
		}
		h.decoded, h.raw, h.value = strings.ToLower(dec), strings.ToLower(v), v
	}
	return out
}

// refCrit is a search criterion with its IMAP form and the scan.
type refCrit struct {
	imap string
	eval func(m *refMsg) (must, may bool)
}

func hdrCrit(key, field, word string) refCrit {
	w := strings.ToLower(word)
	return refCrit{imap: key + " " + quoteIMAP(word), eval: func(m *refMsg) (bool, bool) {
		must, may := false, false
		for _, h := range m.headers {
			if h.name != field {
				continue
			}
			if strings.Contains(h.decoded, w) {
				must = true
			}
			if strings.Contains(h.decoded, w) || strings.Contains(h.raw, w) {
				may = true
			}
		}
		return must, may
	}}
}

func bodyCrit(word string) refCrit {
	w := strings.ToLower(word)
	return refCrit{imap: "BODY " + quoteIMAP(word), eval: func(m *refMsg) (bool, bool) {
		must := strings.Contains(m.bodyMust, w)
		return must, must || strings.Contains(m.bodyMay, w)
	}}
}

func textCrit(word string) refCrit {
	w := strings.ToLower(word)
	return refCrit{imap: "TEXT " + quoteIMAP(word), eval: func(m *refMsg) (bool, bool) {
		must := strings.Contains(m.bodyMust, w)
		may := must || strings.Contains(m.raw, w) || strings.Contains(m.bodyMay, w)
		for _, h := range m.headers {
			// The header is its lines, names and all (RFC 9051 §6.4.4:
			// "in the header or body").
			if strings.Contains(h.name+": "+h.decoded, w) {
				must, may = true, true
			}
		}
		return must, may
	}}
}

// sentCrit is SENTBEFORE/SENTON/SENTSINCE: the Date field's date in its
// own time zone, time and zone disregarded (RFC 9051 §6.4.4).
func sentCrit(key string, day time.Time) refCrit {
	return refCrit{imap: key + " " + day.Format("2-Jan-2006"), eval: func(m *refMsg) (bool, bool) {
		if !m.dateOK {
			return false, true
		}
		d := m.date
		var ok bool
		switch key {
		case "SENTBEFORE":
			ok = d.Before(day)
		case "SENTON":
			ok = d.Equal(day)
		case "SENTSINCE":
			ok = !d.Before(day)
		}
		return ok, ok
	}}
}

// flagCrit is a flag or keyword criterion: set says whether the flag
// must be there (SEEN, KEYWORD) or not (UNSEEN, UNKEYWORD).
func flagCrit(key, flag string, set bool) refCrit {
	return refCrit{imap: key, eval: func(m *refMsg) (bool, bool) {
		ok := m.flags[flag] == set
		return ok, ok
	}}
}

// dateCrit is BEFORE/ON/SINCE on the internal date, time and zone
// disregarded (RFC 9051 §6.4.4); the test APPENDs with +0000 dates.
func dateCrit(key string, day time.Time) refCrit {
	return refCrit{imap: key + " " + day.Format("2-Jan-2006"), eval: func(m *refMsg) (bool, bool) {
		var ok bool
		switch key {
		case "BEFORE":
			ok = m.internal.Before(day)
		case "ON":
			ok = m.internal.Equal(day)
		case "SINCE":
			ok = !m.internal.Before(day)
		}
		return ok, ok
	}}
}

// uidCrit is a UID or sequence set lo:hi; star says hi is "*", which
// stands for the last message even when lo is larger (RFC 9051 §9,
// seq-range).
func uidCrit(imap string, lo, hi uint32, star bool) refCrit {
	return refCrit{imap: imap, eval: func(m *refMsg) (bool, bool) {
		ok := m.uid >= lo && m.uid <= hi
		return ok, ok
	}}
}

func sizeCrit(key string, n int) refCrit {
	return refCrit{imap: key + " " + strconv.Itoa(n), eval: func(m *refMsg) (bool, bool) {
		ok := key == "LARGER" && m.size > n || key == "SMALLER" && m.size < n
		return ok, ok
	}}
}

func notCrit(c refCrit) refCrit {
	return refCrit{imap: "NOT " + c.imap, eval: func(m *refMsg) (bool, bool) {
		must, may := c.eval(m)
		return !may, !must
	}}
}

func orCrit(a, b refCrit) refCrit {
	return refCrit{imap: "OR " + a.imap + " " + b.imap, eval: func(m *refMsg) (bool, bool) {
		m1, y1 := a.eval(m)
		m2, y2 := b.eval(m)
		return m1 || m2, y1 || y2
	}}
}

func andCrit(a, b refCrit) refCrit {
	return refCrit{imap: "(" + a.imap + " " + b.imap + ")", eval: func(m *refMsg) (bool, bool) {
		m1, y1 := a.eval(m)
		m2, y2 := b.eval(m)
		return m1 && m2, y1 && y2
	}}
}

// searchCriteria are the words and header criteria checked: words from
// about 1 % to all of the linux-mips messages, word parts, mixed case,
// punctuation, a two-letter needle (too short for a trigram index), a
// phrase, header fields, dates, sizes and combinations.
func searchCriteria() []refCrit {
	day := func(s string) time.Time {
		d, err := time.Parse("2006-01-02", s)
		if err != nil {
			panic(err)
		}
		return d
	}
	var cs []refCrit
	for _, w := range []string{"bootloader", "ecoff", "r4000", "glibc", "binutils", "gcc", "cvs", "cache",
		"kernel", "patch", "indy", "irix", "linux", "ernel", "LiNuX", "Indy", "sgi.com", "linux-mips@",
		"zz", "the kernel", "segfault", "decstation", "olivetti", "no-such-word-qzx"} {
		cs = append(cs, bodyCrit(w), textCrit(w))
	}
	cs = append(cs,
		hdrCrit("FROM", "from", "ralf"), hdrCrit("FROM", "from", "sgi.com"), hdrCrit("FROM", "from", "Baechle"),
		hdrCrit("TO", "to", "linux"), hdrCrit("TO", "to", "vger"), hdrCrit("CC", "cc", "ralf"),
		hdrCrit("BCC", "bcc", "ralf"), hdrCrit("SUBJECT", "subject", "re:"), hdrCrit("SUBJECT", "subject", "patch"),
		hdrCrit("SUBJECT", "subject", "Indy"), hdrCrit("SUBJECT", "subject", "a"),
		hdrCrit("HEADER Message-ID", "message-id", "sgi.com"), hdrCrit("HEADER X-Mailer", "x-mailer", ""),
		hdrCrit("HEADER In-Reply-To", "in-reply-to", ""), hdrCrit("HEADER References", "references", "@"),
		hdrCrit("HEADER Content-Type", "content-type", "charset"), hdrCrit("HEADER Date", "date", "1997"),
		sentCrit("SENTBEFORE", day("1997-01-01")), sentCrit("SENTSINCE", day("1997-06-01")),
		sentCrit("SENTON", day("1997-08-12")), sentCrit("SENTSINCE", day("2000-01-01")),
		sizeCrit("LARGER", 5000), sizeCrit("SMALLER", 1500),
		notCrit(bodyCrit("linux")), notCrit(hdrCrit("FROM", "from", "ralf")),
		orCrit(hdrCrit("FROM", "from", "ralf"), hdrCrit("SUBJECT", "subject", "patch")),
		andCrit(bodyCrit("kernel"), hdrCrit("FROM", "from", "ralf")),
		andCrit(textCrit("indy"), notCrit(sizeCrit("LARGER", 3000))),
		orCrit(bodyCrit("bootloader"), andCrit(textCrit("r4000"), sentCrit("SENTBEFORE", day("1997-01-01")))),
	)
	for _, f := range []string{`\Seen`, `\Flagged`, `\Answered`, `\Deleted`, `\Draft`} {
		key := strings.ToUpper(f[1:])
		cs = append(cs, flagCrit(key, f, true), flagCrit("UN"+key, f, false))
	}
	cs = append(cs,
		flagCrit("KEYWORD $Junk", "$Junk", true), flagCrit("UNKEYWORD $Junk", "$Junk", false),
		flagCrit("KEYWORD $NotThere", "$NotThere", true),
		dateCrit("BEFORE", day("1997-01-01")), dateCrit("ON", day("1997-08-12")), dateCrit("SINCE", day("1997-06-01")),
		dateCrit("ON", day("1996-02-24")), dateCrit("SINCE", day("2001-06-01")),
		uidCrit("UID 100:200", 100, 200, false), uidCrit("UID 500:*", 500, 1<<31, true),
		uidCrit("1:50", 1, 50, false), uidCrit("900:*", 900, 1<<31, true),
		refCrit{imap: "ALL", eval: func(*refMsg) (bool, bool) { return true, true }},
		andCrit(flagCrit("FLAGGED", `\Flagged`, true), bodyCrit("kernel")),
		orCrit(flagCrit("SEEN", `\Seen`, true), flagCrit("KEYWORD $Junk", "$Junk", true)),
		andCrit(uidCrit("UID 1:500", 1, 500, false), dateCrit("SINCE", day("1997-06-01"))),
		andCrit(notCrit(flagCrit("DELETED", `\Deleted`, true)), hdrCrit("FROM", "from", "ralf")),
	)
	// An empty HEADER needle means "has the field" (RFC 9051 §6.4.4).
	for i, c := range cs {
		if strings.HasSuffix(c.imap, ` ""`) && strings.HasPrefix(c.imap, "HEADER ") {
			field := strings.ToLower(strings.Fields(c.imap)[1])
			cs[i].eval = func(m *refMsg) (bool, bool) {
				for _, h := range m.headers {
					if h.name == field {
						return true, true
					}
				}
				return false, false
			}
		}
	}
	return cs
}

// TestSearchBruteForce compares UID SEARCH on the 1k corpus mailbox with
// the brute-force scan, right after the messages are APPENDed (index
// possibly behind) and again after a restart.
func TestSearchBruteForce(t *testing.T) {
	t.Parallel()
	size := "1k"
	srv := NewServer(t, "")
	user := srv.AddAccounts("search")[0]
	srv.Start()
	var msgs [][]byte
	var dates []time.Time
	skipped := 0
	all, froms := mboxEntries(t, size)
	for i, m := range all {
		if bytes.IndexByte(m, 0) >= 0 { // APPEND without BINARY cannot carry NUL
			skipped++
			continue
		}
		msgs, dates = append(msgs, m), append(dates, froms[i])
	}
	// Each message goes in with its From_ date as INTERNALDATE and some
	// flags; then STORE changes some of them, so that both paths count.
	refs := make([]*refMsg, len(msgs))
	for i, m := range msgs {
		r := newRefMsg(m)
		r.uid = uint32(i + 1) // APPENDed in order into a new mailbox
		d := dates[i].UTC()
		r.internal = time.Date(d.Year(), d.Month(), d.Day(), 0, 0, 0, 0, time.UTC)
		r.flags = map[string]bool{`\Seen`: i%3 == 0, `\Flagged`: i%7 == 0, `\Answered`: i%5 == 0, "$Junk": i%11 == 0}
		refs[i] = r
	}
	t0 := time.Now()
	ic, err := rawIMAPLogin(srv.IMAP, user)
	if err != nil {
		t.Fatal(err)
	}
	for i, m := range msgs {
		var fl []string
		for f, on := range refs[i].flags {
			if on {
				fl = append(fl, f)
			}
		}
		slices.Sort(fl)
		head := fmt.Sprintf("A%d APPEND INBOX (%s) \"%s\" {%d+}\r\n", i, strings.Join(fl, " "),
			dates[i].UTC().Format("02-Jan-2006 15:04:05 -0700"), len(m))
		if err := ic.write(head + string(m) + "\r\n"); err != nil {
			t.Fatal(err)
		}
		if st, _, err := ic.tagged(fmt.Sprintf("A%d", i)); err != nil || !strings.HasPrefix(st, "OK") {
			t.Fatalf("APPEND %d: %q %v", i, st, err)
		}
	}
	t.Logf("mailbox-%s.mbox: %d messages APPENDed in %v (%d with NUL left out)", size, len(msgs), time.Since(t0).Round(time.Millisecond), skipped)
	var del, unseen []string
	for i, r := range refs {
		if i%13 == 0 {
			del = append(del, strconv.Itoa(i+1))
			r.flags[`\Deleted`] = true
		}
		if i%6 == 0 {
			unseen = append(unseen, strconv.Itoa(i+1))
			r.flags[`\Seen`] = false
		}
	}
	for _, c := range [][2]string{
		{"T1", "SELECT INBOX"},
		{"T2", "UID STORE " + strings.Join(del, ",") + ` +FLAGS.SILENT (\Deleted)`},
		{"T3", "UID STORE " + strings.Join(unseen, ",") + ` -FLAGS.SILENT (\Seen)`},
		{"T4", "UNSELECT"}, // no expunge
		{"T5", "LOGOUT"},
	} {
		if st, _, err := ic.command(c[0], c[1]); err != nil || !strings.HasPrefix(st, "OK") {
			t.Fatalf("%s: %q %v", clip(c[1], 60), st, err)
		}
	}
	ic.c.Close()
	crits := searchCriteria()
	check := func(pass string) {
		ic := dialIMAP(t, srv.IMAP)
		ic.login(user)
		ic.expectStatus("S0", "EXAMINE INBOX", "OK")
		exact, between := 0, 0
		var total time.Duration
		for ci, c := range crits {
			t0 := time.Now()
			got := uidSearch(t, ic, fmt.Sprintf("S%d", ci+1), c.imap)
			total += time.Since(t0)
			var must, may []uint32
			for i, r := range refs {
				m, y := c.eval(r)
				if m {
					must = append(must, uint32(i+1))
				}
				if y {
					may = append(may, uint32(i+1))
				}
			}
			missing := setMinus(must, got)
			extra := setMinus(got, may)
			if len(missing) > 0 || len(extra) > 0 {
				t.Errorf("%s: UID SEARCH %s: %d results; the scan says %d (up to %d): missing %s, extra %s",
					pass, c.imap, len(got), len(must), len(may), uidSample(missing, msgs), uidSample(extra, msgs))
			}
			if len(must) == len(may) {
				exact++
			} else {
				between += len(may) - len(must)
			}
			t.Logf("%s: %-60s %5d  (scan %d..%d)", pass, clip(c.imap, 60), len(got), len(must), len(may))
		}
		t.Logf("%s: %d criteria, %d with one brute-force answer, %d message/criterion pairs between must and may; SEARCH time %v in all",
			pass, len(crits), exact, between, total.Round(time.Millisecond))
		ic.expectStatus("S9999", "LOGOUT", "OK")
	}
	check("after APPEND")
	srv.Stop()
	srv.Start()
	check("after restart")
}

// uidSearch runs UID SEARCH and returns the UIDs, sorted.
func uidSearch(t *testing.T, ic *imapConn, tag, crit string) []uint32 {
	t.Helper()
	st, lines, err := ic.command(tag, "UID SEARCH "+crit)
	if err != nil || !strings.HasPrefix(st, "OK") {
		t.Fatalf("UID SEARCH %s: %q %v", crit, st, err)
	}
	var out []uint32
	for _, l := range lines {
		rest, ok := strings.CutPrefix(l, "* SEARCH")
		if !ok {
			continue
		}
		for _, f := range strings.Fields(rest) {
			n, err := strconv.ParseUint(f, 10, 32)
			if err != nil {
				t.Fatalf("UID SEARCH %s: bad response %q", crit, clip(l, 200))
			}
			out = append(out, uint32(n))
		}
	}
	slices.Sort(out)
	return out
}

// setMinus returns the elements of a (sorted) not in b (sorted).
func setMinus(a, b []uint32) []uint32 {
	var out []uint32
	for _, x := range a {
		if _, found := slices.BinarySearch(b, x); !found {
			out = append(out, x)
		}
	}
	return out
}

// uidSample names up to 5 UIDs with the Message-IDs of their messages.
func uidSample(uids []uint32, msgs [][]byte) string {
	if len(uids) == 0 {
		return "none"
	}
	var parts []string
	for _, u := range uids[:min(5, len(uids))] {
		parts = append(parts, fmt.Sprintf("%d %s", u, headerValue(msgs[u-1], "Message-ID")))
	}
	if len(uids) > 5 {
		parts = append(parts, fmt.Sprintf("… %d in all", len(uids)))
	}
	return "[" + strings.Join(parts, ", ") + "]"
}
