package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/mail"
	"net/smtp"
	"net/textproto"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"

	"pimail/bench/spamsplit"
	"pimail/internal/spam"
	"pimail/internal/store/sqlite"
)

const (
	benchUser     = "bench@bench.test"
	benchPassword = "bench-password-1"
)

// server is a running pimail started by this tool.
type server struct {
	bin, data       string
	smtpAddr, imap  string
	cmd             *exec.Cmd
	logFile         *os.File
	peakRSS         atomic.Int64 // KiB, sampled while sampling is on
	sampling        atomic.Bool
	stopSampler     chan struct{}
	samplerFinished chan struct{}
}

// setupPimail creates the data directory (pimail init) with a domain, an account and the base
// model trained with `pimail spam train --base` on list (a train.txt-like
// file); with list "" the base model is not trained and pimail uses the
// one it ships with.
func setupPimail(bin, data, list string) (trainOut string, err error) {
	run := func(stdin string, args ...string) (string, error) {
		c := exec.Command(bin, args...)
		c.Stdin = strings.NewReader(stdin)
		out, err := c.CombinedOutput()
		if err != nil {
			return string(out), fmt.Errorf("pimail %s: %w: %s", strings.Join(args, " "), err, out)
		}
		return string(out), nil
	}
	if _, err := run("", "init", "--data", data); err != nil {
		return "", err
	}
	if _, err := run("", "domain", "add", "--data", data, "bench.test"); err != nil {
		return "", err
	}
	if _, err := run(benchPassword+"\n", "account", "add", "--data", data, "--password-stdin", benchUser); err != nil {
		return "", err
	}
	if list == "" {
		return "(not trained: the shipped base model)", nil
	}
	return run("", "spam", "train", "--data", data, "--base", "--spam", list, "--ham", list)
}

// trainAccount trains the bench account's own model with `pimail spam
// train --account` on n spam and n ham of train.txt, as a user's Junk
// decisions would, and returns the size of its model file.
func trainAccount(bin, data, corpus string, n int) (string, error) {
	train, err := spamsplit.ReadList(corpus, "train.txt")
	if err != nil {
		return "", err
	}
	dir, err := os.MkdirTemp("", "spamcompare-list-")
	if err != nil {
		return "", fmt.Errorf("temp dir: %w", err)
	}
	defer os.RemoveAll(dir)
	absCorpus, err := filepath.Abs(corpus)
	if err != nil {
		return "", fmt.Errorf("corpus path: %w", err)
	}
	var b strings.Builder
	ns, nh := 0, 0
	for _, s := range train {
		label := "ham"
		if s.Spam {
			if ns >= n {
				continue
			}
			ns, label = ns+1, "spam"
		} else {
			if nh >= n {
				continue
			}
			nh++
		}
		sub := "ham"
		if s.Spam {
			sub = "spam"
		}
		rel, err := filepath.Rel(dir, filepath.Join(absCorpus, sub, s.Name()))
		if err != nil {
			return "", fmt.Errorf("list path: %w", err)
		}
		fmt.Fprintf(&b, "%s\t%s\n", rel, label)
	}
	list := filepath.Join(dir, "account.txt")
	if err := os.WriteFile(list, []byte(b.String()), 0o600); err != nil {
		return "", fmt.Errorf("write list: %w", err)
	}
	if out, err := exec.Command(bin, "spam", "train", "--data", data, "--account", benchUser, "--spam", list, "--ham", list).CombinedOutput(); err != nil {
		return "", fmt.Errorf("pimail spam train --account: %w: %s", err, out)
	}
	return modelSize(data, benchUser)
}

