// Package clientinternal lets Riffle's public subpackages reach the
// internals of a *riffle.Client without widening its public API. The root
// package fills in the accessors at init.
package clientinternal

import (
	"log/slog"
	"time"

	"github.com/riffle-go/riffle/internal/cluster"
	"github.com/riffle-go/riffle/internal/sink"
)

// Access returns the cluster manager and logger behind a *riffle.Client
// (passed as any to avoid an import cycle).
var Access func(client any) (*cluster.Cluster, *slog.Logger)

// ReadConfig returns a *riffle.Client's rack (Rack, "" when unset) and
// MetadataMaxAge: follower fetching by riffle/ranges.
var ReadConfig func(client any) (rack string, metadataMaxAge time.Duration)

// ConsumerSink returns a riffle.ConsumerOption (as any) that makes the
// consumer hand its records to s, a sink.Sink[*riffle.Record], instead of
// a handler. Used by riffle/process.
var ConsumerSink func(s any) any

// ProducerTxn reports whether a *riffle.Producer (as any) is
// transactional, and its TransactionTimeout. Used by riffle/process.
var ProducerTxn func(p any) (transactional bool, timeout time.Duration)

// ConsumerRewind moves a partition of a *riffle.Consumer (as any) back to
// a committed position: the partition restarts at pos.Offset in a new
// dispatch generation whose batches carry pos.Meta, as after an
// assignment. It reports false if the consumer no longer has the
// partition. Used by riffle/process when a transaction aborts.
var ConsumerRewind func(cs any, p sink.Part, pos sink.Pos) bool

// ConsumerCommitted records offsets committed for a *riffle.Consumer's
// group by other means (a transaction), for its Stats and lag.
var ConsumerCommitted func(cs any, offsets map[sink.Part]int64)
