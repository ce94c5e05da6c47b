package process_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/riffle-go/riffle"
	"github.com/riffle-go/riffle/process"
	"github.com/riffle-go/riffle/rifftest"
)

// BenchmarkSlowHandler: one partition of 20,000 records, a 20 ms handler,
// concurrency 1,000, unordered and by key: reports efficiency (measured
// rate / ideal rate concurrency/latency) per pass. b.N is the number of
// passes over the partition.
func BenchmarkSlowHandler(b *testing.B) {
	const n, conc, lat = 20_000, 1000, 20 * time.Millisecond
	c := rifftest.New(b, rifftest.Topic("slow", 1))
	cl, err := riffle.NewClient(riffle.SeedBrokers(c.Addrs()...))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	pr, err := riffle.NewProducer(cl, riffle.WithPartitioner(riffle.ManualPartitioner()))
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	val := make([]byte, 100)
	for i := 0; i < n; i++ {
		pr.Produce(ctx, &riffle.Record{Topic: "slow", Key: []byte{byte(i), byte(i >> 8)}, Value: val}, nil)
	}
	if err := pr.Close(ctx); err != nil {
		b.Fatal(err)
	}
	for _, mode := range []process.Mode{process.Unordered, process.ByKey} {
		b.Run(mode.String(), func(b *testing.B) {
			var eff float64
			for i := 0; i < b.N; i++ {
				var done atomic.Int64
				var first atomic.Int64
				finished := make(chan time.Time, 1)
				p, err := process.New(cl, func(ctx context.Context, r *riffle.Record) error {
					first.CompareAndSwap(0, time.Now().UnixNano())
					time.Sleep(lat)
					if done.Add(1) == n {
						finished <- time.Now()
					}
					return nil
				}, process.Ordering(mode), process.Concurrency(conc))
				if err != nil {
					b.Fatal(err)
				}
				if err := p.Assign(riffle.Assignment{TopicPartition: riffle.TopicPartition{Topic: "slow"}, Start: riffle.AtEarliest()}); err != nil {
					b.Fatal(err)
				}
				end := <-finished
				took := end.Sub(time.Unix(0, first.Load()))
				eff += float64(n) / took.Seconds() / (conc / lat.Seconds())
				p.Close(ctx)
			}
			b.ReportMetric(eff/float64(b.N), "efficiency")
		})
	}
}
