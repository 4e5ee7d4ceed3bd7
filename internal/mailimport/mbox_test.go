package mailimport

import (
	"context"
	"errors"
	"io"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"pimail/internal/store"
	"pimail/internal/testcorpus"
)

const sampleMbox = `From alice@example.org Sat Jan  3 01:05:34 1996
From: alice@example.org
Status: RO
X-Status: AF
Subject: one

body line
>From the quoted line
>>From twice quoted
 From not at start

From - Mon Feb 10 12:00:00 2020
From: bob@example.org
X-Mozilla-Status: 1005
X-Mozilla-Status2: 00000000
X-Mozilla-Keys: $label1 work
Subject: two
Date: Tue, 11 Feb 2020 08:00:00 +0100

first
From line not after a blank line is body
second body line

From bogus-date-line
Subject: three
Date: Wed, 12 Feb 2020 09:30:00 +0000
X-Keywords: Junk, $Important

three body
`

func TestMboxReader(t *testing.T) {
	r := NewMboxReader(strings.NewReader(sampleMbox), MboxRD, 0)
	var got []*Message
	for range 10 {
		m, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, m)
	}
	if len(got) != 3 {
		t.Fatalf("got %d messages, want 3", len(got))
	}
	want0 := "From: alice@example.org\nSubject: one\n\nbody line\nFrom the quoted line\n>From twice quoted\n From not at start\n"
	if string(got[0].Raw) != want0 {
		t.Errorf("message 1 = %q, want %q", got[0].Raw, want0)
	}
	if got[0].Flags != store.FlagSeen|store.FlagAnswered|store.FlagFlagged {
		t.Errorf("message 1 flags = %b", got[0].Flags)
	}
	if want := time.Date(1996, 1, 3, 1, 5, 34, 0, time.UTC); !got[0].InternalDate.Equal(want) {
		t.Errorf("message 1 date = %v, want %v", got[0].InternalDate, want)
	}
	if strings.Contains(string(got[1].Raw), "X-Mozilla") {
		t.Errorf("mozilla headers kept: %q", got[1].Raw)
	}
	if !strings.HasSuffix(string(got[1].Raw), "From line not after a blank line is body\nsecond body line\n") {
		t.Errorf("message 2 body = %q", got[1].Raw)
	}
	// 0x1005 = read, marked, forwarded.
	if got[1].Flags != store.FlagSeen|store.FlagFlagged {
		t.Errorf("message 2 flags = %b", got[1].Flags)
	}
	if strings.Join(got[1].Keywords, ",") != "$Forwarded,$label1,work" {
		t.Errorf("message 2 keywords = %v", got[1].Keywords)
	}
	if want := time.Date(2020, 2, 10, 12, 0, 0, 0, time.UTC); !got[1].InternalDate.Equal(want) {
		t.Errorf("message 2 date = %v, want %v", got[1].InternalDate, want)
	}
	// No date on the From_ line: the Date: header.
	if want := time.Date(2020, 2, 12, 9, 30, 0, 0, time.UTC); !got[2].InternalDate.Equal(want) {
		t.Errorf("message 3 date = %v, want %v", got[2].InternalDate, want)
	}
	if strings.Join(got[2].Keywords, ",") != "Junk,$Important" || got[2].Flags != 0 {
		t.Errorf("message 3 flags %b keywords %v", got[2].Flags, got[2].Keywords)
	}
}

func TestMboxWithoutEmptyLines(t *testing.T) {
	in := "From a Sat Jan  3 01:05:34 1996\nSubject: x\n\nhi\nFrom b Sat Jan  3 01:05:35 1996\nSubject: y\n\nbody\nFrom here on, body\n"
	r := NewMboxReader(strings.NewReader(in), MboxRD, 0)
	m1, err1 := r.Next()
	m2, err2 := r.Next()
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	if string(m1.Raw) != "Subject: x\n\nhi\n" || string(m2.Raw) != "Subject: y\n\nbody\nFrom here on, body\n" {
		t.Errorf("got %q and %q", m1.Raw, m2.Raw)
	}
}

func TestMboxOVariant(t *testing.T) {
	in := "From a Sat Jan  3 01:05:34 1996\nSubject: x\n\n>From a\n>>From b\n"
	m, err := NewMboxReader(strings.NewReader(in), MboxO, 0).Next()
	if err != nil {
		t.Fatal(err)
	}
	if want := "Subject: x\n\nFrom a\n>>From b\n"; string(m.Raw) != want {
		t.Errorf("got %q, want %q", m.Raw, want)
	}
}

