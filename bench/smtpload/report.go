package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"syscall"
	"time"
)

// report is one run's result; its JSON form is the tool's output.
type report struct {
	Label      string  `json:"label"`
	Conns      int     `json:"conns"`
	PerConn    int     `json:"per_conn"`
	Size       int     `json:"size"`
	Rcpts      int     `json:"rcpts"`
	BounceFrac float64 `json:"bounces"`
	UnfinFrac  float64 `json:"unfinished"`
	IntervalMS float64 `json:"interval_ms"`
	SendSec    float64 `json:"send_s"`

	Accepted      int     `json:"accepted"`
	Bounced       int     `json:"bounced"`
	BounceMissed  int     `json:"bounce_missed"`
	Rejected      int     `json:"rejected"`
	Broken        int     `json:"broken"`
	ConnErrors    int     `json:"conn_errors"`
	Unfinished    int     `json:"unfinished_sessions"`
	AcceptedRate  float64 `json:"accepted_per_s"`
	GoodputMBps   float64 `json:"goodput_mb_s"`
	SMTPp50ms     float64 `json:"smtp_p50_ms"`
	SMTPp99ms     float64 `json:"smtp_p99_ms"`
	Seen          int     `json:"seen"`
	Unseen        int     `json:"unseen"`
	E2Ep50ms      float64 `json:"e2e_p50_ms"`
	E2Ep99ms      float64 `json:"e2e_p99_ms"`
	E2EMeanMS     float64 `json:"e2e_mean_ms"`
	DeliveredRate float64 `json:"delivered_per_s"`
	DrainSec      float64 `json:"drain_s"`

	CPUSec         float64 `json:"server_cpu_s"`
	CPUPerGoodMS   float64 `json:"cpu_ms_per_good"`
	WrittenBytes   int64   `json:"written_bytes"`
	WrittenPerGood float64 `json:"written_per_good"`
	PeakRSSMiB     float64 `json:"peak_pss_mib"`
	Procs          int     `json:"procs"`
	SettleSec      float64 `json:"settle_s"`
	BusyBeforeSec  float64 `json:"busy_before_s"`
	ClientCPUSec   float64 `json:"client_cpu_s"`

	Errors map[string]int `json:"errors,omitempty"`

	sendTime   time.Duration
	unseen     int
	settled    time.Duration
	busyBefore time.Duration
	cpu        float64
	written    int64
	peakRSS    int64
	procs      int
	// clientCPU0 is this process's CPU at the start: the load generator
	// shares the machine with the server, and its cost is reported too.
	clientCPU0 float64
}

// selfCPU returns this process's user+system CPU seconds.
func selfCPU() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// fill computes the report from the results.
func (rep *report) fill(cfg *config, res *results, t0 time.Time) {
	res.mu.Lock()
	rep.Label, rep.Conns, rep.PerConn, rep.Size = cfg.label, cfg.conns, cfg.perConn, cfg.size
	rep.Rcpts, rep.BounceFrac, rep.UnfinFrac = cfg.rcptsPer, cfg.bounces, cfg.unfinished
	rep.IntervalMS = ms(cfg.interval)
	rep.SendSec = rep.sendTime.Seconds()
	rep.Accepted, rep.Bounced, rep.BounceMissed = res.nAccepted, res.nBounced, res.nBounceMiss
	rep.Rejected, rep.Broken, rep.ConnErrors = res.nRejected, res.nBroken, res.nConnErr
	rep.Unfinished = res.nUnfinished
	rep.AcceptedRate = float64(res.nAccepted) / rep.SendSec
	rep.GoodputMBps = float64(res.bytes) / 1e6 / rep.SendSec
	lat := append([]time.Duration(nil), res.smtpLat...)
	rep.Seen, rep.Unseen = len(res.seen), rep.unseen
	lastSeen := res.lastSeen
	if len(res.errs) > 0 {
		rep.Errors = res.errs
	}
	res.mu.Unlock()

	rep.SMTPp50ms, rep.SMTPp99ms = ms(pct(lat, 50)), ms(pct(lat, 99))
	if e := res.e2e(); len(e) > 0 {
		rep.E2Ep50ms, rep.E2Ep99ms, rep.E2EMeanMS = ms(pct(e, 50)), ms(pct(e, 99)), ms(mean(e))
		rep.DeliveredRate = float64(rep.Seen) / lastSeen.Sub(t0).Seconds()
		rep.DrainSec = max(0, lastSeen.Sub(t0.Add(rep.sendTime)).Seconds())
	}
	rep.CPUSec, rep.WrittenBytes, rep.Procs = rep.cpu, rep.written, rep.procs
	rep.PeakRSSMiB = float64(rep.peakRSS) / (1 << 20)
	rep.SettleSec = rep.settled.Seconds()
	rep.BusyBeforeSec = rep.busyBefore.Seconds()
	rep.ClientCPUSec = selfCPU() - rep.clientCPU0
	if res.nAccepted > 0 {
		rep.CPUPerGoodMS = rep.cpu * 1000 / float64(res.nAccepted)
		rep.WrittenPerGood = float64(rep.written) / float64(res.nAccepted)
	}
}

