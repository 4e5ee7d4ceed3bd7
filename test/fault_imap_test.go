package blackbox

import (
	"bytes"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// faultConns is the number of IMAP connections working at the moment of
// the kill.
const faultConns = 4

// imapFault is the state shared by one kill-during-IMAP round: the
// messages, which ones the server acknowledged, and the UIDs it named.
type imapFault struct {
	t     *testing.T
	srv   *Server
	user  string
	tag   string
	msgs  [][]byte
	acked []atomic.Bool
	uid   []atomic.Uint32 // UID named in APPENDUID/COPYUID for an acknowledged operation
	nAck  atomic.Int32

	killAt int32
	once   sync.Once
	killed chan struct{}
}

func newIMAPFault(t *testing.T, op string, n int) *imapFault {
	srv := NewServer(t, "")
	user := srv.AddAccounts("fault" + op)[0]
	srv.Start()
	f := &imapFault{t: t, srv: srv, user: user, tag: "fault-" + op,
		acked: make([]atomic.Bool, n), uid: make([]atomic.Uint32, n), killed: make(chan struct{})}
	for i := range n {
		f.msgs = append(f.msgs, generatedMessage(f.tag, i, 1500+53*i%9000))
	}
	return f
}

// ack records an acknowledged operation on message i and kills the
// server with SIGKILL once killAt operations are acknowledged.
func (f *imapFault) ack(i int, uid uint32) {
	f.acked[i].Store(true)
	f.uid[i].Store(uid)
	if f.nAck.Add(1) == f.killAt {
		f.once.Do(func() {
			f.srv.Kill9()
			close(f.killed)
		})
	}
}

// run starts faultConns workers, each handling every faultConns-th item
// with op over its own connection until op fails (the server died), and
// checks that the kill came while work was still in flight.
func (f *imapFault) run(items []int, op func(ic *imapConn, i int) error, setup func(ic *imapConn) error) {
	t := f.t
	var wg sync.WaitGroup
	for c := range faultConns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ic, err := rawIMAPLogin(f.srv.IMAP, f.user)
			if err != nil {
				return
			}
			defer ic.c.Close()
			if setup != nil && setup(ic) != nil {
				return
			}
			for k := c; k < len(items); k += faultConns {
				if op(ic, items[k]) != nil {
					return
				}
			}
		}()
	}
	wg.Wait()
	select {
	case <-f.killed:
	default:
		t.Fatalf("only %d operations acknowledged; the server was not killed:\n%s", f.nAck.Load(), f.srv.Logs())
	}
	if int(f.nAck.Load()) == len(items) {
		t.Errorf("all %d operations were acknowledged: the kill did not hit work in flight", len(items))
	}
	t.Logf("SIGKILL after %d acknowledgements; %d acknowledged in all, of %d", f.killAt, f.nAck.Load(), len(items))
}

// restart starts the server again; it must come up without repair and
// without logging errors while opening the store.
func (f *imapFault) restart() {
	f.srv.Start()
	if errs := f.srv.logLines(regexp.MustCompile(`level=ERROR`)); len(errs) > 0 {
		f.t.Errorf("errors logged while restarting after SIGKILL:\n%s", strings.Join(errs, "\n"))
	}
}

// contents fetches a mailbox after the restart and maps each of this
// round's messages to its UIDs there; it fails on foreign or damaged
// messages.
func (f *imapFault) contents(mailbox string) map[int][]uint32 {
	t := f.t
	c := imapLogin(t, f.srv.IMAP, f.user, nil)
	defer c.Close()
	out := map[int][]uint32{}
	for name, msg := range fetchAll(t, c, mailbox) {
		subj := headerValue(msg, "Subject")
		n, ok := strings.CutPrefix(subj, f.tag+" ")
		i, err := strconv.Atoi(n)
		if !ok || err != nil || i < 0 || i >= len(f.msgs) {
			t.Errorf("%s %s: unexpected message with Subject %q", mailbox, name, subj)
			continue
		}
		if !bytes.Equal(msg, f.msgs[i]) {
			t.Errorf("%s %s: message %d (acknowledged %v) is not byte-identical: %s",
				mailbox, name, i, f.acked[i].Load(), firstDifference(msg, f.msgs[i]))
		}
		uid, _ := strconv.ParseUint(strings.TrimPrefix(name, "uid:"), 10, 32)
		out[i] = append(out[i], uint32(uid))
	}
	return out
}

// preload appends every message to INBOX before the round and returns
// their UIDs.
func (f *imapFault) preload() []uint32 {
	t := f.t
	ic, err := rawIMAPLogin(f.srv.IMAP, f.user)
	if err != nil {
		t.Fatal(err)
	}
	defer ic.c.Close()
	uids := make([]uint32, len(f.msgs))
	for i, m := range f.msgs {
		st, err := ic.appendMsg("P", "INBOX", m)
		if err != nil || !strings.HasPrefix(st, "OK") {
			t.Fatalf("preload APPEND %d: %q %v", i, st, err)
		}
		if _, uids[i], err = appendUID(st); err != nil {
			t.Fatal(err)
		}
	}
	return uids
}