// modelSize is the size of the spam model of an account ("": the base
// model) as the store keeps it.
func modelSize(data, address string) (string, error) {
	st, err := sqlite.Open(data, sqlite.Options{Logger: slog.New(slog.DiscardHandler), NoCollect: true})
	if err != nil {
		return "", fmt.Errorf("open the store: %w", err)
	}
	defer st.Close()
	ctx := context.Background()
	id := spam.BaseAccount
	if address != "" {
		a, err := st.Account(ctx, address)
		if err != nil {
			return "", fmt.Errorf("account %s: %w", address, err)
		}
		id = a.ID
	}
	m, _, err := st.SpamModel(ctx, id)
	if err != nil {
		return "", fmt.Errorf("spam model of %q: %w", address, err)
	}
	return fmt.Sprintf("%.2f MB", float64(len(m))/(1<<20)), nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// startPimail writes a config (SMTP and IMAP on loopback, DNS to the
// peers' NXDOMAIN resolver, spam filter on or off) and starts `pimail serve`.
func startPimail(bin, data, dns string, filter bool) (*server, error) {
	sp, err := freePort()
	if err != nil {
		return nil, err
	}
	ip, err := freePort()
	if err != nil {
		return nil, err
	}
	s := &server{bin: bin, data: data, smtpAddr: fmt.Sprintf("127.0.0.1:%d", sp), imap: fmt.Sprintf("127.0.0.1:%d", ip)}
	cfg := fmt.Sprintf(`hostname = "bench.local"
[listen]
  smtp = %q
  submission = ""
  submissions = ""
  imap = %q
  imaps = ""
  pop3 = ""
  pop3s = ""
  http = ""
  https = ""
  managesieve = ""
[imap]
  allow_insecure_auth = true
[dns]
  servers = [%q]
  timeout = "200ms"
[smtp]
  max_errors = 1000000
[spam]
  enabled = %v
[log]
  level = "warn"
`, s.smtpAddr, s.imap, dns, filter)
	cfgPath := filepath.Join(data, "bench.toml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		return nil, fmt.Errorf("write config: %w", err)
	}
	if s.logFile, err = os.Create(filepath.Join(data, "serve.log")); err != nil {
		return nil, fmt.Errorf("log file: %w", err)
	}
	s.cmd = exec.Command(bin, "serve", "--config", cfgPath, "--data", data)
	s.cmd.Stdout, s.cmd.Stderr = s.logFile, s.logFile
	if err := s.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start pimail: %w", err)
	}
	for i := 0; i < 200; i++ {
		if c, err := net.DialTimeout("tcp", s.imap, 100*time.Millisecond); err == nil {
			c.Close()
			if c2, err := net.DialTimeout("tcp", s.smtpAddr, 100*time.Millisecond); err == nil {
				c2.Close()
				s.stopSampler, s.samplerFinished = make(chan struct{}), make(chan struct{})
				go s.sampleRSS()
				return s, nil
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	s.stop()
	log, _ := os.ReadFile(filepath.Join(data, "serve.log"))
	return nil, fmt.Errorf("pimail did not open its ports: %s", log)
}

// stop ends the pimail this tool started (by its PID) and waits for it.
func (s *server) stop() {
	if s.stopSampler != nil {
		close(s.stopSampler)
		<-s.samplerFinished
		s.stopSampler = nil
	}
	if s.cmd != nil && s.cmd.Process != nil {
		_ = s.cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { _ = s.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			_ = s.cmd.Process.Kill()
			<-done
		}
	}
	if s.logFile != nil {
		s.logFile.Close()
	}
}

// sampleRSS records the largest resident set seen while sampling is on,
// every 50 ms.
func (s *server) sampleRSS() {
	defer close(s.samplerFinished)
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-s.stopSampler:
			return
		case <-t.C:
			if !s.sampling.Load() {
				continue
			}
			if kb := rssKiB(s.cmd.Process.Pid); kb > s.peakRSS.Load() {
				s.peakRSS.Store(kb)
			}
		}
	}
}

func rssKiB(pid int) int64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return n
		}
	}
	return 0
}

// cpuSeconds is the user+system CPU time a process has used so far
// (/proc/PID/stat fields 14 and 15, in clock ticks of 1/100 s on Linux).
func cpuSeconds(pid int) float64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i >= 0 {
		s = s[i+1:]
	}
	f := strings.Fields(s) // f[0] is field 3 (state)
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return (u + st) / 100
}

// wire prepares a corpus file for SMTP: an X-Bench-Id field first (to find
// the message again over IMAP), CRLF line ends, no bare CR.
func wire(raw []byte, id int) []byte {
	b := bytes.ReplaceAll(raw, []byte("\r\n"), []byte("\n"))
	b = bytes.ReplaceAll(b, []byte("\r"), []byte(" "))
	b = bytes.ReplaceAll(b, []byte("\n"), []byte("\r\n"))
	return append([]byte(fmt.Sprintf("X-Bench-Id: %d\r\n", id)), b...)
}

// envelopeFrom is the message's From address, or a fixed one.
func envelopeFrom(raw []byte) string {
	m, err := mail.ReadMessage(bytes.NewReader(raw))
	if err == nil {
		if a, err := mail.ParseAddress(m.Header.Get("From")); err == nil && strings.Count(a.Address, "@") == 1 && isASCII(a.Address) {
			return a.Address
		}
	}
	return "sender@bench.test"
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 || s[i] <= ' ' {
			return false
		}
	}
	return true
}

// outcome of one SMTP transaction.
type outcome int

const (
	accepted outcome = iota
	rejectedSpam
	refusedAV // the attachment policy or virus scanner refused it (554 5.7.1)
	failed    // any other refusal or error: reported, not counted as a verdict
)

// smtpConn is one SMTP session that sends many messages.
type smtpConn struct{ c *smtp.Client }

func dialSMTP(addr string) (*smtpConn, error) {
	c, err := smtp.Dial(addr)
	if err != nil {
		return nil, fmt.Errorf("smtp dial: %w", err)
	}
	if err := c.Hello("client.bench.test"); err != nil {
		c.Close()
		return nil, fmt.Errorf("smtp hello: %w", err)
	}
	return &smtpConn{c: c}, nil
}

func (s *smtpConn) close() { _ = s.c.Quit(); _ = s.c.Close() }

