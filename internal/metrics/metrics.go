// Package metrics counts what the server does and exposes it at /metrics
// in the Prometheus text exposition format, version 0.0.4
// (prometheus.io/docs/instrumenting/exposition_formats).
//
// It is written here rather than taken from a library on purpose: pimail
// needs counters, gauges and fixed-bucket histograms with a few labels,
// and the text format is a page of rules. prometheus/client_golang brings
// protobuf and a dozen modules into a binary meant for a Raspberry Pi;
// VictoriaMetrics/metrics is light but its histograms use "vmrange"
// buckets that Prometheus' histogram_quantile cannot read. The whole of
// this package is a few hundred lines with no dependency, and its output
// is checked against the format in its tests.
//
// Metrics are created once, at package initialisation (names.go holds the
// server's), and updated with atomic operations: incrementing a counter
// takes no lock; a labelled series is found under a read lock. A vector
// holds at most MaxSeries label combinations; further ones are counted in
// one series whose label values are all "_overflow", so a bug that puts
// unbounded values (addresses, IPs) in a label cannot eat the memory.
package metrics

import (
	"fmt"
	"math"
	"regexp"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

// MaxSeries bounds the label combinations of one vector.
const MaxSeries = 1000

// overflowValue replaces every label value once a vector is full.
const overflowValue = "_overflow"

var nameRE = regexp.MustCompile(`^[a-zA-Z_:][a-zA-Z0-9_:]*$`)
var labelRE = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`)

// Counter only goes up.
type Counter struct{ v atomic.Uint64 }

// Inc adds one.
func (c *Counter) Inc() { c.v.Add(1) }

// Add adds n.
func (c *Counter) Add(n uint64) { c.v.Add(n) }

// Value returns the count.
func (c *Counter) Value() uint64 { return c.v.Load() }

// Gauge goes up and down.
type Gauge struct{ bits atomic.Uint64 }

// Set sets the value.
func (g *Gauge) Set(v float64) { g.bits.Store(math.Float64bits(v)) }

// Add adds d (which may be negative).
func (g *Gauge) Add(d float64) {
	for {
		old := g.bits.Load()
		if g.bits.CompareAndSwap(old, math.Float64bits(math.Float64frombits(old)+d)) {
			return
		}
	}
}

// Inc adds one; Dec subtracts one.
func (g *Gauge) Inc() { g.Add(1) }
func (g *Gauge) Dec() { g.Add(-1) }

// Value returns the value.
func (g *Gauge) Value() float64 { return math.Float64frombits(g.bits.Load()) }

// Histogram counts observations in buckets with fixed upper bounds.
type Histogram struct {
	upper  []float64       // ascending, without +Inf
	counts []atomic.Uint64 // per bucket (not cumulative); last is +Inf
	count  atomic.Uint64
	sum    Gauge
}

func newHistogram(upper []float64) *Histogram {
	return &Histogram{upper: upper, counts: make([]atomic.Uint64, len(upper)+1)}
}

// Observe records one value.
func (h *Histogram) Observe(v float64) {
	i := sort.SearchFloat64s(h.upper, v) // first bound >= v: le is inclusive
	h.counts[i].Add(1)
	h.sum.Add(v)
	h.count.Add(1)
}

// ObserveSince records the seconds elapsed since start.
func (h *Histogram) ObserveSince(start time.Time) { h.Observe(time.Since(start).Seconds()) }

// Count returns the number of observations.
func (h *Histogram) Count() uint64 { return h.count.Load() }

// DefaultBuckets suit latencies in seconds from a millisecond to a minute.
var DefaultBuckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}

// kind is the TYPE of a family.
type kind string

const (
	kindCounter   kind = "counter"
	kindGauge     kind = "gauge"
	kindHistogram kind = "histogram"
)

// family is one metric name with its series.
type family struct {
	name    string
	help    string
	kind    kind
	labels  []string
	buckets []float64

	mu     sync.RWMutex
	series map[string]*series // key: label values joined by 0xff
	fn     func() float64     // for GaugeFunc / CounterFunc
}

type series struct {
	values []string
	c      *Counter
	g      *Gauge
	h      *Histogram
}

func seriesKey(values []string) string {
	n := 0
	for _, v := range values {
		n += len(v) + 1
	}
	b := make([]byte, 0, n)
	for _, v := range values {
		b = append(b, v...)
		b = append(b, 0xff)
	}
	return string(b)
}

// get returns the series for the label values, creating it.
func (f *family) get(values []string) *series {
	if len(values) != len(f.labels) {
		panic(fmt.Sprintf("metrics: %s takes %d label values, got %d", f.name, len(f.labels), len(values)))
	}
	key := seriesKey(values)
	f.mu.RLock()
	s := f.series[key]
	f.mu.RUnlock()
	if s != nil {
		return s
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if s := f.series[key]; s != nil {
		return s
	}
	if len(f.series) >= MaxSeries {
		values = make([]string, len(f.labels))
		for i := range values {
			values[i] = overflowValue
		}
		key = seriesKey(values)
		if s := f.series[key]; s != nil {
			return s
		}
	}
	s = &series{values: append([]string(nil), values...)}
	switch f.kind {
	case kindCounter:
		s.c = &Counter{}
	case kindGauge:
		s.g = &Gauge{}
	case kindHistogram:
		s.h = newHistogram(f.buckets)
	}
	f.series[key] = s
	return s
}

// CounterVec is a counter with labels.
type CounterVec struct{ f *family }

// With returns the counter for the label values (in the declared order).
func (v *CounterVec) With(values ...string) *Counter { return v.f.get(values).c }

// GaugeVec is a gauge with labels.
type GaugeVec struct{ f *family }

// With returns the gauge for the label values.
func (v *GaugeVec) With(values ...string) *Gauge { return v.f.get(values).g }

// HistogramVec is a histogram with labels.
type HistogramVec struct{ f *family }

// With returns the histogram for the label values.
func (v *HistogramVec) With(values ...string) *Histogram { return v.f.get(values).h }
