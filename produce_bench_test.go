package riffle

import (
	"context"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"
)

// BenchmarkProduce measures the producer's per-record cost against an
// in-process broker that discards writes (its cost is in the numbers too).
func BenchmarkProduce(b *testing.B) {
	fake, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(12, "bench"), kfake.BlackholeProduce())
	if err != nil {
		b.Fatal(err)
	}
	defer fake.Close()
	cl, err := NewClient(SeedBrokers(fake.ListenAddrs()...))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	p, err := NewProducer(cl)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	value := make([]byte, 100)
	if err := p.ProduceSync(ctx, &Record{Topic: "bench", Value: value}); err != nil {
		b.Fatal(err)
	}
	var wg sync.WaitGroup
	b.ReportAllocs()
	b.ResetTimer()
	wg.Add(b.N)
	done := func(*Record, error) { wg.Done() }
	for i := 0; i < b.N; i++ {
		p.Produce(ctx, &Record{Topic: "bench", Value: value}, done)
	}
	p.Flush(ctx)
	wg.Wait()
	b.StopTimer()
	p.Close(ctx)
}
