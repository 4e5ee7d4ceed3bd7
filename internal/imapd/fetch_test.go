package imapd

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2"
)

const multipartMsg = "From: Alice Example <alice@example.org>\r\n" +
	"To: bob@example.org, \"Carol C\" <carol@example.net>\r\n" +
	"Subject: =?UTF-8?Q?Gr=C3=BC=C3=9Fe?= report\r\n" +
	"Date: Tue, 5 Mar 2024 09:00:00 +0100\r\n" +
	"Message-ID: <m1@example.org>\r\n" +
	"MIME-Version: 1.0\r\n" +
	"Content-Type: multipart/mixed; boundary=\"b1\"\r\n" +
	"\r\n" +
	"--b1\r\n" +
	"Content-Type: text/plain; charset=utf-8\r\n" +
	"Content-Transfer-Encoding: quoted-printable\r\n" +
	"\r\n" +
	"Hello Bob, the word is caf=C3=A9 pineapple.\r\n" +
	"--b1\r\n" +
	"Content-Type: application/octet-stream; name=\"x.bin\"\r\n" +
	"Content-Disposition: attachment; filename=\"x.bin\"\r\n" +
	"Content-Transfer-Encoding: base64\r\n" +
	"\r\n" +
	"AAECAwQ=\r\n" +
	"--b1--\r\n"

func TestFetchBodyByteIdentical(t *testing.T) {
	e := newTestEnv(t, Config{})
	raw := corpusFile(t, "ham/ham-002.eml")
	e.deliver("", string(raw))
	c := e.client(nil)
	if _, err := c.Select("INBOX", nil).Wait(); err != nil {
		t.Fatal(err)
	}
	body := &imap.FetchItemBodySection{Peek: true}
	msgs, err := c.Fetch(imap.SeqSetNum(1), &imap.FetchOptions{BodySection: []*imap.FetchItemBodySection{body}, RFC822Size: true}).Collect()
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 1 {
		t.Fatalf("%d messages", len(msgs))
	}
	got := msgs[0].FindBodySection(body)
	if !bytes.Equal(got, raw) {
		t.Fatalf("BODY[] differs from stored message: %d vs %d bytes", len(got), len(raw))
	}
	if msgs[0].RFC822Size != int64(len(raw)) {
		t.Errorf("RFC822.SIZE %d, want %d", msgs[0].RFC822Size, len(raw))
	}
}

