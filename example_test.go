package riffle_test

import (
	"context"
	"errors"
	"fmt"
	"log"
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
