package otel_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/riffle-go/riffle"
	rotel "github.com/riffle-go/riffle/plugin/otel"
	"github.com/riffle-go/riffle/process"
	"github.com/riffle-go/riffle/rifftest"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreAnyFunction("github.com/twmb/franz-go/pkg/kfake.(*Cluster).run"),
	)
}

func newClient(t *testing.T, c *rifftest.Cluster, opts ...riffle.Option) *riffle.Client {
	t.Helper()
	cl, err := riffle.NewClient(append(opts, riffle.SeedBrokers(c.Addrs()...))...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func attrs(s sdktrace.ReadOnlySpan) map[attribute.Key]attribute.Value {
	m := map[attribute.Key]attribute.Value{}
	for _, kv := range s.Attributes() {
		m[kv.Key] = kv.Value
	}
	return m
}

// One trace from the producer through a consumer handler, which produces
// again, to a process worker: send a → process a → send b → process b,
// each the parent of the next, the process spans linked to their record's
// send span.
func TestTraceProducerConsumerProcess(t *testing.T) {
	c := rifftest.New(t, rifftest.Topic("a", 2), rifftest.Topic("b", 2))
	sr := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sr))
	defer tp.Shutdown(context.Background())
	tr := rotel.NewTracing(rotel.WithTracerProvider(tp), rotel.WithPropagator(propagation.TraceContext{}),
		rotel.ClientID("svc"), rotel.ConsumerGroup("g"))
	ctx := context.Background()

	prodCl := newClient(t, c)
	p, err := riffle.NewProducer(prodCl)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(ctx)

	// The consumer handler of "a" produces to "b" with its context.
	handledA := make(chan struct{})
	cs, err := riffle.NewConsumer(newClient(t, c), riffle.ConsumerGroup("g"), riffle.SubscribeTopics("a"),
		riffle.OffsetReset(riffle.ResetEarliest),
		riffle.HandleRecord(tr.WrapHandler(func(ctx context.Context, r *riffle.Record) error {
			defer close(handledA)
			return tr.ProduceSync(ctx, p, &riffle.Record{Topic: "b", Key: []byte("k2"), Value: r.Value})
		})))
	if err != nil {
		t.Fatal(err)
	}
	handledB := make(chan struct{})
	pr, err := process.New(newClient(t, c), tr.WrapHandler(func(ctx context.Context, r *riffle.Record) error {
		close(handledB)
		return nil
	}), process.ConsumerOptions(riffle.ConsumerGroup("g2"), riffle.SubscribeTopics("b"), riffle.OffsetReset(riffle.ResetEarliest)))
	if err != nil {
		t.Fatal(err)
	}

	rootCtx, root := tp.Tracer("test").Start(ctx, "request")
	if err := tr.ProduceSync(rootCtx, p, &riffle.Record{Topic: "a", Key: []byte("k1"), Value: []byte("v")}); err != nil {
		t.Fatal(err)
	}
	root.End()
	<-handledA
	<-handledB
	if _, err := cs.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := pr.Close(ctx); err != nil {
		t.Fatal(err)
	}

	byName := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range sr.Ended() {
		if _, dup := byName[s.Name()]; dup {
			t.Fatalf("two spans named %q", s.Name())
		}
		byName[s.Name()] = s
	}
	chain := []struct {
		name string
		kind trace.SpanKind
	}{{"request", trace.SpanKindInternal}, {"send a", trace.SpanKindProducer}, {"process a", trace.SpanKindConsumer},
		{"send b", trace.SpanKindProducer}, {"process b", trace.SpanKindConsumer}}
	for i, want := range chain {
		s, ok := byName[want.name]
		if !ok {
			t.Fatalf("no span %q; have %v", want.name, names(sr.Ended()))
		}
		if s.SpanKind() != want.kind {
			t.Errorf("%s: kind %v, want %v", want.name, s.SpanKind(), want.kind)
		}
		if s.SpanContext().TraceID() != root.SpanContext().TraceID() {
			t.Errorf("%s: trace %v, want %v", want.name, s.SpanContext().TraceID(), root.SpanContext().TraceID())
		}
		if i == 0 {
			continue
		}
		parent := byName[chain[i-1].name]
		if s.Parent().SpanID() != parent.SpanContext().SpanID() {
			t.Errorf("%s: parent %v, want %s (%v)", want.name, s.Parent().SpanID(), parent.Name(), parent.SpanContext().SpanID())
		}
		if want.kind == trace.SpanKindConsumer {
			if l := s.Links(); len(l) != 1 || l[0].SpanContext.SpanID() != parent.SpanContext().SpanID() {
				t.Errorf("%s: links %+v, want one to %s", want.name, l, parent.Name())
			}
		}
	}
	send, proc := attrs(byName["send a"]), attrs(byName["process a"])
	for k, v := range map[attribute.Key]string{
		"messaging.system": "kafka", "messaging.destination.name": "a", "messaging.operation.type": "send",
		"messaging.operation.name": "send", "messaging.kafka.message.key": "k1", "messaging.client.id": "svc",
	} {
		if send[k].AsString() != v {
			t.Errorf("send a: %s = %q, want %q", k, send[k].AsString(), v)
		}
	}
	for k, v := range map[attribute.Key]string{
		"messaging.system": "kafka", "messaging.destination.name": "a", "messaging.operation.type": "process",
		"messaging.kafka.message.key": "k1", "messaging.consumer.group.name": "g",
		"messaging.destination.partition.id": send["messaging.destination.partition.id"].AsString(),
	} {
		if proc[k].AsString() != v {
			t.Errorf("process a: %s = %q, want %q", k, proc[k].AsString(), v)
		}
	}
	if _, ok := send["messaging.kafka.offset"]; !ok || send["messaging.destination.partition.id"].AsString() == "" {
		t.Errorf("send a lacks partition and offset: %v", send)
	}
	if proc["messaging.kafka.offset"] != send["messaging.kafka.offset"] {
		t.Errorf("offsets: send %v, process %v", send["messaging.kafka.offset"], proc["messaging.kafka.offset"])
	}
}

