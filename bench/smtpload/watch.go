package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// watcher logs in to one mailbox over IMAP and reports when this run's
// messages appear in its INBOX: either by polling (NOOP every poll
// interval) or with IDLE (poll = 0). The moment a message counts as
// visible is when the server first reports the EXISTS that includes it.
type watcher struct {
	cfg   *config
	user  string
	res   *results
	idRe  *regexp.Regexp
	nc    net.Conn
	r     *bufio.Reader
	tagNo int
	next  uint64 // lowest UID not fetched yet
	count int    // messages in INBOX as last reported (by any response)
	// covered is the count when the last FETCH was sent: messages up to
	// it have been fetched. An EXISTS that arrives with a FETCH's own
	// responses raises count past covered, so the next poll fetches
	// again even though no later response repeats that EXISTS.
	covered int
}

var (
	existsRe  = regexp.MustCompile(`^\* (\d+) EXISTS`)
	uidNextRe = regexp.MustCompile(`\[UIDNEXT (\d+)\]`)
	uidRe     = regexp.MustCompile(`UID (\d+)`)
)

func newWatcher(cfg *config, user string, res *results) *watcher {
	return &watcher{cfg: cfg, user: user, res: res,
		idRe: regexp.MustCompile(`sl-` + regexp.QuoteMeta(cfg.runID) + `-(\d+)@smtpload\.bench`)}
}

// start connects, logs in and selects INBOX; after it returns nil the
// watcher sees every later delivery.
func (w *watcher) start() error {
	nc, err := net.DialTimeout("tcp", w.cfg.imapAddr, 10*time.Second)
	if err != nil {
		return fmt.Errorf("imap dial: %w", err)
	}
	w.nc, w.r = nc, bufio.NewReaderSize(nc, 64*1024)
	_ = nc.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := w.readLine(); err != nil {
		return fmt.Errorf("imap greeting: %w", err)
	}
	if _, err := w.cmd(fmt.Sprintf("LOGIN %s %s", quote(w.user), quote(w.cfg.imapPass))); err != nil {
		return fmt.Errorf("imap login %s: %w", w.user, err)
	}
	lines, err := w.cmd("SELECT INBOX")
	if err != nil {
		return fmt.Errorf("imap select: %w", err)
	}
	w.absorb(lines, time.Now())
	w.covered = w.count
	return nil
}

// run watches until ctx ends.
func (w *watcher) run(ctx context.Context) error {
	defer w.nc.Close()
	for ctx.Err() == nil {
		var err error
		if w.cfg.imapPoll > 0 {
			err = w.pollOnce(ctx)
		} else {
			err = w.idleOnce(ctx)
		}
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("watch %s: %w", w.user, err)
		}
	}
	_ = w.nc.SetDeadline(time.Now().Add(2 * time.Second))
	_, _ = w.cmd("LOGOUT")
	return nil
}

func (w *watcher) pollOnce(ctx context.Context) error {
	select {
	case <-ctx.Done():
		return nil
	case <-time.After(w.cfg.imapPoll):
	}
	_ = w.nc.SetDeadline(time.Now().Add(30 * time.Second))
	lines, err := w.cmd("NOOP")
	if err != nil {
		return err
	}
	return w.newMail(lines, time.Now())
}

// idleOnce runs one IDLE until the mailbox grows or ctx ends.
func (w *watcher) idleOnce(ctx context.Context) error {
	tag := w.tag()
	_ = w.nc.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := fmt.Fprintf(w.nc, "%s IDLE\r\n", tag); err != nil {
		return err
	}
	if l, err := w.readLine(); err != nil || !strings.HasPrefix(l, "+") {
		return fmt.Errorf("IDLE refused: %q %v", l, err)
	}
	var got []string
	var at time.Time
	if w.count > w.covered {
		at = time.Now()
	}
	for ctx.Err() == nil && at.IsZero() {
		_ = w.nc.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
		l, err := w.readLine()
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			continue
		}
		if err != nil {
			return err
		}
		got = append(got, l)
		if m := existsRe.FindStringSubmatch(l); m != nil {
			if n, _ := strconv.Atoi(m[1]); n > w.count {
				at = time.Now()
			}
		}
	}
	_ = w.nc.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := fmt.Fprint(w.nc, "DONE\r\n"); err != nil {
		return err
	}
	rest, err := w.until(tag)
	if err != nil {
		return err
	}
	if at.IsZero() {
		return nil
	}
	return w.newMail(append(got, rest...), at)
}

