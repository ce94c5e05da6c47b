//go:build unix

package riffle_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/riffle-go/riffle"
	"github.com/riffle-go/riffle/rifftest"
)

// A group consumer runs until the process is asked to stop (SIGINT or
// SIGTERM), then shuts down gracefully: Close stops fetching, waits for the
// running handlers, commits what they finished and leaves the group, all
// within a deadline of its own (the signal's context is already done, so
// it cannot be Close's). The next member to get the partitions resumes
// right after the last handled record.
//
// This example sends itself SIGTERM once it has handled every record, as
// an orchestrator stopping the process would. (Unix only, for that.)
func ExampleConsumer_group() {
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
	p, _ := riffle.NewProducer(cl)
	for i := 0; i < 30; i++ {
		p.Produce(context.Background(), &riffle.Record{Topic: "orders", Key: []byte(fmt.Sprint("customer-", i%7)), Value: []byte("order")}, nil)
	}
	p.Close(context.Background())

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	var handled atomic.Int64
	c, err := riffle.NewConsumer(cl,
		riffle.ConsumerGroup("billing"),
		riffle.SubscribeTopics("orders"),
		// A new group starts at the end of the log by default; this one
		// reads what is already there.
		riffle.OffsetReset(riffle.ResetEarliest),
		riffle.HandleRecord(func(ctx context.Context, r *riffle.Record) error {
			// ctx is cancelled if Close's deadline passes first.
			if handled.Add(1) == 30 {
				syscall.Kill(syscall.Getpid(), syscall.SIGTERM) // see above
			}
			return nil
		}),
	)
	if err != nil {
		log.Fatal(err)
	}

	<-ctx.Done() // a signal arrived
	stop()       // from now on, a second signal ends the process at once

	closeCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := c.Close(closeCtx); err != nil {
		// Partitions stopped by an error (*riffle.StoppedPartitionsError),
		// or the commit failed.
		log.Println("close:", err)
	}

	offsets, err := cl.Admin().FetchOffsets(context.Background(), "billing")
	if err != nil {
		log.Fatal(err)
	}
	committed := int64(0)
	for _, o := range offsets {
		committed += o.Offset
	}
	fmt.Println("handled:", handled.Load(), "committed:", committed)
	// Output: handled: 30 committed: 30
}
