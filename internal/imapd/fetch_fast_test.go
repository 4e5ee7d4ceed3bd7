package imapd

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	"pimail/internal/imapwire"
	"pimail/internal/message"
	"pimail/internal/store"
)

// generalStore answers the header reads (store.HeaderReader) from the
// general ones, Fetch with Parsed and ReadBlob, as a store without fast
// paths could: a server on it shows what the fast paths must equal.
type generalStore struct{ Store }

func (g generalStore) FetchEnvelopes(ctx context.Context, mailboxID int64, uids store.UIDSet) ([]store.MessageMeta, error) {
	metas, err := g.Fetch(ctx, mailboxID, uids, store.FetchOptions{Parsed: true})
	for i := range metas {
		metas[i].Parsed = &message.Parsed{Envelope: *envelopeOf(&metas[i])}
	}
	return metas, err
}

func (g generalStore) FetchEnvelopesBuffered(ctx context.Context, mailboxID int64, uids store.UIDSet) ([]store.MessageMeta, func(), error) {
	metas, err := g.FetchEnvelopes(ctx, mailboxID, uids)
	return metas, func() {}, err
}

func (g generalStore) FetchHeaders(ctx context.Context, mailboxID int64, uids store.UIDSet) ([]store.MessageMeta, [][]byte, error) {
	metas, err := g.Fetch(ctx, mailboxID, uids, store.FetchOptions{Parsed: true})
	if err != nil {
		return nil, nil, err
	}
	headers := make([][]byte, len(metas))
	for i := range metas {
		raw, err := g.ReadBlob(ctx, metas[i].BlobID)
		if err != nil {
			return nil, nil, err
		}
		headers[i] = headerBytes(raw, rootPart(&metas[i], raw))
		metas[i].Parsed = nil
	}
	return metas, headers, nil
}

func (g generalStore) FetchHeadersBuffered(ctx context.Context, mailboxID int64, uids store.UIDSet, _ bool) ([]store.MessageMeta, [][]byte, func(), error) {
	metas, headers, err := g.FetchHeaders(ctx, mailboxID, uids)
	return metas, headers, func() {}, err
}

// fetchAll sends one command and returns everything up to and including
// its tagged response.
func fetchAll(t *testing.T, addr, command string) string {
	t.Helper()
	return fetchEach(t, addr, []string{command})[0]
}

// fetchEach sends the commands on one session (after LOGIN and EXAMINE
// INBOX) and returns the answer of each, its tagged response included.
func fetchEach(t *testing.T, addr string, commands []string) []string {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(30 * time.Second))
	br := bufio.NewReader(c)
	var outs []string
	for i, cmd := range append([]string{"a LOGIN alice@example.org " + testPassword, "b EXAMINE INBOX"}, commands...) {
		if i >= 2 {
			cmd = "Zq9 " + cmd
		}
		tag := cmd[:strings.IndexByte(cmd, ' ')]
		io.WriteString(c, cmd+"\r\n")
		var out strings.Builder
		for range 1_000_000 {
			l, err := br.ReadString('\n')
			if err != nil {
				t.Fatalf("%s: %v", cmd, err)
			}
			out.WriteString(l)
			if strings.HasPrefix(l, tag+" ") {
				if !strings.HasPrefix(l, tag+" OK") {
					t.Fatalf("%s: %q", cmd, l)
				}
				break
			}
		}
		if i >= 2 {
			outs = append(outs, out.String())
		}
	}
	return outs
}