func names(spans []sdktrace.ReadOnlySpan) []string {
	var ns []string
	for _, s := range spans {
		ns = append(ns, s.Name())
	}
	return ns
}

// With LinkOnly the process span stays in the handler's trace and only
// links to the record's; a failing handler marks its span.
func TestLinkOnlyAndError(t *testing.T) {
	sr := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sr))
	defer tp.Shutdown(context.Background())
	prop := propagation.TraceContext{}
	tr := rotel.NewTracing(rotel.WithTracerProvider(tp), rotel.WithPropagator(prop), rotel.LinkOnly())
	rec := &riffle.Record{Topic: "t", Value: []byte("v"), Headers: []riffle.Header{{Key: "x", Value: []byte("y")}}}
	sendCtx, send := tr.StartSend(context.Background(), rec)
	if got := (rotel.RecordCarrier{Record: rec}).Get("traceparent"); got == "" || len(rec.Headers) != 2 {
		t.Fatalf("headers after inject: %+v", rec.Headers)
	}
	tr.StartSend(sendCtx, rec) // injecting again replaces the header
	if len(rec.Headers) != 2 {
		t.Fatalf("headers after a second inject: %+v", rec.Headers)
	}
	_, send2 := tr.StartSend(context.Background(), rec)
	tr.EndSend(send, rec, nil)
	tr.EndSend(send2, rec, nil)
	ambientCtx, ambient := tp.Tracer("test").Start(context.Background(), "poll")
	h := tr.WrapHandler(func(context.Context, *riffle.Record) error { return fmt.Errorf("boom: %w", riffle.ErrDeliveryTimeout) })
	if err := h(ambientCtx, rec); err == nil {
		t.Fatal("handler error lost")
	}
	ambient.End()
	var proc sdktrace.ReadOnlySpan
	for _, s := range sr.Ended() {
		if s.Name() == "process t" {
			proc = s
		}
	}
	if proc == nil {
		t.Fatal("no process span")
	}
	if proc.Parent().SpanID() != ambient.SpanContext().SpanID() {
		t.Errorf("parent %v, want the ambient span", proc.Parent().SpanID())
	}
	if l := proc.Links(); len(l) != 1 || l[0].SpanContext.SpanID() != send2.SpanContext().SpanID() {
		t.Errorf("links %+v, want the last send span", l)
	}
	if proc.Status().Code.String() != "Error" || attrs(proc)["error.type"].AsString() != "delivery_timeout" {
		t.Errorf("status %v, attrs %v", proc.Status(), attrs(proc))
	}
}

