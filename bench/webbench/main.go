// Command webbench is the webmail load client (seed paper 001's webmail
// workload): it logs in, fetches the inbox page (50 messages), reads
// messages of 1 KB, 20 KB and 120 KB, and composes and sends 1–120 KB, for
// one user (latency: p50/p99 per request type) and for 1 and 10 users in a
// closed loop without think time (list and open a random message of page
// 1, as the Roundcube peer's rcbench does), sampling the server's RSS and
// PSS from /proc.
//
//	webbench -seed-smtp 127.0.0.1:2525 -base http://127.0.0.1:8090 -pid PID
//
// bench/webbench/run.sh starts pimail and the Roundcube peer and runs both.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

var (
	base      = flag.String("base", "http://127.0.0.1:8090", "pimail webmail base URL")
	users     = flag.String("users", "user1..user10", "login users (userA..userB or comma list); the first is used for latency")
	domain    = flag.String("domain", "bench.test", "mail domain")
	pass      = flag.String("pass", "benchpass", "password")
	rcpt      = flag.String("rcpt", "user10@bench.test", "recipient of sent mail")
	reps      = flag.Int("reps", 50, "measured repetitions per request type")
	warm      = flag.Int("warmup", 5, "warm-up repetitions per request type")
	dur       = flag.Duration("duration", 60*time.Second, "load duration per level")
	warmDur   = flag.Duration("load-warmup", 5*time.Second, "load warm-up (not recorded)")
	levels    = flag.String("levels", "1,10", "concurrency levels for load")
	pid       = flag.Int("pid", 0, "server PID whose RSS/PSS is sampled")
	jsonOut   = flag.String("json", "", "write results as JSON here")
	sendSizes = flag.String("send-sizes", "1000,20000,120000", "compose body sizes (bytes)")
	seedSMTP  = flag.String("seed-smtp", "", "SMTP address to seed the users' inboxes through first (empty: no seeding)")
	corpus    = flag.String("corpus", "", "mbox whose first -seed-count messages are seeded")
	seedCount = flag.Int("seed-count", 200, "corpus messages to seed")
	seedOnly  = flag.Bool("seed-only", false, "seed (with -seed-smtp) and exit")
	memPids   = flag.String("mem-watch", "", "only sample the memory of these process trees (comma-separated master PIDs) for -duration, print the peak and exit")
	memLabel  = flag.String("mem-label", "processes", "label of -mem-watch's output")
)

// Result is one measured request type or load level.
type Result struct {
	Name   string  `json:"name"`
	N      int     `json:"n"`
	Errors int     `json:"errors"`
	P50ms  float64 `json:"p50_ms"`
	P99ms  float64 `json:"p99_ms"`
	RPS    float64 `json:"rps,omitempty"`
	CPUPct float64 `json:"server_cpu_pct,omitempty"` // of one core, during the load
	RSSkB  int     `json:"peak_rss_kb,omitempty"`
	PSSkB  int     `json:"peak_pss_kb,omitempty"`
}

func main() {
	flag.Parse()
	if *memPids != "" {
		var pids []int
		for _, f := range strings.Split(*memPids, ",") {
			if p, err := strconv.Atoi(strings.TrimSpace(f)); err == nil {
				pids = append(pids, p)
			}
		}
		memWatch(*memLabel, pids, *dur)
		return
	}
	names := expandUsers(*users)
	if *seedSMTP != "" {
		if err := seed(*seedSMTP, *corpus, *seedCount, names); err != nil {
			log.Fatalf("seed: %v", err)
		}
	}
	if *seedOnly {
		return
	}
	var out []Result
	idleRSS, idlePSS := memOf(*pid)
	fmt.Printf("server idle: RSS %d kB, PSS %d kB\n", idleRSS, idlePSS)
	out = append(out, Result{Name: "idle", RSSkB: idleRSS, PSSkB: idlePSS})
	lat, err := latency(names[0])
	if err != nil {
		log.Fatalf("latency: %v", err)
	}
	out = append(out, lat...)
	for _, l := range strings.Split(*levels, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(l))
		if err != nil || n < 1 || n > len(names) {
			log.Fatalf("level %q: need 1..%d users", l, len(names))
		}
		r, err := load(names[:n])
		if err != nil {
			log.Fatalf("load %d: %v", n, err)
		}
		out = append(out, r)
	}
	fmt.Printf("\n%-16s %7s %6s %9s %9s %9s %7s %10s %10s\n", "request", "n", "errors", "p50 ms", "p99 ms", "req/s", "CPU %", "peak RSS", "peak PSS")
	for _, r := range out {
		fmt.Printf("%-16s %7d %6d %9.3f %9.3f %9.1f %7.0f %7d kB %7d kB\n", r.Name, r.N, r.Errors, r.P50ms, r.P99ms, r.RPS, r.CPUPct, r.RSSkB, r.PSSkB)
	}
	if *jsonOut != "" {
		b, _ := json.MarshalIndent(out, "", "  ")
		if err := os.WriteFile(*jsonOut, b, 0o644); err != nil {
			log.Fatal(err)
		}
	}
}

func expandUsers(s string) []string {
	var out []string
	if a, b, ok := strings.Cut(s, ".."); ok {
		prefix := strings.TrimRight(a, "0123456789")
		lo, _ := strconv.Atoi(a[len(prefix):])
		hi, _ := strconv.Atoi(strings.TrimPrefix(b, prefix))
		for i := lo; i <= hi && i-lo < 1000; i++ {
			out = append(out, prefix+strconv.Itoa(i))
		}
		return out
	}
	return strings.Split(s, ",")
}

