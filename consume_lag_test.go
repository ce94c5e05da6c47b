package riffle

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
)

// lagHooks keeps what a metrics sink keeps: the last lag of every
// partition, dropped on PartitionRemoved, and the partition events.
type lagHooks struct {
	mu     sync.Mutex
	last   map[TopicPartition]FetchBatchEvent
	events []PartitionEvent
	// Protocol breaches: fetch events after the partition's Removed, or
	// before its Assigned; events with the wrong group.
	bad   []string
	state map[TopicPartition]PartitionEventKind
	group string
	// zeroFetched: a lag of 0 came in an event of a fetch response (not a
	// Refreshed one).
	zeroFetched map[TopicPartition]bool
}

func newLagHooks(group string) *lagHooks {
	return &lagHooks{last: map[TopicPartition]FetchBatchEvent{}, state: map[TopicPartition]PartitionEventKind{},
		zeroFetched: map[TopicPartition]bool{}, group: group}
}

func (h *lagHooks) OnFetchBatch(e FetchBatchEvent) {
	h.mu.Lock()
	defer h.mu.Unlock()
	tp := TopicPartition{Topic: e.Topic, Partition: e.Partition}
	if s := h.state[tp]; s != PartitionAssigned && s != PartitionStopped && s != PartitionResumed {
		h.bad = append(h.bad, fmt.Sprintf("fetch event %+v with the partition %v", e, s))
	}
	if e.Group != h.group {
		h.bad = append(h.bad, fmt.Sprintf("fetch event %+v, want group %q", e, h.group))
	}
	h.last[tp] = e
	if e.Lag == 0 && !e.Refreshed {
		h.zeroFetched[tp] = true
	}
}

func (h *lagHooks) OnPartition(e PartitionEvent) {
	h.mu.Lock()
	defer h.mu.Unlock()
	tp := TopicPartition{Topic: e.Topic, Partition: e.Partition}
	if e.Group != h.group {
		h.bad = append(h.bad, fmt.Sprintf("partition event %+v, want group %q", e, h.group))
	}
	h.events = append(h.events, e)
	h.state[tp] = e.Kind
	if e.Kind == PartitionRemoved {
		delete(h.last, tp)
	}
}

func (h *lagHooks) lag(tp TopicPartition) (FetchBatchEvent, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	e, ok := h.last[tp]
	return e, ok
}

func (h *lagHooks) String() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return fmt.Sprintf("last %+v; partition events %+v; bad %v", h.last, h.events, h.bad)
}

func (h *lagHooks) check(t *testing.T) {
	t.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, b := range h.bad {
		t.Error(b)
	}
}

