package sqlite

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"pimail/internal/store"
)

// The expunge benchmarks work on a mailbox of expungeBenchSize messages,
// loaded once per benchmark (b.Loop runs the function once) into a
// template data directory that every iteration copies (an expunge is
// destructive); both go with the benchmark's temporary directory. PIMAIL_EXPUNGE_MBOX names
// an mbox file to load instead of the synthetic messages, e.g.
//
//	PIMAIL_EXPUNGE_MBOX=$PWD/../shared/corpus/mailbox/mailbox-21k.mbox \
//	  go test -run XXX -bench Expunge -benchtime 5x ./internal/store/sqlite/
const expungeBenchSize = 21000

type expungeTemplate struct {
	dir     string
	account int64
	mailbox int64
	uids    []uint32
}

// expungeBenchMsg is a message of a few KB with the header fields a real
// one has, unique per n.
func expungeBenchMsg(n int) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "Return-Path: <list-%d@lists.example.net>\r\nReceived: from mx%d.example.net by mail.example.org; Tue, 3 Mar 2020 10:%02d:00 +0000\r\n", n%50, n%7, n%60)
	fmt.Fprintf(&b, "From: Sender %d <sender%d@example.net>\r\nTo: list@lists.example.net\r\nCc: someone%d@example.com\r\n", n%300, n%300, n%11)
	fmt.Fprintf(&b, "Subject: [list] message number %d about things\r\nDate: Tue, 3 Mar 2020 10:%02d:%02d +0000\r\nMessage-ID: <exp%d@example.net>\r\n", n, n%60, n%59, n)
	b.WriteString("MIME-Version: 1.0\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n")
	line := "Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor.\r\n"
	for i := 0; i < 20+n%40; i++ {
		b.WriteString(line)
	}
	return b.Bytes()
}

// mboxMessages splits an mbox file into messages ("From " separator lines
// dropped, ">From " unquoted not needed for a benchmark).
func mboxMessages(path string) ([][]byte, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out [][]byte
	for _, part := range bytes.Split(raw, []byte("\nFrom ")) {
		if i := bytes.IndexByte(part, '\n'); i >= 0 {
			if m := bytes.TrimRight(part[i+1:], "\n"); len(m) > 0 {
				out = append(out, m)
			}
		}
	}
	return out, nil
}

// buildExpungeTemplate loads the mailbox into a store in dir and closes it.
func buildExpungeTemplate(dir string) (*expungeTemplate, error) {
	t := &expungeTemplate{dir: dir}
	var msgs [][]byte
	if p := os.Getenv("PIMAIL_EXPUNGE_MBOX"); p != "" {
		var err error
		if msgs, err = mboxMessages(p); err != nil {
			return nil, err
		}
	} else {
		for i := range expungeBenchSize {
			msgs = append(msgs, expungeBenchMsg(i))
		}
	}
	s, err := Open(dir, testOptions())
	if err != nil {
		return nil, err
	}
	defer s.Close()
	ctx := context.Background()
	if _, err := s.AddDomain(ctx, "example.org"); err != nil {
		return nil, err
	}
	a, err := s.AddAccount(ctx, "u@example.org", "h")
	if err != nil {
		return nil, err
	}
	mb, err := s.Mailbox(ctx, a.ID, "INBOX")
	if err != nil {
		return nil, err
	}
	t.account, t.mailbox = a.ID, mb.ID
	for lo := 0; lo < len(msgs); lo += 100 {
		batch := make([]store.AppendMessage, 0, 100)
		for _, m := range msgs[lo:min(lo+100, len(msgs))] {
			batch = append(batch, store.AppendMessage{Raw: m})
		}
		ds, err := s.AppendBatch(ctx, mb.ID, batch)
		if err != nil {
			return nil, err
		}
		for _, d := range ds {
			t.uids = append(t.uids, d.UID)
		}
	}
	// No indexing in the measured copies.
	return t, s.WaitIndexed(ctx)
}

// copyTree copies the regular files under src to dst.
func copyTree(dst, src string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		to := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(to, 0o700)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		in, err := os.Open(p)
		if err != nil {
			return err
		}
		defer in.Close()
		out, err := os.Create(to)
		if err != nil {
			return err
		}
		if _, err := io.Copy(out, in); err != nil {
			out.Close()
			return err
		}
		return out.Close()
	})
}

// benchExpunge flags share of the template mailbox \Deleted (the same
// seeded random choice as bench/imapbench) and times Expunge, then the
// Changes an IMAP session reads after it.
func benchExpunge(b *testing.B, share float64) {
	t, err := buildExpungeTemplate(filepath.Join(b.TempDir(), "template"))
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	uids := slices.Clone(t.uids)
	rng := rand.New(rand.NewPCG(3, 2003))
	rng.Shuffle(len(uids), func(i, j int) { uids[i], uids[j] = uids[j], uids[i] })
	victims := uids[:int(float64(len(uids))*share+0.5)]
	slices.Sort(victims)
	var sets []store.UIDSet // of 500 UIDs, as bench/imapbench stores them
	for lo := 0; lo < len(victims); lo += 500 {
		var set store.UIDSet
		for _, u := range victims[lo:min(lo+500, len(victims))] {
			set = append(set, store.UIDRange{Start: u, Stop: u})
		}
		sets = append(sets, set)
	}
	var exp, chg float64
	n := 0
	for b.Loop() {
		b.StopTimer()
		n++
		dir := filepath.Join(b.TempDir(), fmt.Sprint("copy", n))
		if err := copyTree(dir, t.dir); err != nil {
			b.Fatal(err)
		}
		s, err := Open(dir, testOptions())
		if err != nil {
			b.Fatal(err)
		}
		for _, set := range sets {
			if _, err := s.StoreFlags(ctx, t.mailbox, set, store.FlagsAdd, store.FlagDeleted, nil); err != nil {
				b.Fatal(err)
			}
		}
		mb, err := s.Mailbox(ctx, t.account, "INBOX")
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		t0 := time.Now()
		got, err := s.Expunge(ctx, t.mailbox, nil)
		if err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		ch, err := s.Changes(ctx, t.mailbox, mb.HighestModSeq)
		if err != nil {
			b.Fatal(err)
		}
		t2 := time.Now()
		b.StopTimer()
		if len(got) != len(victims) || len(ch.Expunged) != len(victims) {
			b.Fatalf("expunged %d, changes report %d, want %d", len(got), len(ch.Expunged), len(victims))
		}
		exp += float64(t1.Sub(t0))
		chg += float64(t2.Sub(t1))
		s.Close()
		if err := os.RemoveAll(dir); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	b.ReportMetric(exp/float64(n)/1e6, "expunge-ms")
	b.ReportMetric(chg/float64(n)/1e6, "changes-ms")
}

func BenchmarkExpunge1(b *testing.B)  { benchExpunge(b, 0.01) }
func BenchmarkExpunge20(b *testing.B) { benchExpunge(b, 0.20) }