// timeIt runs f warm + reps times and summarises the measured runs.
func timeIt(name string, f func() error) (Result, error) {
	for range *warm {
		if err := f(); err != nil {
			return Result{}, fmt.Errorf("%s: %w", name, err)
		}
	}
	d := make([]time.Duration, 0, *reps)
	for range *reps {
		t := time.Now()
		if err := f(); err != nil {
			return Result{}, fmt.Errorf("%s: %w", name, err)
		}
		d = append(d, time.Since(t))
	}
	r := summarise(name, d)
	fmt.Printf("%-16s p50 %8.3f ms  p99 %8.3f ms\n", name, r.P50ms, r.P99ms)
	return r, nil
}

func summarise(name string, d []time.Duration) Result {
	slices.Sort(d)
	r := Result{Name: name, N: len(d)}
	if len(d) > 0 {
		r.P50ms = ms(d[len(d)/2])
		r.P99ms = ms(d[min(len(d)-1, len(d)*99/100)])
	}
	return r
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func latency(name string) ([]Result, error) {
	addr := name + "@" + *domain
	var out []Result
	r, err := timeIt("login", func() error { return newUser(*base).login(addr, *pass) })
	if err != nil {
		return nil, err
	}
	out = append(out, r)
	u := newUser(*base)
	if err := u.login(addr, *pass); err != nil {
		return nil, err
	}
	if r, err = timeIt("list", u.list); err != nil {
		return nil, err
	}
	out = append(out, r)
	for _, size := range []int{1000, 20000, 120000} {
		p, ok := u.sized[size]
		if !ok {
			return nil, fmt.Errorf("no message 'rcbench size %d' on the inbox's first page", size)
		}
		if r, err = timeIt(fmt.Sprintf("open %dk", size/1000), func() error { return u.open(p) }); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	for _, s := range strings.Split(*sendSizes, ",") {
		size, _ := strconv.Atoi(s)
		text := bodyText(size)
		if r, err = timeIt(fmt.Sprintf("send %dk", size/1000), func() error { return u.send(*rcpt, text) }); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

// bodyText is size bytes of prose in 72-character lines.
func bodyText(size int) string {
	const line = "The quick brown fox jumps over the lazy dog while the webmail is measured."
	var b strings.Builder
	for b.Len() < size {
		b.WriteString(line[:min(len(line), size-b.Len())])
		if b.Len() < size {
			b.WriteString("\n")
		}
	}
	return b.String()
}

// load runs len(names) users in a closed loop alternating list and open.
func load(names []string) (Result, error) {
	us := make([]*user, len(names))
	for i, n := range names {
		us[i] = newUser(*base)
		if err := us[i].login(n+"@"+*domain, *pass); err != nil {
			return Result{}, err
		}
		if err := us[i].list(); err != nil {
			return Result{}, err
		}
	}
	var (
		mu       sync.Mutex
		lat      []time.Duration
		errs     atomic.Int64
		done     atomic.Bool
		record   atomic.Bool
		requests atomic.Int64
		wg       sync.WaitGroup
	)
	for i, u := range us {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(i), 42))
			var mine []time.Duration
			for k := 0; !done.Load(); k++ {
				t := time.Now()
				var err error
				if k%2 == 0 {
					err = u.list()
				} else {
					err = u.open(u.msgs[rng.IntN(len(u.msgs))])
				}
				if !record.Load() {
					continue
				}
				if err != nil {
					errs.Add(1)
					continue
				}
				mine = append(mine, time.Since(t))
				requests.Add(1)
			}
			mu.Lock()
			lat = append(lat, mine...)
			mu.Unlock()
		}()
	}
	time.Sleep(*warmDur)
	record.Store(true)
	start := time.Now()
	cpu0 := cpuTicks(*pid)
	var peakRSS, peakPSS int
	for time.Since(start) < *dur {
		time.Sleep(time.Second)
		rss, pss := memOf(*pid)
		peakRSS, peakPSS = max(peakRSS, rss), max(peakPSS, pss)
	}
	n := requests.Load()
	elapsed := time.Since(start)
	cpu1 := cpuTicks(*pid)
	done.Store(true)
	wg.Wait()
	r := summarise(fmt.Sprintf("load %d users", len(names)), lat)
	r.Errors = int(errs.Load())
	r.RPS = float64(n) / elapsed.Seconds()
	r.RSSkB, r.PSSkB = peakRSS, peakPSS
	r.CPUPct = float64(cpu1-cpu0) / 100 / elapsed.Seconds() * 100 // USER_HZ is 100 on Linux
	fmt.Printf("%-16s p50 %8.3f ms  p99 %8.3f ms  %8.1f req/s  server CPU %.0f%%  peak RSS %d kB PSS %d kB\n", r.Name, r.P50ms, r.P99ms, r.RPS, r.CPUPct, peakRSS, peakPSS)
	return r, nil
}

// cpuTicks is the user+system CPU time of a process in clock ticks
// (/proc/PID/stat fields 14 and 15).
func cpuTicks(pid int) int64 {
	if pid <= 0 {
		return 0
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseInt(f[11], 10, 64)
	k, _ := strconv.ParseInt(f[12], 10, 64)
	return u + k
}

// memOf reads RSS and PSS (kB) of a process from /proc.
func memOf(pid int) (rss, pss int) {
	if pid <= 0 {
		return 0, 0
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/smaps_rollup")
	if err != nil {
		return 0, 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) >= 2 && f[0] == "Rss:" {
			rss, _ = strconv.Atoi(f[1])
		}
		if len(f) >= 2 && f[0] == "Pss:" {
			pss, _ = strconv.Atoi(f[1])
		}
	}
	return rss, pss
}
