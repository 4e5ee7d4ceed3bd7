package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"pimail/internal/metrics"
)

func init() {
	register("status", "show store statistics and, with --metrics, a running server's metrics", cmdStatus)
}

// maxMetricsBody bounds what status reads from a metrics endpoint.
const maxMetricsBody = 8 << 20

func cmdStatus(args []string) error {
	fs := newFlags("status", "", `Print what the store holds; with --metrics, also a summary of
a running server's metrics (for example http://127.0.0.1:8080/metrics).`)
	data := addDataFlags(fs)
	url := fs.String("metrics", "", "URL of a running server's /metrics")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 0 {
		return usagef("unexpected arguments %q", pos)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// With --metrics alone, a missing data directory is no error: the
	// server may run on another machine.
	if loc, err := data.loc(); err == nil {
		if err := printStoreStatus(ctx, loc); err != nil {
			return err
		}
	} else if *url == "" || *data.data != "" {
		return err
	}
	if *url != "" {
		return printMetrics(ctx, *url)
	}
	return nil
}

func printStoreStatus(ctx context.Context, loc storeLoc) error {
	st, err := openAdminStore(loc)
	if err != nil {
		return err
	}
	defer st.Close()
	s, err := st.Stats(ctx)
	if err != nil {
		return fmt.Errorf("store stats: %w", err)
	}
	doms, err := st.Domains(ctx)
	if err != nil {
		return fmt.Errorf("list domains: %w", err)
	}
	q, err := st.QueueEntries(ctx)
	if err != nil {
		return fmt.Errorf("list queue: %w", err)
	}
	w := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	if loc.database != "" {
		fmt.Fprintf(w, "database\t%s\n", redactURL(loc.database))
	} else {
		fmt.Fprintf(w, "data directory\t%s\n", loc.dir)
	}
	fmt.Fprintf(w, "domains\t%d\n", len(doms))
	fmt.Fprintf(w, "accounts\t%d\n", s.Accounts)
	fmt.Fprintf(w, "messages\t%d\n", s.Messages)
	// A content is stored once however many mailboxes hold it, small ones
	// in the database, the others as files.
	fmt.Fprintf(w, "message contents\t%d (each stored once)\n", s.Blobs)
	fmt.Fprintf(w, "message bytes\t%d (%.1f MiB)\n", s.BlobBytes, float64(s.BlobBytes)/(1<<20))
	fmt.Fprintf(w, "outbound queue\t%d\n", len(q))
	return w.Flush()
}

func fetchMetrics(ctx context.Context, url string) ([]metrics.Sample, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, usagef("--metrics: %v", err)
	}
	c := &http.Client{Timeout: 10 * time.Second}
	resp, err := c.Do(req)
	if err != nil {
		return nil, fmt.Errorf("fetch metrics: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("fetch metrics: %s", resp.Status)
	}
	samples, err := metrics.ParseText(io.LimitReader(resp.Body, maxMetricsBody))
	if err != nil {
		return nil, err
	}
	if len(samples) == 0 {
		return nil, errors.New("fetch metrics: no samples")
	}
	return samples, nil
}

func printMetrics(ctx context.Context, url string) error {
	s, err := fetchMetrics(ctx, url)
	if err != nil {
		return err
	}
	w := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintf(w, "\nserver\t%s\n", url)
	if start := metrics.Sum(s, "process_start_time_seconds", nil); start > 0 {
		up := time.Since(time.Unix(int64(start), 0)).Round(time.Second)
		fmt.Fprintf(w, "uptime\t%v\n", up)
	}
	fmt.Fprintf(w, "resident memory\t%.1f MiB\n", metrics.Sum(s, "process_resident_memory_bytes", nil)/(1<<20))
	fmt.Fprintf(w, "goroutines\t%.0f\n", metrics.Sum(s, "go_goroutines", nil))
	fmt.Fprintf(w, "open files\t%.0f\n", metrics.Sum(s, "process_open_fds", nil))
	fmt.Fprintf(w, "CPU time\t%.1f s\n", metrics.Sum(s, "process_cpu_seconds_total", nil))
	fmt.Fprintf(w, "GC cycles\t%.0f\n", metrics.Sum(s, "go_gc_cycles_total", nil))

	total := metrics.ByLabel(s, "pimail_connections_total", "protocol")
	active := metrics.ByLabel(s, "pimail_connections_active", "protocol")
	for _, p := range sortedKeys(total) {
		fmt.Fprintf(w, "connections %s\t%.0f total, %.0f open\n", p, total[p], active[p])
	}
	fmt.Fprintf(w, "messages accepted\t%.0f\n", metrics.Sum(s, "pimail_messages_accepted_total", nil))
	fmt.Fprintf(w, "filed as junk\t%.0f\n", metrics.Sum(s, "pimail_messages_junk_total", nil))
	rej := metrics.ByLabel(s, "pimail_messages_rejected_total", "reason")
	for _, r := range sortedKeys(rej) {
		fmt.Fprintf(w, "rejected %s\t%.0f\n", r, rej[r])
	}
	if n := metrics.Sum(s, "pimail_delivery_duration_seconds_count", nil); n > 0 {
		p50 := metrics.Quantile(s, "pimail_delivery_duration_seconds", 0.5)
		p95 := metrics.Quantile(s, "pimail_delivery_duration_seconds", 0.95)
		mean := metrics.Sum(s, "pimail_delivery_duration_seconds_sum", nil) / n
		fmt.Fprintf(w, "delivery latency\tmean %s, p50 ≈ %s, p95 ≈ %s (%.0f deliveries)\n", ms(mean), ms(p50), ms(p95), n)
	}
	fmt.Fprintf(w, "outbound queue\t%.0f\n", metrics.Sum(s, "pimail_queue_messages", nil))
	if l := metrics.Sum(s, "pimail_dnsbl_lookups_total", nil); l > 0 {
		hits := metrics.Sum(s, "pimail_dnsbl_cache_hits_total", nil)
		fmt.Fprintf(w, "DNSBL lookups\t%.0f, %.0f%% from cache, %.0f listed\n", l, 100*hits/l, metrics.Sum(s, "pimail_dnsbl_listed_total", nil))
	}
	return w.Flush()
}

func ms(sec float64) string {
	if math.IsNaN(sec) {
		return "-"
	}
	return fmt.Sprintf("%.1f ms", sec*1000)
}

func sortedKeys(m map[string]float64) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, strings.TrimSpace(k))
	}
	sort.Strings(ks)
	return ks
}