// send delivers one message to the bench account.
func (s *smtpConn) send(from string, msg []byte) (outcome, string, error) {
	if err := s.c.Mail(from); err != nil {
		_ = s.c.Reset()
		if classify(err) != nil {
			return failed, "MAIL: " + err.Error(), err
		}
		if err2 := s.c.Mail("sender@bench.test"); err2 != nil {
			return failed, "MAIL: " + err.Error(), classify(err2)
		}
	}
	if err := s.c.Rcpt(benchUser); err != nil {
		_ = s.c.Reset()
		return failed, "RCPT: " + err.Error(), classify(err)
	}
	w, err := s.c.Data()
	if err != nil {
		_ = s.c.Reset()
		return failed, "DATA: " + err.Error(), classify(err)
	}
	if _, err := w.Write(msg); err != nil {
		return failed, "DATA write: " + err.Error(), err
	}
	if err := w.Close(); err != nil {
		var te *textproto.Error
		if errors.As(err, &te) && te.Code == 550 && strings.Contains(te.Msg, "spam") {
			return rejectedSpam, te.Msg, nil
		}
		if errors.As(err, &te) && te.Code == 554 && strings.Contains(te.Msg, "attachment") {
			return refusedAV, te.Msg, nil
		}
		return failed, "end of DATA: " + err.Error(), classify(err)
	}
	return accepted, "", nil
}

// classify keeps protocol refusals (the session goes on) apart from
// broken connections and 421 (the server closes), returned as errors so
// that the sender opens a new session.
func classify(err error) error {
	var te *textproto.Error
	if errors.As(err, &te) && te.Code != 421 {
		return nil
	}
	return err
}

// sendAll delivers msgs over conns parallel SMTP sessions and returns the
// outcome of each.
func sendAll(addr string, msgs [][]byte, froms []string, conns int) ([]outcome, []string, time.Duration, error) {
	out := make([]outcome, len(msgs))
	why := make([]string, len(msgs))
	var next atomic.Int64
	var wg sync.WaitGroup
	var firstErr error
	var mu sync.Mutex
	start := time.Now()
	for range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := dialSMTP(addr)
			if err != nil {
				mu.Lock()
				firstErr = err
				mu.Unlock()
				return
			}
			defer func() { c.close() }()
			for {
				i := int(next.Add(1)) - 1
				if i >= len(msgs) {
					return
				}
				o, w, err := c.send(froms[i], msgs[i])
				out[i], why[i] = o, w
				if err != nil { // connection broken: open a new one
					c.close()
					if c, err = dialSMTP(addr); err != nil {
						mu.Lock()
						firstErr = err
						mu.Unlock()
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	return out, why, time.Since(start), firstErr
}

// landed reads, over IMAP, which X-Bench-Id ended in INBOX and in Junk.
func landed(addr string) (inbox, junk map[int]bool, err error) {
	c, err := imapclient.DialInsecure(addr, nil)
	if err != nil {
		return nil, nil, fmt.Errorf("imap dial: %w", err)
	}
	defer c.Close()
	if err := c.Login(benchUser, benchPassword).Wait(); err != nil {
		return nil, nil, fmt.Errorf("imap login: %w", err)
	}
	read := func(mbox string) (map[int]bool, error) {
		sel, err := c.Select(mbox, &imap.SelectOptions{ReadOnly: true}).Wait()
		if err != nil {
			return nil, fmt.Errorf("select %s: %w", mbox, err)
		}
		ids := map[int]bool{}
		if sel.NumMessages == 0 {
			return ids, nil
		}
		var set imap.SeqSet
		set.AddRange(1, sel.NumMessages)
		sec := &imap.FetchItemBodySection{Specifier: imap.PartSpecifierHeader, HeaderFields: []string{"X-Bench-Id"}, Peek: true}
		msgs, err := c.Fetch(set, &imap.FetchOptions{BodySection: []*imap.FetchItemBodySection{sec}}).Collect()
		if err != nil {
			return nil, fmt.Errorf("fetch %s: %w", mbox, err)
		}
		for _, m := range msgs {
			for _, b := range m.BodySection {
				v := strings.TrimSpace(string(b.Bytes))
				if _, rest, ok := strings.Cut(v, ":"); ok {
					if n, err := strconv.Atoi(strings.TrimSpace(rest)); err == nil {
						ids[n] = true
					}
				}
			}
		}
		return ids, nil
	}
	if inbox, err = read("INBOX"); err != nil {
		return nil, nil, err
	}
	if junk, err = read("Junk"); err != nil {
		return nil, nil, err
	}
	return inbox, junk, nil
}

// waitDelivered polls until n messages are in INBOX+Junk or ctx ends.
func waitDelivered(ctx context.Context, addr string, n int) (inbox, junk map[int]bool, err error) {
	for {
		inbox, junk, err = landed(addr)
		if err != nil || len(inbox)+len(junk) >= n {
			return inbox, junk, err
		}
		select {
		case <-ctx.Done():
			return inbox, junk, nil
		case <-time.After(500 * time.Millisecond):
		}
	}
}
