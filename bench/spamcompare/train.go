package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"pimail/bench/spamsplit"
)

// writeLists writes a split's training messages as list files in dir:
// train.txt ("<path>\t<label>", paths relative to dir, as `pimail spam
// train` reads them) and train-spam.list / train-ham.list (absolute
// paths, one a line, as sa-learn -f and rspamc read them).
func writeLists(dir, corpus string, train []spamsplit.Sample) (string, error) {
	abs, err := filepath.Abs(corpus)
	if err != nil {
		return "", fmt.Errorf("corpus path: %w", err)
	}
	var rel, spamList, hamList strings.Builder
	for _, s := range train {
		p := filepath.Join(abs, s.Path)
		r, err := filepath.Rel(dir, p)
		if err != nil {
			return "", fmt.Errorf("list path: %w", err)
		}
		label := "ham"
		list := &hamList
		if s.Spam {
			label, list = "spam", &spamList
		}
		fmt.Fprintf(&rel, "%s\t%s\n", r, label)
		list.WriteString(p + "\n")
	}
	for name, body := range map[string]string{"train.txt": rel.String(), "train-spam.list": spamList.String(), "train-ham.list": hamList.String()} {
		// Readable by the peers' users (debian-spamd, _rspamd's client).
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			return "", fmt.Errorf("write list: %w", err)
		}
	}
	return filepath.Join(dir, "train.txt"), nil
}

// trainPeers trains SpamAssassin's and rspamd's Bayes on the lists in
// dir, each from empty, the way ../shared/peers/filters/bin/run-accuracy.sh
// does (train-sa, train-rspamd-bulk): sa-learn with spamd stopped, then
// spamd started again with Bayes on; rspamd learns every message
// (Learn-Type: bulk skips its check that the message is not already
// classified that way).
func trainPeers(o options, dir string) error {
	lists := map[bool]string{true: filepath.Join(dir, "train-spam.list"), false: filepath.Join(dir, "train-ham.list")}
	if o.rspamdURL != "" {
		start := time.Now()
		if out, err := exec.Command("redis-cli", "-p", "6479", "flushall").CombinedOutput(); err != nil {
			return fmt.Errorf("redis flushall: %w: %s", err, out)
		}
		for _, spam := range []bool{true, false} {
			files, err := os.ReadFile(lists[spam])
			if err != nil {
				return fmt.Errorf("read list: %w", err)
			}
			cmd := "learn_ham"
			if spam {
				cmd = "learn_spam"
			}
			all := strings.Fields(string(files))
			for i := 0; i < len(all); i += 200 {
				args := append([]string{"-h", "127.0.0.1:11434", "-n", "2", "--header=Learn-Type=bulk", cmd}, all[i:min(i+200, len(all))]...)
				if out, err := exec.Command("rspamc", args...).CombinedOutput(); err != nil {
					return fmt.Errorf("rspamc %s: %w: %s", cmd, err, tail(out))
				}
			}
		}
		fmt.Printf("rspamd Bayes trained from empty in %.0f s\n", time.Since(start).Seconds())
	}
	if o.spamdAddr != "" {
		start := time.Now()
		if out, err := exec.Command(filepath.Join(o.peers, "stop.sh"), "sa").CombinedOutput(); err != nil {
			return fmt.Errorf("stop spamd: %w: %s", err, out)
		}
		old, _ := filepath.Glob(filepath.Join(o.peers, "state", "sa-bayes", "bayes_*"))
		for _, f := range old {
			if err := os.Remove(f); err != nil {
				return fmt.Errorf("empty SpamAssassin Bayes: %w", err)
			}
		}
		site := "--siteconfigpath=" + filepath.Join(o.peers, "state", "sa", "site-bayes")
		for _, spam := range []bool{true, false} {
			class := "--ham"
			if spam {
				class = "--spam"
			}
			// Into the journal (--no-sync), merged once below: the same
			// counts, several times faster.
			if out, err := exec.Command("runuser", "-u", "debian-spamd", "--", "sa-learn", "-L", "--no-sync", site, class, "-f", lists[spam]).CombinedOutput(); err != nil {
				return fmt.Errorf("sa-learn %s: %w: %s", class, err, tail(out))
			}
		}
		if out, err := exec.Command("runuser", "-u", "debian-spamd", "--", "sa-learn", site, "--sync").CombinedOutput(); err != nil {
			return fmt.Errorf("sa-learn --sync: %w: %s", err, tail(out))
		}
		if out, err := exec.Command(filepath.Join(o.peers, "start.sh"), "sa-bayes").CombinedOutput(); err != nil {
			return fmt.Errorf("start spamd: %w: %s", err, out)
		}
		fmt.Printf("SpamAssassin Bayes trained from empty in %.0f s\n", time.Since(start).Seconds())
	}
	return nil
}

// tail is the end of a command's output, for errors.
func tail(out []byte) string {
	s := strings.TrimSpace(string(out))
	if len(s) > 500 {
		s = "…" + s[len(s)-500:]
	}
	return s
}
