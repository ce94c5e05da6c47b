package riffle_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log"
	"slices"
	"sync"
	"time"

	"github.com/riffle-go/riffle"
	"github.com/riffle-go/riffle/rifftest"
)

// A transaction: records produced by any number of goroutines between
// BeginTransaction and CommitTransaction become visible to read_committed
// consumers together; an aborted transaction's records never do.
func ExampleProducer_CommitTransaction() {
	cluster, err := rifftest.Start(rifftest.Topic("payments", 3))
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

	p, err := riffle.NewProducer(cl, riffle.TransactionalID("payments-writer"))
	if err != nil {
		log.Fatal(err)
	}
	defer p.Close(ctx) // aborts a transaction left open
	// Fences any earlier producer with this id and aborts what it left.
	if err := p.InitTransactions(ctx); err != nil {
		log.Fatal(err)
	}

	// run writes the values in one transaction, from one goroutine each.
	run := func(commit bool, values ...string) error {
		if err := p.BeginTransaction(); err != nil {
			return err
		}
		var wg sync.WaitGroup
		for _, v := range values {
			wg.Add(1)
			go func() {
				defer wg.Done()
				p.Produce(ctx, &riffle.Record{Topic: "payments", Key: []byte(v), Value: []byte(v)}, nil)
			}()
		}
		wg.Wait()
		if !commit {
			return p.AbortTransaction(ctx)
		}
		// Waits for every record produced above; fails if one failed.
		err := p.CommitTransaction(ctx)
		if errors.Is(err, riffle.ErrTransactionAbortable) {
			// Nothing was committed; abort, then the producer
			// can run the next transaction.
			if aerr := p.AbortTransaction(ctx); aerr != nil {
				return aerr
			}
		}
		// ErrTransactionFatal (ErrProducerFenced: another instance
		// took over): close the producer.
		return err
	}
	if err := run(true, "alice:10", "bob:20"); err != nil {
		log.Fatal(err)
	}
	if err := run(false, "mallory:99"); err != nil {
		log.Fatal(err)
	}
	if err := run(true, "carol:30"); err != nil {
		log.Fatal(err)
	}

	fmt.Println(readCommitted(ctx, cl, "payments", 3, 3))
	// Output: [alice:10 bob:20 carol:30]
}

// Consume, transform, produce, exactly once: the transformed records and
// the consumed offsets commit in one transaction. Handlers produce into
// the open transaction concurrently; the loop commits it with the group's
// offsets (KIP-447: the coordinator refuses offsets of a member that lost
// its partitions, so one transactional producer serves every partition).
func ExampleProducer_SendOffsetsToTransaction() {
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
	in, _ := riffle.NewProducer(cl)
	for _, w := range []string{"hello", "exactly", "once"} {
		in.Produce(ctx, &riffle.Record{Topic: "words", Key: []byte(w), Value: []byte(w)}, nil)
	}
	in.Close(ctx)

	p, err := riffle.NewProducer(cl, riffle.TransactionalID("shouter"))
	if err != nil {
		log.Fatal(err)
	}
	defer p.Close(ctx)
	if err := p.InitTransactions(ctx); err != nil {
		log.Fatal(err)
	}
	if err := p.BeginTransaction(); err != nil {
		log.Fatal(err)
	}

	// txn is held (shared) by handlers while they produce into the open
	// transaction, and (exclusively) by the commit.
	var txn sync.RWMutex
	var mu sync.Mutex
	offsets := map[riffle.TopicPartition]riffle.OffsetAndMetadata{}
	handled := make(chan struct{}, 3)
	ccl, err := riffle.NewClient(riffle.SeedBrokers(cluster.Addrs()...)) // one group member per client
	if err != nil {
		log.Fatal(err)
	}
	defer ccl.Close()
	c, err := riffle.NewConsumer(ccl,
		riffle.ConsumerGroup("shouters"), riffle.SubscribeTopics("words"),
		riffle.OffsetReset(riffle.ResetEarliest),
		riffle.Isolation(riffle.ReadCommitted),
		riffle.DisableCommits(), // offsets commit with the transaction, never by the consumer
		riffle.HandleRecord(func(ctx context.Context, r *riffle.Record) error {
			txn.RLock()
			defer txn.RUnlock()
			p.Produce(ctx, &riffle.Record{Topic: "shouts", Key: r.Key, Value: bytes.ToUpper(r.Value)}, nil)
			mu.Lock()
			offsets[riffle.TopicPartition{Topic: r.Topic, Partition: r.Partition}] = riffle.OffsetAndMetadata{Offset: r.Offset + 1, LeaderEpoch: r.LeaderEpoch}
			mu.Unlock()
			handled <- struct{}{}
			return nil
		}),
	)
	if err != nil {
		log.Fatal(err)
	}
	for range 3 {
		<-handled
	}

	// Commit what was handled so far (a real loop does this every few
	// hundred milliseconds, then begins the next transaction).
	txn.Lock()
	err = p.SendOffsetsToTransaction(ctx, offsets, c.GroupMetadata())
	if err == nil {
		err = p.CommitTransaction(ctx)
	}
	if errors.Is(err, riffle.ErrTransactionAbortable) {
		// Abort; the consumer must then start again from the committed
		// offsets (close it and create a new one).
		p.AbortTransaction(ctx)
	}
	txn.Unlock()
	if err != nil {
		log.Fatal(err)
	}
	c.Close(ctx)

	fmt.Println(readCommitted(ctx, cl, "shouts", 2, 3))
	committed, _ := cl.Admin().FetchOffsets(ctx, "shouters")
	total := int64(0)
	for _, om := range committed {
		total += om.Offset
	}
	fmt.Println("committed offsets sum to", total)
	// Output:
	// [EXACTLY HELLO ONCE]
	// committed offsets sum to 3
}

