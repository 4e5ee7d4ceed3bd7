package storetest

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"pimail/internal/message"
	"pimail/internal/store"
)

// SettleFunc waits until a store's background indexing has caught up; the
// search tests run once before (answers must be exact either way) and once
// after it. nil skips the second run.
type SettleFunc func(t *testing.T, s store.Store)

// RunSearch runs the search tests (Store.Search) on fresh stores.
func RunSearch(t *testing.T, open OpenFunc, settle SettleFunc) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s store.Store, settle SettleFunc)
	}{
		{"Semantics", testSearchSemantics},
		{"CorpusEqualsScan", testSearchCorpus},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := open(t)
			t.Cleanup(func() { s.Close() })
			tc.fn(t, s, settle)
		})
	}
}

// searchMsgs are small messages with encodings a search must see through.
var searchMsgs = []string{
	// 1: quoted-printable ISO-8859-1 body, encoded-word subject.
	"From: =?iso-8859-1?q?J=FCrgen?= <juergen@example.de>\r\nTo: bob@example.org\r\n" +
		"Subject: =?utf-8?b?w5xiZXIgZGllIEJyw7xja2U=?=\r\nDate: Mon, 01 Jan 2024 23:30:00 -0500\r\n" +
		"X-Custom: Marker-Alpha\r\nMIME-Version: 1.0\r\nContent-Type: text/plain; charset=iso-8859-1\r\n" +
		"Content-Transfer-Encoding: quoted-printable\r\n\r\nViele Gr=FC=DFe aus K=F6ln, mit einem langen =\r\nWort.\r\n",
	// 2: base64 HTML with entities, script and comment.
	"From: Alice <alice@example.net>\r\nTo: carol@example.org\r\nCc: dave@example.org\r\n" +
		"Subject: Menu\r\nDate: Tue, 02 Jan 2024 08:00:00 +0100\r\nMIME-Version: 1.0\r\n" +
		"Content-Type: text/html; charset=utf-8\r\nContent-Transfer-Encoding: base64\r\n\r\n" +
		"PGh0bWw+PGhlYWQ+PHRpdGxlPkhpZGRlbiB0aXRsZTwvdGl0bGU+PC9oZWFkPjxib2R5PjxwPkNhZiZlYWN1dGU7IGF1IGxhaXQ8L3A+PHNjcmlwdD52YXIgc2VjcmV0cGhyYXNlPTE7PC9zY3JpcHQ+PCEtLSBjb21tZW50ZWQgb3V0IC0tPjxkaXY+VG9tICZhbXA7IEplcnJ5PC9kaXY+PC9ib2R5PjwvaHRtbD4=\r\n",
	// 3: multipart with a nested message and a binary attachment.
	"From: Bob <bob@example.org>\r\nTo: alice@example.net\r\nSubject: Fwd: report\r\n" +
		"Date: Wed, 03 Jan 2024 12:00:00 +0000\r\nMIME-Version: 1.0\r\n" +
		"Content-Type: multipart/mixed; boundary=\"xx\"\r\n\r\n--xx\r\nContent-Type: text/plain\r\n\r\n" +
		"See the forwarded note.\r\n--xx\r\nContent-Type: message/rfc822\r\n\r\n" +
		"From: Zed <zed@example.com>\r\nSubject: Quarterly numbers\r\n\r\nRevenue grew by eleven percent.\r\n" +
		"--xx\r\nContent-Type: application/octet-stream\r\nContent-Transfer-Encoding: base64\r\n\r\n" +
		"c2VjcmV0YmluYXJ5d29yZA==\r\n--xx--\r\n",
	// 4: no Date:, plain ASCII.
	"From: nobody@example.com\r\nSubject: tiny\r\n\r\nab\r\n",
}

