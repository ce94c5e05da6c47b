package riffle_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"sync/atomic"
	"time"

	"github.com/riffle-go/riffle"
	"github.com/riffle-go/riffle/rifftest"
)

// A share group (KIP-932, Kafka 4.2's queues) hands each record to one of
// its members under an acquisition lock; a handler that returns nil
// accepts its record (an error releases it, to be delivered again). Where
// the group starts in a partition is not the member's choice but the
// group's share.auto.offset.reset config (latest unless altered), so this
// one is set to earliest, with the Admin, to read what is already there.
func ExampleNewShareConsumer() {
	cluster, err := rifftest.Start(rifftest.Topic("tasks", 3))
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

	p, err := riffle.NewProducer(cl)
	if err != nil {
		log.Fatal(err)
	}
	var recs []*riffle.Record
	for i := 0; i < 20; i++ {
		recs = append(recs, &riffle.Record{Topic: "tasks", Value: []byte(fmt.Sprint("task ", i))})
	}
	if err := p.ProduceSync(ctx, recs...); err != nil {
		log.Fatal(err)
	}
	p.Close(ctx)

	earliest := "earliest"
	res, err := cl.Admin().AlterGroupConfigs(ctx,
		riffle.GroupConfigChange{Group: "workers", Name: "share.auto.offset.reset", Value: &earliest})
	if err != nil {
		log.Fatal(err)
	}
	if err := res.Err(); err != nil {
		log.Fatal(err)
	}

	var handled atomic.Int64
	done := make(chan struct{})
	handle := riffle.HandleRecord(func(ctx context.Context, r *riffle.Record) error {
		if handled.Add(1) == 20 {
			close(done)
		}
		return nil // accept
	})
	sc, err := riffle.NewShareConsumer(cl, riffle.ShareGroup("workers"), riffle.SubscribeTopics("tasks"), handle)
	if err != nil {
		log.Fatal(err)
	}
	select {
	case <-done:
	case <-ctx.Done():
		log.Fatal("the records did not come")
	}
	if err := sc.Close(ctx); err != nil { // sends the last acknowledgements, leaves the group
		log.Fatal(err)
	}
	fmt.Println(sc.Stats().Accepted, "records accepted")

	// Consumer options a share group has no use for are refused, the
	// error saying what to do instead (here: the group config above).
	_, err = riffle.NewShareConsumer(cl, riffle.ShareGroup("workers"), riffle.SubscribeTopics("tasks"), handle,
		riffle.OffsetReset(riffle.ResetEarliest))
	fmt.Println(errors.Is(err, riffle.ErrInvalidConfig))
	// Output:
	// 20 records accepted
	// true
}
