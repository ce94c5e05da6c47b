package process_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log"
	"slices"
	"sync/atomic"
	"time"

	"github.com/riffle-go/riffle"
	"github.com/riffle-go/riffle/process"
	"github.com/riffle-go/riffle/ranges"
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

// Consume, transform and produce exactly once, at a concurrency beyond
// the partition count: the handler hands its outputs to process.Output
// instead of producing them; they are produced into the open transaction
// when the record finishes, and commit with the consumed offsets. An
// attempt that fails has its outputs dropped, so a retry adds nothing.
func ExampleExactlyOnce() {
	cluster, err := rifftest.Start(rifftest.Topic("words", 2), rifftest.Topic("shouts", 2))
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
	in, err := riffle.NewProducer(cl)
	if err != nil {
		log.Fatal(err)
	}
	for _, w := range []string{"hello", "exactly", "once"} {
		if err := in.ProduceSync(ctx, &riffle.Record{Topic: "words", Key: []byte(w), Value: []byte(w)}); err != nil {
			log.Fatal(err)
		}
	}
	in.Close(ctx)

	// The transactional producer: InitTransactions fences an earlier
	// instance with the same id and aborts what it left open.
	tp, err := riffle.NewProducer(cl, riffle.TransactionalID("shouter"))
	if err != nil {
		log.Fatal(err)
	}
	defer tp.Close(ctx)
	if err := tp.InitTransactions(ctx); err != nil {
		log.Fatal(err)
	}

	var failedOnce atomic.Bool
	pcl, err := riffle.NewClient(riffle.SeedBrokers(cluster.Addrs()...)) // one group member per client
	if err != nil {
		log.Fatal(err)
	}
	defer pcl.Close()
	p, err := process.New(pcl, func(ctx context.Context, r *riffle.Record) error {
		out := &riffle.Record{Topic: "shouts", Key: r.Key, Value: bytes.ToUpper(r.Value)}
		if err := process.Output(ctx, out); err != nil {
			return err
		}
		if string(r.Value) == "exactly" && failedOnce.CompareAndSwap(false, true) {
			return errors.New("a transient failure") // its output is dropped
		}
		return nil
	},
		process.ExactlyOnce(tp, riffle.CommitEvery{Interval: 100 * time.Millisecond}),
		process.Concurrency(64),
		process.Retry(process.RetryPolicy{Attempts: 3, Backoff: 10 * time.Millisecond}),
		process.ConsumerOptions(
			riffle.ConsumerGroup("shouters"),
			riffle.SubscribeTopics("words"),
			riffle.OffsetReset(riffle.ResetEarliest),
		))
	if err != nil {
		log.Fatal(err)
	}
	// Wait for the transaction that covers the three words to commit.
	committed := func() int64 {
		offs, err := cl.Admin().FetchOffsets(ctx, "shouters")
		if err != nil {
			log.Fatal(err)
		}
		var n int64
		for _, om := range offs {
			n += om.Offset
		}
		return n
	}
	for committed() < 3 {
		time.Sleep(10 * time.Millisecond)
	}
	if err := p.Close(ctx); err != nil {
		log.Fatal(err)
	}

	// A read_committed reader sees each word's output once.
	ends, err := cl.Admin().ListOffsets(ctx, riffle.OffsetLatest, "shouts")
	if err != nil {
		log.Fatal(err)
	}
	var got []string
	for _, e := range ends {
		err := ranges.ReadRange(ctx, cl, ranges.Range{Topic: "shouts", Partition: e.Partition, High: e.Offset},
			func(r *riffle.Record) error {
				got = append(got, string(r.Value))
				return nil
			}, ranges.ReadCommitted())
		if err != nil {
			log.Fatal(err)
		}
	}
	slices.Sort(got)
	fmt.Println(got)
	fmt.Println("committed offsets sum to", committed())
	// Output:
	// [EXACTLY HELLO ONCE]
	// committed offsets sum to 3
}
