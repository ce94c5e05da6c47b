package otel_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/riffle-go/riffle"
	rotel "github.com/riffle-go/riffle/plugin/otel"
	"github.com/riffle-go/riffle/rifftest"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// A batch runs in one "process" span, child of the handler's context,
// linked to each distinct creation context of its records, with the
// batch's size, partition and the handler's error.
func TestBatchSpan(t *testing.T) {
	sr := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sr))
	defer tp.Shutdown(context.Background())
	tr := rotel.NewTracing(rotel.WithTracerProvider(tp), rotel.WithPropagator(propagation.TraceContext{}),
		rotel.ClientID("svc"), rotel.ConsumerGroup("g"))
	var sends []trace.Span
	var recs []*riffle.Record
	for i := range 2 {
		r := &riffle.Record{Topic: "t", Partition: 2, Offset: int64(i), Value: []byte("v")}
		_, s := tr.StartSend(context.Background(), r) // a trace of its own each
		tr.EndSend(s, r, nil)
		sends, recs = append(sends, s), append(recs, r)
	}
	same := &riffle.Record{Topic: "t", Partition: 2, Offset: 2, Headers: append([]riffle.Header(nil), recs[0].Headers...)}
	bare := &riffle.Record{Topic: "t", Partition: 2, Offset: 3}
	b := &riffle.FetchBatch{Topic: "t", Partition: 2, Records: append(recs, same, bare)}

	ambientCtx, ambient := tp.Tracer("test").Start(context.Background(), "poll")
	var inner trace.SpanContext
	h := tr.WrapBatchHandler(func(ctx context.Context, got *riffle.FetchBatch) error {
		inner = trace.SpanContextFromContext(ctx)
		if got != b {
			t.Error("the handler did not get the batch")
		}
		return fmt.Errorf("boom: %w", riffle.ErrDeliveryTimeout)
	})
	if err := h(ambientCtx, b); !errors.Is(err, riffle.ErrDeliveryTimeout) {
		t.Fatalf("handler error %v", err)
	}
	ambient.End()

	var procs []sdktrace.ReadOnlySpan
	for _, s := range sr.Ended() {
		if s.Name() == "process t" {
			procs = append(procs, s)
		}
	}
	if len(procs) != 1 {
		t.Fatalf("%d process spans, want 1: %v", len(procs), names(sr.Ended()))
	}
	proc := procs[0]
	if proc.SpanKind() != trace.SpanKindConsumer {
		t.Errorf("kind %v", proc.SpanKind())
	}
	if proc.Parent().SpanID() != ambient.SpanContext().SpanID() || proc.SpanContext().TraceID() != ambient.SpanContext().TraceID() {
		t.Errorf("parent %v in trace %v, want the handler's span", proc.Parent().SpanID(), proc.SpanContext().TraceID())
	}
	if inner.SpanID() != proc.SpanContext().SpanID() {
		t.Errorf("the handler's context carries span %v, want the batch's %v", inner.SpanID(), proc.SpanContext().SpanID())
	}
	links := proc.Links()
	if len(links) != 2 {
		t.Fatalf("%d links, want one per distinct creation context (2): %+v", len(links), links)
	}
	for i, l := range links {
		if l.SpanContext.SpanID() != sends[i].SpanContext().SpanID() || l.SpanContext.TraceID() != sends[i].SpanContext().TraceID() {
			t.Errorf("link %d to %v, want send span %v", i, l.SpanContext.SpanID(), sends[i].SpanContext().SpanID())
		}
	}
	a := attrs(proc)
	if a["messaging.batch.message_count"].AsInt64() != 4 {
		t.Errorf("messaging.batch.message_count = %v, want 4", a["messaging.batch.message_count"])
	}
	for k, v := range map[attribute.Key]string{
		"messaging.system": "kafka", "messaging.destination.name": "t", "messaging.destination.partition.id": "2",
		"messaging.operation.type": "process", "messaging.operation.name": "process",
		"messaging.consumer.group.name": "g", "messaging.client.id": "svc", "error.type": "delivery_timeout",
	} {
		if got := a[k].AsString(); got != v {
			t.Errorf("%s = %q, want %q", k, got, v)
		}
	}
	if _, ok := a["messaging.kafka.offset"]; ok {
		t.Error("a batch span carries a record's offset")
	}
	if proc.Status().Code.String() != "Error" {
		t.Errorf("status %v", proc.Status())
	}
}

