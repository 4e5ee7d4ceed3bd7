// Command loginload measures IMAP logins per second: each of -conns
// clients connects, reads the greeting, logs in (LOGIN, or AUTHENTICATE
// SCRAM-SHA-256 with an initial response, RFC 4959), logs out and
// disconnects, over and over, for -duration. It reports logins per second
// and, with -pids, the server's CPU per login (its process tree, from
// /proc). The users take turns, as a server's many clients do; each
// user's SCRAM client keeps its derived keys (RFC 5802 §5: a client may
// cache them), so the client's cost is not the PBKDF2 of every login.
//
//	go run ./bench/loginload -imap 127.0.0.1:1143 -users u1@x,u2@x -pass secret -mech scram -conns 10 -duration 10s -pids PID
package main

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/xdg-go/scram"

	"pimail/bench/procstat"
)

func main() {
	addr := flag.String("imap", "127.0.0.1:1143", "IMAP server")
	users := flag.String("users", "", "comma-separated user names")
	pass := flag.String("pass", "", "their password")
	mech := flag.String("mech", "login", "login or scram")
	conns := flag.Int("conns", 10, "concurrent clients")
	dur := flag.Duration("duration", 10*time.Second, "how long")
	pids := flag.String("pids", "", "comma-separated server PIDs (their process trees are measured)")
	label := flag.String("label", "", "label of the JSON line")
	flag.Parse()
	names := strings.Split(*users, ",")
	if *users == "" || *pass == "" || (*mech != "login" && *mech != "scram") {
		fmt.Fprintln(os.Stderr, "loginload: -users, -pass and -mech login|scram are required")
		os.Exit(2)
	}
	var roots []int
	for _, p := range strings.Split(*pids, ",") {
		if n, err := strconv.Atoi(strings.TrimSpace(p)); err == nil {
			roots = append(roots, n)
		}
	}
	clients := map[string]*scram.Client{}
	for _, u := range names {
		c, err := scram.SHA256.NewClient(u, *pass, "")
		if err != nil {
			fmt.Fprintln(os.Stderr, "loginload:", err)
			os.Exit(1)
		}
		clients[u] = c
	}
	// One login per user first: the server's cache, the clients' keys.
	for _, u := range names {
		if err := login(*addr, u, *pass, *mech, clients[u]); err != nil {
			fmt.Fprintln(os.Stderr, "loginload: warm-up:", err)
			os.Exit(1)
		}
	}
	var before procstat.Usage
	if len(roots) > 0 {
		before, _ = procstat.Sample(roots, false)
	}
	self := []int{os.Getpid()}
	selfBefore, _ := procstat.Sample(self, false)
	ctx, cancel := context.WithTimeout(context.Background(), *dur)
	defer cancel()
	var done, failed atomic.Int64
	var next atomic.Int64
	start := time.Now()
	var wg sync.WaitGroup
	for range *conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				u := names[int(next.Add(1))%len(names)]
				if err := login(*addr, u, *pass, *mech, clients[u]); err != nil {
					if failed.Add(1) <= 3 {
						fmt.Fprintln(os.Stderr, "loginload:", err)
					}
					continue
				}
				done.Add(1)
			}
		}()
	}
	wg.Wait()
	el := time.Since(start).Seconds()
	out := map[string]any{"label": *label, "mech": *mech, "conns": *conns, "seconds": el,
		"logins": done.Load(), "failed": failed.Load(), "logins_per_s": float64(done.Load()) / el}
	line := fmt.Sprintf("%-28s %-5s conns %3d: %8.0f logins/s, %d failed", *label, *mech, *conns, float64(done.Load())/el, failed.Load())
	if len(roots) > 0 {
		after, _ := procstat.Sample(roots, false)
		cpu := after.CPU - before.CPU
		out["server_cpu_s"] = cpu
		if n := done.Load(); n > 0 {
			out["server_cpu_ms_per_login"] = cpu * 1000 / float64(n)
			line += fmt.Sprintf(", server CPU %.3f ms a login", cpu*1000/float64(n))
		}
	}
	// The client's own CPU: on a machine the servers share with their
	// load, the rate is the CPU there is over server plus client cost.
	if selfAfter, err := procstat.Sample(self, false); err == nil && done.Load() > 0 {
		ms := (selfAfter.CPU - selfBefore.CPU) * 1000 / float64(done.Load())
		out["client_cpu_ms_per_login"] = ms
		line += fmt.Sprintf(", client CPU %.3f ms", ms)
	}
	fmt.Println(line)
	j, _ := json.Marshal(out)
	fmt.Println(string(j))
}

// login runs one connection: greeting, login, LOGOUT.
func login(addr, user, pass, mech string, sc *scram.Client) error {
	c, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	r := bufio.NewReader(c)
	if line, err := r.ReadString('\n'); err != nil || !strings.HasPrefix(line, "* OK") {
		return fmt.Errorf("greeting %q: %v", line, err)
	}
	switch mech {
	case "login":
		if _, err := fmt.Fprintf(c, "a LOGIN %q %q\r\n", user, pass); err != nil {
			return err
		}
	case "scram":
		conv := sc.NewConversation()
		first, _ := conv.Step("")
		if _, err := fmt.Fprintf(c, "a AUTHENTICATE SCRAM-SHA-256 %s\r\n", base64.StdEncoding.EncodeToString([]byte(first))); err != nil {
			return err
		}
		for !conv.Done() {
			line, err := r.ReadString('\n')
			if err != nil {
				return err
			}
			if !strings.HasPrefix(line, "+ ") {
				return fmt.Errorf("SCRAM: %q", line)
			}
			ch, err := base64.StdEncoding.DecodeString(strings.TrimSpace(line[2:]))
			if err != nil {
				return err
			}
			resp, err := conv.Step(string(ch))
			if err != nil {
				return fmt.Errorf("SCRAM step: %w", err)
			}
			if _, err := fmt.Fprintf(c, "%s\r\n", base64.StdEncoding.EncodeToString([]byte(resp))); err != nil {
				return err
			}
		}
	}
	if err := tagged(r, "a"); err != nil {
		return fmt.Errorf("login %s: %w", user, err)
	}
	if _, err := fmt.Fprintf(c, "b LOGOUT\r\n"); err != nil {
		return err
	}
	return tagged(r, "b")
}

// tagged reads up to the tagged reply and wants OK. A continuation ("+"),
// which a server sends SCRAM's server-final in, is answered empty.
func tagged(r *bufio.Reader, tag string) error {
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return err
		}
		if strings.HasPrefix(line, tag+" ") {
			if !strings.HasPrefix(line, tag+" OK") {
				return fmt.Errorf("%q", strings.TrimSpace(line))
			}
			return nil
		}
	}
}
