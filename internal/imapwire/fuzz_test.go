package imapwire

import (
	"bufio"
	"bytes"
	"testing"
)

func FuzzReadCommand(f *testing.F) {
	for _, s := range []string{
		"a1 FETCH 1:*,3 (FLAGS BODY.PEEK[1.2.HEADER.FIELDS (From To)]<0.100>)\r\n",
		"a APPEND INBOX (\\Seen) \" 7-Feb-2024 10:11:12 +0100\" {5+}\r\nhello\r\n",
		"a LOGIN {3}\r\nbob {4}\r\npass\r\n",
		"a SEARCH CHARSET UTF-8 OR (FROM x) NOT SEEN\r\n",
		"a SELECT INBOX (QRESYNC (1 2 1:5 (1:2 3:4)))\r\n", "a UID FETCH 1:* FLAGS (CHANGEDSINCE 5 VANISHED)\r\n",
		"a NOOP ((((\r\n", "\r\n", "a\r\n", "a NOOP x{3+}\r\nabc\r\n",
		"a NOTIFY SET STATUS (SELECTED (MessageNew (UID FLAGS) MessageExpunge)) (SUBTREE (a b) (MailboxName))\r\n",
		"a SORT RETURN (PARTIAL 1:5 UPDATE) (REVERSE DATE) UTF-8 ALL\r\n",
		"a APPEND x CATENATE (URL \"/INBOX;UIDVALIDITY=5/;UID=3/;SECTION=1.HEADER/;PARTIAL=0.9\" TEXT {2+}\r\nhi)\r\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		r := NewReader(bufio.NewReaderSize(bytes.NewReader(data), 4096),
			Limits{MaxLine: 256, MaxLiteral: 1024, MaxDiscard: 2048}, func(int64) error { return nil })
		for i := 0; i < 64; i++ {
			cmd, err := r.ReadCommand()
			if err != nil {
				if pe, ok := err.(*Error); ok && !pe.Fatal {
					if pe.Tag == "" {
						t.Fatal("error without tag")
					}
					continue
				}
				return
			}
			if cmd.Tag == "" || cmd.Name == "" {
				t.Fatalf("empty tag or name: %+v", cmd)
			}
			for _, a := range cmd.Args {
				if a.Kind == KindAtom {
					_, _ = ParseFetchAtts(a)
					_, _ = ParseSeqSet(a.Str)
				}
			}
			_, _ = ParseSearch(cmd.Args)
			_, _ = ParseNotify(cmd.Args)
			for _, a := range cmd.Args {
				if s, ok := a.AString(); ok {
					if u, err := ParseIMAPURL(s); err == nil && u.UID == 0 {
						t.Fatalf("URL without UID accepted: %q", s)
					}
				}
				if a.Kind == KindList {
					if _, p, err := ParseReturnOptions(a); err == nil && p.First > p.Last {
						t.Fatalf("PARTIAL range %d:%d", p.First, p.Last)
					}
					_, _ = ParseFetchModifiers(a)
					_, _ = ParseStoreModifiers(a)
					_, _ = ParseSelectParams(a)
				}
			}
		}
	})
}

func FuzzFetchAtt(f *testing.F) {
	for _, s := range []string{"BODY[1.2.HEADER.FIELDS (A B)]<0.100>", "BINARY.PEEK[1]", "BODY[TEXT]<5>", "RFC822.SIZE"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		fa, err := ParseFetchAtt(s)
		if err != nil {
			return
		}
		if fa.Section != nil {
			for _, n := range fa.Section.Part {
				if n <= 0 {
					t.Fatalf("part number %d", n)
				}
			}
		}
		if fa.Partial != nil && fa.Partial.HasCount && fa.Partial.Count <= 0 {
			t.Fatalf("partial count %d", fa.Partial.Count)
		}
	})
}

func FuzzMUTF7(f *testing.F) {
	for _, s := range []string{"INBOX", "Entw&APw-rfe", "&-", "&ZeVnLIqe-"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		dec, err := DecodeMUTF7(s)
		if err != nil {
			return
		}
		if again, err := DecodeMUTF7(EncodeMUTF7(dec)); err != nil || again != dec {
			t.Fatalf("round trip of %q: %q %v", dec, again, err)
		}
	})
}