func testSearchSemantics(t *testing.T, s store.Store, settle SettleFunc) {
	f := setup(t, s, 1)
	inbox := f.mailbox(t, 0, "INBOX")
	idate := time.Date(2024, 2, 10, 12, 0, 0, 0, time.Local)
	for i, m := range searchMsgs {
		flags := store.Flags(0)
		var kws []string
		if i%2 == 0 {
			flags = store.FlagSeen
			kws = []string{"$Important"}
		}
		if _, err := s.Append(ctx(t), inbox.ID, []byte(m), flags, kws, idate.AddDate(0, 0, i)); err != nil {
			t.Fatalf("Append: %v", err)
		}
	}
	day := func(y int, m time.Month, d int) time.Time { return time.Date(y, m, d, 0, 0, 0, 0, time.UTC) }
	text := func(op store.SearchOp, s string) store.SearchQuery { return store.SearchQuery{Op: op, Text: s} }
	cases := []struct {
		name string
		q    store.SearchQuery
		want []uint32
	}{
		{"qp latin1 body", text(store.SearchBody, "GRÜSSE"), nil}, // no ß→ss folding
		{"qp latin1 body exact", text(store.SearchBody, "grüße aus köln"), []uint32{1}},
		{"qp soft break joined", text(store.SearchBody, "langen wort"), []uint32{1}},
		{"encoded subject", text(store.SearchSubject, "über die"), []uint32{1}},
		{"encoded from", text(store.SearchFrom, "jürgen"), []uint32{1}},
		{"html entity decoded", text(store.SearchBody, "café au lait"), []uint32{2}},
		{"html amp decoded", text(store.SearchText, "tom & jerry"), []uint32{2}},
		{"html tags dropped", text(store.SearchBody, "<div"), nil},
		{"html script dropped", text(store.SearchText, "secretphrase"), nil},
		{"html comment dropped", text(store.SearchBody, "commented"), nil},
		{"html title dropped", text(store.SearchBody, "hidden title"), nil},
		{"nested message header in body", text(store.SearchBody, "quarterly numbers"), []uint32{3}},
		{"nested message text", text(store.SearchBody, "eleven percent"), []uint32{3}},
		{"attachment not text", text(store.SearchText, "secretbinaryword"), nil},
		{"text sees header", text(store.SearchText, "marker-alpha"), []uint32{1}},
		{"text sees field names", text(store.SearchText, "x-custom: marker"), []uint32{1}},
		{"body does not see header", text(store.SearchBody, "marker-alpha"), nil},
		{"short needle", text(store.SearchBody, "ab"), []uint32{4}},
		{"word inside a word", text(store.SearchBody, "üß"), []uint32{1}},
		{"word inside a word, upper case", text(store.SearchText, "ARKE"), []uint32{1}},
		{"body word only in header", text(store.SearchBody, "juergen"), nil},
		{"text word in header", text(store.SearchText, "juergen"), []uint32{1}},
		{"word in nested header", text(store.SearchBody, "zed"), []uint32{3}},
		{"word nowhere", text(store.SearchText, "zzqqzz"), nil},
		{"words and separators", text(store.SearchText, "revenue grew by"), []uint32{3}},
		{"separators only", text(store.SearchText, "@"), []uint32{1, 2, 3, 4}},
		{"empty body needle", text(store.SearchBody, ""), []uint32{1, 2, 3, 4}},
		{"header present", store.SearchQuery{Op: store.SearchHeader, Field: "x-custom"}, []uint32{1}},
		{"header value", store.SearchQuery{Op: store.SearchHeader, Field: "X-CUSTOM", Text: "alpha"}, []uint32{1}},
		{"header value other field", store.SearchQuery{Op: store.SearchHeader, Field: "Subject", Text: "alpha"}, nil},
		{"cc", text(store.SearchCc, "DAVE@"), []uint32{2}},
		{"to", text(store.SearchTo, "alice"), []uint32{3}},
		// Date: -0500 23:30 on Jan 1 is Jan 1 in its own zone.
		{"senton own zone", store.SearchQuery{Op: store.SearchSentOn, Date: day(2024, 1, 1)}, []uint32{1}},
		{"sentbefore", store.SearchQuery{Op: store.SearchSentBefore, Date: day(2024, 1, 3)}, []uint32{1, 2}},
		// No Date: falls back to the internal date (Feb 13).
		{"sentsince missing date", store.SearchQuery{Op: store.SearchSentSince, Date: day(2024, 2, 1)}, []uint32{4}},
		{"on internal", store.SearchQuery{Op: store.SearchOn, Date: day(2024, 2, 11)}, []uint32{2}},
		{"before internal", store.SearchQuery{Op: store.SearchBefore, Date: day(2024, 2, 11)}, []uint32{1}},
		{"since internal", store.SearchQuery{Op: store.SearchSince, Date: day(2024, 2, 12)}, []uint32{3, 4}},
		{"larger", store.SearchQuery{Op: store.SearchLarger, Num: int64(len(searchMsgs[3]))}, []uint32{1, 2, 3}},
		{"smaller", store.SearchQuery{Op: store.SearchSmaller, Num: int64(len(searchMsgs[3]) + 1)}, []uint32{4}},
		{"flag", store.SearchQuery{Op: store.SearchFlag, Flags: store.FlagSeen}, []uint32{1, 3}},
		{"keyword any case", store.SearchQuery{Op: store.SearchKeyword, Keyword: "$important"}, []uint32{1, 3}},
		{"not flag", store.SearchQuery{Op: store.SearchNot, Children: []store.SearchQuery{{Op: store.SearchFlag, Flags: store.FlagSeen}}}, []uint32{2, 4}},
		{"uids", store.SearchQuery{Op: store.SearchUIDs, UIDs: store.UIDSet{{Start: 2, Stop: 3}}}, []uint32{2, 3}},
		{"uids star", store.SearchQuery{Op: store.SearchUIDs, UIDs: store.UIDSet{{Start: 3, Stop: 0}}}, []uint32{3, 4}},
		{"uids empty", store.SearchQuery{Op: store.SearchUIDs}, nil},
		{"or text", store.SearchQuery{Op: store.SearchOr, Children: []store.SearchQuery{text(store.SearchBody, "eleven"), text(store.SearchSubject, "menu")}}, []uint32{2, 3}},
		{"and not text", store.SearchQuery{Op: store.SearchAnd, Children: []store.SearchQuery{
			{Op: store.SearchAll}, {Op: store.SearchNot, Children: []store.SearchQuery{text(store.SearchText, "example.org")}}}}, []uint32{4}},
	}
	run := func(phase string) {
		for _, tc := range cases {
			res, err := s.Search(ctx(t), inbox.ID, tc.q)
			if err != nil {
				t.Fatalf("%s %s: Search: %v", phase, tc.name, err)
			}
			if !slices.Equal(res.UIDs, tc.want) {
				t.Errorf("%s %s: got %v, want %v", phase, tc.name, res.UIDs, tc.want)
			}
			if len(res.ModSeqs) != len(res.UIDs) {
				t.Errorf("%s %s: %d modseqs for %d uids", phase, tc.name, len(res.ModSeqs), len(res.UIDs))
			}
		}
	}
	run("before indexing")
	if settle != nil {
		settle(t, s)
		run("after indexing")
	}
	if _, err := s.Search(ctx(t), inbox.ID+1000, store.SearchQuery{}); err == nil {
		t.Errorf("Search of a missing mailbox succeeded")
	}
}

