package storetest

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"pimail/internal/store"
)

// Tests of ListSorter and of listing an account's sessions.

func testListSorter(t *testing.T, s store.Store) {
	c := ctx(t)
	f := setup(t, s, 1)
	inbox := f.mailbox(t, 0, "INBOX")
	raws := []string{
		"From: =?utf-8?q?J=C3=B6rg?= <j@example.net>\r\nSubject: =?utf-8?q?gr=C3=BC=C3=9Fe?=\r\nMessage-ID: <a@x>\r\nDate: Mon, 2 Jan 2006 15:04:05 +0200\r\n\r\nbody\r\n",
		"From: b@example.net\r\nTo: Zoë <z@example.org>\r\nSubject: Re: x\r\nMessage-ID: <b@x>\r\nIn-Reply-To: <a@x>\r\nReferences: <r@x> <a@x>\r\n\r\nlonger body here\r\n",
		"From: c@example.net\r\nSubject: third\r\n\r\nc\r\n",
	}
	for i, raw := range raws {
		if _, err := s.Append(c, inbox.ID, []byte(raw), store.Flags(i%2)*store.FlagSeen, nil, time.Unix(int64(1000+i), 0)); err != nil {
			t.Fatal(err)
		}
	}
	keys, err := s.SortKeys(c, inbox.ID)
	if err != nil || len(keys) != 3 {
		t.Fatalf("SortKeys: %+v, %v", keys, err)
	}
	k := keys[0]
	if k.UID != 1 || k.Subject != "grüße" || k.From != "Jörg <j@example.net>" || k.MessageID != "a@x" ||
		k.InternalDate.Unix() != 1000 || k.Size != int64(len(raws[0])) || k.Date.Unix() != time.Date(2006, 1, 2, 13, 4, 5, 0, time.UTC).Unix() {
		t.Errorf("first key: %+v", k)
	}
	if _, off := k.Date.Zone(); off != 7200 {
		t.Errorf("date zone %d", off)
	}
	k = keys[1]
	if k.UID != 2 || k.To != "Zoë <z@example.org>" || k.InReplyTo != "<a@x>" || !slices.Equal(k.References, []string{"r@x", "a@x"}) || !k.Date.IsZero() {
		t.Errorf("second key: %+v", k)
	}
	if keys[2].UID != 3 || keys[2].References != nil || keys[2].MessageID != "" {
		t.Errorf("third key: %+v", keys[2])
	}
	items, err := s.ListItems(c, inbox.ID, []uint32{3, 1, 99})
	if err != nil || len(items) != 2 || items[0].UID != 1 || items[1].UID != 3 {
		t.Fatalf("ListItems: %+v, %v", items, err)
	}
	page, err := s.MailboxPage(c, inbox.ID, 0, 3)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(items[0]) != fmt.Sprint(page[2]) || fmt.Sprint(items[1]) != fmt.Sprint(page[0]) {
		t.Errorf("ListItems rows differ from MailboxPage's:\n%+v\n%+v", items, page)
	}
	if none, err := s.ListItems(c, inbox.ID, nil); err != nil || len(none) != 0 {
		t.Errorf("no UIDs: %v, %v", none, err)
	}
	if none, err := s.SortKeys(c, inbox.ID+1000); err != nil || len(none) != 0 {
		t.Errorf("unknown mailbox: %v, %v", none, err)
	}
}

func testAccountSessions(t *testing.T, s store.Store) {
	c := ctx(t)
	f := setup(t, s, 2)
	a, b := f.accounts[0], f.accounts[1]
	now := time.UnixMilli(time.Now().UnixMilli())
	mk := func(acc store.Account, id string, seen, expires time.Duration, client string) {
		if err := s.CreateSession(c, store.Session{App: "webmail", ID: id, AccountID: acc.ID, CSRF: "t" + id,
			Created: now.Add(-time.Hour), LastSeen: now.Add(seen), Expires: now.Add(expires), Client: client}, 0); err != nil {
			t.Fatal(err)
		}
	}
	mk(a, "old", -30*time.Minute, time.Hour, "Firefox on Linux, 192.0.2.1")
	mk(a, "new", -time.Minute, time.Hour, string(make([]byte, 300)))
	mk(a, "expired", -2*time.Hour, -time.Minute, "")
	mk(b, "other", 0, time.Hour, "")
	l, err := s.AccountSessions(c, "webmail", a.ID, now)
	if err != nil || len(l) != 2 || l[0].ID != "new" || l[1].ID != "old" {
		t.Fatalf("list: %+v, %v", l, err)
	}
	if o := l[1]; o.Client != "Firefox on Linux, 192.0.2.1" || o.Address != a.Address || o.AccountID != a.ID ||
		!o.LastSeen.Equal(now.Add(-30*time.Minute)) || !o.Expires.Equal(now.Add(time.Hour)) || o.App != "webmail" {
		t.Errorf("session: %+v", o)
	}
	if n := len(l[0].Client); n > 200 {
		t.Errorf("client of %d bytes kept", n)
	}
	if got, err := s.Session(c, "webmail", "old", now); err != nil || got.Client != "Firefox on Linux, 192.0.2.1" {
		t.Errorf("Session's client: %q, %v", got.Client, err)
	}
	if l, err := s.AccountSessions(c, "admin", a.ID, now); err != nil || len(l) != 0 {
		t.Errorf("another program's: %v, %v", l, err)
	}
}