// A consumer with HandleBatch gets a process span per handler call, linked
// to the send spans of the batch's records; what the handler produces with
// its context continues the batch's trace.
func TestTraceHandleBatch(t *testing.T) {
	const n = 6
	c := rifftest.New(t, rifftest.Topic("in", 1), rifftest.Topic("out", 1))
	sr := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sr))
	defer tp.Shutdown(context.Background())
	tr := rotel.NewTracing(rotel.WithTracerProvider(tp), rotel.WithPropagator(propagation.TraceContext{}))
	ctx := context.Background()
	p, err := riffle.NewProducer(newClient(t, c))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(ctx)
	sendOf := map[int64]trace.SpanID{} // by offset
	for i := range n {
		r := &riffle.Record{Topic: "in", Value: fmt.Appendf(nil, "%d", i)}
		if err := tr.ProduceSync(ctx, p, r); err != nil { // a trace per record
			t.Fatal(err)
		}
		sendOf[r.Offset] = trace.SpanContextFromContext(propagation.TraceContext{}.Extract(ctx, rotel.RecordCarrier{Record: r})).SpanID()
	}

	var mu sync.Mutex
	batches := map[trace.SpanID][]int64{} // process span → offsets of its batch
	handled := 0
	done := make(chan struct{})
	cs, err := riffle.NewConsumer(newClient(t, c), riffle.ConsumerGroup("g"), riffle.SubscribeTopics("in"),
		riffle.OffsetReset(riffle.ResetEarliest),
		riffle.HandleBatch(tr.WrapBatchHandler(func(ctx context.Context, b *riffle.FetchBatch) error {
			if err := tr.ProduceSync(ctx, p, &riffle.Record{Topic: "out", Value: []byte("derived")}); err != nil {
				return err
			}
			mu.Lock()
			defer mu.Unlock()
			id := trace.SpanContextFromContext(ctx).SpanID()
			for _, r := range b.Records {
				batches[id] = append(batches[id], r.Offset)
			}
			if handled += len(b.Records); handled == n {
				close(done)
			}
			return nil
		})))
	if err != nil {
		t.Fatal(err)
	}
	<-done
	if _, err := cs.Close(ctx); err != nil {
		t.Fatal(err)
	}
	procs := map[trace.SpanID]sdktrace.ReadOnlySpan{}
	var derived []sdktrace.ReadOnlySpan
	for _, s := range sr.Ended() {
		switch s.Name() {
		case "process in":
			procs[s.SpanContext().SpanID()] = s
		case "send out":
			derived = append(derived, s)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(procs) != len(batches) || len(derived) != len(batches) {
		t.Fatalf("%d process spans and %d derived sends for %d batches", len(procs), len(derived), len(batches))
	}
	for id, offsets := range batches {
		s, ok := procs[id]
		if !ok {
			t.Fatalf("the handler ran in span %v, which is no process span", id)
		}
		if got := attrs(s)["messaging.batch.message_count"].AsInt64(); got != int64(len(offsets)) {
			t.Errorf("span %v: message_count %d, batch of %d", id, got, len(offsets))
		}
		if s.Parent().IsValid() {
			t.Errorf("span %v has parent %v: a batch's span must not adopt one record's trace", id, s.Parent().SpanID())
		}
		want := map[trace.SpanID]bool{}
		for _, o := range offsets {
			want[sendOf[o]] = true
		}
		got := map[trace.SpanID]bool{}
		for _, l := range s.Links() {
			got[l.SpanContext.SpanID()] = true
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("span %v links %v, want the send spans of offsets %v: %v", id, got, offsets, want)
		}
	}
	for _, d := range derived {
		if _, ok := procs[d.Parent().SpanID()]; !ok {
			t.Errorf("derived send's parent %v is no process span", d.Parent().SpanID())
		}
	}
}

// A batch span links to at most 128 creation contexts, those of its first
// records, however many the SDK would keep: extracting a context from
// every record of a large batch costs allocations per record for links
// the SDK's default limit (128) drops.
func TestBatchSpanLinkCap(t *testing.T) {
	sr := tracetest.NewSpanRecorder()
	limits := sdktrace.NewSpanLimits()
	limits.LinkCountLimit = 1000
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sr), sdktrace.WithRawSpanLimits(limits))
	defer tp.Shutdown(context.Background())
	tr := rotel.NewTracing(rotel.WithTracerProvider(tp), rotel.WithPropagator(propagation.TraceContext{}))
	var sends []trace.Span
	b := &riffle.FetchBatch{Topic: "t"}
	for i := range 300 {
		r := &riffle.Record{Topic: "t", Offset: int64(i)}
		_, s := tr.StartSend(context.Background(), r)
		tr.EndSend(s, r, nil)
		sends, b.Records = append(sends, s), append(b.Records, r)
	}
	_, span := tr.StartProcessBatch(context.Background(), b)
	tr.EndProcess(span, nil)
	var links []sdktrace.Link
	for _, s := range sr.Ended() {
		if s.Name() == "process t" {
			links = s.Links()
		}
	}
	if len(links) != 128 {
		t.Fatalf("%d links, want 128", len(links))
	}
	for i, l := range links {
		if l.SpanContext.SpanID() != sends[i].SpanContext().SpanID() {
			t.Fatalf("link %d to %v, want record %d's send span %v", i, l.SpanContext.SpanID(), i, sends[i].SpanContext().SpanID())
		}
	}
}
