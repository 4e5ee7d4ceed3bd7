package metrics

import (
	"fmt"
	"math"
	"slices"
	"sync"
)

// Registry holds metric families and the collectors that refresh values
// just before they are written.
type Registry struct {
	mu         sync.Mutex
	families   map[string]*family
	collectors []func()
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{families: map[string]*family{}} }

// Default is the registry of the server's metrics (names.go) and the
// process metrics.
var Default = NewRegistry()

// add registers a family; a duplicate or malformed name is a programming
// error and panics, at start-up.
func (r *Registry) add(f *family) *family {
	if !nameRE.MatchString(f.name) {
		panic(fmt.Sprintf("metrics: invalid name %q", f.name))
	}
	for _, l := range f.labels {
		if !labelRE.MatchString(l) || l == "le" {
			panic(fmt.Sprintf("metrics: %s: invalid label name %q", f.name, l))
		}
	}
	if f.kind == kindHistogram {
		for i, b := range f.buckets {
			if math.IsNaN(b) || math.IsInf(b, 0) || i > 0 && b <= f.buckets[i-1] {
				panic(fmt.Sprintf("metrics: %s: buckets must be finite, ascending and distinct", f.name))
			}
		}
		if len(f.buckets) == 0 {
			panic(fmt.Sprintf("metrics: %s: no buckets", f.name))
		}
	}
	f.series = map[string]*series{}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.families[f.name]; dup {
		panic(fmt.Sprintf("metrics: %s registered twice", f.name))
	}
	r.families[f.name] = f
	return f
}

// NewCounter registers a counter without labels.
func (r *Registry) NewCounter(name, help string) *Counter {
	return r.add(&family{name: name, help: help, kind: kindCounter}).get(nil).c
}

// NewCounterVec registers a counter with labels.
func (r *Registry) NewCounterVec(name, help string, labels ...string) *CounterVec {
	return &CounterVec{r.add(&family{name: name, help: help, kind: kindCounter, labels: labels})}
}

// NewGauge registers a gauge without labels.
func (r *Registry) NewGauge(name, help string) *Gauge {
	return r.add(&family{name: name, help: help, kind: kindGauge}).get(nil).g
}

// NewGaugeVec registers a gauge with labels.
func (r *Registry) NewGaugeVec(name, help string, labels ...string) *GaugeVec {
	return &GaugeVec{r.add(&family{name: name, help: help, kind: kindGauge, labels: labels})}
}

// NewGaugeFunc registers a gauge whose value fn returns at each scrape;
// fn must be cheap and safe for concurrent use.
func (r *Registry) NewGaugeFunc(name, help string, fn func() float64) {
	r.add(&family{name: name, help: help, kind: kindGauge, fn: fn})
}

// NewCounterFunc registers a counter whose value fn returns at each scrape.
func (r *Registry) NewCounterFunc(name, help string, fn func() float64) {
	r.add(&family{name: name, help: help, kind: kindCounter, fn: fn})
}

// NewHistogram registers a histogram without labels; nil buckets means
// DefaultBuckets.
func (r *Registry) NewHistogram(name, help string, buckets []float64) *Histogram {
	if buckets == nil {
		buckets = DefaultBuckets
	}
	return r.add(&family{name: name, help: help, kind: kindHistogram, buckets: buckets}).get(nil).h
}

// NewHistogramVec registers a histogram with labels.
func (r *Registry) NewHistogramVec(name, help string, buckets []float64, labels ...string) *HistogramVec {
	if buckets == nil {
		buckets = DefaultBuckets
	}
	return &HistogramVec{r.add(&family{name: name, help: help, kind: kindHistogram, buckets: buckets, labels: labels})}
}

// OnCollect adds a function run before every exposition, to refresh
// gauges from a source that is not updated as it changes (store sizes).
func (r *Registry) OnCollect(fn func()) {
	r.mu.Lock()
	r.collectors = append(r.collectors, fn)
	r.mu.Unlock()
}

// sorted returns the families in name order and the collectors.
func (r *Registry) sorted() ([]*family, []func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	fs := make([]*family, 0, len(r.families))
	for _, f := range r.families {
		fs = append(fs, f)
	}
	slices.SortFunc(fs, func(a, b *family) int {
		switch {
		case a.name < b.name:
			return -1
		case a.name > b.name:
			return 1
		}
		return 0
	})
	return fs, slices.Clone(r.collectors)
}