// readMboxPrefix returns the first n messages of an mboxrd file.
func readMboxPrefix(path string, n int) ([][]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out [][]byte
	for _, chunk := range bytes.Split(data, []byte("\nFrom ")) {
		if len(out) == n {
			break
		}
		i := bytes.IndexByte(chunk, '\n') // the rest of the separator line
		if i < 0 {
			continue
		}
		m := bytes.ReplaceAll(chunk[i+1:], []byte("\n>From "), []byte("\nFrom "))
		out = append(out, bytes.TrimSuffix(m, []byte("\n")))
	}
	return out, nil
}

// corpusMessage is a stored corpus message and what the reference scan
// needs of it.
type corpusMessage struct {
	meta store.MessageMeta
	text store.SearchableText
	raw  []byte
}

// testSearchCorpus checks Search against a brute-force scan on a few
// hundred real messages (mailing-list mail, ham and spam with charsets,
// HTML and base64), for words of every frequency and header criteria.
func testSearchCorpus(t *testing.T, s store.Store, settle SettleFunc) {
	dir := corpusDir(t)
	raws, err := readMboxPrefix(filepath.Join(dir, "mailbox", "mailbox-1k.mbox"), 250)
	if err != nil {
		t.Fatalf("corpus mailbox: %v", err)
	}
	for _, sub := range []string{"ham", "spam", "edge"} {
		m, _ := filepath.Glob(filepath.Join(dir, sub, "*.eml"))
		sort.Strings(m)
		for _, name := range m[:min(len(m), 40)] {
			if raw, err := os.ReadFile(name); err == nil && len(raw) > 0 {
				raws = append(raws, raw)
			}
		}
	}
	f := setup(t, s, 1)
	inbox := f.mailbox(t, 0, "INBOX")
	base := time.Date(2002, 11, 25, 10, 0, 0, 0, time.Local)
	for i, raw := range raws {
		var fl store.Flags
		if i%3 == 0 {
			fl |= store.FlagSeen
		}
		if i%7 == 0 {
			fl |= store.FlagFlagged
		}
		if _, err := s.Append(ctx(t), inbox.ID, raw, fl, nil, base.Add(time.Duration(i)*7*time.Hour)); err != nil {
			t.Fatalf("Append corpus message %d: %v", i, err)
		}
	}
	metas, err := s.Fetch(ctx(t), inbox.ID, nil, store.FetchOptions{Parsed: true})
	if err != nil {
		t.Fatalf("Fetch: %v", err)
	}
	msgs := make([]corpusMessage, len(metas))
	for i, m := range metas {
		raw, err := s.ReadBlob(ctx(t), m.BlobID)
		if err != nil {
			t.Fatalf("ReadBlob: %v", err)
		}
		msgs[i] = corpusMessage{meta: m, raw: raw, text: store.ExtractSearchableText(raw, m.Parsed)}
	}
	words := []string{"the", "linux", "mips", "kernel", "patch", "happy", "free", "ralf", "sgi.com",
		"indy", "ecoff", "#include", "re: ", "money", "click here", "unsubscribe", "zzzz", "qwertyuiop",
		"ü", "ä", "é", "ö", "\u00a0", "--", "=", "a", "00", "http://", "<", "&", "é", "€", "中"}
	var queries []store.SearchQuery
	for _, w := range words {
		queries = append(queries, store.SearchQuery{Op: store.SearchText, Text: w},
			store.SearchQuery{Op: store.SearchBody, Text: strings.ToUpper(w)})
	}
	for _, w := range []string{"ralf", "linux", "re:", "sgi", "=?", "ü", "@", "yyyy"} {
		for _, op := range []store.SearchOp{store.SearchSubject, store.SearchFrom, store.SearchTo, store.SearchCc, store.SearchBcc} {
			queries = append(queries, store.SearchQuery{Op: op, Text: w})
		}
	}
	for _, h := range [][2]string{{"X-Mailer", ""}, {"x-mailer", "mutt"}, {"Received", "sgi"}, {"Content-Type", "html"}, {"Message-ID", "@"}, {"Reply-To", ""}} {
		queries = append(queries, store.SearchQuery{Op: store.SearchHeader, Field: h[0], Text: h[1]})
	}
	for _, d := range []time.Time{time.Date(1996, 3, 1, 0, 0, 0, 0, time.UTC), time.Date(1997, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2002, 11, 30, 0, 0, 0, 0, time.UTC)} {
		for _, op := range []store.SearchOp{store.SearchBefore, store.SearchOn, store.SearchSince, store.SearchSentBefore, store.SearchSentOn, store.SearchSentSince} {
			queries = append(queries, store.SearchQuery{Op: op, Date: d})
		}
	}
	queries = append(queries,
		store.SearchQuery{Op: store.SearchAnd, Children: []store.SearchQuery{
			{Op: store.SearchText, Text: "mips"}, {Op: store.SearchNot, Children: []store.SearchQuery{{Op: store.SearchFlag, Flags: store.FlagSeen}}}}},
		store.SearchQuery{Op: store.SearchOr, Children: []store.SearchQuery{
			{Op: store.SearchBody, Text: "happy"}, {Op: store.SearchLarger, Num: 20000}}},
		store.SearchQuery{Op: store.SearchNot, Children: []store.SearchQuery{{Op: store.SearchText, Text: "the"}}},
		store.SearchQuery{Op: store.SearchAnd, Children: []store.SearchQuery{
			{Op: store.SearchFlag, Flags: store.FlagFlagged}, {Op: store.SearchSmaller, Num: 3000}, {Op: store.SearchUIDs, UIDs: store.UIDSet{{Start: 5, Stop: 200}}}}},
	)
	check := func(phase string) {
		for _, q := range queries {
			res, err := s.Search(ctx(t), inbox.ID, q)
			if err != nil {
				t.Fatalf("%s: Search %+v: %v", phase, q, err)
			}
			var want []uint32
			for i := range msgs {
				if refMatch(&msgs[i], q) {
					want = append(want, msgs[i].meta.UID)
				}
			}
			if !slices.Equal(res.UIDs, want) {
				t.Errorf("%s: %s: store found %d, scan %d (first differences %v)", phase, describe(q), len(res.UIDs), len(want), diff(res.UIDs, want))
			}
		}
	}
	check("before indexing")
	if settle != nil {
		settle(t, s)
		check("after indexing")
	}
}

