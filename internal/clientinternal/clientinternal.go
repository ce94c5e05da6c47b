// Package clientinternal lets Riffle's public subpackages reach the
// internals of a *riffle.Client without widening its public API. The root
// package fills in the accessors at init.
package clientinternal

import (
	"log/slog"

	"github.com/riffle-go/riffle/internal/cluster"
)

// Access returns the cluster manager and logger behind a *riffle.Client
// (passed as any to avoid an import cycle).
var Access func(client any) (*cluster.Cluster, *slog.Logger)

// ConsumerSink returns a riffle.ConsumerOption (as any) that makes the
// consumer hand its records to s, a sink.Sink[*riffle.Record], instead of
// a handler. Used by riffle/process.
var ConsumerSink func(s any) any