// A consumer that caught up reports a lag of 0: the fetch responses of an
// incremental fetch session leave a partition with nothing new out, and
// the lag follows the position all the same. (It stayed at the backlog
// the first fetch found.)
func TestLagFollowsCaughtUpConsumer(t *testing.T) {
	const n = 200
	c := newFake(t, kfake.SeedTopics(1, "t"))
	h := newLagHooks("")
	cl := newTestClient(t, SeedBrokers(c.ListenAddrs()...), WithHooks(h))
	ctx := context.Background()
	produceN(t, cl, "t", 1, n)
	release := make(chan struct{})
	var handled atomic.Int64
	cs, err := NewConsumer(cl, HandleRecord(func(ctx context.Context, r *Record) error {
		select {
		case <-release:
		case <-ctx.Done():
			return ctx.Err()
		}
		handled.Add(1)
		return nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close(ctx)
	tp := TopicPartition{Topic: "t", Partition: 0}
	if err := cs.Assign(Assignment{TopicPartition: tp, Start: AtEarliest()}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 30*time.Second, func() bool { e, ok := h.lag(tp); return ok && e.Lag == n && e.HighWatermark == n }, h.String)
	close(release)
	waitUntil(t, 30*time.Second, func() bool {
		h.mu.Lock()
		defer h.mu.Unlock()
		return handled.Load() == n && h.zeroFetched[tp] && h.last[tp].Lag == 0
	}, h.String)
	h.check(t)
}

// A group consumer's events carry the group; revoked and closed
// partitions are reported removed, and nothing of them follows.
func TestLagGroupAndRemoved(t *testing.T) {
	const parts, n = 3, 30
	c := newFake(t, kfake.SeedTopics(parts, "t"))
	h := newLagHooks("g")
	cl := newTestClient(t, SeedBrokers(c.ListenAddrs()...), WithHooks(h))
	ctx := context.Background()
	produceN(t, cl, "t", parts, n)
	var handled atomic.Int64
	cs, err := NewConsumer(cl, ConsumerGroup("g"), SubscribeTopics("t"), OffsetReset(ResetEarliest),
		HandleRecord(func(context.Context, *Record) error { handled.Add(1); return nil }))
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close(ctx) // on failure; the test closes it
	waitUntil(t, 15*time.Second, func() bool {
		h.mu.Lock()
		defer h.mu.Unlock()
		if handled.Load() != parts*n || len(h.last) != parts {
			return false
		}
		for _, e := range h.last {
			if e.Lag != 0 || e.HighWatermark != n {
				return false
			}
		}
		return true
	}, h.String)
	if _, err := cs.Close(ctx); err != nil {
		t.Fatal(err)
	}
	h.check(t)
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.last) != 0 {
		t.Errorf("lag kept after Close: %+v", h.last)
	}
	for i := range int32(parts) {
		tp := TopicPartition{Topic: "t", Partition: i}
		var kinds []PartitionEventKind
		for _, e := range h.events {
			if e.Topic == tp.Topic && e.Partition == tp.Partition {
				kinds = append(kinds, e.Kind)
			}
		}
		if len(kinds) != 2 || kinds[0] != PartitionAssigned || kinds[1] != PartitionRemoved {
			t.Errorf("%s: events %v, want [assigned removed]", tp, kinds)
		}
	}
}

// A partition stopped by a handler error gets no fetches, yet its lag
// grows with what is produced (Refreshed events), and the stop and the
// resume are reported; a paused partition's lag grows the same way.
func TestLagStoppedPartitionGrows(t *testing.T) {
	const n, failAt, more = 50, 10, 100
	c := newFake(t, kfake.SeedTopics(1, "t"))
	h := newLagHooks("")
	cl := newTestClient(t, SeedBrokers(c.ListenAddrs()...), WithHooks(h))
	ctx := context.Background()
	produceN(t, cl, "t", 1, n)
	boom := errors.New("boom")
	var failing atomic.Bool
	failing.Store(true)
	var pos atomic.Int64
	cs, err := NewConsumer(cl, HandleRecord(func(_ context.Context, r *Record) error {
		if r.Offset == failAt && failing.Load() {
			return boom
		}
		pos.Store(r.Offset + 1)
		return nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close(ctx)
	tp := TopicPartition{Topic: "t", Partition: 0}
	if err := cs.Assign(Assignment{TopicPartition: tp, Start: AtEarliest()}); err != nil {
		t.Fatal(err)
	}
	stopped := func() *PartitionEvent {
		h.mu.Lock()
		defer h.mu.Unlock()
		for _, e := range h.events {
			if e.Kind == PartitionStopped {
				return &e
			}
		}
		return nil
	}
	waitUntil(t, 30*time.Second, func() bool { return stopped() != nil }, h.String)
	var pe *PartitionError
	if e := stopped(); !e.Handler || !errors.As(e.Err, &pe) || pe.Offset != failAt || !errors.Is(e.Err, boom) {
		t.Errorf("stopped event %+v, want the handler's error at offset %d", e, failAt)
	}
	produceN(t, cl, "t", 1, more)
	want := int64(n + more - failAt)
	waitUntil(t, 15*time.Second, func() bool {
		e, ok := h.lag(tp)
		return ok && e.Lag == want && e.HighWatermark == n+more && e.Refreshed
	}, h.String)
	st := cs.Stats().Partitions[0]
	if st.HighWatermark != n+more || st.LagProcessed != want {
		t.Errorf("stats %v, want HighWatermark %d LagProcessed %d", st, n+more, want)
	}

	failing.Store(false)
	if err := cs.Resume(tp); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 30*time.Second, func() bool {
		e, ok := h.lag(tp)
		return pos.Load() == n+more && ok && e.Lag == 0
	}, h.String)

	if err := cs.Pause(tp); err != nil {
		t.Fatal(err)
	}
	produceN(t, cl, "t", 1, 20)
	waitUntil(t, 15*time.Second, func() bool {
		e, ok := h.lag(tp)
		return ok && e.Lag == 20 && e.Refreshed
	}, h.String)
	if _, err := cs.Close(ctx); err != nil {
		t.Fatal(err)
	}
	h.check(t)
	h.mu.Lock()
	defer h.mu.Unlock()
	var kinds []PartitionEventKind
	for _, e := range h.events {
		kinds = append(kinds, e.Kind)
	}
	if fmt.Sprint(kinds) != "[assigned stopped resumed removed]" {
		t.Errorf("partition events %v, want [assigned stopped resumed removed]", kinds)
	}
	if len(h.last) != 0 {
		t.Errorf("lag kept after Close: %+v", h.last)
	}
}

// With ReadCommitted the lag counts from the last stable offset: records
// of an open transaction cannot be read yet, so a consumer at the
// transaction's start is caught up (Stats and the FetchBatchEvents).
func TestLagReadCommittedCountsFromLastStable(t *testing.T) {
	const n, open = 5, 3
	c := newFake(t, kfake.SeedTopics(1, "t"))
	h := newLagHooks("")
	cl := newTestClient(t, SeedBrokers(c.ListenAddrs()...), WithHooks(h))
	ctx := context.Background()
	produceN(t, cl, "t", 1, n)
	tx, err := NewProducer(cl, TransactionalID("lag-open"), WithPartitioner(ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Close(ctx)
	if err := tx.InitTransactions(ctx); err != nil {
		t.Fatal(err)
	}
	if err := tx.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for range open {
		if err := tx.ProduceSync(ctx, &Record{Topic: "t", Partition: 0, Value: []byte("open")}); err != nil {
			t.Fatal(err)
		}
	}
	var handled atomic.Int64
	cs, err := NewConsumer(cl, Isolation(ReadCommitted),
		HandleRecord(func(context.Context, *Record) error { handled.Add(1); return nil }))
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close(ctx)
	tp := TopicPartition{Topic: "t", Partition: 0}
	if err := cs.Assign(Assignment{TopicPartition: tp, Start: AtEarliest()}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 30*time.Second, func() bool {
		st := cs.Stats().Partitions[0]
		e, ok := h.lag(tp)
		return handled.Load() == n && st.LastStable == n && st.HighWatermark == n+open && st.LagProcessed == 0 &&
			ok && e.Lag == 0 && e.HighWatermark == n+open
	}, func() string { return fmt.Sprintf("%v; %v", cs.Stats().Partitions, h) })
	h.check(t)
}