func TestMboxCRLFAndNotMbox(t *testing.T) {
	in := "From a Sat Jan  3 01:05:34 1996\r\nSubject: x\r\n\r\nhi\r\n\r\nFrom b Sat Jan  3 01:05:35 1996\r\nSubject: y\r\n\r\nyo\r\n"
	r := NewMboxReader(strings.NewReader(in), MboxRD, 0)
	m1, err := r.Next()
	if err != nil {
		t.Fatal(err)
	}
	m2, err := r.Next()
	if err != nil {
		t.Fatal(err)
	}
	if string(m1.Raw) != "Subject: x\r\n\r\nhi\r\n" || string(m2.Raw) != "Subject: y\r\n\r\nyo\r\n" {
		t.Errorf("got %q and %q", m1.Raw, m2.Raw)
	}
	if _, err := r.Next(); !errors.Is(err, io.EOF) {
		t.Errorf("third Next = %v, want EOF", err)
	}
	if _, err := NewMboxReader(strings.NewReader("Subject: x\n\nhi\n"), MboxRD, 0).Next(); !errors.Is(err, ErrNotMbox) {
		t.Errorf("plain message: err = %v, want ErrNotMbox", err)
	}
	if _, err := NewMboxReader(strings.NewReader(""), MboxRD, 0).Next(); !errors.Is(err, io.EOF) {
		t.Errorf("empty file: err = %v, want EOF", err)
	}
}

func TestMboxTooLargeSkipped(t *testing.T) {
	big := strings.Repeat("x", 5000)
	in := "From a Sat Jan  3 01:05:34 1996\nSubject: big\n\n" + big + "\n\nFrom b Sat Jan  3 01:05:35 1996\nSubject: small\n\nok\n"
	st := newStore(t)
	im := newImporter(t, st)
	im.MaxMessageSize = 1000
	if err := im.ImportMbox(context.Background(), strings.NewReader(in), "Big", MboxRD); err != nil {
		t.Fatal(err)
	}
	s := im.Stats()
	if s.Messages != 1 || s.Skipped != 1 {
		t.Fatalf("stats %+v, want 1 stored and 1 skipped", s)
	}
	msgs := readMailbox(t, st, im.Account().ID, "Big")
	if len(msgs) != 1 || msgs[0].raw != "Subject: small\n\nok\n" {
		t.Fatalf("stored %+v", msgs)
	}
}

// TestMboxCorpus imports the test corpus' mailbox (a mailing list of 1,000
// messages) and checks every message's size, internal date and Message-ID
// against the index its generator wrote.
func TestMboxCorpus(t *testing.T) {
	if testing.Short() {
		t.Skip("corpus test skipped in -short mode")
	}
	corpus, err := testcorpus.Dir()
	if err != nil {
		t.Fatal(err)
	}
	dir := corpus + "/mailbox/"
	index, err := os.ReadFile(dir + "mailbox-1k.index.tsv")
	if err != nil {
		t.Fatal(err)
	}
	rows := strings.Split(strings.TrimSpace(string(index)), "\n")[1:]
	st := newStore(t)
	im := newImporter(t, st)
	start := time.Now()
	path := dir + "mailbox-1k.mbox"
	if err := im.ImportMboxFile(context.Background(), path, MboxMailboxName(path), MboxRD); err != nil {
		t.Fatal(err)
	}
	el := time.Since(start)
	s := im.Stats()
	t.Logf("imported %d messages (%d bytes) in %v: %.0f msgs/s", s.Messages, s.Bytes, el, float64(s.Messages)/el.Seconds())
	if s.Messages != len(rows) || s.Skipped != 0 {
		t.Fatalf("stats %+v, want %d messages", s, len(rows))
	}
	msgs := readMailbox(t, st, im.Account().ID, "mailbox-1k")
	if len(msgs) != len(rows) {
		t.Fatalf("mailbox holds %d messages, want %d", len(msgs), len(rows))
	}
	for i, m := range msgs {
		f := strings.Split(rows[i], "\t")
		if strconv.Itoa(len(m.raw)) != f[2] {
			t.Fatalf("message %d: %d bytes, index says %s", i+1, len(m.raw), f[2])
		}
		if d := m.meta.InternalDate.UTC().Format(time.RFC3339); d != f[1] {
			t.Fatalf("message %d: internal date %s, index says %s", i+1, d, f[1])
		}
		if !strings.Contains(m.raw, f[3]) {
			t.Fatalf("message %d does not contain its Message-ID %s", i+1, f[3])
		}
	}
}
