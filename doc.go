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
//	if err != nil { ... }
//	defer cl.Close()
//	topics, err := cl.Admin().ListTopics(ctx)
//
// Errors are typed and classified: match them with errors.Is against the
// Err* values (ErrUnreachable, ErrAuth, ErrUnknownTopic, Kafka error codes
// such as ErrNotLeaderForPartition) and use IsRetriable to decide whether
// to try again. Every call made after an object's Close returns at once an
// error matching ErrClosed. Logging goes through a *slog.Logger you provide (silent by
// default); metrics through hooks (see Hook).
//
// The rifftest package starts an in-process cluster for tests and demos.
package riffle
