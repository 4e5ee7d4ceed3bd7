package blackbox

import (
	"bufio"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"
)

// rawIMAPLogin connects and logs in without a *testing.T, for use from
// several goroutines (the imapConn methods used then never touch t).
func rawIMAPLogin(addr, user string) (*imapConn, error) {
	c, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		return nil, err
	}
	ic := &imapConn{c: c, r: bufio.NewReader(c)}
	if line, err := ic.line(); err != nil || !strings.HasPrefix(line, "* OK") {
		c.Close()
		return nil, fmt.Errorf("greeting %q: %v", line, err)
	}
	status, _, err := ic.command("L", fmt.Sprintf("LOGIN %q %q", user, testPassword))
	if err != nil || !strings.HasPrefix(status, "OK") {
		c.Close()
		return nil, fmt.Errorf("LOGIN %s: %q %v", user, status, err)
	}
	return ic, nil
}

// appendMsg sends APPEND with a non-synchronizing literal (RFC 7888) and
// returns the tagged status line.
func (ic *imapConn) appendMsg(tag, mailbox string, msg []byte) (string, error) {
	head := fmt.Sprintf("%s APPEND %s {%d+}\r\n", tag, mailbox, len(msg))
	if err := ic.write(head + string(msg) + "\r\n"); err != nil {
		return "", err
	}
	status, _, err := ic.tagged(tag)
	return status, err
}

// respCode returns the response code's arguments from a status line such
// as `OK [APPENDUID 17 4] done`: code "APPENDUID" gives ["17", "4"].
func respCode(status, code string) []string {
	i := strings.Index(status, "["+code+" ")
	if i < 0 {
		return nil
	}
	rest := status[i+len(code)+2:]
	end := strings.IndexByte(rest, ']')
	if end < 0 {
		return nil
	}
	return strings.Fields(rest[:end])
}

// appendUID parses the UIDVALIDITY and UID of an APPENDUID code (RFC 4315).
func appendUID(status string) (uint32, uint32, error) {
	f := respCode(status, "APPENDUID")
	if len(f) != 2 {
		return 0, 0, fmt.Errorf("no APPENDUID in %q", status)
	}
	v, err1 := strconv.ParseUint(f[0], 10, 32)
	u, err2 := strconv.ParseUint(f[1], 10, 32)
	if err1 != nil || err2 != nil {
		return 0, 0, fmt.Errorf("bad APPENDUID in %q", status)
	}
	return uint32(v), uint32(u), nil
}

// mailboxStatus is what STATUS says about a mailbox.
type mailboxStatus struct {
	Messages, UIDNext, UIDValidity uint32
}

// status runs STATUS (MESSAGES UIDNEXT UIDVALIDITY) and fails the test on error.
func (ic *imapConn) status(t *testing.T, mailbox string) mailboxStatus {
	t.Helper()
	st, untagged, err := ic.command("S", "STATUS "+mailbox+" (MESSAGES UIDNEXT UIDVALIDITY)")
	if err != nil || !strings.HasPrefix(st, "OK") {
		t.Fatalf("STATUS %s: %q %v", mailbox, st, err)
	}
	var ms mailboxStatus
	for _, u := range untagged {
		i := strings.IndexByte(u, '(')
		if !strings.HasPrefix(u, "* STATUS ") || i < 0 {
			continue
		}
		f := strings.Fields(strings.Trim(u[i:], "()"))
		for j := 0; j+1 < len(f); j += 2 {
			n, _ := strconv.ParseUint(f[j+1], 10, 32)
			switch f[j] {
			case "MESSAGES":
				ms.Messages = uint32(n)
			case "UIDNEXT":
				ms.UIDNext = uint32(n)
			case "UIDVALIDITY":
				ms.UIDValidity = uint32(n)
			}
		}
	}
	if ms.UIDNext == 0 || ms.UIDValidity == 0 {
		t.Fatalf("STATUS %s: no UIDNEXT/UIDVALIDITY in %q", mailbox, untagged)
	}
	return ms
}