// The metrics count what was produced and consumed.
func TestMetrics(t *testing.T) {
	const n = 300
	c := rifftest.New(t, rifftest.Topic("m", 3))
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(context.Background())
	m, err := rotel.NewMetrics(rotel.WithMeterProvider(mp), rotel.ClientID("svc"))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	cl := newClient(t, c, riffle.WithHooks(m))
	ctx := context.Background()
	p, err := riffle.NewProducer(cl, riffle.WithCompression(riffle.CompressionLZ4))
	if err != nil {
		t.Fatal(err)
	}
	defer m.WatchProducer(p)()
	recs := make([]*riffle.Record, n)
	for i := range recs {
		recs[i] = &riffle.Record{Topic: "m", Key: fmt.Appendf(nil, "%d", i), Value: make([]byte, 64)}
	}
	if err := p.ProduceSync(ctx, recs...); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	count := 0
	cs, err := riffle.NewConsumer(cl, riffle.ConsumerGroup("g"), riffle.SubscribeTopics("m"), riffle.OffsetReset(riffle.ResetEarliest),
		riffle.Runners(1), riffle.HandleRecord(func(context.Context, *riffle.Record) error {
			if count++; count == n {
				close(done)
			}
			return nil
		}))
	if err != nil {
		t.Fatal(err)
	}
	<-done
	// Caught up: a lag of 0 for each partition, of the group.
	waitFor(t, 30*time.Second, func() bool {
		pts := gaugePoints(t, reader, "riffle.consumer.records.lag")
		if len(pts) != 3 {
			return false
		}
		for k, v := range pts {
			if v != 0 || !strings.Contains(k, "messaging.consumer.group.name=g") {
				return false
			}
		}
		return true
	}, func() string { return fmt.Sprint(gaugePoints(t, reader, "riffle.consumer.records.lag")) })
	if _, err := cs.Close(ctx); err != nil {
		t.Fatal(err)
	}
	got := collect(t, reader)
	if got["messaging.client.sent.messages"] != n || got["messaging.client.consumed.messages"] != n {
		t.Errorf("sent %d, consumed %d, want %d", got["messaging.client.sent.messages"], got["messaging.client.consumed.messages"], n)
	}
	for _, name := range []string{"riffle.producer.byte_total", "riffle.producer.batch.size", "riffle.producer.compression.rate",
		"riffle.producer.record.latency", "riffle.consumer.bytes_consumed_total", "riffle.consumer.fetch.size",
		"riffle.consumer.rebalance.total", "riffle.consumer.commit.total", "riffle.request.total", "riffle.producer.buffer.available"} {
		if got[name] <= 0 {
			t.Errorf("%s: %d", name, got[name])
		}
	}
	if got["riffle.consumer.records.lag"] != 0 {
		t.Errorf("records.lag after Close: %d partitions, want none", got["riffle.consumer.records.lag"])
	}
}

// gaugePoints returns the points of the int64 gauge name: attributes
// (key=value, comma-separated) → value.
func gaugePoints(t *testing.T, reader *sdkmetric.ManualReader, name string) map[string]int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, md := range sm.Metrics {
			if g, ok := md.Data.(metricdata.Gauge[int64]); ok && md.Name == name {
				for _, dp := range g.DataPoints {
					var kv []string
					for _, a := range dp.Attributes.ToSlice() {
						kv = append(kv, string(a.Key)+"="+a.Value.String())
					}
					out[strings.Join(kv, ",")] = dp.Value
				}
			}
		}
	}
	return out
}

