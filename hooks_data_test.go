package riffle

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// recHooks records every data-path event.
type recHooks struct {
	mu         sync.Mutex
	produced   []ProduceBatchEvent
	fetched    []FetchBatchEvent
	rebalances []RebalanceEvent
	commits    []CommitEvent
}

func (h *recHooks) OnProduceBatch(e ProduceBatchEvent) {
	h.mu.Lock()
	h.produced = append(h.produced, e)
	h.mu.Unlock()
}

func (h *recHooks) OnFetchBatch(e FetchBatchEvent) {
	h.mu.Lock()
	h.fetched = append(h.fetched, e)
	h.mu.Unlock()
}

func (h *recHooks) OnRebalance(e RebalanceEvent) {
	h.mu.Lock()
	h.rebalances = append(h.rebalances, e)
	h.mu.Unlock()
}

func (h *recHooks) OnCommit(e CommitEvent) {
	h.mu.Lock()
	h.commits = append(h.commits, e)
	h.mu.Unlock()
}

// The data-path hooks see every produced and consumed record once, per
// batch, with sizes, watermarks, the rebalance and the commits.
func TestDataHooks(t *testing.T) {
	const parts, n = 3, 600
	c := newFake(t, kfake.SeedTopics(parts, "m"))
	h := &recHooks{}
	cl := newTestClient(t, SeedBrokers(c.ListenAddrs()...), WithHooks(h))
	ctx := context.Background()
	p, err := NewProducer(cl, WithCompression(CompressionLZ4))
	if err != nil {
		t.Fatal(err)
	}
	recs := make([]*Record, n)
	perPart := map[int32]int64{}
	for i := range recs {
		// Compressible values, so the compression ratio shows.
		recs[i] = &Record{Topic: "m", Key: fmt.Appendf(nil, "k%d", i), Value: make([]byte, 200)}
	}
	if err := p.ProduceSync(ctx, recs...); err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		perPart[r.Partition]++
	}
	if st := p.Stats(); st.BufferedBytes != 0 || st.BufferedRecords != 0 || st.MaxBufferedBytes <= 0 {
		t.Errorf("stats after ProduceSync: %+v", st)
	}
	h.mu.Lock()
	var got int
	for _, e := range h.produced {
		got += e.Records
		if e.Err != nil || e.Topic != "m" || e.Records <= 0 || e.UncompressedBytes <= 0 ||
			e.CompressedBytes <= 0 || e.CompressedBytes >= e.UncompressedBytes || e.Latency < 0 {
			t.Errorf("produce event %+v", e)
		}
	}
	h.mu.Unlock()
	if got != n {
		t.Fatalf("produce events count %d records, want %d", got, n)
	}
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}

	var handled atomic.Int64
	done := make(chan struct{})
	cs, err := NewConsumer(cl, ConsumerGroup("g"), SubscribeTopics("m"), OffsetReset(ResetEarliest),
		HandleRecord(func(context.Context, *Record) error {
			if handled.Add(1) == n {
				close(done)
			}
			return nil
		}))
	if err != nil {
		t.Fatal(err)
	}
	<-done
	// After Close every goroutine that reports has stopped: the events
	// are all in.
	if _, err := cs.Close(ctx); err != nil {
		t.Fatal(err)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	fetchedPer := map[int32]int64{}
	hw := map[int32]int64{}
	for _, e := range h.fetched {
		if e.Err != nil || e.Topic != "m" || e.Lag < 0 || e.Lag > e.HighWatermark {
			t.Errorf("fetch event %+v", e)
		}
		if e.Records > 0 && (e.Bytes <= 0 || e.UncompressedBytes <= 0) {
			t.Errorf("fetch event without sizes: %+v", e)
		}
		fetchedPer[e.Partition] += int64(e.Records)
		hw[e.Partition] = e.HighWatermark
	}
	for part, want := range perPart {
		if fetchedPer[part] != want || hw[part] != want {
			t.Errorf("partition %d: fetched %d records, high watermark %d; want %d", part, fetchedPer[part], hw[part], want)
		}
	}
	var assigned int
	for _, e := range h.rebalances {
		if e.Group != "g" || e.Protocol != "cooperative" && e.Protocol != "eager" || e.Duration < 0 {
			t.Errorf("rebalance event %+v", e)
		}
		if e.Err == nil {
			assigned += e.Assigned
		}
	}
	if assigned != parts {
		t.Errorf("rebalances assigned %d partitions, want %d: %+v", assigned, parts, h.rebalances)
	}
	var committed bool
	for _, e := range h.commits {
		if e.Group != "g" || e.Partitions <= 0 || e.Partitions != len(e.Offsets) || e.Transactional || e.Latency < 0 {
			t.Errorf("commit event %+v", e)
		}
		for tp, om := range e.Offsets {
			if tp.Topic != "m" || om.Offset <= 0 || om.Offset > perPart[tp.Partition] {
				t.Errorf("commit event offset %s %+v (partition has %d records)", tp, om, perPart[tp.Partition])
			}
		}
		committed = committed || e.Err == nil
	}
	if !committed {
		t.Errorf("no successful commit reported: %+v", h.commits)
	}
}