// newMail fetches the Message-IDs of the messages that arrived since the
// last fetch when lines report a larger mailbox, and records them as seen
// at t.
func (w *watcher) newMail(lines []string, t time.Time) error {
	for _, l := range lines {
		if m := existsRe.FindStringSubmatch(l); m != nil {
			w.count, _ = strconv.Atoi(m[1])
		}
	}
	if w.count <= w.covered {
		w.covered = w.count // expunged elsewhere: follow the server
		return nil
	}
	w.covered = w.count
	got, err := w.cmd(fmt.Sprintf("UID FETCH %d:* (UID BODY.PEEK[HEADER.FIELDS (MESSAGE-ID)])", w.next))
	if err != nil {
		return fmt.Errorf("fetch: %w", err)
	}
	w.absorb(got, t)
	return nil
}

// absorb reads EXISTS, UIDNEXT and FETCH responses.
func (w *watcher) absorb(lines []string, t time.Time) {
	for _, l := range lines {
		if m := existsRe.FindStringSubmatch(l); m != nil {
			w.count, _ = strconv.Atoi(m[1])
		}
		if m := uidNextRe.FindStringSubmatch(l); m != nil {
			w.next, _ = strconv.ParseUint(m[1], 10, 64)
		}
		if !strings.Contains(l, "FETCH") {
			continue
		}
		m := uidRe.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		uid, _ := strconv.ParseUint(m[1], 10, 64)
		if uid < w.next {
			continue // "N:*" with N past the end returns the last message
		}
		w.next = uid + 1
		if id := w.idRe.FindStringSubmatch(l); id != nil {
			seq, _ := strconv.Atoi(id[1])
			w.res.sawMessage(seq, t)
		}
	}
}

func (w *watcher) tag() string {
	w.tagNo++
	return "w" + strconv.Itoa(w.tagNo)
}

// cmd sends one command and returns the untagged lines before its tagged
// reply, or an error unless that reply is OK.
func (w *watcher) cmd(c string) ([]string, error) {
	tag := w.tag()
	if _, err := fmt.Fprintf(w.nc, "%s %s\r\n", tag, c); err != nil {
		return nil, err
	}
	return w.until(tag)
}

func (w *watcher) until(tag string) ([]string, error) {
	var lines []string
	for {
		l, err := w.readLine()
		if err != nil {
			return lines, err
		}
		if rest, ok := strings.CutPrefix(l, tag+" "); ok {
			if !strings.HasPrefix(rest, "OK") {
				return lines, fmt.Errorf("%s", rest)
			}
			return lines, nil
		}
		lines = append(lines, l)
	}
}

// readLine reads one response line with any literals it announces
// inlined.
func (w *watcher) readLine() (string, error) {
	var b strings.Builder
	for {
		l, err := w.r.ReadString('\n')
		if err != nil {
			return b.String(), err
		}
		l = strings.TrimRight(l, "\r\n")
		b.WriteString(l)
		n, ok := literalLen(l)
		if !ok {
			return b.String(), nil
		}
		buf := make([]byte, n)
		if _, err := io.ReadFull(w.r, buf); err != nil {
			return b.String(), err
		}
		b.Write(buf)
	}
}

// literalLen reports the size of a literal announced at the end of l.
func literalLen(l string) (int, bool) {
	if !strings.HasSuffix(l, "}") {
		return 0, false
	}
	i := strings.LastIndexByte(l, '{')
	if i < 0 {
		return 0, false
	}
	n, err := strconv.Atoi(strings.TrimSuffix(l[i+1:len(l)-1], "+"))
	return n, err == nil && n >= 0
}

func quote(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s) + `"`
}
