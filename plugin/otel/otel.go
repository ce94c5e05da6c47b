// Package otel connects Riffle to OpenTelemetry: metrics through the OTel
// metric API, fed by Riffle's hooks, and tracing that follows the
// OpenTelemetry messaging semantic conventions, carrying the trace context
// in record headers from the producer to the consumer's handler and to
// the workers of riffle/process.
//
// # Tracing
//
// On the producer side, Tracing.Produce (or ProduceSync) starts a "send
// <topic>" span of kind PRODUCER for each record, injects its context into
// the record's headers with the configured propagator (W3C traceparent by
// default) and ends the span with the record's partition and offset once
// it is acknowledged, or with its error. On the consumer side,
// Tracing.WrapHandler wraps a record handler, for riffle.HandleRecord or
// process.New (a process.Handler is the same function type): each record
// runs inside a "process <topic>" span of kind CONSUMER whose parent is
// the context extracted from the record (the record's creation context, as
// the conventions recommend for single-message processing), with a link
// to it as well; LinkOnly keeps the handler's own context as the parent
// and only links. A handler that produces with the context it was given
// continues the same trace, so a trace spans producer → consumer handler →
// producer → process workers.
//
// Tracing.WrapBatchHandler does the same for riffle.HandleBatch, following
// the conventions for batch processing: one "process <topic>" span of kind
// CONSUMER per batch, child of the handler's context, with
// messaging.batch.message_count and a link to the creation context of
// each record rather than a parent (a batch has many).
//
// # Metrics
//
// Metrics implements Riffle's data-path and connection hooks (pass it to
// riffle.WithHooks) and records them as OTel instruments. The two that the
// messaging conventions define carry their names:
// messaging.client.sent.messages and messaging.client.consumed.messages
// (attributes messaging.system, messaging.destination.name, and with
// PartitionAttributes messaging.destination.partition.id, error.type on
// failures). The others follow the Java client's names under "riffle.":
//
//   - riffle.producer.byte_total (By): bytes of acknowledged batches, compressed (byte-total)
//   - riffle.producer.batch.size (By): histogram of batch sizes (batch-size-avg, -max)
//   - riffle.producer.compression.rate (1): histogram of compressed/uncompressed (compression-rate-avg)
//   - riffle.producer.record.latency (s): histogram: a batch's first record buffered → outcome
//   - riffle.producer.buffer.available (By): MaxBufferedBytes - buffered, of watched producers (buffer-available-bytes)
//   - riffle.consumer.bytes_consumed_total (By): (bytes-consumed-total)
//   - riffle.consumer.records.lag ({record}): observable gauge per partition the consumer has, with
//     messaging.consumer.group.name for a group's consumer (records-lag); see below
//   - riffle.consumer.partitions.stopped ({partition}): observable gauge: partitions stopped by an error
//     (a handler's, a corrupt batch...) until resumed or removed, per group and topic
//   - riffle.consumer.fetch.size (By): histogram of fetch responses (fetch-size-avg)
//   - riffle.consumer.rebalance.total ({rebalance}), riffle.consumer.rebalance.latency (s): rebalance-total, rebalance-latency-avg
//   - riffle.consumer.commit.total ({commit}), riffle.consumer.commit.latency (s): commit-total, commit-latency-avg
//     (OffsetCommit requests only, as Java's)
//   - riffle.consumer.transactional_commit.total ({commit}): transactions that committed offsets of the group
//     (SendOffsetsToTransaction, ExactlyOnce), counted when they commit
//   - riffle.request.total ({request}), riffle.request.latency (s): by riffle.api (request-total, request-latency-avg)
//   - riffle.errors ({error}): by riffle.error.source and error.type (riffle.ErrorClass); sources:
//     produce, fetch, rebalance, commit, request, connect, handler (a handler's error, or panic, which
//     stopped its partition), partition_stopped (a partition stopped by any other error)
//
// The lag follows every fetch response, those without records and those
// an incremental fetch session leaves out too, so it drops to 0 once the
// consumer caught up; a partition that is not fetched (stopped by an
// error, paused) has its end refreshed about once a second, so its lag
// grows with what is produced. A partition's point goes when the consumer
// loses the partition (revoked, unassigned, closed).
//
// # Client telemetry (KIP-714)
//
// Telemetry implements riffle.TelemetryReporter: with its readers on the
// MeterProvider of Metrics and riffle.TelemetryPush(tel) on the client,
// the client pushes the metrics the brokers subscribe to as OTLP
// MetricsData, under the Java client's KIP-714 names (the mapping is in
// Telemetry's documentation).
package otel

import (
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// ScopeName is the instrumentation scope of the tracer and the meter.
const ScopeName = "github.com/riffle-go/riffle/plugin/otel"

// Option configures Tracing and Metrics.
type Option func(*config)

type config struct {
	tp         trace.TracerProvider
	mp         metric.MeterProvider
	prop       propagation.TextMapPropagator
	clientID   string
	group      string
	partitions bool
	linkOnly   bool
}

func newConfig(opts []Option) config {
	var c config
	for _, o := range opts {
		o(&c)
	}
	if c.tp == nil {
		c.tp = otel.GetTracerProvider()
	}
	if c.mp == nil {
		c.mp = otel.GetMeterProvider()
	}
	if c.prop == nil {
		c.prop = otel.GetTextMapPropagator()
	}
	return c
}

// WithTracerProvider sets the tracer provider (default: the global one).
func WithTracerProvider(tp trace.TracerProvider) Option { return func(c *config) { c.tp = tp } }

// WithMeterProvider sets the meter provider (default: the global one).
func WithMeterProvider(mp metric.MeterProvider) Option { return func(c *config) { c.mp = mp } }

// WithPropagator sets the propagator that writes and reads the trace
// context in record headers (default: the global one, which must be set
// up, e.g. to propagation.TraceContext{}, for traceparent headers).
func WithPropagator(p propagation.TextMapPropagator) Option { return func(c *config) { c.prop = p } }

// ClientID adds messaging.client.id to spans and metrics; give the
// client's riffle.ClientID.
func ClientID(id string) Option { return func(c *config) { c.clientID = id } }

// ConsumerGroup adds messaging.consumer.group.name to process spans.
func ConsumerGroup(group string) Option { return func(c *config) { c.group = group } }

// PartitionAttributes adds messaging.destination.partition.id to the
// per-topic metrics (more series: one per partition).
func PartitionAttributes() Option { return func(c *config) { c.partitions = true } }

// LinkOnly makes process spans children of the handler's context, with
// only a link to the record's creation context (default: the creation
// context is the parent, and linked).
func LinkOnly() Option { return func(c *config) { c.linkOnly = true } }
