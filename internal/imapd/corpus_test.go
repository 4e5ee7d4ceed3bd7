package imapd

import (
	"bytes"
	"context"
	"os"
	"sort"
	"strings"
	"testing"

	"github.com/emersion/go-imap/v2"

	"pimail/internal/store"
)

// TestCorpusRoundTrip stores the malformed edge cases and some real mail,
// then has go-imap's strict parser read ENVELOPE, BODYSTRUCTURE and every
// BODY[] back: the structures must parse and the bytes must be identical.
func TestCorpusRoundTrip(t *testing.T) {
	var files []string
	for _, pat := range []string{"edge/*", "ham/ham-0*", "spam/spam-0*"} {
		files = append(files, corpusGlob(t, pat)...)
	}
	sort.Strings(files)
	if len(files) > 400 {
		files = files[:400]
	}
	e := newTestEnv(t, Config{})
	var raws [][]byte
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil || len(b) == 0 || strings.HasSuffix(f, ".md") {
			continue
		}
		if _, err := e.st.Deliver(context.Background(), store.Delivery{Raw: b,
			Recipients: []store.Recipient{{AccountID: e.acct.ID}}}); err != nil {
			t.Fatalf("deliver %s: %v", f, err)
		}
		raws = append(raws, b)
	}
	c := e.client(nil)
	if _, err := c.Select("INBOX", nil).Wait(); err != nil {
		t.Fatal(err)
	}
	body := &imap.FetchItemBodySection{Peek: true}
	hdr := &imap.FetchItemBodySection{Peek: true, Specifier: imap.PartSpecifierHeader}
	all := imap.SeqSet{}
	all.AddRange(1, 0)
	msgs, err := c.Fetch(all, &imap.FetchOptions{Envelope: true, UID: true,
		BodyStructure: &imap.FetchItemBodyStructure{Extended: true},
		BodySection:   []*imap.FetchItemBodySection{body, hdr}}).Collect()
	if err != nil {
		t.Fatalf("fetch: %v", err)
	}
	if len(msgs) != len(raws) {
		t.Fatalf("%d messages fetched, %d stored", len(msgs), len(raws))
	}
	for i, m := range msgs {
		if !bytes.Equal(m.FindBodySection(body), raws[i]) {
			t.Errorf("message %d: BODY[] differs", i+1)
		}
		if h := m.FindBodySection(hdr); !bytes.HasPrefix(raws[i], h) {
			t.Errorf("message %d: BODY[HEADER] is not a prefix of the message", i+1)
		}
		if m.BodyStructure == nil || m.Envelope == nil {
			t.Errorf("message %d: no structure or envelope", i+1)
		}
	}
	// SEARCH over all of it must not fail.
	if _, err := c.Search(&imap.SearchCriteria{Body: []string{"the"}, Header: []imap.SearchCriteriaHeaderField{{Key: "Subject", Value: "a"}}}, nil).Wait(); err != nil {
		t.Fatalf("search: %v", err)
	}
}