// waitFor polls cond until it holds, failing the test with what describe
// says after the deadline (which only catches hangs).
func waitFor(t *testing.T, d time.Duration, cond func() bool, describe func() string) {
	t.Helper()
	end := time.Now().Add(d)
	for !cond() {
		if time.Now().After(end) {
			t.Fatalf("timed out waiting: %s", describe())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// The lag gauge has a point per partition with the group, dropped with
// the partition's PartitionRemoved; stopped partitions are counted per
// group and topic until resumed, and in riffle.errors by source.
func TestLagAndStoppedFromEvents(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(context.Background())
	m, err := rotel.NewMetrics(rotel.WithMeterProvider(mp))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	m.OnFetchBatch(riffle.FetchBatchEvent{Group: "g", Topic: "t", Partition: 0, HighWatermark: 10, Lag: 7})
	m.OnFetchBatch(riffle.FetchBatchEvent{Group: "g", Topic: "t", Partition: 1, HighWatermark: 10, Lag: 5})
	m.OnFetchBatch(riffle.FetchBatchEvent{Group: "g", Topic: "t", Partition: 1, HighWatermark: 12, Lag: 6})
	m.OnFetchBatch(riffle.FetchBatchEvent{Topic: "t", Partition: 0, HighWatermark: 10, Lag: 1})
	want := map[string]int64{
		"messaging.consumer.group.name=g,messaging.destination.name=t,messaging.destination.partition.id=0,messaging.system=kafka": 7,
		"messaging.consumer.group.name=g,messaging.destination.name=t,messaging.destination.partition.id=1,messaging.system=kafka": 6,
		"messaging.destination.name=t,messaging.destination.partition.id=0,messaging.system=kafka":                                 1,
	}
	if got := gaugePoints(t, reader, "riffle.consumer.records.lag"); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("records.lag %v, want %v", got, want)
	}
	m.OnPartition(riffle.PartitionEvent{Group: "g", Topic: "t", Partition: 1, Kind: riffle.PartitionStopped,
		Err: &riffle.PartitionError{Topic: "t", Partition: 1, Err: errors.New("boom")}, Handler: true})
	m.OnPartition(riffle.PartitionEvent{Group: "g", Topic: "t", Partition: 0, Kind: riffle.PartitionStopped,
		Err: &riffle.PartitionError{Topic: "t", Err: riffle.ErrCorruptBatch}})
	if got := gaugePoints(t, reader, "riffle.consumer.partitions.stopped"); len(got) != 1 ||
		got["messaging.consumer.group.name=g,messaging.destination.name=t,messaging.system=kafka"] != 2 {
		t.Errorf("partitions.stopped %v, want 2 for group g, topic t", got)
	}
	m.OnPartition(riffle.PartitionEvent{Group: "g", Topic: "t", Partition: 0, Kind: riffle.PartitionResumed})
	m.OnPartition(riffle.PartitionEvent{Group: "g", Topic: "t", Partition: 0, Kind: riffle.PartitionRemoved})
	m.OnPartition(riffle.PartitionEvent{Group: "g", Topic: "t", Partition: 1, Kind: riffle.PartitionRemoved})
	if got := gaugePoints(t, reader, "riffle.consumer.records.lag"); len(got) != 1 {
		t.Errorf("records.lag after the group's partitions were removed: %v, want the groupless one only", got)
	}
	if got := gaugePoints(t, reader, "riffle.consumer.partitions.stopped"); len(got) != 0 {
		t.Errorf("partitions.stopped after removal: %v", got)
	}
	m.OnProduceBatch(riffle.ProduceBatchEvent{Topic: "t", Partition: 1, Records: 3, Err: fmt.Errorf("t[1]: %w", riffle.ErrTopicAuthorization)})
	errs := map[string]int64{}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	for _, sm := range rm.ScopeMetrics {
		for _, md := range sm.Metrics {
			if s, ok := md.Data.(metricdata.Sum[int64]); ok && md.Name == "riffle.errors" {
				for _, dp := range s.DataPoints {
					src, _ := dp.Attributes.Value("riffle.error.source")
					class, _ := dp.Attributes.Value("error.type")
					errs[src.AsString()+"/"+class.AsString()] += dp.Value
				}
			}
		}
	}
	if errs["handler/other"] != 1 || errs["partition_stopped/corrupt_batch"] != 1 || errs["produce/authorization"] != 1 {
		t.Errorf("riffle.errors %v, want handler/other 1, partition_stopped/corrupt_batch 1 and produce/authorization 1", errs)
	}
}

// Against a cluster: a partition stopped by a handler error is counted,
// its lag grows with what is produced to it, and Close removes the
// consumer's points.
func TestLagStoppedPartition(t *testing.T) {
	const n, more, failAt = 20, 15, 4
	c := rifftest.New(t, rifftest.Topic("lag", 1))
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(context.Background())
	m, err := rotel.NewMetrics(rotel.WithMeterProvider(mp))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	cl := newClient(t, c, riffle.WithHooks(m))
	ctx := context.Background()
	p, err := riffle.NewProducer(cl)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(ctx)
	produce := func(k int) {
		t.Helper()
		for range k {
			if err := p.ProduceSync(ctx, &riffle.Record{Topic: "lag", Value: []byte("v")}); err != nil {
				t.Fatal(err)
			}
		}
	}
	produce(n)
	cs, err := riffle.NewConsumer(cl, riffle.ConsumerGroup("lg"), riffle.SubscribeTopics("lag"), riffle.OffsetReset(riffle.ResetEarliest),
		riffle.HandleRecord(func(_ context.Context, r *riffle.Record) error {
			if r.Offset == failAt {
				return errors.New("boom")
			}
			return nil
		}))
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close(ctx)
	const key = "messaging.consumer.group.name=lg,messaging.destination.name=lag,messaging.destination.partition.id=0,messaging.system=kafka"
	describe := func() string {
		return fmt.Sprint(gaugePoints(t, reader, "riffle.consumer.records.lag"), gaugePoints(t, reader, "riffle.consumer.partitions.stopped"))
	}
	waitFor(t, 30*time.Second, func() bool {
		return len(gaugePoints(t, reader, "riffle.consumer.partitions.stopped")) == 1 && gaugePoints(t, reader, "riffle.consumer.records.lag")[key] == n-failAt
	}, describe)
	produce(more)
	waitFor(t, 30*time.Second, func() bool { return gaugePoints(t, reader, "riffle.consumer.records.lag")[key] == n+more-failAt }, describe)
	if _, err := cs.Close(ctx); err == nil {
		t.Error("Close: no error for the stopped partition")
	}
	if got := describe(); got != "map[] map[]" {
		t.Errorf("after Close: %s, want no points", got)
	}
}

// collect reads reader's metrics: per instrument, the sum of its sums, the
// count of its histograms, the number of its gauge points.
func collect(t *testing.T, reader *sdkmetric.ManualReader) map[string]int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, md := range sm.Metrics {
			switch d := md.Data.(type) {
			case metricdata.Sum[int64]:
				for _, dp := range d.DataPoints {
					got[md.Name] += dp.Value
				}
			case metricdata.Gauge[int64]:
				for range d.DataPoints {
					got[md.Name]++
				}
			case metricdata.Histogram[float64]:
				for _, dp := range d.DataPoints {
					got[md.Name] += int64(dp.Count)
				}
			case metricdata.Histogram[int64]:
				for _, dp := range d.DataPoints {
					got[md.Name] += int64(dp.Count)
				}
			}
		}
	}
	return got
}