// refMatch is the brute-force reference: RFC 9051 §6.4.4 evaluated on the
// message itself.
func refMatch(m *corpusMessage, q store.SearchQuery) bool {
	p := m.meta.Parsed
	if p == nil {
		p = &message.Parsed{}
	}
	internalDay := func() time.Time {
		y, mo, d := m.meta.InternalDate.In(time.Local).Date()
		return time.Date(y, mo, d, 0, 0, 0, 0, time.UTC)
	}
	sentDay := func() time.Time {
		if p.Date.IsZero() {
			return internalDay()
		}
		y, mo, d := p.Date.Date()
		return time.Date(y, mo, d, 0, 0, 0, 0, time.UTC)
	}
	want := time.Date(q.Date.Year(), q.Date.Month(), q.Date.Day(), 0, 0, 0, 0, time.UTC)
	lower := strings.ToLower(q.Text)
	switch q.Op {
	case store.SearchAll:
		return true
	case store.SearchAnd:
		for _, c := range q.Children {
			if !refMatch(m, c) {
				return false
			}
		}
		return true
	case store.SearchOr:
		for _, c := range q.Children {
			if refMatch(m, c) {
				return true
			}
		}
		return false
	case store.SearchNot:
		return !refMatch(m, q.Children[0])
	case store.SearchUIDs:
		return len(q.UIDs) > 0 && q.UIDs.Contains(m.meta.UID)
	case store.SearchFlag:
		return m.meta.Flags&q.Flags == q.Flags
	case store.SearchLarger:
		return m.meta.Size > q.Num
	case store.SearchSmaller:
		return m.meta.Size < q.Num
	case store.SearchBefore:
		return internalDay().Before(want)
	case store.SearchOn:
		return internalDay().Equal(want)
	case store.SearchSince:
		return !internalDay().Before(want)
	case store.SearchSentBefore:
		return sentDay().Before(want)
	case store.SearchSentOn:
		return sentDay().Equal(want)
	case store.SearchSentSince:
		return !sentDay().Before(want)
	case store.SearchSubject:
		return store.ContainsFold(p.Subject, q.Text)
	case store.SearchFrom:
		return store.ContainsFold(p.From, q.Text)
	case store.SearchTo:
		return store.ContainsFold(p.To, q.Text)
	case store.SearchCc:
		return store.ContainsFold(p.Cc, q.Text)
	case store.SearchBcc:
		return store.ContainsFold(p.Bcc, q.Text)
	case store.SearchHeader:
		return store.HeaderFieldContains(m.raw, m.meta.Parsed, q.Field, q.Text)
	case store.SearchBody:
		return strings.Contains(m.text.Body, lower)
	case store.SearchText:
		return strings.Contains(m.text.Body, lower) || strings.Contains(m.text.Header, lower)
	}
	panic(fmt.Sprintf("refMatch: operation %d not covered", q.Op))
}

func describe(q store.SearchQuery) string {
	return fmt.Sprintf("op %d field %q text %q date %s num %d children %d", q.Op, q.Field, q.Text, q.Date.Format("2006-01-02"), q.Num, len(q.Children))
}

// diff returns up to 5 UIDs in one list but not the other.
func diff(a, b []uint32) []uint32 {
	var out []uint32
	for _, x := range a {
		if !slices.Contains(b, x) && len(out) < 5 {
			out = append(out, x)
		}
	}
	for _, x := range b {
		if !slices.Contains(a, x) && len(out) < 10 {
			out = append(out, x)
		}
	}
	return out
}
