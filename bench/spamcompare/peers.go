package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// peer scores one message: spam or not, and its score.
type peer interface {
	name() string
	check(raw []byte) (spam bool, score float64, err error)
}

// spamd speaks the spamc protocol (SPAMC/1.5 CHECK) to SpamAssassin's
// spamd; "Spam: True" is its verdict at its own threshold (5).
type spamd struct{ addr string }

func (s spamd) name() string { return "SpamAssassin" }

func (s spamd) check(raw []byte) (bool, float64, error) {
	c, err := net.DialTimeout("tcp", s.addr, 5*time.Second)
	if err != nil {
		return false, 0, fmt.Errorf("spamd: %w", err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(120 * time.Second))
	hdr := fmt.Sprintf("CHECK SPAMC/1.5\r\nContent-length: %d\r\nUser: debian-spamd\r\n\r\n", len(raw))
	if _, err := io.WriteString(c, hdr); err != nil {
		return false, 0, fmt.Errorf("spamd: %w", err)
	}
	if _, err := c.Write(raw); err != nil {
		return false, 0, fmt.Errorf("spamd: %w", err)
	}
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.CloseWrite()
	}
	br := bufio.NewReader(c)
	status, err := br.ReadString('\n')
	if err != nil {
		return false, 0, fmt.Errorf("spamd status: %w", err)
	}
	if !strings.Contains(status, " 0 EX_OK") {
		return false, 0, fmt.Errorf("spamd: %s", strings.TrimSpace(status))
	}
	for range 20 {
		line, err := br.ReadString('\n')
		if err != nil && line == "" {
			break
		}
		// "Spam: True ; 15.3 / 5.0"
		if v, ok := strings.CutPrefix(line, "Spam: "); ok {
			verdict, rest, _ := strings.Cut(v, ";")
			score, _, _ := strings.Cut(strings.TrimSpace(rest), "/")
			f, _ := strconv.ParseFloat(strings.TrimSpace(score), 64)
			return strings.EqualFold(strings.TrimSpace(verdict), "true"), f, nil
		}
		if strings.TrimSpace(line) == "" {
			break
		}
	}
	return false, 0, fmt.Errorf("spamd: no Spam: line")
}

// rspamd posts to the normal worker's /checkv2; a message is spam at the
// score of rspamd's "add header" action (6 in its stock actions), which
// files it as junk, the same decision as pimail's Junk.
type rspamd struct {
	url    string
	client *http.Client
}

func (r rspamd) name() string { return "rspamd" }

func (r rspamd) check(raw []byte) (bool, float64, error) {
	resp, err := r.client.Post(r.url+"/checkv2", "message/rfc822", bytes.NewReader(raw))
	if err != nil {
		return false, 0, fmt.Errorf("rspamd: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return false, 0, fmt.Errorf("rspamd: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return false, 0, fmt.Errorf("rspamd: HTTP %d", resp.StatusCode)
	}
	var v struct {
		Score float64 `json:"score"`
	}
	if err := json.Unmarshal(body, &v); err != nil {
		return false, 0, fmt.Errorf("rspamd answer: %w", err)
	}
	return v.Score >= rspamdJunkScore, v.Score, nil
}

const rspamdJunkScore = 6

// checkAll scores msgs with p over conc parallel clients; failed[i] is set
// when a message could not be scored.
func checkAll(p peer, msgs [][]byte, conc int) (spam []bool, failed []bool, elapsed time.Duration) {
	spam = make([]bool, len(msgs))
	failed = make([]bool, len(msgs))
	var next atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= len(msgs) {
					return
				}
				s, _, err := p.check(msgs[i])
				spam[i], failed[i] = s, err != nil
			}
		}()
	}
	wg.Wait()
	return spam, failed, time.Since(start)
}

// peerRate scores msgs round robin for d with conc clients: messages per
// second.
func peerRate(p peer, msgs [][]byte, conc int, d time.Duration) (float64, int) {
	var n, errs atomic.Int64
	var wg sync.WaitGroup
	deadline := time.Now().Add(d)
	start := time.Now()
	for w := range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; time.Now().Before(deadline) && i < 1_000_000; i += conc {
				if _, _, err := p.check(msgs[i%len(msgs)]); err != nil {
					errs.Add(1)
					continue
				}
				n.Add(1)
			}
		}()
	}
	wg.Wait()
	return float64(n.Load()) / time.Since(start).Seconds(), int(errs.Load())
}
