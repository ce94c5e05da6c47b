package prometheus_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	prom "github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/riffle-go/riffle"
	rprom "github.com/riffle-go/riffle/plugin/prometheus"
	"github.com/riffle-go/riffle/rifftest"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreAnyFunction("github.com/twmb/franz-go/pkg/kfake.(*Cluster).run"),
	)
}

// sum returns the sum of the samples (counter values, histogram counts or
// gauge values) of the family name whose labels include want.
func sum(t *testing.T, reg *prom.Registry, name string, want map[string]string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var total float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	metric:
		for _, m := range mf.GetMetric() {
			have := map[string]string{}
			for _, lp := range m.GetLabel() {
				have[lp.GetName()] = lp.GetValue()
			}
			for k, v := range want {
				if have[k] != v {
					continue metric
				}
			}
			total += value(m)
		}
	}
	return total
}

func value(m *dto.Metric) float64 {
	switch {
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	case m.Histogram != nil:
		return float64(m.Histogram.GetSampleCount())
	}
	return 0
}

// The counters equal what was produced and consumed, per topic and (with
// PartitionLabels) per partition.
func TestProduceConsumeCounters(t *testing.T) {
	for _, perPartition := range []bool{false, true} {
		t.Run(fmt.Sprintf("partitions=%v", perPartition), func(t *testing.T) {
			testCounters(t, perPartition)
		})
	}
}