// statusNow is STATUS over a fresh connection.
func (f *imapFault) statusNow(mailbox string) mailboxStatus {
	ic := dialIMAP(f.t, f.srv.IMAP)
	ic.login(f.user)
	defer ic.c.Close()
	return ic.status(f.t, mailbox)
}

// checkUIDs compares STATUS before the kill with STATUS after the restart:
// the same UIDVALIDITY, UIDNEXT not smaller and above every UID the server
// named before the kill (RFC 9051 §2.3.1.1: UIDs strictly ascend and are
// never reused within one UIDVALIDITY).
func (f *imapFault) checkUIDs(mailbox string, before mailboxStatus, highest uint32) {
	after := f.statusNow(mailbox)
	f.t.Logf("%s before: %+v, after restart: %+v, highest UID named: %d", mailbox, before, after, highest)
	if after.UIDValidity != before.UIDValidity {
		f.t.Errorf("%s: UIDVALIDITY changed from %d to %d across the crash", mailbox, before.UIDValidity, after.UIDValidity)
	}
	if after.UIDNext < before.UIDNext || after.UIDNext <= highest {
		f.t.Errorf("%s: UIDNEXT went backwards: %d before, %d after, UID %d already handed out",
			mailbox, before.UIDNext, after.UIDNext, highest)
	}
	// A new message gets a UID above everything handed out.
	ic := dialIMAP(f.t, f.srv.IMAP)
	ic.login(f.user)
	st, err := ic.appendMsg("N", mailbox, generatedMessage("after-crash", 1, 500))
	if err != nil || !strings.HasPrefix(st, "OK") {
		f.t.Fatalf("APPEND after restart: %q %v", st, err)
	}
	if _, uid, err := appendUID(st); err != nil || uid <= highest || uid < before.UIDNext {
		f.t.Errorf("%s: APPEND after the restart got UID %d (%v); UID %d was handed out before", mailbox, uid, err, highest)
	}
}

// TestFaultKillDuringAppend kills the server with SIGKILL while four
// connections APPEND. Every APPEND that got OK is present after the
// restart, byte-identical, once, under the UID its APPENDUID named.
func TestFaultKillDuringAppend(t *testing.T) {
	n := pick(160, 1200)
	f := newIMAPFault(t, "append", n)
	f.killAt = int32(n / 4)
	before := f.statusNow("INBOX")
	items := make([]int, n)
	for i := range items {
		items[i] = i
	}
	f.run(items, func(ic *imapConn, i int) error {
		st, err := ic.appendMsg(fmt.Sprintf("A%d", i), "INBOX", f.msgs[i])
		if err != nil {
			return err
		}
		if !strings.HasPrefix(st, "OK") {
			return fmt.Errorf("APPEND: %s", st)
		}
		_, uid, err := appendUID(st)
		if err != nil {
			return err
		}
		f.ack(i, uid)
		return nil
	}, nil)
	f.restart()
	got := f.contents("INBOX")
	var highest uint32
	lost, present := 0, 0
	for i := range f.msgs {
		uids := got[i]
		present += min(len(uids), 1)
		if len(uids) > 1 {
			t.Errorf("message %d is in INBOX %d times (UIDs %v)", i, len(uids), uids)
		}
		if !f.acked[i].Load() {
			continue
		}
		highest = max(highest, f.uid[i].Load())
		switch {
		case len(uids) == 0:
			lost++
			t.Errorf("message %d got OK [APPENDUID … %d] but is gone after the crash", i, f.uid[i].Load())
		case uids[0] != f.uid[i].Load():
			t.Errorf("message %d: APPENDUID said UID %d, after the crash it is UID %d", i, f.uid[i].Load(), uids[0])
		}
	}
	for _, uids := range got {
		for _, u := range uids {
			highest = max(highest, u)
		}
	}
	t.Logf("acknowledged %d, present after restart %d, lost %d", f.nAck.Load(), present, lost)
	f.checkUIDs("INBOX", before, highest)
}