// Offsets committed by a transaction count in
// riffle.consumer.transactional_commit.total when the transaction commits,
// never in the OffsetCommit instruments; an aborted transaction counts
// nowhere.
func TestTransactionalCommitMetrics(t *testing.T) {
	c := rifftest.New(t, rifftest.Topic("in", 2), rifftest.Topic("out", 1))
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(context.Background())
	m, err := rotel.NewMetrics(rotel.WithMeterProvider(mp))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	cl := newClient(t, c, riffle.WithHooks(m))
	ctx := context.Background()
	p, err := riffle.NewProducer(cl, riffle.TransactionalID("otel-txn"))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(ctx)
	if err := p.InitTransactions(ctx); err != nil {
		t.Fatal(err)
	}
	for _, commit := range []bool{false, true} {
		if err := p.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		if err := p.ProduceSync(ctx, &riffle.Record{Topic: "out", Value: []byte("v")}); err != nil {
			t.Fatal(err)
		}
		offs := map[riffle.TopicPartition]riffle.OffsetAndMetadata{{Topic: "in", Partition: 0}: {Offset: 3, LeaderEpoch: -1}}
		if err := p.SendOffsetsToTransaction(ctx, offs, riffle.GroupMetadata{GroupID: "g", GenerationID: -1}); err != nil {
			t.Fatal(err)
		}
		end := p.AbortTransaction
		if commit {
			end = p.CommitTransaction
		}
		if err := end(ctx); err != nil {
			t.Fatal(err)
		}
		got := collect(t, reader)
		want := int64(0)
		if commit {
			want = 1
		}
		if got["riffle.consumer.transactional_commit.total"] != want || got["riffle.consumer.commit.total"] != 0 || got["riffle.consumer.commit.latency"] != 0 {
			t.Errorf("commit %v: transactional_commit.total %d (want %d), commit.total %d, commit.latency count %d", commit,
				got["riffle.consumer.transactional_commit.total"], want, got["riffle.consumer.commit.total"], got["riffle.consumer.commit.latency"])
		}
	}
}

// BenchmarkOnProduceBatch is the cost of the metrics hook itself, per
// batch.
func BenchmarkOnProduceBatch(b *testing.B) {
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	defer mp.Shutdown(context.Background())
	m, err := rotel.NewMetrics(rotel.WithMeterProvider(mp))
	if err != nil {
		b.Fatal(err)
	}
	e := riffle.ProduceBatchEvent{Topic: "events", Partition: 3, Records: 100, UncompressedBytes: 10000, CompressedBytes: 4000}
	b.ReportAllocs()
	for b.Loop() {
		m.OnProduceBatch(e)
	}
}
