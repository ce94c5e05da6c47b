package process_test

import (
	"context"
	"fmt"
	"log"
	"sync/atomic"
	"time"

	"github.com/riffle-go/riffle"
	"github.com/riffle-go/riffle/process"
	"github.com/riffle-go/riffle/rifftest"
)

// A processor runs a slow handler on 64 records at once from a single
// partition, one record per key at a time, and commits only what finished
// (with the finished records above the commit in its metadata). Failures
// are retried, then written to a dead-letter topic.
func Example() {
	cluster, err := rifftest.Start(rifftest.Topic("orders", 1), rifftest.Topic("orders.dlq", 1))
	if err != nil {
		log.Fatal(err)
	}
	defer cluster.Close()
	cl, err := riffle.NewClient(riffle.SeedBrokers(cluster.Addrs()...))
	if err != nil {
		log.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	pr, err := riffle.NewProducer(cl)
	if err != nil {
		log.Fatal(err)
	}
	defer pr.Close(ctx)
	for i := 0; i < 640; i++ {
		rec := &riffle.Record{Topic: "orders", Key: []byte(fmt.Sprint("customer-", i%100)), Value: []byte(fmt.Sprint(i))}
		if err := pr.ProduceSync(ctx, rec); err != nil {
			log.Fatal(err)
		}
	}

	var done atomic.Int64
	p, err := process.New(cl, func(ctx context.Context, r *riffle.Record) error {
		time.Sleep(10 * time.Millisecond) // a call to another service
		done.Add(1)
		return nil
	},
		process.Ordering(process.ByKey),
		process.Concurrency(64),
		process.Retry(process.RetryPolicy{Attempts: 3, Backoff: 50 * time.Millisecond}),
		process.DeadLetter(process.DeadLetterTopic(pr, "orders.dlq")),
		process.ConsumerOptions(
			riffle.ConsumerGroup("billing"),
			riffle.SubscribeTopics("orders"),
			riffle.OffsetReset(riffle.ResetEarliest),
		))
	if err != nil {
		log.Fatal(err)
	}
	// 640 records × 10 ms would take 6.4 s one at a time; 64 at once
	// take about a tenth of a second.
	for done.Load() < 640 {
		time.Sleep(10 * time.Millisecond)
	}
	if err := p.Close(ctx); err != nil { // drains, commits, leaves the group
		log.Fatal(err)
	}
	offs, err := cl.Admin().FetchOffsets(ctx, "billing")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("committed:", offs[riffle.TopicPartition{Topic: "orders", Partition: 0}].Offset)
	fmt.Println("processed:", done.Load())
	// Output:
	// committed: 640
	// processed: 640
}
