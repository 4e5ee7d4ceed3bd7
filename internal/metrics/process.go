package metrics

import (
	"runtime"
	"runtime/metrics"
	"time"
)

// RegisterProcessMetrics adds the usual process_* and go_* metrics to r:
// resident memory, open file descriptors and CPU time (from /proc on
// Linux), start time, goroutines, GC cycles and Go heap sizes (from
// runtime/metrics, which does not stop the world).
func RegisterProcessMetrics(r *Registry) {
	start := float64(time.Now().UnixNano()) / 1e9
	r.NewGaugeFunc("process_start_time_seconds", "Start time of the process since the Unix epoch in seconds.",
		func() float64 { return start })
	r.NewGaugeFunc("process_resident_memory_bytes", "Resident memory size in bytes.",
		func() float64 { return float64(residentBytes()) })
	r.NewGaugeFunc("process_open_fds", "Number of open file descriptors.",
		func() float64 { return float64(openFDs()) })
	r.NewCounterFunc("process_cpu_seconds_total", "Total user and system CPU time spent in seconds.",
		cpuSeconds)
	r.NewGaugeFunc("go_goroutines", "Number of goroutines that currently exist.",
		func() float64 { return float64(runtime.NumGoroutine()) })
	r.NewGaugeFunc("go_gomaxprocs", "GOMAXPROCS: the number of threads running Go code at once.",
		func() float64 { return float64(runtime.GOMAXPROCS(0)) })
	r.NewCounterFunc("go_gc_cycles_total", "Completed garbage collection cycles.",
		func() float64 { return runtimeValue("/gc/cycles/total:gc-cycles") })
	r.NewGaugeFunc("go_heap_objects_bytes", "Bytes of heap memory occupied by live and not yet swept objects.",
		func() float64 { return runtimeValue("/memory/classes/heap/objects:bytes") })
	r.NewGaugeFunc("go_heap_goal_bytes", "Heap size target of the current GC cycle.",
		func() float64 { return runtimeValue("/gc/heap/goal:bytes") })
	r.NewGaugeFunc("go_memory_total_bytes", "All memory mapped by the Go runtime.",
		func() float64 { return runtimeValue("/memory/classes/total:bytes") })
}

func init() { RegisterProcessMetrics(Default) }

// runtimeValue reads one scalar of runtime/metrics (0 if unknown).
func runtimeValue(name string) float64 {
	s := []metrics.Sample{{Name: name}}
	metrics.Read(s)
	switch s[0].Value.Kind() {
	case metrics.KindUint64:
		return float64(s[0].Value.Uint64())
	case metrics.KindFloat64:
		return s[0].Value.Float64()
	}
	return 0
}