// emit writes the JSON line (to w, and appended to -json) and a summary.
func (rep *report) emit(cfg *config, w io.Writer) error {
	b, err := json.Marshal(rep)
	if err != nil {
		return fmt.Errorf("json: %w", err)
	}
	b = append(b, '\n')
	if _, err := w.Write(b); err != nil {
		return fmt.Errorf("write: %w", err)
	}
	if cfg.jsonFile != "" {
		f, err := os.OpenFile(cfg.jsonFile, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			return fmt.Errorf("json file: %w", err)
		}
		_, werr := f.Write(b)
		if err := f.Close(); werr == nil {
			werr = err
		}
		if werr != nil {
			return fmt.Errorf("json file: %w", werr)
		}
	}
	fmt.Fprintf(w, "# %s: %d accepted in %.2fs = %.1f msgs/s (%.2f MB/s), smtp p50 %.1fms p99 %.1fms;"+
		" bounced %d, unfinished %d, rejected %d, broken %d, conn errors %d, bounce accepted %d\n",
		rep.Label, rep.Accepted, rep.SendSec, rep.AcceptedRate, rep.GoodputMBps, rep.SMTPp50ms, rep.SMTPp99ms,
		rep.Bounced, rep.Unfinished, rep.Rejected, rep.Broken, rep.ConnErrors, rep.BounceMissed)
	if cfg.watch {
		fmt.Fprintf(w, "#   visible %d (unseen %d): e2e p50 %.1fms p99 %.1fms mean %.1fms; delivered %.1f msgs/s, drain %.2fs after sending\n",
			rep.Seen, rep.Unseen, rep.E2Ep50ms, rep.E2Ep99ms, rep.E2EMeanMS, rep.DeliveredRate, rep.DrainSec)
	}
	if len(cfg.pids) > 0 {
		fmt.Fprintf(w, "#   client (smtpload) cpu %.2fs\n", rep.ClientCPUSec)
		fmt.Fprintf(w, "#   server: cpu %.2fs (%.3f ms/good msg), written %.1f MB (%.0f B/good msg), peak PSS %.1f MiB over %d procs, settle %.1fs, busy %.1fs before\n",
			rep.CPUSec, rep.CPUPerGoodMS, float64(rep.WrittenBytes)/1e6, rep.WrittenPerGood, rep.PeakRSSMiB, rep.Procs, rep.SettleSec, rep.BusyBeforeSec)
	}
	keys := make([]string, 0, len(rep.Errors))
	for k := range rep.Errors {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(w, "#   error x%d: %s\n", rep.Errors[k], k)
	}
	return nil
}