// A failed batch is reported with its error, and ErrorClass names it.
func TestProduceHookFailure(t *testing.T) {
	c := newFake(t, kfake.SeedTopics(1, "f"))
	c.ControlKey(0, func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		req := kreq.(*kmsg.ProduceRequest)
		resp := req.ResponseKind().(*kmsg.ProduceResponse)
		for _, rt := range req.Topics {
			st := kmsg.NewProduceResponseTopic()
			st.Topic = rt.Topic
			for _, rp := range rt.Partitions {
				sp := kmsg.NewProduceResponseTopicPartition()
				sp.Partition = rp.Partition
				sp.ErrorCode = kerr.TopicAuthorizationFailed.Code
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil, true
	})
	h := &recHooks{}
	cl := newTestClient(t, SeedBrokers(c.ListenAddrs()...))
	p, err := NewProducer(cl, WithProducerHooks(h))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	defer p.Close(ctx)
	err = p.ProduceSync(ctx, &Record{Topic: "f", Value: []byte("x")}, &Record{Topic: "f", Value: []byte("y")})
	if !errors.Is(err, ErrTopicAuthorization) {
		t.Fatalf("ProduceSync: %v", err)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	var recs int
	for _, e := range h.produced {
		recs += e.Records
		if ErrorClass(e.Err) != "authorization" || e.CompressedBytes <= 0 {
			t.Errorf("event %+v, class %q", e, ErrorClass(e.Err))
		}
	}
	if recs != 2 {
		t.Errorf("events count %d records, want 2", recs)
	}
}

// Records that fail before they join a batch are reported too, each as an
// Unbatched event of one record: every record whose callback got an error
// is counted in exactly one event with that error.
func TestProduceHookUnbatched(t *testing.T) {
	c := newFake(t, kfake.SeedTopics(2, "u"))
	h := &recHooks{}
	cl := newTestClient(t, SeedBrokers(c.ListenAddrs()...))
	p, err := NewProducer(cl, WithProducerHooks(h), WithPartitioner(ManualPartitioner()), MaxBatchBytes(1024))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var (
		mu     sync.Mutex
		cbErrs = map[error]int{} // callback errors by kind
		cbOK   int
	)
	kinds := []error{errors.New("other"), ErrInvalidConfig, ErrRecordTooLarge, ErrInvalidPartition, ErrProducerClosed}
	kindOf := func(err error) error {
		for _, k := range kinds[1:] {
			if errors.Is(err, k) {
				return k
			}
		}
		return kinds[0]
	}
	cb := func(_ *Record, err error) {
		mu.Lock()
		defer mu.Unlock()
		if err == nil {
			cbOK++
			return
		}
		cbErrs[kindOf(err)]++
	}
	for i := 0; i < 5; i++ {
		p.Produce(ctx, &Record{Topic: "u", Partition: int32(i % 2), Value: []byte("ok")}, cb)
	}
	p.Produce(ctx, &Record{Value: []byte("no topic")}, cb)
	p.Produce(ctx, &Record{Topic: "u", Value: make([]byte, 4096)}, cb)
	p.Produce(ctx, &Record{Topic: "u", Partition: 9, Value: []byte("no such partition")}, cb)
	p.Produce(ctx, &Record{Topic: "u", Partition: -3, Value: []byte("no such partition")}, cb)
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
	p.Produce(ctx, &Record{Topic: "u", Value: []byte("closed")}, cb)

	want := map[error]int{ErrInvalidConfig: 1, ErrRecordTooLarge: 1, ErrInvalidPartition: 2, ErrProducerClosed: 1}
	mu.Lock()
	defer mu.Unlock()
	if cbOK != 5 || len(cbErrs) != len(want) {
		t.Fatalf("callbacks: %d ok, errors %v", cbOK, cbErrs)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	evErrs := map[error]int{}
	evOK := 0
	for _, e := range h.produced {
		if e.Err == nil {
			if e.Unbatched {
				t.Errorf("a successful batch reported Unbatched: %+v", e)
			}
			evOK += e.Records
			continue
		}
		if !e.Unbatched || e.Records != 1 || e.Partition != -1 || e.CompressedBytes != 0 || e.UncompressedBytes != 0 || e.Latency != 0 {
			t.Errorf("event for a record failed before a batch: %+v", e)
		}
		evErrs[kindOf(e.Err)] += e.Records
	}
	if evOK != cbOK {
		t.Errorf("events count %d records written, callbacks %d", evOK, cbOK)
	}
	for k, n := range want {
		if cbErrs[k] != n || evErrs[k] != n {
			t.Errorf("%v: %d callbacks, %d in events, want %d", k, cbErrs[k], evErrs[k], n)
		}
	}
}

// A record refused for a full buffer (FailFast) is an Unbatched event too.
func TestProduceHookBufferFull(t *testing.T) {
	c := newFake(t, kfake.SeedTopics(1, "u"))
	h := &recHooks{}
	cl := newTestClient(t, SeedBrokers(c.ListenAddrs()...))
	p, err := NewProducer(cl, WithProducerHooks(h), MaxBufferedBytes(1024), MaxBatchBytes(1024), FailFast(), Linger(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	errs := make(chan error, 2)
	cb := func(_ *Record, err error) { errs <- err }
	p.Produce(ctx, &Record{Topic: "u", Value: make([]byte, 600)}, cb) // buffered, lingering
	p.Produce(ctx, &Record{Topic: "u", Value: make([]byte, 600)}, cb) // no room
	if err := <-errs; !errors.Is(err, ErrBufferFull) {
		t.Fatalf("second record: %v, want ErrBufferFull", err)
	}
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-errs; err != nil {
		t.Fatalf("first record: %v", err)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	var full, ok int
	for _, e := range h.produced {
		switch {
		case errors.Is(e.Err, ErrBufferFull) && e.Unbatched && e.Records == 1 && e.Partition == -1:
			full++
		case e.Err == nil && !e.Unbatched:
			ok += e.Records
		default:
			t.Errorf("unexpected event %+v", e)
		}
	}
	if full != 1 || ok != 1 {
		t.Fatalf("%d buffer-full events, %d records written; want 1 and 1", full, ok)
	}
}

func TestErrorClass(t *testing.T) {
	for _, c := range []struct {
		err  error
		want string
	}{
		{nil, ""},
		{fmt.Errorf("t[0]: %w", ErrNotLeaderForPartition), "NOT_LEADER_FOR_PARTITION"},
		{fmt.Errorf("t[0]: %w: %w", ErrDataLoss, KafkaErrorForCode(45)), "data_loss"},
		{fmt.Errorf("x: %w", ErrDeliveryTimeout), "delivery_timeout"},
		{ErrProducerClosed, "closed"},
		{ErrBufferFull, "buffer_full"},
		{context.DeadlineExceeded, "timeout"},
		{context.Canceled, "canceled"},
		{ErrRequestTimeout, "timeout"},
		{fmt.Errorf("t[0]: %w", ErrTopicAuthorization), "authorization"},
		{fmt.Errorf("InitProducerId: %w", ErrClusterAuthorization), "authorization"},
		{KafkaErrorForCode(53), "authorization"}, // TRANSACTIONAL_ID_AUTHORIZATION_FAILED
		{KafkaErrorForCode(30), "authorization"}, // GROUP_AUTHORIZATION_FAILED
		{errors.New("something"), "other"},
	} {
		if got := ErrorClass(c.err); got != c.want {
			t.Errorf("ErrorClass(%v) = %q, want %q", c.err, got, c.want)
		}
	}
}