// readCommitted reads n records of topic (partitions 0 to parts-1) as a
// read_committed consumer and returns their values, sorted.
func readCommitted(ctx context.Context, cl *riffle.Client, topic string, parts int32, n int) []string {
	var mu sync.Mutex
	var got []string
	done := make(chan struct{})
	c, err := riffle.NewConsumer(cl, riffle.Isolation(riffle.ReadCommitted),
		riffle.HandleRecord(func(ctx context.Context, r *riffle.Record) error {
			mu.Lock()
			defer mu.Unlock()
			if got = append(got, string(r.Value)); len(got) == n {
				close(done)
			}
			return nil
		}))
	if err != nil {
		log.Fatal(err)
	}
	for part := int32(0); part < parts; part++ {
		c.Assign(riffle.Assignment{TopicPartition: riffle.TopicPartition{Topic: topic, Partition: part}, Start: riffle.AtEarliest()})
	}
	select {
	case <-done:
	case <-ctx.Done():
		log.Fatal("not all records read")
	}
	c.Close(ctx)
	mu.Lock()
	defer mu.Unlock()
	slices.Sort(got)
	return got
}

// ExactlyOnce runs the transactions of a consume-transform-produce group
// member: handlers produce with the transactional producer, and the
// consumer commits their outputs with the inputs' offsets (every 100 ms by
// default, at a revoke, and at Close). A read_committed reader sees every
// input's outputs exactly once, through crashes and rebalances.
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
	in, _ := riffle.NewProducer(cl)
	for _, w := range []string{"hello", "exactly", "once"} {
		in.Produce(ctx, &riffle.Record{Topic: "words", Key: []byte(w), Value: []byte(w)}, nil)
	}
	in.Close(ctx)

	p, err := riffle.NewProducer(cl, riffle.TransactionalID("shouter"))
	if err != nil {
		log.Fatal(err)
	}
	defer p.Close(ctx)
	if err := p.InitTransactions(ctx); err != nil {
		log.Fatal(err)
	}
	ccl, err := riffle.NewClient(riffle.SeedBrokers(cluster.Addrs()...)) // one group member per client
	if err != nil {
		log.Fatal(err)
	}
	defer ccl.Close()
	handled := make(chan struct{}, 3)
	c, err := riffle.NewConsumer(ccl,
		riffle.ConsumerGroup("shouters"), riffle.SubscribeTopics("words"),
		riffle.OffsetReset(riffle.ResetEarliest),
		riffle.ExactlyOnce(p, riffle.CommitEvery{}),
		riffle.HandleRecord(func(ctx context.Context, r *riffle.Record) error {
			// Into the open transaction; it commits with r's offset.
			p.Produce(ctx, &riffle.Record{Topic: "shouts", Key: r.Key, Value: bytes.ToUpper(r.Value)}, nil)
			handled <- struct{}{}
			return nil
		}),
	)
	if err != nil {
		log.Fatal(err)
	}
	for range 3 {
		<-handled
	}
	c.Close(ctx) // commits the open transaction

	fmt.Println(readCommitted(ctx, cl, "shouts", 2, 3))
	committed, _ := cl.Admin().FetchOffsets(ctx, "shouters")
	total := int64(0)
	for _, om := range committed {
		total += om.Offset
	}
	fmt.Println("committed offsets sum to", total)
	// Output:
	// [EXACTLY HELLO ONCE]
	// committed offsets sum to 3
}
