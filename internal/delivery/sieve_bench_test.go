package delivery

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// rules20 is a script of 20 rules of the kinds users write, shared with
// the benchmarks of internal/sieve.
var rules20 = func() string {
	b, err := os.ReadFile("../sieve/testdata/rules20.sieve")
	if err != nil {
		panic(err)
	}
	return string(b)
}()

// BenchmarkDeliverSieve delivers a 2 KB message to one account through
// the pipeline into a real SQLite store, 8 deliveries per core at a time (group
// commit), with no script and with rules20 active: the difference is what
// a 20-rule script costs per message (docs/benchmarks.md).
func BenchmarkDeliverSieve(b *testing.B) {
	msg := testMessage + strings.Repeat("Some body text of the benchmark's message, line after line.\r\n", 30)
	for _, name := range []string{"none", "20rules"} {
		b.Run(name, func(b *testing.B) {
			f := newFixture(b)
			f.pipe.WithSieve(SieveConfig{Store: f.st})
			if name == "20rules" {
				ctx := context.Background()
				if err := f.st.PutSieveScript(ctx, f.ids["alice@example.com"], "rules", rules20); err != nil {
					b.Fatal(err)
				}
				if err := f.st.SetActiveSieveScript(ctx, f.ids["alice@example.com"], "rules"); err != nil {
					b.Fatal(err)
				}
			}
			var n atomic.Int64
			b.SetParallelism(8)
			cpu0 := processCPU()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					raw := strings.Replace(msg, "<m1@remote.test>", fmt.Sprintf("<m%d@remote.test>", n.Add(1)), 1)
					if _, err := f.pipe.Deliver(context.Background(), Envelope{MailFrom: "sender@remote.test",
						Recipients: []string{"alice@example.com"}, RemoteIP: "192.0.2.1"}, []byte(raw)); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
			// The process's CPU time per message does not count the time
			// other programs on a shared machine take.
			b.ReportMetric(float64((processCPU()-cpu0).Microseconds())/float64(b.N), "cpu-µs/msg")
		})
	}
}

// processCPU is the user and system CPU time of this process so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkSieveStep is the user-filter step alone for one account (the
// active script's read from the store and its run), without storing.
func BenchmarkSieveStep(b *testing.B) {
	f := newFixture(b)
	f.pipe.WithSieve(SieveConfig{Store: f.st})
	ctx := context.Background()
	id := f.ids["alice@example.com"]
	if err := f.st.PutSieveScript(ctx, id, "rules", rules20); err != nil {
		b.Fatal(err)
	}
	if err := f.st.SetActiveSieveScript(ctx, id, "rules"); err != nil {
		b.Fatal(err)
	}
	raw := []byte(testMessage)
	parsed := parse(quiet(), raw)
	acct, err := f.st.AccountByID(ctx, id)
	if err != nil {
		b.Fatal(err)
	}
	m := sieveMessage{env: Envelope{MailFrom: "sender@remote.test"}, tgt: target{rcptOf: map[int64]string{id: "alice@example.com"}},
		received: raw, full: raw, parsed: parsed}
	b.ResetTimer()
	for range b.N {
		if _, ran, err := f.pipe.runScript(ctx, quiet(), m, acct); err != nil || !ran {
			b.Fatal(err)
		}
	}
}
