package prometheus_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

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
	m.OnProduceBatch(riffle.ProduceBatchEvent{Topic: "t", Records: 3, Err: fmt.Errorf("t[1]: %w", riffle.ErrTopicAuthorization)})
	// A record failed before it joined a batch: an error, no latency.
	m.OnProduceBatch(riffle.ProduceBatchEvent{Topic: "t", Partition: -1, Records: 1, Err: riffle.ErrRecordTooLarge, Unbatched: true})
	if got := sum(t, reg, "riffle_producer_record_error_total", map[string]string{"topic": "t"}); got != 13 {
		t.Errorf("record_error_total = %v, want 13", got)
	}
	if got := sum(t, reg, "riffle_producer_record_latency_seconds", map[string]string{"topic": "t"}); got != 3 {
		t.Errorf("record_latency_seconds has %v samples, want 3 (none for the unbatched record)", got)
	}
	if got := sum(t, reg, "riffle_errors_total", map[string]string{"source": "produce", "class": "NOT_LEADER_FOR_PARTITION"}); got != 1 {
		t.Errorf("errors_total{NOT_LEADER_FOR_PARTITION} = %v, want 1", got)
	}
	if got := sum(t, reg, "riffle_errors_total", map[string]string{"source": "produce", "class": "closed"}); got != 1 {
		t.Errorf("errors_total{closed} = %v, want 1", got)
	}
	// Every *_AUTHORIZATION_FAILED code is one class, not its code name.
	if got := sum(t, reg, "riffle_errors_total", map[string]string{"source": "produce", "class": "authorization"}); got != 1 {
		t.Errorf("errors_total{authorization} = %v, want 1", got)
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

// series returns the samples of the family name: label values (name=value,
// sorted as gathered) → value.
func series(t *testing.T, reg *prom.Registry, name string) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			var ls []string
			for _, lp := range m.GetLabel() {
				ls = append(ls, lp.GetName()+"="+lp.GetValue())
			}
			out[strings.Join(ls, ",")] = value(m)
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

// The lag gauge carries the group, and a partition's series goes with its
// PartitionRemoved; a stopped partition counts in partitions_stopped until
// resumed, and in errors_total by source.
func TestLagAndStoppedFromEvents(t *testing.T) {
	for _, perPartition := range []bool{false, true} {
		t.Run(fmt.Sprintf("partitions=%v", perPartition), func(t *testing.T) {
			var opts []rprom.Option
			if perPartition {
				opts = append(opts, rprom.PartitionLabels())
			}
			m := rprom.New(opts...)
			reg := prom.NewRegistry()
			reg.MustRegister(m)
			m.OnPartition(riffle.PartitionEvent{Group: "g", Topic: "t", Partition: 0, Kind: riffle.PartitionAssigned})
			m.OnFetchBatch(riffle.FetchBatchEvent{Group: "g", Topic: "t", Partition: 0, HighWatermark: 10, Lag: 7})
			m.OnFetchBatch(riffle.FetchBatchEvent{Group: "g", Topic: "t", Partition: 1, HighWatermark: 10, Lag: 5})
			m.OnFetchBatch(riffle.FetchBatchEvent{Topic: "t", Partition: 0, HighWatermark: 10, Lag: 1}) // no group
			if got := sum(t, reg, "riffle_consumer_records_lag", map[string]string{"group": "g", "topic": "t"}); got != 12 {
				t.Errorf("records_lag{group=g} = %v, want 12: %v", got, series(t, reg, "riffle_consumer_records_lag"))
			}
			if got := sum(t, reg, "riffle_consumer_records_lag", map[string]string{"group": "", "topic": "t"}); got != 1 {
				t.Errorf("records_lag{group=\"\"} = %v, want 1", got)
			}
			pe := &riffle.PartitionError{Topic: "t", Partition: 1, Offset: 3, Err: errors.New("boom")}
			m.OnPartition(riffle.PartitionEvent{Group: "g", Topic: "t", Partition: 1, Kind: riffle.PartitionStopped, Err: pe, Handler: true})
			m.OnPartition(riffle.PartitionEvent{Group: "g", Topic: "t", Partition: 0, Kind: riffle.PartitionStopped,
				Err: &riffle.PartitionError{Topic: "t", Err: riffle.ErrCorruptBatch}})
			if got := sum(t, reg, "riffle_consumer_partitions_stopped", map[string]string{"group": "g", "topic": "t"}); got != 2 {
				t.Errorf("partitions_stopped = %v, want 2", got)
			}
			if got := sum(t, reg, "riffle_errors_total", map[string]string{"source": "handler", "class": "other"}); got != 1 {
				t.Errorf("errors_total{source=handler} = %v, want 1", got)
			}
			if got := sum(t, reg, "riffle_errors_total", map[string]string{"source": "partition_stopped", "class": "corrupt_batch"}); got != 1 {
				t.Errorf("errors_total{source=partition_stopped} = %v, want 1", got)
			}
			m.OnPartition(riffle.PartitionEvent{Group: "g", Topic: "t", Partition: 0, Kind: riffle.PartitionResumed})
			if got := sum(t, reg, "riffle_consumer_partitions_stopped", nil); got != 1 {
				t.Errorf("partitions_stopped after a resume = %v, want 1", got)
			}
			m.OnPartition(riffle.PartitionEvent{Group: "g", Topic: "t", Partition: 0, Kind: riffle.PartitionRemoved})
			m.OnPartition(riffle.PartitionEvent{Group: "g", Topic: "t", Partition: 1, Kind: riffle.PartitionRemoved})
			if got := series(t, reg, "riffle_consumer_records_lag"); len(got) != 1 || sum(t, reg, "riffle_consumer_records_lag", nil) != 1 {
				t.Errorf("records_lag after the group's partitions were removed: %v, want only the groupless one", got)
			}
			if got := series(t, reg, "riffle_consumer_partitions_stopped"); len(got) != 0 {
				t.Errorf("partitions_stopped after removal: %v", got)
			}
			if probs, err := testutil.CollectAndLint(m); err != nil || len(probs) > 0 {
				t.Fatalf("lint: %v %+v", err, probs)
			}
		})
	}
}

// Against a cluster: the lag of a group consumer that caught up is 0; a
// partition stopped by a handler error is counted, and its lag grows with
// what is produced to it; Close removes the consumer's series. (The lag
// stayed at the first backlog a fetch found, and after Close.)
func TestLagFollowsConsumer(t *testing.T) {
	const n, more = 40, 25
	c := rifftest.New(t, rifftest.Topic("lag", 3))
	m := rprom.New(rprom.PartitionLabels())
	reg := prom.NewRegistry()
	reg.MustRegister(m)
	cl, err := riffle.NewClient(riffle.SeedBrokers(c.Addrs()...), riffle.WithHooks(m))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx := context.Background()
	p, err := riffle.NewProducer(cl, riffle.WithPartitioner(riffle.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(ctx)
	produce := func(part int32, k int) {
		t.Helper()
		for range k {
			if err := p.ProduceSync(ctx, &riffle.Record{Topic: "lag", Partition: part, Value: []byte("v")}); err != nil {
				t.Fatal(err)
			}
		}
	}
	for part := range int32(3) {
		produce(part, n)
	}
	var failing atomic.Bool
	failing.Store(true)
	const failAt = 5 // of partition 2
	cs, err := riffle.NewConsumer(cl, riffle.ConsumerGroup("lg"), riffle.SubscribeTopics("lag"), riffle.OffsetReset(riffle.ResetEarliest),
		riffle.HandleRecord(func(_ context.Context, r *riffle.Record) error {
			if r.Partition == 2 && r.Offset == failAt && failing.Load() {
				return errors.New("boom")
			}
			return nil
		}))
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close(ctx)
	lagOf := func(part int32) float64 {
		return sum(t, reg, "riffle_consumer_records_lag", map[string]string{"group": "lg", "topic": "lag", "partition": fmt.Sprint(part)})
	}
	describe := func() string {
		return fmt.Sprintf("lag %v stopped %v errors %v", series(t, reg, "riffle_consumer_records_lag"),
			series(t, reg, "riffle_consumer_partitions_stopped"), series(t, reg, "riffle_errors_total"))
	}
	waitFor(t, 30*time.Second, func() bool {
		return len(series(t, reg, "riffle_consumer_records_lag")) == 3 && lagOf(0) == 0 && lagOf(1) == 0 &&
			sum(t, reg, "riffle_consumer_partitions_stopped", map[string]string{"group": "lg", "partition": "2"}) == 1
	}, describe)
	if got := sum(t, reg, "riffle_errors_total", map[string]string{"source": "handler"}); got != 1 {
		t.Errorf("errors_total{source=handler} = %v, want 1", got)
	}
	produce(2, more)
	waitFor(t, 30*time.Second, func() bool { return lagOf(2) == n+more-failAt }, describe)
	if _, err := cs.Close(ctx); err == nil {
		t.Error("Close: no error for the stopped partition")
	}
	if got := series(t, reg, "riffle_consumer_records_lag"); len(got) != 0 {
		t.Errorf("records_lag after Close: %v", got)
	}
	if got := series(t, reg, "riffle_consumer_partitions_stopped"); len(got) != 0 {
		t.Errorf("partitions_stopped after Close: %v", got)
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