// TestFaultKillDuringMove kills the server while four connections move
// messages one by one with UID MOVE (RFC 6851). After the restart each
// message is in exactly one of the two mailboxes; a move that got OK is in
// the target under the UID its COPYUID named.
func TestFaultKillDuringMove(t *testing.T) {
	n := pick(160, 800)
	f := newIMAPFault(t, "move", n)
	f.killAt = int32(n / 4)
	src := f.preload()
	beforeIn, beforeArch := f.statusNow("INBOX"), f.statusNow("Archive")
	items := make([]int, n)
	for i := range items {
		items[i] = i
	}
	f.run(items, func(ic *imapConn, i int) error {
		st, untagged, err := ic.command(fmt.Sprintf("M%d", i), fmt.Sprintf("UID MOVE %d Archive", src[i]))
		if err != nil {
			return err
		}
		if !strings.HasPrefix(st, "OK") {
			return fmt.Errorf("MOVE: %s", st)
		}
		// RFC 6851 §4.3: COPYUID comes in an untagged OK before the EXPUNGE.
		var f3 []string
		for _, u := range append(untagged, st) {
			if c := respCode(u, "COPYUID"); len(c) == 3 {
				f3 = c
			}
		}
		if len(f3) != 3 || f3[1] != strconv.Itoa(int(src[i])) {
			return fmt.Errorf("MOVE %d: no COPYUID for it in %q %q", src[i], untagged, st)
		}
		dst, err := strconv.ParseUint(f3[2], 10, 32)
		if err != nil {
			return err
		}
		f.ack(i, uint32(dst))
		return nil
	}, func(ic *imapConn) error {
		st, _, err := ic.command("S", "SELECT INBOX")
		if err == nil && !strings.HasPrefix(st, "OK") {
			err = fmt.Errorf("SELECT: %s", st)
		}
		return err
	})
	f.restart()
	inbox, archive := f.contents("INBOX"), f.contents("Archive")
	var highest uint32
	for i := range f.msgs {
		in, arch := len(inbox[i]), len(archive[i])
		if in+arch != 1 {
			t.Errorf("message %d is %d times in INBOX and %d times in Archive; want exactly once", i, in, arch)
		}
		if f.acked[i].Load() {
			dst := f.uid[i].Load()
			highest = max(highest, dst)
			if arch != 1 || archive[i][0] != dst {
				t.Errorf("message %d: UID MOVE got OK [COPYUID … %d] but after the crash Archive has it as %v", i, dst, archive[i])
			}
		}
		for _, u := range archive[i] {
			highest = max(highest, u)
		}
	}
	t.Logf("moves acknowledged %d; after restart INBOX %d, Archive %d", f.nAck.Load(), len(inbox), len(archive))
	f.checkUIDs("INBOX", beforeIn, src[n-1])
	f.checkUIDs("Archive", beforeArch, highest)
}

// TestFaultKillDuringExpunge kills the server while four connections
// flag and expunge every other message with UID EXPUNGE (RFC 4315). After
// the restart an acknowledged expunge stays done, and every message that
// was not a target is present, byte-identical and once.
func TestFaultKillDuringExpunge(t *testing.T) {
	n := pick(160, 800)
	f := newIMAPFault(t, "expunge", n)
	src := f.preload()
	var targets []int
	for i := 0; i < n; i += 2 {
		targets = append(targets, i)
	}
	f.killAt = int32(len(targets) / 4)
	before := f.statusNow("INBOX")
	f.run(targets, func(ic *imapConn, i int) error {
		tag := fmt.Sprintf("E%d", i)
		st, _, err := ic.command(tag+"s", fmt.Sprintf(`UID STORE %d +FLAGS.SILENT (\Deleted)`, src[i]))
		if err != nil || !strings.HasPrefix(st, "OK") {
			return fmt.Errorf("STORE: %q %v", st, err)
		}
		st, _, err = ic.command(tag, fmt.Sprintf("UID EXPUNGE %d", src[i]))
		if err != nil || !strings.HasPrefix(st, "OK") {
			return fmt.Errorf("UID EXPUNGE: %q %v", st, err)
		}
		f.ack(i, src[i])
		return nil
	}, func(ic *imapConn) error {
		st, _, err := ic.command("S", "SELECT INBOX")
		if err == nil && !strings.HasPrefix(st, "OK") {
			err = fmt.Errorf("SELECT: %s", st)
		}
		return err
	})
	f.restart()
	got := f.contents("INBOX")
	kept := 0
	for i := range f.msgs {
		uids := got[i]
		switch {
		case len(uids) > 1:
			t.Errorf("message %d is in INBOX %d times", i, len(uids))
		case f.acked[i].Load() && len(uids) > 0:
			t.Errorf("message %d: UID EXPUNGE %d got OK but it is back after the crash", i, src[i])
		case i%2 == 1 && len(uids) == 0:
			t.Errorf("message %d was never a target but is gone after the crash", i)
		case len(uids) == 1 && uids[0] != src[i]:
			t.Errorf("message %d changed UID from %d to %d", i, src[i], uids[0])
		}
		kept += len(uids)
	}
	t.Logf("expunges acknowledged %d of %d targets; %d of %d messages left", f.nAck.Load(), len(targets), kept, n)
	f.checkUIDs("INBOX", before, src[n-1])
}