func TestFetchEnvelopeStructureSections(t *testing.T) {
	e := newTestEnv(t, Config{})
	e.deliver("", multipartMsg)
	c := e.client(nil)
	if _, err := c.Select("INBOX", nil).Wait(); err != nil {
		t.Fatal(err)
	}
	part1 := &imap.FetchItemBodySection{Part: []int{1}, Peek: true}
	hdr := &imap.FetchItemBodySection{Specifier: imap.PartSpecifierHeader, HeaderFields: []string{"Subject", "To"}, Peek: true}
	partial := &imap.FetchItemBodySection{Part: []int{1}, Peek: true, Partial: &imap.SectionPartial{Offset: 6, Size: 3}}
	bin := &imap.FetchItemBinarySection{Part: []int{2}, Peek: true}
	msgs, err := c.Fetch(imap.SeqSetNum(1), &imap.FetchOptions{
		Envelope: true, BodyStructure: &imap.FetchItemBodyStructure{Extended: true}, Flags: true, UID: true,
		InternalDate: true, BodySection: []*imap.FetchItemBodySection{part1, hdr, partial},
		BinarySection: []*imap.FetchItemBinarySection{bin},
	}).Collect()
	if err != nil {
		t.Fatal(err)
	}
	m := msgs[0]
	env := m.Envelope
	if env == nil || env.Subject != "Grüße report" || env.MessageID != "m1@example.org" {
		t.Fatalf("envelope %+v", env)
	}
	if len(env.From) != 1 || env.From[0].Mailbox != "alice" || env.From[0].Host != "example.org" || env.From[0].Name != "Alice Example" {
		t.Errorf("from %+v", env.From)
	}
	if len(env.To) != 2 || env.To[1].Name != "Carol C" || len(env.Sender) != 1 || len(env.ReplyTo) != 1 {
		t.Errorf("to/sender/reply-to %+v %+v %+v", env.To, env.Sender, env.ReplyTo)
	}
	mp, ok := m.BodyStructure.(*imap.BodyStructureMultiPart)
	if !ok || len(mp.Children) != 2 || !strings.EqualFold(mp.Subtype, "mixed") {
		t.Fatalf("bodystructure %#v", m.BodyStructure)
	}
	sp := mp.Children[1].(*imap.BodyStructureSinglePart)
	if !strings.EqualFold(sp.Type, "application") || sp.Disposition() == nil || sp.Disposition().Params["filename"] != "x.bin" {
		t.Errorf("attachment part %+v", sp)
	}
	if got := string(m.FindBodySection(part1)); got != "Hello Bob, the word is caf=C3=A9 pineapple." {
		t.Errorf("BODY[1] = %q", got)
	}
	if got := string(m.FindBodySection(hdr)); !strings.HasPrefix(got, "To: bob@") || !strings.Contains(got, "\r\nSubject: ") || !strings.HasSuffix(got, "\r\n\r\n") || strings.Contains(got, "From:") {
		t.Errorf("HEADER.FIELDS = %q", got)
	}
	if got := string(m.FindBodySection(partial)); got != "Bob" {
		t.Errorf("partial = %q", got)
	}
	if got := m.FindBinarySection(bin); !bytes.Equal(got, []byte{0, 1, 2, 3, 4}) {
		t.Errorf("BINARY[2] = %v", got)
	}
	if m.InternalDate.IsZero() || !m.InternalDate.Equal(time.Date(2024, 3, 5, 10, 0, 0, 0, time.UTC)) {
		t.Errorf("internal date %v", m.InternalDate)
	}
	for _, f := range m.Flags {
		if f != `\Recent` { // delivered before SELECT: recent here
			t.Errorf("flags after peek: %v", m.Flags)
		}
	}
}

func TestFetchSetsSeen(t *testing.T) {
	e := newTestEnv(t, Config{})
	e.deliver("", multipartMsg)
	r := e.raw()
	r.login()
	r.cmd("s", "SELECT INBOX")
	res := r.cmd("f", "FETCH 1 (BODY[TEXT])")
	if !strings.Contains(strings.Join(res, "\n"), `FLAGS (\Seen`) {
		t.Fatalf("no FLAGS after non-peek fetch: %q", res)
	}
	res = r.cmd("g", "FETCH 1 FLAGS")
	if !strings.Contains(res[0], `\Seen`) {
		t.Fatalf("flags after fetch: %q", res)
	}
	// EXAMINE never sets \Seen.
	e.deliver("", multipartMsg)
	r.cmd("x", "EXAMINE INBOX")
	r.cmd("h", "FETCH 2 BODY[]")
	if res := r.cmd("i", "FETCH 2 FLAGS"); strings.Contains(res[0], `\Seen`) {
		t.Fatalf("EXAMINE set \\Seen: %q", res)
	}
}

func TestFetchRawForms(t *testing.T) {
	e := newTestEnv(t, Config{})
	e.deliver("", multipartMsg)
	r := e.raw()
	r.login()
	r.cmd("s", "SELECT INBOX")
	res := r.cmd("f", "UID FETCH 1:* (RFC822.HEADER BODY[2.MIME] BODY[3])")
	all := strings.Join(res, "\n")
	if !strings.Contains(all, "UID 1 ") || !strings.Contains(all, "RFC822.HEADER {") || !strings.Contains(all, "BODY[2.MIME] {") || !strings.Contains(all, "BODY[3] NIL") {
		t.Fatalf("raw fetch: %q", res)
	}
	if l := last(r.cmd("g", "FETCH 5 FLAGS")); !strings.HasPrefix(l, "g BAD") {
		t.Fatalf("fetch beyond mailbox: %q", l)
	}
	if l := last(r.cmd("h", "FETCH 1 (BODY[1.HEADER.FIELDS ()])")); !strings.HasPrefix(l, "h BAD") {
		t.Fatalf("bad section: %q", l)
	}
}
