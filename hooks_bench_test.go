package riffle

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
)

// BenchmarkProduceHooks measures the data-path hooks' cost end to end:
// the same producer workload as BenchmarkProduce, without hooks and with a
// ProduceBatchHook that counts (sub-benchmarks of one run, so one
// machine state). The hook runs per batch, so its cost per record is its
// cost per batch divided by the batch's record count.
func BenchmarkProduceHooks(b *testing.B) {
	for _, bc := range []struct {
		name  string
		hooks []Hook
	}{{"unused", nil}, {"used", []Hook{&countHooks{}}}} {
		b.Run(bc.name, func(b *testing.B) {
			fake, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(12, "bench"), kfake.BlackholeProduce())
			if err != nil {
				b.Fatal(err)
			}
			defer fake.Close()
			cl, err := NewClient(SeedBrokers(fake.ListenAddrs()...), WithHooks(bc.hooks...))
			if err != nil {
				b.Fatal(err)
			}
			defer cl.Close()
			p, err := NewProducer(cl)
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			defer p.Close(ctx)
			value := make([]byte, 100)
			if err := p.ProduceSync(ctx, &Record{Topic: "bench", Value: value}); err != nil {
				b.Fatal(err)
			}
			var wg sync.WaitGroup
			recs := make([]Record, b.N)
			b.ReportAllocs()
			b.ResetTimer()
			wg.Add(b.N)
			done := func(*Record, error) { wg.Done() }
			for i := range recs {
				recs[i] = Record{Topic: "bench", Value: value}
				p.Produce(ctx, &recs[i], done)
			}
			p.Flush(ctx)
			wg.Wait()
		})
	}
}

// BenchmarkFinishBatchHooks isolates the per-batch cost of a
// ProduceBatchHook: finishing a batch of 10 records (buffer release,
// callbacks) without hooks and with a counting hook.
func BenchmarkFinishBatchHooks(b *testing.B) {
	for _, bc := range []struct {
		name  string
		hooks []Hook
	}{{"unused", nil}, {"used", []Hook{&countHooks{}}}} {
		b.Run(bc.name, func(b *testing.B) {
			cl, err := NewClient(SeedBrokers("127.0.0.1:1"), WithHooks(bc.hooks...))
			if err != nil {
				b.Fatal(err)
			}
			defer cl.Close()
			p, err := NewProducer(cl)
			if err != nil {
				b.Fatal(err)
			}
			defer p.Close(context.Background())
			recs := make([]Record, 10)
			cb := func(*Record, error) {}
			proto := pbatch{created: time.Now(), wireBytes: 500, rawBytes: 1000}
			for j := range recs {
				proto.recs = append(proto.recs, pendingRecord{rec: &recs[j], fn: cb, size: 100})
			}
			batches := make([]pbatch, b.N)
			for i := range batches {
				batches[i].created, batches[i].wireBytes, batches[i].rawBytes, batches[i].recs = proto.created, proto.wireBytes, proto.rawBytes, proto.recs
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := range batches {
				p.finish(&batches[i], "t", 0, 100, nil)
			}
		})
	}
}
