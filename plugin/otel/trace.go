package otel

import (
	"context"
	"errors"
	"strconv"
	"sync"

	"github.com/riffle-go/riffle"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// RecordCarrier adapts a record's headers to a propagation.TextMapCarrier:
// Set replaces a header of the same key (or appends one), Get reads the
// last header of the key.
type RecordCarrier struct{ Record *riffle.Record }

var _ propagation.TextMapCarrier = RecordCarrier{}

// Get returns the value of the last header named key, or "".
func (c RecordCarrier) Get(key string) string {
	hs := c.Record.Headers
	for i := len(hs) - 1; i >= 0; i-- {
		if hs[i].Key == key {
			return string(hs[i].Value)
		}
	}
	return ""
}

// Set sets the header key to value, replacing any header of that key.
func (c RecordCarrier) Set(key, value string) {
	hs := c.Record.Headers
	for i := range hs {
		if hs[i].Key == key {
			hs[i].Value = []byte(value)
			return
		}
	}
	c.Record.Headers = append(hs, riffle.Header{Key: key, Value: []byte(value)})
}

// Keys lists the header keys.
func (c RecordCarrier) Keys() []string {
	ks := make([]string, len(c.Record.Headers))
	for i, h := range c.Record.Headers {
		ks[i] = h.Key
	}
	return ks
}

// Tracing creates messaging spans for produced and handled records. It is
// safe for concurrent use.
type Tracing struct {
	cfg    config
	tracer trace.Tracer
}

// NewTracing returns a Tracing configured by opts (WithTracerProvider,
// WithPropagator, ClientID, ConsumerGroup, LinkOnly).
func NewTracing(opts ...Option) *Tracing {
	cfg := newConfig(opts)
	return &Tracing{cfg: cfg, tracer: cfg.tp.Tracer(ScopeName)}
}

var (
	defaultOnce    sync.Once
	defaultTracing *Tracing
)

func global() *Tracing {
	defaultOnce.Do(func() { defaultTracing = NewTracing() })
	return defaultTracing
}

// WrapHandler is NewTracing().WrapHandler with the global tracer provider
// and propagator.
func WrapHandler(h func(context.Context, *riffle.Record) error) func(context.Context, *riffle.Record) error {
	return global().WrapHandler(h)
}

// WrapBatchHandler is NewTracing().WrapBatchHandler with the global tracer
// provider and propagator.
func WrapBatchHandler(h func(context.Context, *riffle.FetchBatch) error) func(context.Context, *riffle.FetchBatch) error {
	return global().WrapBatchHandler(h)
}

// Produce is NewTracing().Produce with the global tracer provider and
// propagator.
func Produce(ctx context.Context, p *riffle.Producer, rec *riffle.Record, fn func(*riffle.Record, error)) {
	global().Produce(ctx, p, rec, fn)
}

func (t *Tracing) common(topic string) []attribute.KeyValue {
	attrs := make([]attribute.KeyValue, 0, 10)
	attrs = append(attrs, semconv.MessagingSystemKafka, semconv.MessagingDestinationName(topic))
	if t.cfg.clientID != "" {
		attrs = append(attrs, semconv.MessagingClientID(t.cfg.clientID))
	}
	return attrs
}

// StartSend starts the PRODUCER span of rec as a child of ctx and injects
// its context into rec's headers. End it with EndSend once the record's
// outcome is known. Produce does both; use these with other ways of
// producing.
func (t *Tracing) StartSend(ctx context.Context, rec *riffle.Record) (context.Context, trace.Span) {
	attrs := append(t.common(rec.Topic), semconv.MessagingOperationName("send"), semconv.MessagingOperationTypeSend)
	if rec.Key != nil {
		attrs = append(attrs, semconv.MessagingKafkaMessageKey(string(rec.Key)))
	}
	if rec.Value == nil {
		attrs = append(attrs, semconv.MessagingKafkaMessageTombstone(true))
	}
	ctx, span := t.tracer.Start(ctx, "send "+rec.Topic, trace.WithSpanKind(trace.SpanKindProducer), trace.WithAttributes(attrs...))
	t.cfg.prop.Inject(ctx, RecordCarrier{rec})
	return ctx, span
}

// EndSend ends a span from StartSend with the record's outcome: partition
// and offset, or the error.
func (t *Tracing) EndSend(span trace.Span, rec *riffle.Record, err error) {
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
		span.SetAttributes(semconv.ErrorTypeKey.String(riffle.ErrorClass(err)))
	} else {
		span.SetAttributes(semconv.MessagingDestinationPartitionID(strconv.Itoa(int(rec.Partition))))
		if rec.Offset >= 0 {
			span.SetAttributes(semconv.MessagingKafkaOffset(int(rec.Offset)))
		}
	}
	span.End()
}

// Produce produces rec through p inside a "send" span (see StartSend):
// the span ends when fn is called, with the partition and offset or the
// error.
func (t *Tracing) Produce(ctx context.Context, p *riffle.Producer, rec *riffle.Record, fn func(*riffle.Record, error)) {
	_, span := t.StartSend(ctx, rec)
	p.Produce(ctx, rec, func(r *riffle.Record, err error) {
		t.EndSend(span, r, err)
		if fn != nil {
			fn(r, err)
		}
	})
}

// ProduceSync is p.ProduceSync with a "send" span per record.
func (t *Tracing) ProduceSync(ctx context.Context, p *riffle.Producer, recs ...*riffle.Record) error {
	spans := make([]trace.Span, len(recs))
	for i, r := range recs {
		_, spans[i] = t.StartSend(ctx, r)
	}
	err := p.ProduceSync(ctx, recs...)
	for i, r := range recs {
		t.EndSend(spans[i], r, recordErr(err, r))
	}
	return err
}

