package postgres

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"testing"
)

// BenchmarkBlobStorage writes and reads messages as a bytea column (what
// blob_data does) and as large objects (an oid column and
// lo_create/lo_write/lo_read), one message per transaction, at 8 KiB
// (the common mail) and 1 MiB (an attachment). It reports the write and
// read rates, and the table's size with its TOAST data and the large
// objects' pages the writes added. docs/benchmarks.md has the numbers
// that chose bytea.
func BenchmarkBlobStorage(b *testing.B) {
	for _, size := range []int{8 << 10, 1 << 20} {
		// Random words in lines, compressible about as mail text is.
		rng := rand.New(rand.NewPCG(1, uint64(size)))
		msg := make([]byte, size)
		for i := range msg {
			switch {
			case i%78 == 76:
				msg[i] = '\r'
			case i%78 == 77:
				msg[i] = '\n'
			case rng.IntN(6) == 0:
				msg[i] = ' '
			default:
				msg[i] = byte('a' + rng.IntN(26))
			}
		}
		for _, kind := range []string{"bytea", "largeobject"} {
			b.Run(fmt.Sprintf("%s/%dKiB", kind, size>>10), func(b *testing.B) {
				s := openTest(b)
				c := context.Background()
				if _, err := s.pool.Exec(c, `CREATE TABLE IF NOT EXISTS bench_bytea (id bigint PRIMARY KEY, raw bytea NOT NULL);
					CREATE TABLE IF NOT EXISTS bench_lo (id bigint PRIMARY KEY, oid oid NOT NULL);
					SELECT lo_unlink(oid) FROM bench_lo; TRUNCATE bench_bytea, bench_lo`); err != nil {
					b.Fatal(err)
				}
				q := "SELECT pg_total_relation_size('bench_bytea')"
				if kind != "bytea" {
					q = "SELECT pg_total_relation_size('bench_lo') + pg_total_relation_size('pg_largeobject')"
				}
				var before int64
				if err := s.pool.QueryRow(c, q).Scan(&before); err != nil {
					b.Fatal(err)
				}
				write := func(i int) error {
					tx, err := s.pool.Begin(c)
					if err != nil {
						return err
					}
					defer tx.Rollback(c)
					if kind == "bytea" {
						if _, err := tx.Exec(c, "INSERT INTO bench_bytea VALUES ($1, $2)", i, msg); err != nil {
							return err
						}
					} else {
						los := tx.LargeObjects()
						oid, err := los.Create(c, 0)
						if err != nil {
							return err
						}
						lo, err := los.Open(c, oid, 0x20000) // INV_WRITE
						if err != nil {
							return err
						}
						if _, err := lo.Write(msg); err != nil {
							return err
						}
						if _, err := tx.Exec(c, "INSERT INTO bench_lo VALUES ($1, $2)", i, oid); err != nil {
							return err
						}
					}
					return tx.Commit(c)
				}
				read := func(i int) ([]byte, error) {
					if kind == "bytea" {
						var raw []byte
						err := s.pool.QueryRow(c, "SELECT raw FROM bench_bytea WHERE id = $1", i).Scan(&raw)
						return raw, err
					}
					tx, err := s.pool.Begin(c)
					if err != nil {
						return nil, err
					}
					defer tx.Rollback(c)
					var oid uint32
					if err := tx.QueryRow(c, "SELECT oid FROM bench_lo WHERE id = $1", i).Scan(&oid); err != nil {
						return nil, err
					}
					los := tx.LargeObjects()
					lo, err := los.Open(c, oid, 0x40000) // INV_READ
					if err != nil {
						return nil, err
					}
					return io.ReadAll(lo)
				}
				b.ResetTimer()
				for i := range b.N {
					if err := write(i); err != nil {
						b.Fatal(err)
					}
				}
				wr := b.Elapsed()
				for i := range b.N {
					raw, err := read(i)
					if err != nil || !bytes.Equal(raw, msg) {
						b.Fatalf("read %d: %v", i, err)
					}
				}
				rd := b.Elapsed() - wr
				b.StopTimer()
				var bytesOnDisk int64
				if err := s.pool.QueryRow(c, q).Scan(&bytesOnDisk); err != nil {
					b.Fatal(err)
				}
				bytesOnDisk -= before
				b.ReportMetric(float64(b.N)/wr.Seconds(), "writes/s")
				b.ReportMetric(float64(b.N)/rd.Seconds(), "reads/s")
				b.ReportMetric(float64(bytesOnDisk)/float64(b.N*size), "disk/byte")
				b.ReportMetric(0, "ns/op")
			})
		}
	}
}
