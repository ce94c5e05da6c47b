// Package riffle is a Kafka client built for concurrency and correctness.
//
// A Client holds the connection to a cluster: seed brokers kept for its
// whole life, brokers discovered from metadata, and one lazily dialed
// connection per broker and traffic class (produce, fetch, group, other),
// so long polls never delay heartbeats, commits or metadata. Every blocking
// call takes a context.Context; when no broker can be reached the error is
// an *UnreachableError naming each address and why it failed.
//
//	cl, err := riffle.NewClient(riffle.SeedBrokers("localhost:9092"))
//	if err != nil {
//		return err // invalid configuration: errors.Is(err, riffle.ErrInvalidConfig)
//	}
//	defer cl.Close()
//	topics, err := cl.Admin().ListTopics(ctx)
//
// On a Client:
//
//   - a Producer writes records, idempotently by default: batched per
//     partition, with a callback per record (Produce) or waiting for them
//     (ProduceSync); with TransactionalID it writes them in transactions
//     (BeginTransaction, CommitTransaction, AbortTransaction), together
//     with consumed offsets (SendOffsetsToTransaction) for exactly-once
//     consume-transform-produce;
//   - a Consumer reads the partitions given to Assign, or joins a consumer
//     group (ConsumerGroup, SubscribeTopics) and reads what the group
//     assigns it; a handler runs per record or per batch, each partition on
//     one goroutine at a time, partitions in parallel, and commits cover
//     only what the handler finished;
//   - Admin creates, lists and deletes topics, lists offsets, and
//     describes, resets and deletes consumer groups.
//
// Two packages build on them. [github.com/riffle-go/riffle/process] runs a
// handler on many records of a partition at once (by key, by partition or
// unordered), with retries and a dead-letter topic, and commits only
// records that finished. [github.com/riffle-go/riffle/ranges] plans topics
// into exact offset ranges [low, high) and reads them, for batch engines
// that hand ranges to workers. [github.com/riffle-go/riffle/rifftest]
// starts an in-process cluster for tests and demos; the examples here run
// against it, including a group consumer that shuts down cleanly on a
// signal.
//
// Errors are typed and classified: match them with errors.Is against the
// Err* values (ErrUnreachable, ErrAuth, ErrUnknownTopic, Kafka error codes
// such as ErrNotLeaderForPartition) and use IsRetriable to decide whether
// to try again. Every call made after an object's Close returns at once an
// error matching ErrClosed. Logging goes through a *slog.Logger you provide
// (without one, warnings and errors go to slog.Default()); metrics through
// hooks (see Hook).
package riffle
