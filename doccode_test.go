package riffle_test

import (
	"context"
	"crypto/tls"
	"errors"
	"log/slog"

	"github.com/riffle-go/riffle"
	"github.com/riffle-go/riffle/process"
	"github.com/riffle-go/riffle/ranges"
)

// Code that README.md and the package docs show but that cannot run as an
// Example (it needs a real cluster and credentials) is compiled here, so it
// cannot stop compiling unnoticed; TestDocCodeCompiles checks that the docs
// show it line for line. The parameters are what the snippets take as
// given.

// Compiled, never called.
var _ = []any{readmeTour, packageDoc, readmeShare}

// readmeTour is README.md's "A short tour".
func readmeTour(ctx context.Context, user, pass string, k, v []byte, recs []*riffle.Record,
	cl2, cl3 *riffle.Client, handle func(context.Context, *riffle.Record) error) error {
	cl, err := riffle.NewClient(
		riffle.SeedBrokers("kafka-1:9092", "kafka-2:9092", "kafka-3:9092"),
		riffle.Logger(slog.Default()), // default: only warnings, to slog.Default()
		riffle.SASL(riffle.SASLScramSHA512(user, pass)),
		riffle.DialTLS(&tls.Config{}),
	)
	if err != nil {
		return err // invalid configuration: errors.Is(err, riffle.ErrInvalidConfig)
	}
	defer cl.Close()

	// Produce: idempotent, acks=all by default; any number of goroutines.
	p, _ := riffle.NewProducer(cl, riffle.WithCompression(riffle.CompressionZstd))
	defer p.Close(ctx) // delivers or fails everything buffered
	p.Produce(ctx, &riffle.Record{Topic: "events", Key: k, Value: v}, func(r *riffle.Record, err error) {
		// called exactly once: nil, or the error that stopped the record
	})
	if err := p.ProduceSync(ctx, recs...); err != nil { // no linger; fills in Partition and Offset
		return err
	}

	// Consume a group: one runner per partition at a time, partitions in
	// parallel; commits only cover records whose handler returned.
	c, _ := riffle.NewConsumer(cl2, // one group member per Client
		riffle.ConsumerGroup("billing"), riffle.SubscribeTopics("events"),
		riffle.HandleRecord(func(ctx context.Context, r *riffle.Record) error {
			return handle(ctx, r) // an error stops this partition only
		}),
	)
	defer c.Close(ctx)

	// Process beyond the partition count: 256 records at once, one per key at
	// a time; commits cover only finished records (the ones finished above the
	// committed offset ride in the commit metadata, so a restart skips them).
	pr, _ := process.New(cl3, handle,
		process.Ordering(process.ByKey), process.Concurrency(256),
		process.Retry(process.RetryPolicy{Attempts: 3}),
		process.DeadLetter(process.DeadLetterTopic(p, "events.dlq")),
		process.ConsumerOptions(riffle.ConsumerGroup("enricher"), riffle.SubscribeTopics("events")),
	)
	defer pr.Close(ctx) // drains by the deadline, commits, leaves the group

	// Read exact ranges [low, high), e.g. as tasks of a batch engine.
	plan, _ := ranges.Plan(ctx, cl, ranges.PlanOptions{MaxRecords: 100_000}, "events")
	r := ranges.NewReader(cl) // keep it: it shares the client's connections
	err = r.Read(ctx, plan[0], func(rec *riffle.Record) error {
		return handle(ctx, rec) // an error stops the read and is returned
	})
	if err != nil {
		return err
	}

	// Admin: per-topic results, typed errors.
	res, err := cl.Admin().CreateTopics(ctx, riffle.TopicSpec{Name: "events", Partitions: 12, ReplicationFactor: 3})
	if err != nil {
		return err // the whole call failed, e.g. *riffle.UnreachableError
	}
	for _, t := range res {
		if t.Err != nil && !errors.Is(t.Err, riffle.ErrTopicAlreadyExists) {
			return t.Err // e.g. riffle.ErrPolicyViolation
		}
	}
	// The rest of Java's AdminClient works the same way, one result per item:
	// ACLs, client quotas, topic, broker and group configs (incremental), DeleteRecords,
	// reassignments, ElectLeaders, log dirs (described, replicas moved between
	// them), SCRAM credentials (salted here), group offsets, features (described,
	// updated), transactions (listed, described, a hanging one aborted). Each goes
	// to the broker that must answer (controller, leader, coordinator, a given
	// broker) and is retried there. Admin().ValidateOnly() has topic creation,
	// partition raises, config changes and feature updates checked without
	// applying them (Java's validateOnly);
	// DescribeCluster and DescribeTopics take IncludeAuthorizedOperations().
	acls, err := cl.Admin().CreateACLs(ctx, riffle.ACLBinding{
		ResourceType: riffle.ACLResourceTopic, ResourceName: "events", Principal: "User:billing",
		Operation: riffle.ACLOperationRead, Permission: riffle.ACLPermissionAllow,
	})
	if err != nil {
		return err
	}
	return acls.Err() // the per-ACL errors joined, nil if all were created
}

// packageDoc is the snippet of the package documentation (doc.go).
func packageDoc(ctx context.Context) error {
	cl, err := riffle.NewClient(riffle.SeedBrokers("localhost:9092"))
	if err != nil {
		return err // invalid configuration: errors.Is(err, riffle.ErrInvalidConfig)
	}
	defer cl.Close()
	topics, err := cl.Admin().ListTopics(ctx)
	_ = topics
	return err
}

// readmeShare is README.md's "Share groups".
func readmeShare(ctx context.Context, cl *riffle.Client, run func(context.Context, *riffle.Record) error) {
	sc, _ := riffle.NewShareConsumer(cl, riffle.ShareGroup("jobs"), riffle.SubscribeTopics("tasks"),
		riffle.Runners(64), // handler goroutines: records of one partition run concurrently
		riffle.HandleRecord(func(ctx context.Context, r *riffle.Record) error {
			return run(ctx, r) // nil: ACCEPT; an error: RELEASE (delivered again, r.DeliveryCount+1)
		}))
	defer sc.Close(ctx) // releases what it holds, leaves the group
}
