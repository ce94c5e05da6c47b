package otel_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
	"github.com/riffle-go/riffle"
	rotel "github.com/riffle-go/riffle/plugin/otel"
	"github.com/riffle-go/riffle/rifftest"
	"github.com/twmb/franz-go/pkg/kmsg"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	metricspb "go.opentelemetry.io/proto/otlp/metrics/v1"
	"google.golang.org/protobuf/proto"
)

func newTelemetryMetrics(t *testing.T) (*rotel.Telemetry, *rotel.Metrics) {
	t.Helper()
	tel := rotel.NewTelemetry()
	mp := sdkmetric.NewMeterProvider(tel.MeterProviderOptions()...)
	t.Cleanup(func() { mp.Shutdown(context.Background()) })
	m, err := rotel.NewMetrics(rotel.WithMeterProvider(mp), rotel.ClientID("svc"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return tel, m
}

func decode(t *testing.T, b []byte) map[string]*metricspb.Metric {
	t.Helper()
	var md metricspb.MetricsData
	if err := proto.Unmarshal(b, &md); err != nil {
		t.Fatal(err)
	}
	out := map[string]*metricspb.Metric{}
	for _, rm := range md.ResourceMetrics {
		for _, sm := range rm.ScopeMetrics {
			if sm.Scope.GetName() != rotel.ScopeName {
				t.Errorf("scope %q pushed", sm.Scope.GetName())
			}
			for _, m := range sm.Metrics {
				if out[m.Name] != nil {
					t.Errorf("metric %s twice", m.Name)
				}
				out[m.Name] = m
			}
		}
	}
	return out
}

// sumOf adds the int points of a Sum, checking each point's attributes.
func sumOf(t *testing.T, m *metricspb.Metric, want map[string]string) int64 {
	t.Helper()
	if m == nil {
		return 0
	}
	var n int64
	for _, p := range m.GetSum().GetDataPoints() {
		got := map[string]string{}
		for _, kv := range p.Attributes {
			got[kv.Key] = kv.Value.GetStringValue()
		}
		for k, v := range want {
			if got[k] != v {
				t.Errorf("%s: attribute %s = %q, want %q (all: %v)", m.Name, k, got[k], v, got)
			}
		}
		n += p.GetAsInt()
	}
	return n
}

// Encoding: Java names, renamed attributes, the requested prefixes only,
// the subscription's temporality.
func TestTelemetryEncoding(t *testing.T) {
	tel, m := newTelemetryMetrics(t)
	ctx := context.Background()
	m.OnProduceBatch(riffle.ProduceBatchEvent{Topic: "t", Records: 3, UncompressedBytes: 100, CompressedBytes: 50})
	m.OnProduceBatch(riffle.ProduceBatchEvent{Topic: "t", Records: 2, Err: riffle.ErrDeliveryTimeout})
	m.OnFetchBatch(riffle.FetchBatchEvent{Topic: "t", Records: 4, Bytes: 40, Lag: 1})

	producer := riffle.TelemetrySubscription{RequestedMetrics: []string{"org.apache.kafka.producer."}, DeltaTemporality: true}
	b, err := tel.CollectTelemetry(ctx, producer)
	if err != nil {
		t.Fatal(err)
	}
	got := decode(t, b)
	send := got["org.apache.kafka.producer.topic.record.send.total"]
	if n := sumOf(t, send, map[string]string{"topic": "t", "client_id": "svc"}); n != 3 {
		t.Errorf("record.send.total = %d, want 3", n)
	}
	if send.GetSum().GetAggregationTemporality() != metricspb.AggregationTemporality_AGGREGATION_TEMPORALITY_DELTA || !send.GetSum().GetIsMonotonic() {
		t.Errorf("record.send.total: %v", send.GetSum())
	}
	if n := sumOf(t, got["org.apache.kafka.producer.topic.record.error.total"], map[string]string{"topic": "t", "error_type": "_OTHER"}); n != 2 {
		t.Errorf("record.error.total = %d, want 2", n)
	}
	if h := got["org.apache.kafka.producer.batch.size"].GetHistogram(); len(h.GetDataPoints()) != 1 || h.DataPoints[0].GetSum() != 50 {
		t.Errorf("batch.size: %v", h)
	}
	for name := range got {
		if name[:len("org.apache.kafka.producer.")] != "org.apache.kafka.producer." {
			t.Errorf("%s pushed for a producer-only subscription", name)
		}
	}

	// The next delta holds only what came since.
	m.OnProduceBatch(riffle.ProduceBatchEvent{Topic: "t", Records: 1, UncompressedBytes: 10, CompressedBytes: 10})
	b, err = tel.CollectTelemetry(ctx, producer)
	if err != nil {
		t.Fatal(err)
	}
	if n := sumOf(t, decode(t, b)["org.apache.kafka.producer.topic.record.send.total"], nil); n != 1 {
		t.Errorf("second delta record.send.total = %d, want 1", n)
	}

	// Everything, cumulative.
	b, err = tel.CollectTelemetry(ctx, riffle.TelemetrySubscription{RequestedMetrics: []string{""}})
	if err != nil {
		t.Fatal(err)
	}
	got = decode(t, b)
	send = got["org.apache.kafka.producer.topic.record.send.total"]
	if n := sumOf(t, send, nil); n != 4 || send.GetSum().GetAggregationTemporality() != metricspb.AggregationTemporality_AGGREGATION_TEMPORALITY_CUMULATIVE {
		t.Errorf("cumulative record.send.total = %d, %v", n, send.GetSum().GetAggregationTemporality())
	}
	if n := sumOf(t, got["org.apache.kafka.consumer.fetch.manager.records.consumed.total"], map[string]string{"topic": "t"}); n != 4 {
		t.Errorf("records.consumed.total = %d, want 4", n)
	}
	if got["org.apache.kafka.consumer.fetch.manager.records.lag"].GetGauge() == nil || got["riffle.producer.record.latency"] == nil {
		t.Errorf("records.lag or riffle.producer.record.latency missing: %v", got)
	}

	// Nothing requested: an empty MetricsData.
	b, err = tel.CollectTelemetry(ctx, riffle.TelemetrySubscription{})
	if err != nil || len(decode(t, b)) != 0 {
		t.Errorf("empty subscription: %d metrics, %v", len(decode(t, b)), err)
	}
}

// End to end through a kfake broker: after producing, the pushes (zstd)
// carry the records sent; Close sends the terminating push last.
func TestTelemetryPushThroughBroker(t *testing.T) {
	c := rifftest.New(t, rifftest.Topic("t", 1))
	kf := c.Kfake()
	instance := [16]byte{1, 2, 3}
	var (
		mu     sync.Mutex
		pushes []*kmsg.PushTelemetryRequest
		signal = make(chan struct{}, 1)
	)
	kf.ControlKey(int16(kmsg.GetTelemetrySubscriptions), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		kf.KeepControl()
		resp := kreq.ResponseKind().(*kmsg.GetTelemetrySubscriptionsResponse)
		resp.ClientInstanceID, resp.SubscriptionID = instance, 1
		resp.AcceptedCompressionTypes = []int8{4}
		resp.PushIntervalMillis = 10 // short, for the test
		resp.DeltaTemporality = true
		resp.RequestedMetrics = []string{"org.apache.kafka.producer."}
		return resp, nil, true
	})
	kf.ControlKey(int16(kmsg.PushTelemetry), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		kf.KeepControl()
		req := kreq.(*kmsg.PushTelemetryRequest)
		resp := req.ResponseKind().(*kmsg.PushTelemetryResponse)
		if req.ClientInstanceID != instance || req.SubscriptionID != 1 {
			resp.ErrorCode = 117 // UNKNOWN_SUBSCRIPTION_ID
		}
		mu.Lock()
		pushes = append(pushes, req)
		mu.Unlock()
		select {
		case signal <- struct{}{}:
		default:
		}
		return resp, nil, true
	})

	tel, m := newTelemetryMetrics(t)
	cl, err := riffle.NewClient(riffle.SeedBrokers(c.Addrs()...), riffle.WithHooks(m), riffle.TelemetryPush(tel))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	p, err := riffle.NewProducer(cl)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for range 3 {
		if err := p.ProduceSync(ctx, &riffle.Record{Topic: "t", Value: []byte("v")}); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}

	dec, err := zstd.NewReader(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer dec.Close()
	payload := func(r *kmsg.PushTelemetryRequest) map[string]*metricspb.Metric {
		if len(r.Metrics) == 0 {
			return nil // nothing happened since the last push
		}
		if r.CompressionType != 4 {
			t.Fatalf("compression %d, want zstd", r.CompressionType)
		}
		raw, err := dec.DecodeAll(r.Metrics, nil)
		if err != nil {
			t.Fatal(err)
		}
		return decode(t, raw)
	}
	// Deltas add up to the 3 records; the deadline only keeps a broken
	// client from hanging the run.
	deadline := time.NewTimer(30 * time.Second)
	defer deadline.Stop()
	var sent int64
	for seen := 0; sent < 3; {
		mu.Lock()
		batch := pushes[seen:]
		seen = len(pushes)
		mu.Unlock()
		for _, r := range batch {
			sent += sumOf(t, payload(r)["org.apache.kafka.producer.topic.record.send.total"], map[string]string{"topic": "t"})
		}
		if sent >= 3 {
			break
		}
		select {
		case <-signal:
		case <-deadline.C:
			t.Fatalf("pushes carried %d records sent, want 3", sent)
		}
	}
	if sent != 3 {
		t.Errorf("pushes carried %d records sent, want 3", sent)
	}

	cl.Close()
	mu.Lock()
	defer mu.Unlock()
	var terminating int
	for _, r := range pushes {
		if r.Terminating {
			terminating++
		}
	}
	last := pushes[len(pushes)-1]
	if terminating != 1 || !last.Terminating {
		t.Fatalf("%d terminating pushes, last terminating: %v", terminating, last.Terminating)
	}
	payload(last) // decodes
}