// TestFetchFastPathsMatch compares, byte for byte, the answers of the
// envelope and header paths with those of the general path, on real and
// malformed mail.
func TestFetchFastPathsMatch(t *testing.T) {
	e := newTestEnv(t, Config{})
	var files []string
	for _, pat := range []string{"edge/*", "ham/ham-00*", "spam/spam-00*"} {
		files = append(files, corpusGlob(t, pat)...)
	}
	sort.Strings(files)
	raws := []string{"Subject: x\r\n\r\nbody\r\n", "no header, no blank line", "\r\nbody only\r\n",
		"From: a@b.c\nTo: \"G\": x@y.z;\nSubject: lf\n\nbody\n"}
	for _, f := range files {
		if b, err := os.ReadFile(f); err == nil && len(b) > 0 && !strings.HasSuffix(f, ".md") {
			raws = append(raws, string(b))
		}
	}
	for _, r := range raws {
		e.deliver("", r)
	}
	plain := New(Config{AllowInsecureAuth: true}, generalStore{e.st}, testAuth{e.st}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go plain.Serve(ln)
	t.Cleanup(func() { plain.Close() })
	for _, cmd := range []string{
		"UID FETCH 1:* (UID FLAGS INTERNALDATE RFC822.SIZE ENVELOPE)",
		"FETCH 1:* (BODY.PEEK[HEADER])",
		"UID FETCH 2:5,7 (FLAGS BODY.PEEK[HEADER.FIELDS (From Subject DATE)] RFC822.SIZE)",
		"FETCH 1:* (BODY.PEEK[HEADER.FIELDS.NOT (Received)]<10.200> RFC822.HEADER)",
		"FETCH 3,1 ENVELOPE",
	} {
		fast, general := fetchAll(t, e.addr, cmd), fetchAll(t, ln.Addr().String(), cmd)
		if fast != general {
			t.Errorf("%s: the fast path differs from the general path\nfast:    %.600q\ngeneral: %.600q", cmd, fast, general)
		}
		if n := strings.Count(fast, " FETCH ("); n < 2 {
			t.Errorf("%s: only %d FETCH responses", cmd, n)
		}
	}
	// The general path of this server (ENVELOPE and the header together
	// take it) writes what the two fast paths write.
	var cmds []string
	for i := 1; i <= len(raws); i++ {
		cmds = append(cmds, fmt.Sprintf("FETCH %d (ENVELOPE)", i), fmt.Sprintf("FETCH %d (BODY.PEEK[HEADER])", i),
			fmt.Sprintf("FETCH %d (ENVELOPE BODY.PEEK[HEADER])", i))
	}
	outs := fetchEach(t, e.addr, cmds)
	for i := 0; i < len(outs); i += 3 {
		n := i/3 + 1
		env, hdr, full := outs[i], outs[i+1], outs[i+2]
		env = env[:strings.LastIndex(env, ")\r\nZq9 OK")]
		hdr = strings.TrimPrefix(hdr, fmt.Sprintf("* %d FETCH (", n))
		if want := env + " " + hdr; full != want {
			t.Errorf("message %d: the general path differs from the fast paths\ngeneral: %.600q\nfast:    %.600q", n, full, want)
		}
	}
}

// TestChoosePath checks which FETCH shapes take the fast paths.
func TestChoosePath(t *testing.T) {
	for _, c := range []struct {
		atts []string
		want fetchPath
	}{
		{[]string{"UID", "FLAGS", "INTERNALDATE", "RFC822.SIZE", "ENVELOPE"}, pathEnvelope},
		{[]string{"UID", "BODY.PEEK[HEADER]"}, pathHeader},
		{[]string{"UID", "RFC822.SIZE", "BODY.PEEK[HEADER.FIELDS (From To)]"}, pathHeader},
		{[]string{"RFC822.HEADER"}, pathHeader},
		{[]string{"ENVELOPE", "BODY.PEEK[HEADER]"}, pathFull},
		{[]string{"ENVELOPE", "BODYSTRUCTURE"}, pathFull},
		{[]string{"BODY.PEEK[1.HEADER]"}, pathFull},
		{[]string{"BODY.PEEK[]"}, pathFull},
		{[]string{"BODY.PEEK[TEXT]"}, pathFull},
		{[]string{"FLAGS"}, pathFull},
	} {
		var atts []imapwire.FetchAtt
		for _, s := range c.atts {
			a, err := imapwire.ParseFetchAtt(s)
			if err != nil {
				t.Fatalf("%s: %v", s, err)
			}
			atts = append(atts, a)
		}
		if got := choosePath(atts); got != c.want {
			t.Errorf("%v: path %d, want %d", c.atts, got, c.want)
		}
	}
}

// TestFetchHeaderSetsSeen checks that BODY[HEADER] without PEEK on the
// header path still sets \Seen and reports it (RFC 9051 §6.4.5).
func TestFetchHeaderSetsSeen(t *testing.T) {
	e := newTestEnv(t, Config{})
	e.deliver("", "Subject: s\r\n\r\nbody\r\n")
	r := e.raw()
	r.login()
	r.cmd("s", "SELECT INBOX")
	res := r.cmd("f", "FETCH 1 BODY[HEADER]")
	if !strings.Contains(strings.Join(res, "\n"), `\Seen`) || !strings.HasPrefix(last(res), "f OK") {
		t.Errorf("no \\Seen reported: %q", res)
	}
	if res := r.cmd("g", "FETCH 1 FLAGS"); !strings.Contains(res[0], `\Seen`) {
		t.Errorf("\\Seen not stored: %q", res)
	}
}

// TestFetchManyChunks checks a FETCH that spans several chunks, whose
// store reads overlap: the answers must come complete and in order, equal
// to the general path's, and a non-PEEK fetch must set \Seen on all.
func TestFetchManyChunks(t *testing.T) {
	e := newTestEnv(t, Config{})
	const n = 2*fetchChunk + 37
	sem := make(chan struct{}, 16)
	errs := make(chan error, n)
	for i := range n {
		sem <- struct{}{}
		go func() {
			defer func() { <-sem }()
			_, err := e.st.Deliver(context.Background(), store.Delivery{
				Raw:        []byte(fmt.Sprintf("From: u%d@example.org\r\nSubject: message %d\r\n\r\nbody %d\r\n", i, i, i)),
				Recipients: []store.Recipient{{AccountID: e.acct.ID}}})
			errs <- err
		}()
	}
	for range n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	plain := New(Config{AllowInsecureAuth: true}, generalStore{e.st}, testAuth{e.st}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go plain.Serve(ln)
	t.Cleanup(func() { plain.Close() })
	for _, cmd := range []string{"FETCH 1:* (UID ENVELOPE)", "UID FETCH 1:* (BODY.PEEK[HEADER])", "FETCH 1:* (UID RFC822.SIZE)"} {
		fast, general := fetchAll(t, e.addr, cmd), fetchAll(t, ln.Addr().String(), cmd)
		if fast != general {
			t.Errorf("%s: the fast path differs from the general path", cmd)
		}
		if got := strings.Count(fast, " FETCH ("); got != n {
			t.Errorf("%s: %d FETCH responses, want %d", cmd, got, n)
		}
		for i := 1; i <= n; i += 97 {
			if !strings.Contains(fast, fmt.Sprintf("* %d FETCH (", i)) {
				t.Errorf("%s: no response for message %d", cmd, i)
			}
		}
	}
	r := e.raw()
	r.login()
	r.cmd("s", "SELECT INBOX")
	res := r.cmd("f", "FETCH 1:* BODY[HEADER]")
	if !strings.HasPrefix(last(res), "f OK") {
		t.Fatalf("FETCH BODY[HEADER]: %q", last(res))
	}
	if seen := r.cmd("g", `SEARCH UNSEEN`); !strings.HasPrefix(seen[0], "* SEARCH") || strings.TrimSpace(strings.TrimPrefix(seen[0], "* SEARCH")) != "" {
		t.Errorf("messages left unseen after FETCH BODY[HEADER]: %.200q", seen[0])
	}
}

// appendFlags (behind writeFlags too): system flags in their order,
// \Recent only before IMAP4rev2, keywords that are atoms.
func TestAppendFlags(t *testing.T) {
	all := store.FlagSeen | store.FlagAnswered | store.FlagFlagged | store.FlagDeleted | store.FlagDraft
	for _, c := range []struct {
		f      msgFlags
		recent bool
		rev2   bool
		want   string
	}{
		{msgFlags{}, false, false, "()"},
		{msgFlags{}, true, false, `(\Recent)`},
		{msgFlags{}, true, true, "()"},
		{msgFlags{flags: store.FlagSeen}, false, true, `(\Seen)`},
		{msgFlags{flags: all}, true, false, `(\Seen \Answered \Flagged \Deleted \Draft \Recent)`},
		{msgFlags{flags: store.FlagDraft, keywords: []string{"$Junk", "bad kw", "Work"}}, false, true, `(\Draft $Junk Work)`},
		{msgFlags{keywords: []string{"x"}}, true, false, `(\Recent x)`},
	} {
		s := &session{rev2: c.rev2}
		if got := string(s.appendFlags([]byte("x"), c.f, c.recent)); got != "x"+c.want {
			t.Errorf("%+v recent %v rev2 %v: %q, want %q", c.f, c.recent, c.rev2, got, "x"+c.want)
		}
	}
}
