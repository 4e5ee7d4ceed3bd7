package spam

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"pimail/internal/message"
	"pimail/internal/testcorpus"
)

// The benchmarks measure what delivery pays per message: Check on an
// already parsed message (delivery parses once for everything), with a
// base model trained on a few hundred messages, for messages of about
// 8 KB and 64 KB. Run with
//
//	go test ./internal/spam/ -run '^$' -bench . -benchmem
//
// "synthetic" messages are generated here (multipart/alternative, text
// and HTML with links, a realistic header); "corpus" ones are the real
// messages of the large corpus (testcorpus.LargeDir) nearest each size,
// when it exists.

var benchWords = strings.Fields(`the of and to in is for that you with on this are be as your from at have
or by not will can all new more an was we if our has but one any about free get out now only also which
their time what would up so when who money business report meeting offer order click here information
please email list message people make like just price save special online company service project review
software server linux kernel patch release thursday agenda attached weekend credit mortgage rate lowest
guaranteed remove subscribe unsubscribe week network system files update version problem question thanks
regards best world internet million dollars receive limited income home work opportunity account security`)

// benchMessage builds a message of about size bytes.
func benchMessage(size int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, 7))
	words := func(n int) string {
		var b strings.Builder
		for i := range n {
			if i > 0 {
				if i%12 == 0 {
					b.WriteString("\r\n")
				} else {
					b.WriteByte(' ')
				}
			}
			b.WriteString(benchWords[r.IntN(len(benchWords))])
		}
		return b.String()
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Received: from mail%d.example.net (mail%d.example.net [192.0.2.%d])\r\n\tby mx.example.com with ESMTP id %x; Mon, 4 Mar 2024 10:00:00 +0000\r\n", seed, seed, seed%250, seed)
	fmt.Fprintf(&b, "From: \"Sender %d\" <s%d@example.net>\r\nTo: rcpt@example.com\r\nSubject: %s\r\n", seed, seed, words(6))
	fmt.Fprintf(&b, "Date: Mon, 4 Mar 2024 09:59:00 +0000\r\nMessage-ID: <%x.%d@example.net>\r\nMIME-Version: 1.0\r\nX-Mailer: Bench 1.0\r\n", seed*7919, seed)
	b.WriteString("Content-Type: multipart/alternative; boundary=\"b1\"\r\n\r\n--b1\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n")
	half := size / 2
	for b.Len() < half {
		b.WriteString(words(60))
		fmt.Fprintf(&b, " http://www.site%d.example.org/path/%d\r\n\r\n", r.IntN(50), r.IntN(1000))
	}
	b.WriteString("\r\n--b1\r\nContent-Type: text/html; charset=utf-8\r\n\r\n<html><body>\r\n")
	for b.Len() < size-40 {
		fmt.Fprintf(&b, "<p style=\"color:#333\">%s <a href=\"http://link%d.example.com/c?id=%d\">%s</a></p>\r\n", words(40), r.IntN(50), r.IntN(1000), words(2))
	}
	b.WriteString("</body></html>\r\n--b1--\r\n")
	return []byte(b.String())
}

type benchCase struct {
	name string
	msgs [][]byte
}

// benchCases returns the synthetic cases and, when the corpus is there,
// the 20 real test messages nearest each size.
func benchCases(b *testing.B) []benchCase {
	var cases []benchCase
	for _, size := range []int{8 << 10, 64 << 10} {
		var msgs [][]byte
		for i := range 8 {
			msgs = append(msgs, benchMessage(size, uint64(i+1)))
		}
		cases = append(cases, benchCase{fmt.Sprintf("synthetic-%dKB", size>>10), msgs})
	}
	corpus, _ := testcorpus.LargeDir()
	test := readSplit(b, corpus, "test.txt", 0)
	if len(test) == 0 {
		return cases
	}
	for _, size := range []int{8 << 10, 64 << 10} {
		abs := func(x int) int { return max(x, -x) }
		sort.SliceStable(test, func(i, j int) bool { return abs(len(test[i].raw)-size) < abs(len(test[j].raw)-size) })
		var msgs [][]byte
		for _, s := range test[:20] {
			msgs = append(msgs, s.raw)
		}
		cases = append(cases, benchCase{fmt.Sprintf("corpus-%dKB", size>>10), msgs})
	}
	return cases
}

type labelled struct {
	raw  []byte
	spam bool
}

// readSplit reads up to n (0: all) messages of a corpus split; none when
// the corpus is absent.
func readSplit(b testing.TB, corpus, name string, n int) []labelled {
	fh, err := os.Open(filepath.Join(corpus, name))
	if err != nil {
		return nil
	}
	defer fh.Close()
	var out []labelled
	sc := bufio.NewScanner(fh)
	for sc.Scan() && (n == 0 || len(out) < n) {
		path, label, ok := strings.Cut(sc.Text(), "\t")
		if !ok {
			continue
		}
		raw, err := os.ReadFile(filepath.Join(corpus, path))
		if err != nil {
			b.Fatal(err)
		}
		out = append(out, labelled{raw, label == "spam"})
	}
	return out
}

// benchFilter returns a filter whose base model is trained on the
// corpus' first 2,000 training messages, or on synthetic ones.
func benchFilter(b *testing.B) *Filter {
	f, err := New(Config{Logger: quiet(), ReloadInterval: -1})
	if err != nil {
		b.Fatal(err)
	}
	corpus, _ := testcorpus.LargeDir()
	train := readSplit(b, corpus, "train.txt", 2000)
	if len(train) == 0 {
		for i := range 200 {
			train = append(train, labelled{benchMessage(4<<10, uint64(1000+i)), i%2 == 0})
		}
	}
	for _, s := range train {
		if s.spam {
			err = f.TrainSpam(BaseAccount, s.raw)
		} else {
			err = f.TrainHam(BaseAccount, s.raw)
		}
		if err != nil {
			b.Fatal(err)
		}
	}
	return f
}

func BenchmarkCheck(b *testing.B) {
	f := benchFilter(b)
	ctx := context.Background()
	for _, c := range benchCases(b) {
		parsed := make([]*message.Parsed, len(c.msgs))
		var total int64
		for i, m := range c.msgs {
			parsed[i] = message.Parse(m)
			total += int64(len(m))
		}
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(total / int64(len(c.msgs)))
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				k := i % len(c.msgs)
				if _, err := f.Check(ctx, Input{Raw: c.msgs[k], Parsed: parsed[k], Accounts: []int64{1}}); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
}

func BenchmarkTokens(b *testing.B) {
	for _, c := range benchCases(b) {
		parsed := make([]*message.Parsed, len(c.msgs))
		var total int64
		for i, m := range c.msgs {
			parsed[i] = message.Parse(m)
			total += int64(len(m))
		}
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(total / int64(len(c.msgs)))
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				k := i % len(c.msgs)
				Tokens(c.msgs[k], parsed[k])
				i++
			}
		})
	}
}