// recordErr picks a record's share of a ProduceSync error: ProduceSync
// joins errors that each name their record's partition; a record whose
// partition is not named succeeded.
func recordErr(err error, r *riffle.Record) error {
	if err == nil {
		return nil
	}
	var joined interface{ Unwrap() []error }
	if !errors.As(err, &joined) {
		return err // ctx's error, or one record's
	}
	prefix := r.Topic + "[" + strconv.Itoa(int(r.Partition)) + "]: "
	for _, e := range joined.Unwrap() {
		if len(e.Error()) >= len(prefix) && e.Error()[:len(prefix)] == prefix {
			return e
		}
	}
	return nil
}

// StartProcess starts the CONSUMER "process" span of a consumed record:
// its parent is the creation context extracted from the record's headers
// (with LinkOnly, or when the record carries none, ctx's span), and it
// links to the creation context. End it with EndProcess.
func (t *Tracing) StartProcess(ctx context.Context, rec *riffle.Record) (context.Context, trace.Span) {
	created := trace.SpanContextFromContext(t.cfg.prop.Extract(context.Background(), RecordCarrier{rec}))
	attrs := append(t.common(rec.Topic), semconv.MessagingOperationName("process"), semconv.MessagingOperationTypeProcess,
		semconv.MessagingDestinationPartitionID(strconv.Itoa(int(rec.Partition))),
		semconv.MessagingKafkaOffset(int(rec.Offset)), semconv.MessagingMessageBodySize(len(rec.Value)))
	if rec.Key != nil {
		attrs = append(attrs, semconv.MessagingKafkaMessageKey(string(rec.Key)))
	}
	if t.cfg.group != "" {
		attrs = append(attrs, semconv.MessagingConsumerGroupName(t.cfg.group))
	}
	opts := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindConsumer), trace.WithAttributes(attrs...)}
	parent := ctx
	if created.IsValid() {
		opts = append(opts, trace.WithLinks(trace.Link{SpanContext: created}))
		if !t.cfg.linkOnly {
			parent = trace.ContextWithRemoteSpanContext(ctx, created)
		}
	}
	return t.tracer.Start(parent, "process "+rec.Topic, opts...)
}

// EndProcess ends a span from StartProcess with the handler's error.
func (t *Tracing) EndProcess(span trace.Span, err error) {
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
		span.SetAttributes(semconv.ErrorTypeKey.String(riffle.ErrorClass(err)))
	}
	span.End()
}

// WrapHandler returns h running inside a "process" span per record (see
// StartProcess); h gets the span's context, so what it produces with
// Produce continues the trace. It suits riffle.HandleRecord and, the
// function type being the same, process.New.
func (t *Tracing) WrapHandler(h func(context.Context, *riffle.Record) error) func(context.Context, *riffle.Record) error {
	return func(ctx context.Context, rec *riffle.Record) error {
		ctx, span := t.StartProcess(ctx, rec)
		err := h(ctx, rec)
		t.EndProcess(span, err)
		return err
	}
}

// StartProcessBatch starts the CONSUMER "process" span of a batch of
// consumed records (riffle.HandleBatch), as the messaging conventions
// describe batch processing: its parent is ctx (the handler's context; a
// batch has no single creation context, so LinkOnly changes nothing
// here), it links to the creation context extracted from each record's
// headers (once per distinct context; records without one add no link),
// and it carries messaging.batch.message_count with the destination and
// partition of the batch. The links are given when the span starts, so
// samplers see them. At most maxBatchLinks (128, the SDK's default
// SpanLimits.LinkCountLimit) are made, from the first records with a
// creation context: the SDK would drop the rest anyway, and extracting a
// context from every record of a large batch costs allocations per
// record. End it with EndProcess.
func (t *Tracing) StartProcessBatch(ctx context.Context, b *riffle.FetchBatch) (context.Context, trace.Span) {
	attrs := append(t.common(b.Topic), semconv.MessagingOperationName("process"), semconv.MessagingOperationTypeProcess,
		semconv.MessagingDestinationPartitionID(strconv.Itoa(int(b.Partition))),
		semconv.MessagingBatchMessageCount(len(b.Records)))
	if t.cfg.group != "" {
		attrs = append(attrs, semconv.MessagingConsumerGroupName(t.cfg.group))
	}
	var links []trace.Link
	type spanKey struct {
		trace trace.TraceID
		span  trace.SpanID
	}
	seen := map[spanKey]struct{}{}
	for _, rec := range b.Records {
		if len(links) == maxBatchLinks {
			break
		}
		created := trace.SpanContextFromContext(t.cfg.prop.Extract(context.Background(), RecordCarrier{rec}))
		if !created.IsValid() {
			continue
		}
		k := spanKey{created.TraceID(), created.SpanID()}
		if _, dup := seen[k]; dup {
			continue
		}
		seen[k] = struct{}{}
		links = append(links, trace.Link{SpanContext: created})
	}
	return t.tracer.Start(ctx, "process "+b.Topic, trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithAttributes(attrs...), trace.WithLinks(links...))
}

// maxBatchLinks bounds the links of a batch's process span.
const maxBatchLinks = 128

// WrapBatchHandler returns h running inside a "process" span per batch
// (see StartProcessBatch), ended with h's error (EndProcess); h gets the
// span's context, so what it produces with Produce continues the batch's
// trace. It suits riffle.HandleBatch.
func (t *Tracing) WrapBatchHandler(h func(context.Context, *riffle.FetchBatch) error) func(context.Context, *riffle.FetchBatch) error {
	return func(ctx context.Context, b *riffle.FetchBatch) error {
		ctx, span := t.StartProcessBatch(ctx, b)
		err := h(ctx, b)
		t.EndProcess(span, err)
		return err
	}
}
