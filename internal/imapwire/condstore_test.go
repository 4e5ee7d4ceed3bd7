package imapwire

import (
	"bufio"
	"strings"
	"testing"
)

// parseArgs reads one command line and returns its arguments.
func parseArgs(t *testing.T, line string) []Arg {
	t.Helper()
	r := NewReader(bufio.NewReader(strings.NewReader("t X "+line+"\r\n")), Limits{}, nil)
	cmd, err := r.ReadCommand()
	if err != nil {
		t.Fatalf("%s: %v", line, err)
	}
	return cmd.Args
}

func TestParseCondStoreModifiers(t *testing.T) {
	m, err := ParseFetchModifiers(parseArgs(t, "(CHANGEDSINCE 9223372036854775807 vanished)")[0])
	if err != nil || !m.HasChangedSince || m.ChangedSince != 1<<63-1 || !m.Vanished {
		t.Fatalf("fetch modifiers: %+v %v", m, err)
	}
	for _, bad := range []string{"()", "(CHANGEDSINCE)", "(CHANGEDSINCE 0)", "(CHANGEDSINCE 9223372036854775808)",
		"(CHANGEDSINCE 1 CHANGEDSINCE 2)", "(FOO 1)", "(CHANGEDSINCE x)"} {
		if _, err := ParseFetchModifiers(parseArgs(t, bad)[0]); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
	n, err := ParseStoreModifiers(parseArgs(t, "(unchangedsince 0)")[0])
	if err != nil || n != 0 {
		t.Fatalf("store modifiers: %d %v", n, err)
	}
	if _, err := ParseStoreModifiers(parseArgs(t, "(UNCHANGEDSINCE -1)")[0]); err == nil {
		t.Error("negative UNCHANGEDSINCE accepted")
	}

	p, err := ParseSelectParams(parseArgs(t, "(QRESYNC (67890007 90060115194045000 41:211,214:541 (1,5:7 41,60:62)))")[0])
	if err != nil || p.QResync == nil {
		t.Fatalf("select params: %+v %v", p, err)
	}
	q := p.QResync
	if q.UIDValidity != 67890007 || q.ModSeq != 90060115194045000 || q.KnownUIDs == nil ||
		!q.KnownUIDs.Contains(300, 1000) || q.KnownUIDs.Contains(212, 1000) || !q.HasMatch || !q.SeqMatch[1].Contains(61, 100) {
		t.Fatalf("qresync: %+v", q)
	}
	if p, err := ParseSelectParams(parseArgs(t, "(CONDSTORE)")[0]); err != nil || !p.CondStore || p.QResync != nil {
		t.Fatalf("condstore param: %+v %v", p, err)
	}
	for _, bad := range []string{"(QRESYNC)", "(QRESYNC (0 5))", "(QRESYNC (1 0))", "(QRESYNC (1 2 $))", "(QRESYNC (1 2 1:3 (1)))", "(QRESYNC (1 2 1:3 (1 2) x))"} {
		if _, err := ParseSelectParams(parseArgs(t, bad)[0]); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
}

func TestParseSearchModSeq(t *testing.T) {
	sc, err := ParseSearch(parseArgs(t, `MODSEQ "/flags/\\draft" all 620162338 UNSEEN`))
	if err != nil || len(sc.Key.Children) != 2 || sc.Key.Children[0].Op != "MODSEQ" || sc.Key.Children[0].Num != 620162338 ||
		sc.Key.Children[0].Field != `/flags/\draft` {
		t.Fatalf("MODSEQ with entry: %+v %v", sc.Key, err)
	}
	if sc, err := ParseSearch(parseArgs(t, "MODSEQ 0")); err != nil || sc.Key.Op != "MODSEQ" || sc.Key.Num != 0 {
		t.Fatalf("MODSEQ 0: %+v %v", sc.Key, err)
	}
	for _, bad := range []string{`MODSEQ "/flags/x" bogus 5`, "MODSEQ", "MODSEQ x"} {
		if _, err := ParseSearch(parseArgs(t, bad)); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
}
