package riffle_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net"
	"sync"
	"time"

	"github.com/riffle-go/riffle"
	"github.com/riffle-go/riffle/rifftest"
)

// A client bootstraps from seed brokers and creates and lists topics.
func Example_admin() {
	cluster, err := rifftest.Start(rifftest.Brokers(3))
	if err != nil {
		log.Fatal(err)
	}
	defer cluster.Close()

	cl, err := riffle.NewClient(riffle.SeedBrokers(cluster.Addrs()...))
	if err != nil {
		log.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	adm := cl.Admin()
	res, err := adm.CreateTopics(ctx, riffle.TopicSpec{Name: "events", Partitions: 6})
	if err != nil {
		log.Fatal(err) // the whole call failed, e.g. *riffle.UnreachableError
	}
	if err := res.Err(); err != nil {
		log.Fatal(err) // a per-topic failure
	}
	topics, err := adm.ListTopics(ctx, "events")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(topics[0].Name, len(topics[0].Partitions), "partitions")

	// Creating it again fails for that topic only, with a typed error.
	res, _ = adm.CreateTopics(ctx, riffle.TopicSpec{Name: "events", Partitions: 6})
	fmt.Println(errors.Is(res[0].Err, riffle.ErrTopicAlreadyExists))
	// Output:
	// events 6 partitions
	// true
}

// Produce asynchronously with a callback per record, then close the
// producer, which delivers (or fails) everything still buffered.
func ExampleProducer_Produce() {
	cluster, err := rifftest.Start(rifftest.Topic("orders", 3))
	if err != nil {
		log.Fatal(err)
	}
	defer cluster.Close()
	cl, err := riffle.NewClient(riffle.SeedBrokers(cluster.Addrs()...))
	if err != nil {
		log.Fatal(err)
	}
	defer cl.Close()

	p, err := riffle.NewProducer(cl) // idempotent, acks=all by default
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	done := make(chan error, 10)
	for i := 0; i < 10; i++ {
		r := &riffle.Record{Topic: "orders", Key: []byte("customer-42"), Value: []byte(fmt.Sprint("order ", i))}
		p.Produce(ctx, r, func(r *riffle.Record, err error) { done <- err })
	}
	if err := p.Close(ctx); err != nil {
		log.Fatal(err)
	}
	failed := 0
	for i := 0; i < 10; i++ {
		if <-done != nil {
			failed++
		}
	}
	fmt.Println("failed:", failed)
	// Output: failed: 0
}

// ProduceSync waits for the records (without lingering) and fills in their
// partitions and offsets.
func ExampleProducer_ProduceSync() {
	cluster, err := rifftest.Start(rifftest.Topic("audit", 1))
	if err != nil {
		log.Fatal(err)
	}
	defer cluster.Close()
	cl, err := riffle.NewClient(riffle.SeedBrokers(cluster.Addrs()...))
	if err != nil {
		log.Fatal(err)
	}
	defer cl.Close()
	p, err := riffle.NewProducer(cl, riffle.WithCompression(riffle.CompressionZstd))
	if err != nil {
		log.Fatal(err)
	}
	defer p.Close(context.Background())

	a := &riffle.Record{Topic: "audit", Value: []byte("login")}
	b := &riffle.Record{Topic: "audit", Value: []byte("logout")}
	if err := p.ProduceSync(context.Background(), a, b); err != nil {
		log.Fatal(err)
	}
	fmt.Println(a.Partition, a.Offset, b.Offset)
	// Output: 0 0 1
}

// A consumer runs a handler per record; each partition is handled in
// offset order by one runner at a time, partitions run concurrently.
func ExampleConsumer() {
	cluster, err := rifftest.Start(rifftest.Topic("clicks", 3))
	if err != nil {
		log.Fatal(err)
	}
	defer cluster.Close()
	cl, err := riffle.NewClient(riffle.SeedBrokers(cluster.Addrs()...))
	if err != nil {
		log.Fatal(err)
	}
	defer cl.Close()
	ctx := context.Background()

	p, _ := riffle.NewProducer(cl)
	for i := 0; i < 30; i++ {
		p.Produce(ctx, &riffle.Record{Topic: "clicks", Key: []byte(fmt.Sprint("user-", i%5)), Value: []byte("click")}, nil)
	}
	p.Close(ctx)

	var mu sync.Mutex
	seen := 0
	done := make(chan struct{})
	c, err := riffle.NewConsumer(cl,
		riffle.HandleRecord(func(ctx context.Context, r *riffle.Record) error {
			mu.Lock()
			defer mu.Unlock()
			if seen++; seen == 30 {
				close(done)
			}
			return nil
		}),
		riffle.OnPartitionError(func(e *riffle.PartitionError) { log.Println(e) }),
	)
	if err != nil {
		log.Fatal(err)
	}
	for part := int32(0); part < 3; part++ {
		c.Assign(riffle.Assignment{TopicPartition: riffle.TopicPartition{Topic: "clicks", Partition: part}, Start: riffle.AtEarliest()})
	}
	<-done
	positions, _ := c.Close(ctx)
	total := int64(0)
	for _, pos := range positions {
		total += pos
	}
	fmt.Println("consumed", seen, "records; positions sum to", total)
	// Output: consumed 30 records; positions sum to 30
}

// When no broker answers, the error is an *UnreachableError naming each
// address tried and why it failed.
func ExampleUnreachableError() {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nobody listens there any more
	cl, err := riffle.NewClient(riffle.SeedBrokers(addr))
	if err != nil {
		log.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()

	err = cl.Ping(ctx)
	var ue *riffle.UnreachableError
	if errors.As(err, &ue) {
		for _, a := range ue.Addrs {
			fmt.Println(a.Addr == addr, a.NodeID, a.Cause())
		}
		fmt.Println("ended by:", ue.Ctx)
	}
	fmt.Println(errors.Is(err, riffle.ErrUnreachable), errors.Is(err, context.DeadlineExceeded))
	// Output:
	// true -1 dial refused
	// ended by: context deadline exceeded
	// true true
}

// A broker's error code is a *KafkaError: match it with errors.Is against
// the Err values, or get its code with errors.As.
func ExampleKafkaError() {
	cluster, err := rifftest.Start(rifftest.Topic("events", 1))
	if err != nil {
		log.Fatal(err)
	}
	defer cluster.Close()
	cl, err := riffle.NewClient(riffle.SeedBrokers(cluster.Addrs()...))
	if err != nil {
		log.Fatal(err)
	}
	defer cl.Close()

	res, err := cl.Admin().CreateTopics(context.Background(), riffle.TopicSpec{Name: "events", Partitions: 1})
	if err != nil {
		log.Fatal(err)
	}
	err = res[0].Err
	fmt.Println(errors.Is(err, riffle.ErrTopicAlreadyExists))
	var ke *riffle.KafkaError
	if errors.As(err, &ke) {
		fmt.Println(ke.Code, ke.Name, ke.Retriable)
	}
	// Output:
	// true
	// 36 TOPIC_ALREADY_EXISTS false
}