func testCounters(t *testing.T, perPartition bool) {
	const n = 500
	c := rifftest.New(t, rifftest.Topic("events", 3), rifftest.Topic("other", 1))
	opts := []rprom.Option{rprom.ClientID("test")}
	if perPartition {
		opts = append(opts, rprom.PartitionLabels())
	}
	m := rprom.New(opts...)
	reg := prom.NewRegistry()
	reg.MustRegister(m)
	if probs, err := testutil.CollectAndLint(m); err != nil || len(probs) > 0 {
		t.Fatalf("lint: %v %+v", err, probs)
	}
	cl, err := riffle.NewClient(riffle.SeedBrokers(c.Addrs()...), riffle.ClientID("test"), riffle.WithHooks(m))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx := context.Background()
	p, err := riffle.NewProducer(cl, riffle.WithCompression(riffle.CompressionZstd))
	if err != nil {
		t.Fatal(err)
	}
	unwatch := m.WatchProducer(p)
	defer unwatch()
	recs := make([]*riffle.Record, n)
	for i := range recs {
		recs[i] = &riffle.Record{Topic: "events", Key: fmt.Appendf(nil, "k%d", i), Value: []byte(strings.Repeat("v", 100))}
	}
	if err := p.ProduceSync(ctx, recs...); err != nil {
		t.Fatal(err)
	}
	if err := p.ProduceSync(ctx, &riffle.Record{Topic: "other", Value: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	perPart := map[int32]float64{}
	for _, r := range recs {
		perPart[r.Partition]++
	}
	events := map[string]string{"topic": "events", "client_id": "test"}
	if got := sum(t, reg, "riffle_producer_record_send_total", events); got != n {
		t.Errorf("record_send_total{topic=events} = %v, want %d", got, n)
	}
	if got := sum(t, reg, "riffle_producer_record_send_total", map[string]string{"topic": "other"}); got != 1 {
		t.Errorf("record_send_total{topic=other} = %v, want 1", got)
	}
	if perPartition {
		for part, want := range perPart {
			l := map[string]string{"topic": "events", "partition": fmt.Sprint(part)}
			if got := sum(t, reg, "riffle_producer_record_send_total", l); got != want {
				t.Errorf("record_send_total%v = %v, want %v", l, got, want)
			}
		}
	}
	if got := sum(t, reg, "riffle_producer_record_error_total", nil); got != 0 {
		t.Errorf("record_error_total = %v", got)
	}
	if got := sum(t, reg, "riffle_producer_byte_total", events); got <= 0 {
		t.Errorf("byte_total = %v", got)
	}
	batches := sum(t, reg, "riffle_producer_batch_size_bytes", events)
	if batches < 1 || sum(t, reg, "riffle_producer_compression_rate", events) != batches ||
		sum(t, reg, "riffle_producer_record_latency_seconds", events) != batches {
		t.Errorf("histograms: %v batches, %v compression samples", batches, sum(t, reg, "riffle_producer_compression_rate", events))
	}
	if got := sum(t, reg, "riffle_producer_buffer_available_bytes", nil); got != sum(t, reg, "riffle_producer_buffer_total_bytes", nil) || got <= 0 {
		t.Errorf("buffer_available_bytes = %v after every record's outcome", got)
	}
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}

	var handled atomic.Int64
	done := make(chan struct{})
	cs, err := riffle.NewConsumer(cl, riffle.ConsumerGroup("g"), riffle.SubscribeTopics("events"),
		riffle.OffsetReset(riffle.ResetEarliest),
		riffle.HandleRecord(func(context.Context, *riffle.Record) error {
			if handled.Add(1) == n {
				close(done)
			}
			return nil
		}))
	if err != nil {
		t.Fatal(err)
	}
	<-done
	if _, err := cs.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if got := sum(t, reg, "riffle_consumer_records_consumed_total", events); got != n {
		t.Errorf("records_consumed_total = %v, want %d", got, n)
	}
	if perPartition {
		for part, want := range perPart {
			l := map[string]string{"topic": "events", "partition": fmt.Sprint(part)}
			if got := sum(t, reg, "riffle_consumer_records_consumed_total", l); got != want {
				t.Errorf("records_consumed_total%v = %v, want %v", l, got, want)
			}
		}
	}
	if got := sum(t, reg, "riffle_consumer_bytes_consumed_total", events); got <= 0 {
		t.Errorf("bytes_consumed_total = %v", got)
	}
	if got := sum(t, reg, "riffle_consumer_rebalance_total", map[string]string{"group": "g"}); got < 1 {
		t.Errorf("rebalance_total = %v", got)
	}
	if got := sum(t, reg, "riffle_consumer_commit_total", map[string]string{"group": "g"}); got < 1 {
		t.Errorf("commit_total = %v", got)
	}
	if got := sum(t, reg, "riffle_consumer_fetch_size_bytes", nil); got < 1 {
		t.Errorf("fetch_size_bytes count = %v", got)
	}
	if got := sum(t, reg, "riffle_request_total", map[string]string{"api": "Produce"}); got < 1 {
		t.Errorf("request_total{api=Produce} = %v", got)
	}
	if got := sum(t, reg, "riffle_connection_creation_total", nil); got < 1 {
		t.Errorf("connection_creation_total = %v", got)
	}
	// Lag: the high watermark minus the position at the last fetch of
	// each partition, at most what was produced.
	if got := sum(t, reg, "riffle_consumer_records_lag", events); got < 0 || got > n {
		t.Errorf("records_lag = %v", got)
	}
	if probs, err := testutil.CollectAndLint(m); err != nil || len(probs) > 0 {
		t.Fatalf("lint: %v %+v", err, probs)
	}
}

// A failed batch counts its records as errors, by class.
func TestErrorsByClass(t *testing.T) {
	m := rprom.New()
	reg := prom.NewRegistry()
	reg.MustRegister(m)
	m.OnProduceBatch(riffle.ProduceBatchEvent{Topic: "t", Records: 7, Err: fmt.Errorf("t[0]: %w", riffle.ErrNotLeaderForPartition)})
	m.OnProduceBatch(riffle.ProduceBatchEvent{Topic: "t", Records: 2, Err: riffle.ErrProducerClosed})
	// A record failed before it joined a batch: an error, no latency.
	m.OnProduceBatch(riffle.ProduceBatchEvent{Topic: "t", Partition: -1, Records: 1, Err: riffle.ErrRecordTooLarge, Unbatched: true})
	if got := sum(t, reg, "riffle_producer_record_error_total", map[string]string{"topic": "t"}); got != 10 {
		t.Errorf("record_error_total = %v, want 10", got)
	}
	if got := sum(t, reg, "riffle_producer_record_latency_seconds", map[string]string{"topic": "t"}); got != 2 {
		t.Errorf("record_latency_seconds has %v samples, want 2 (none for the unbatched record)", got)
	}
	if got := sum(t, reg, "riffle_errors_total", map[string]string{"source": "produce", "class": "NOT_LEADER_FOR_PARTITION"}); got != 1 {
		t.Errorf("errors_total{NOT_LEADER_FOR_PARTITION} = %v, want 1", got)
	}
	if got := sum(t, reg, "riffle_errors_total", map[string]string{"source": "produce", "class": "closed"}); got != 1 {
		t.Errorf("errors_total{closed} = %v, want 1", got)
	}
}

// Offsets committed by a transaction count in transactional_commit_total
// when the transaction commits, never in the OffsetCommit metrics; an
// aborted transaction counts nowhere.
func TestTransactionalCommits(t *testing.T) {
	c := rifftest.New(t, rifftest.Topic("in", 2), rifftest.Topic("out", 1))
	m := rprom.New()
	reg := prom.NewRegistry()
	reg.MustRegister(m)
	cl, err := riffle.NewClient(riffle.SeedBrokers(c.Addrs()...), riffle.WithHooks(m))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx := context.Background()
	p, err := riffle.NewProducer(cl, riffle.TransactionalID("prom-txn"))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(ctx)
	if err := p.InitTransactions(ctx); err != nil {
		t.Fatal(err)
	}
	group := riffle.GroupMetadata{GroupID: "g", GenerationID: -1}
	for _, commit := range []bool{false, true} {
		if err := p.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		if err := p.ProduceSync(ctx, &riffle.Record{Topic: "out", Value: []byte("v")}); err != nil {
			t.Fatal(err)
		}
		offs := map[riffle.TopicPartition]riffle.OffsetAndMetadata{{Topic: "in", Partition: 0}: {Offset: 3, LeaderEpoch: -1}, {Topic: "in", Partition: 1}: {Offset: 4, LeaderEpoch: -1}}
		if err := p.SendOffsetsToTransaction(ctx, offs, group); err != nil {
			t.Fatal(err)
		}
		end := p.AbortTransaction
		if commit {
			end = p.CommitTransaction
		}
		if err := end(ctx); err != nil {
			t.Fatal(err)
		}
		want := 0.0
		if commit {
			want = 1
		}
		if got := sum(t, reg, "riffle_consumer_transactional_commit_total", map[string]string{"group": "g"}); got != want {
			t.Errorf("commit %v: transactional_commit_total = %v, want %v", commit, got, want)
		}
	}
	if got := sum(t, reg, "riffle_consumer_commit_total", nil) + sum(t, reg, "riffle_consumer_commit_latency_seconds", nil); got != 0 {
		t.Errorf("transactions counted as OffsetCommits: commit_total + commit_latency_seconds count = %v", got)
	}
}

// BenchmarkOnProduceBatch is the cost of the hook itself, per batch.
func BenchmarkOnProduceBatch(b *testing.B) {
	for _, bc := range []struct {
		name string
		opts []rprom.Option
	}{{"topic", nil}, {"partition", []rprom.Option{rprom.PartitionLabels()}}} {
		b.Run(bc.name, func(b *testing.B) {
			m := rprom.New(bc.opts...)
			e := riffle.ProduceBatchEvent{Topic: "events", Partition: 3, Records: 100, UncompressedBytes: 10000, CompressedBytes: 4000}
			b.ReportAllocs()
			for b.Loop() {
				m.OnProduceBatch(e)
			}
		})
	}
}
