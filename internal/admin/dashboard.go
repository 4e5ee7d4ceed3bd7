package admin

import (
	"bytes"
	"fmt"
	"net/http"
	"sort"
	"time"

	"pimail/internal/metrics"
	"pimail/internal/store"
)

// chartMinutes is the span of the dashboard's charts.
const chartMinutes = 60

// Chart geometry in SVG user units: one bar per minute.
const (
	barWidth    = 10
	chartHeight = 80
)

type bar struct{ X, Y, H, N int }

// chart is one per-minute series over the last hour.
type chart struct {
	Title string
	Class string
	Total int
	Max   int
	Bars  []bar
	Width int
}

type statRow struct {
	Name  string
	Value string
}

type dashData struct {
	Charts   []chart
	Results  []statRow // last hour, per direction and result
	Queue    int
	QueueDue int
	Store    store.Stats
	DataDir  string
	Metrics  []statRow
}

func (s *Server) dashboard(w http.ResponseWriter, r *http.Request, sess *session) {
	ctx := r.Context()
	now := s.now()
	start := now.Truncate(time.Minute).Add(-(chartMinutes - 1) * time.Minute)
	s.flushLog(ctx)
	counts, err := s.st.DeliveryLogCounts(ctx, start)
	if err != nil {
		s.httpError(w, r, http.StatusInternalServerError, "The delivery log could not be read.", err)
		return
	}
	queue, err := s.st.QueueEntries(ctx)
	if err != nil {
		s.httpError(w, r, http.StatusInternalServerError, "The queue could not be read.", err)
		return
	}
	stats, err := s.st.Stats(ctx)
	if err != nil {
		s.httpError(w, r, http.StatusInternalServerError, "The store could not be read.", err)
		return
	}
	d := dashData{Queue: len(queue), Store: stats, DataDir: s.cfg.DataDir}
	for _, e := range queue {
		if due(e.NextAttempt) {
			d.QueueDue++
		}
	}
	d.Charts = []chart{
		makeChart("Received (accepted and junk)", "in", counts, start, func(c store.DeliveryLogCount) bool {
			return c.Direction == store.DirectionIn && (c.Result == store.ResultAccepted || c.Result == store.ResultJunk)
		}),
		makeChart("Rejected", "rej", counts, start, func(c store.DeliveryLogCount) bool {
			return c.Result == store.ResultRejected
		}),
		makeChart("Sent (delivered to remote servers)", "out", counts, start, func(c store.DeliveryLogCount) bool {
			return c.Direction == store.DirectionOut && c.Result == store.ResultDelivered
		}),
	}
	totals := map[string]int{}
	for _, c := range counts {
		totals[string(c.Direction)+" · "+string(c.Result)] += c.Count
	}
	for k, v := range totals {
		d.Results = append(d.Results, statRow{k, fmt.Sprint(v)})
	}
	sort.Slice(d.Results, func(i, j int) bool { return d.Results[i].Name < d.Results[j].Name })
	d.Metrics = metricRows()
	s.page(w, r, sess, http.StatusOK, "dashboard", pageData{Title: "Dashboard", Data: d})
}

// makeChart sums the matching counts per minute since start.
func makeChart(title, class string, counts []store.DeliveryLogCount, start time.Time, match func(store.DeliveryLogCount) bool) chart {
	per := make([]int, chartMinutes)
	c := chart{Title: title, Class: class, Width: chartMinutes * barWidth}
	for _, x := range counts {
		i := int(x.Minute.Sub(start) / time.Minute)
		if i < 0 || i >= chartMinutes || !match(x) {
			continue
		}
		per[i] += x.Count
		c.Total += x.Count
	}
	for _, n := range per {
		c.Max = max(c.Max, n)
	}
	for i, n := range per {
		if n == 0 {
			continue
		}
		h := max(1, n*chartHeight/max(c.Max, 1))
		c.Bars = append(c.Bars, bar{X: i * barWidth, Y: chartHeight - h, H: h, N: n})
	}
	return c
}

// metricRows reads the counters worth a glance from the metrics registry:
// totals since the server started.
func metricRows() []statRow {
	var buf bytes.Buffer
	if err := metrics.Default.WriteText(&buf); err != nil {
		return nil
	}
	samples, err := metrics.ParseText(&buf)
	if err != nil {
		return nil
	}
	num := func(v float64) string { return fmt.Sprintf("%.0f", v) }
	rows := []statRow{
		{"Messages accepted", num(metrics.Sum(samples, "pimail_messages_accepted_total", nil))},
		{"Messages filed into Junk", num(metrics.Sum(samples, "pimail_messages_junk_total", nil))},
		{"Messages or recipients rejected", num(metrics.Sum(samples, "pimail_messages_rejected_total", nil))},
	}
	byReason := metrics.ByLabel(samples, "pimail_messages_rejected_total", "reason")
	reasons := make([]string, 0, len(byReason))
	for k := range byReason {
		reasons = append(reasons, k)
	}
	sort.Strings(reasons)
	for _, k := range reasons {
		rows = append(rows, statRow{"  rejected: " + k, num(byReason[k])})
	}
	lookups := metrics.Sum(samples, "pimail_dnsbl_lookups_total", nil)
	hits := metrics.Sum(samples, "pimail_dnsbl_cache_hits_total", nil)
	hitRatio := "—"
	if lookups > 0 {
		hitRatio = fmt.Sprintf("%.0f %%", 100*hits/lookups)
	}
	rows = append(rows,
		statRow{"Blocklist lookups", num(lookups)},
		statRow{"Blocklist cache hit ratio", hitRatio},
		statRow{"Blocklist listings found", num(metrics.Sum(samples, "pimail_dnsbl_listed_total", nil))},
		statRow{"Failed logins", num(metrics.Sum(samples, "pimail_auth_failures_total", nil))},
		statRow{"Outbound attempts delivered", num(metrics.Sum(samples, "pimail_queue_attempts_total", map[string]string{"result": metrics.ResultDelivered}))},
		statRow{"Outbound attempts deferred", num(metrics.Sum(samples, "pimail_queue_attempts_total", map[string]string{"result": metrics.ResultDeferred}))},
		statRow{"Outbound attempts failed", num(metrics.Sum(samples, "pimail_queue_attempts_total", map[string]string{"result": metrics.ResultFailed}))},
		statRow{"Delivery log entries dropped", num(metrics.Sum(samples, "pimail_delivery_log_dropped_total", nil))},
	)
	return rows
}
