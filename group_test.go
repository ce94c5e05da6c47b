package riffle

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/riffle-go/riffle/internal/kafkaerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// groupHarness runs group members over one topic and records every
// handler call, to check no partition is ever handled by two members at
// once and which records were processed more than once.
type groupHarness struct {
	proto     GroupProtocol
	t         *testing.T
	addrs     []string
	topic     string
	group     string
	balancer  GroupBalancer
	active    []atomic.Int32 // handler calls in progress per partition
	overlap   atomic.Value   // first overlap seen
	mu        sync.Mutex
	processed map[[2]int64][]int // (partition, offset) -> member ids
	killed    map[int]bool
	lost      map[int]bool // members told their partitions were lost (fenced)
	total     atomic.Int64
	nextID    int
}

func newGroupHarness(t *testing.T, addrs []string, topic string, partitions int, b GroupBalancer) *groupHarness {
	return &groupHarness{
		t: t, addrs: addrs, topic: topic, group: "g-" + topic, balancer: b,
		active:    make([]atomic.Int32, partitions),
		processed: map[[2]int64][]int{},
		killed:    map[int]bool{},
		lost:      map[int]bool{},
	}
}

func (h *groupHarness) start() (*Consumer, int) {
	h.mu.Lock()
	id := h.nextID
	h.nextID++
	h.mu.Unlock()
	// One client per member, like separate processes.
	cl := newTestClient(h.t, SeedBrokers(h.addrs...))
	cs, err := NewConsumer(cl,
		ConsumerGroup(h.group), SubscribeTopics(h.topic), Balancers(h.balancer), WithGroupProtocol(h.proto),
		OffsetReset(ResetEarliest),
		SessionTimeout(3*time.Second), HeartbeatInterval(100*time.Millisecond),
		RebalanceTimeout(3*time.Second), RevokeTimeout(time.Second),
		AutoCommitInterval(200*time.Millisecond),
		OnPartitionsLost(func(_ context.Context, tps []TopicPartition) {
			h.mu.Lock()
			h.lost[id] = true
			h.mu.Unlock()
			h.t.Logf("member %d lost %v", id, tps)
		}),
		OnGroupError(func(err error) { h.t.Logf("member %d: %v", id, err) }),
		HandleRecord(func(ctx context.Context, r *Record) error {
			if n := h.active[r.Partition].Add(1); n > 1 {
				h.overlap.CompareAndSwap(nil, fmt.Sprintf("partition %d handled by %d members at once (offset %d)", r.Partition, n, r.Offset))
			}
			if rand.IntN(2) == 0 {
				// Work that takes time, so churn hits it mid-stream;
				// like any well-behaved handler it honours ctx.
				select {
				case <-time.After(time.Millisecond):
				case <-ctx.Done():
					h.active[r.Partition].Add(-1)
					return ctx.Err()
				}
			}
			h.mu.Lock()
			k := [2]int64{int64(r.Partition), r.Offset}
			h.processed[k] = append(h.processed[k], id)
			h.mu.Unlock()
			h.total.Add(1)
			h.active[r.Partition].Add(-1)
			return nil
		}),
	)
	if err != nil {
		h.t.Fatal(err)
	}
	return cs, id
}

// kill stops a member like a crashed process: no revoke, no commit, no
// LeaveGroup. The coordinator notices only when its session expires.
func (h *groupHarness) count(id int) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, by := range h.processed {
		for _, m := range by {
			if m == id {
				n++
			}
		}
	}
	return n
}

func (h *groupHarness) kill(cs *Consumer, id int) {
	n := h.count(id)
	h.mu.Lock()
	h.killed[id] = true
	h.mu.Unlock()
	cs.kill()
	h.t.Logf("killed member %d after it processed %d records; it owned %v", id, n, cs.member.ownedList())
}

// check asserts every record 0..n-1 of each partition was processed, and
// that any record processed twice was first processed by a killed member
// (work it had not committed), or by one that was told it lost its
// partitions: fenced, when a loaded machine delays its heartbeats past
// the session, its uncommitted work is rightly handled again. A member
// that handed its partitions over cleanly committed its work first.
func (h *groupHarness) check(perPartition int) {
	h.t.Helper()
	if o := h.overlap.Load(); o != nil {
		h.t.Fatal(o)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	dups := 0
	for p := 0; p < len(h.active); p++ {
		for o := 0; o < perPartition; o++ {
			by := h.processed[[2]int64{int64(p), int64(o)}]
			if len(by) == 0 {
				h.t.Fatalf("record %d@%d never processed", p, o)
			}
			if len(by) > 1 {
				dups++
				if !h.killed[by[0]] && !h.lost[by[0]] {
					h.t.Fatalf("record %d@%d processed by members %v; the first was neither killed nor fenced, so its work was committed", p, o, by)
				}
			}
		}
	}
	h.t.Logf("%d records processed, %d duplicates (all after hard kills or losses); members that lost partitions: %v", h.total.Load(), dups, h.lost)
}

func runChurn(t *testing.T, b GroupBalancer, proto GroupProtocol) {
	fake := newFake(t, kfake.NumBrokers(3), kfake.SeedTopics(8, "churn"), kfake.GroupMinSessionTimeout(100*time.Millisecond),
		kfake.BrokerConfigs(map[string]string{ // KIP-848 timing, like the classic settings below
			"group.consumer.heartbeat.interval.ms": "100",
			"group.consumer.session.timeout.ms":    "3000",
		}))
	cl := newTestClient(t, SeedBrokers(fake.ListenAddrs()...))
	const perPartition = 5000 // 40,000 records over 8 partitions
	produceN(t, cl, "churn", 8, perPartition)

	h := newGroupHarness(t, fake.ListenAddrs(), "churn", 8, b)
	h.proto = proto
	type running struct {
		cs *Consumer
		id int
	}
	var members []running
	for i := 0; i < 4; i++ {
		cs, id := h.start()
		members = append(members, running{cs, id})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	// Churn: every 400 ms a member leaves cleanly, is killed, or joins.
	for round := 0; h.total.Load() < 8*perPartition && ctx.Err() == nil; round++ {
		time.Sleep(400 * time.Millisecond)
		switch {
		case round%3 == 0 && len(members) > 2:
			m := members[0]
			members = members[1:]
			cctx, ccancel := context.WithTimeout(ctx, 20*time.Second)
			if _, err := m.cs.Close(cctx); err != nil {
				t.Errorf("close: %v", err)
			}
			ccancel()
		case round%3 == 1 && len(members) > 2 && round < 12:
			// Kill the busiest member: it has uncommitted work.
			busiest := 0
			for i := range members {
				if h.count(members[i].id) > h.count(members[busiest].id) {
					busiest = i
				}
			}
			m := members[busiest]
			members = append(members[:busiest:busiest], members[busiest+1:]...)
			h.kill(m.cs, m.id)
		default:
			if len(members) < 5 {
				cs, id := h.start()
				members = append(members, running{cs, id})
			}
		}
	}
	// Let the group settle and finish.
	deadline := time.Now().Add(60 * time.Second)
	for !h.allDone(perPartition) && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	for _, m := range members {
		cctx, ccancel := context.WithTimeout(context.Background(), 30*time.Second)
		if _, err := m.cs.Close(cctx); err != nil {
			t.Errorf("final close: %v", err)
		}
		ccancel()
	}
	h.check(perPartition)
}

func (h *groupHarness) allDone(per int) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	for p := 0; p < len(h.active); p++ {
		for o := 0; o < per; o++ {
			if len(h.processed[[2]int64{int64(p), int64(o)}]) == 0 {
				return false
			}
		}
	}
	return true
}

func TestGroupChurnCooperative(t *testing.T) {
	runChurn(t, CooperativeStickyBalancer(), GroupProtocolClassic)
}
func TestGroupChurnEager(t *testing.T) { runChurn(t, RangeBalancer(), GroupProtocolClassic) }
func TestGroupChurnKIP848(t *testing.T) {
	runChurn(t, CooperativeStickyBalancer(), GroupProtocolConsumer)
}

// Commits of finished work survive a clean handover: a second member
// continues exactly where the first stopped.
func TestGroupCommitHandover(t *testing.T) {
	fake := newFake(t, kfake.NumBrokers(1), kfake.SeedTopics(2, "t"), kfake.GroupMinSessionTimeout(100*time.Millisecond))
	cl := newTestClient(t, SeedBrokers(fake.ListenAddrs()...))
	produceN(t, cl, "t", 2, 100)
	var mu sync.Mutex
	seen := map[string]int{}
	var n atomic.Int32
	mk := func() *Consumer {
		// A long session: with auto-commit off, a member fenced by late
		// heartbeats on a loaded machine would rightly handle its
		// records again; nothing here waits for a session to expire
		// (Close leaves the group).
		cs, err := NewConsumer(cl, ConsumerGroup("g"), SubscribeTopics("t"), OffsetReset(ResetEarliest),
			SessionTimeout(10*time.Second), HeartbeatInterval(100*time.Millisecond), DisableAutoCommit(),
			HandleRecord(func(ctx context.Context, r *Record) error {
				time.Sleep(2 * time.Millisecond)
				n.Add(1)
				mu.Lock()
				seen[fmt.Sprint(r.Partition, "@", r.Offset)]++
				mu.Unlock()
				return nil
			}))
		if err != nil {
			t.Fatal(err)
		}
		return cs
	}
	a := mk()
	waitFor(t, 30*time.Second, "the first member to handle 60 records", func() bool { return n.Load() >= 60 })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// Close waits for the running handlers and commits what finished
	// (auto-commit is off: only the final commit carries the handover).
	if _, err := a.Close(ctx); err != nil {
		t.Fatalf("close a: %v", err)
	}
	if n.Load() >= 200 {
		t.Fatal("the first member finished everything; the test proves nothing")
	}
	b := mk()
	distinct := func() int { mu.Lock(); defer mu.Unlock(); return len(seen) }
	waitFor(t, 30*time.Second, "every record handled", func() bool { return distinct() == 200 })
	// A duplicate handled after this point would go unseen: a false
	// pass at worst, never a false failure.
	ctx, cancel = context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b.Close(ctx)
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 200 {
		t.Fatalf("%d distinct records processed, want 200", len(seen))
	}
	for k, c := range seen {
		if c != 1 {
			t.Fatalf("record %s processed %d times after a clean handover", k, c)
		}
	}
}

// Many async commits in flight: the committed offset ends at the newest.
func TestGroupCommitOrdering(t *testing.T) {
	fake := newFake(t, kfake.NumBrokers(1), kfake.SeedTopics(1, "t"), kfake.GroupMinSessionTimeout(100*time.Millisecond))
	cl := newTestClient(t, SeedBrokers(fake.ListenAddrs()...))
	assigned := make(chan struct{}, 1)
	cs, err := NewConsumer(cl, ConsumerGroup("g"), SubscribeTopics("t"), DisableAutoCommit(),
		SessionTimeout(time.Second), HeartbeatInterval(100*time.Millisecond),
		OnPartitionsAssigned(func(context.Context, []TopicPartition) { assigned <- struct{}{} }),
		HandleRecord(func(context.Context, *Record) error { return nil }))
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close(context.Background())
	select {
	case <-assigned:
	case <-time.After(30 * time.Second):
		t.Fatal("never assigned")
	}
	tp := TopicPartition{"t", 0}
	var wg sync.WaitGroup
	for i := 1; i <= 200; i++ {
		wg.Add(1)
		o := int64(i)
		cs.member.commits.enqueue(map[TopicPartition]int64{tp: o}, nil, nil, nil)
		wg.Done()
	}
	wg.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := cs.CommitOffsets(ctx, map[TopicPartition]int64{tp: 201}); err != nil {
		t.Fatal(err)
	}
	got, _, _, err := cs.member.commits.fetch(ctx, []TopicPartition{tp})
	if err != nil {
		t.Fatal(err)
	}
	if got[tp] != 201 {
		t.Fatalf("committed %d, want 201", got[tp])
	}
}

// A settled KIP-848 member heartbeats at the interval, not in a loop.
func TestGroupKIP848HeartbeatRate(t *testing.T) {
	fake := newFake(t, kfake.NumBrokers(1), kfake.SeedTopics(4, "t"),
		kfake.BrokerConfigs(map[string]string{"group.consumer.heartbeat.interval.ms": "100"}))
	var hbs atomic.Int32
	fake.ControlKey(68, func(kmsg.Request) (kmsg.Response, error, bool) {
		fake.KeepControl()
		hbs.Add(1)
		return nil, nil, false
	})
	cl := newTestClient(t, SeedBrokers(fake.ListenAddrs()...))
	assigned := make(chan struct{}, 4)
	cs, err := NewConsumer(cl, ConsumerGroup("g848"), SubscribeTopics("t"), WithGroupProtocol(GroupProtocolConsumer),
		OnPartitionsAssigned(func(context.Context, []TopicPartition) { assigned <- struct{}{} }),
		HandleRecord(func(context.Context, *Record) error { return nil }))
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close(context.Background())
	select {
	case <-assigned:
	case <-time.After(30 * time.Second):
		t.Fatal("never assigned")
	}
	// Settled: the member owns all four partitions (reconciling them
	// takes heartbeats of its own, sent at once). Then at most 30 a
	// second, over the time the window really took.
	waitFor(t, 30*time.Second, "the member to own the 4 partitions", func() bool { return len(cs.member.ownedList()) == 4 })
	n, took := countOver(time.Second, func() int64 { return int64(hbs.Load()) })
	if n > rateLimit(30, took) {
		t.Fatalf("%d heartbeats in %v with a 100ms interval (want at most 30 a second)", n, took)
	}
}

// A broker whose offset.metadata.max.bytes is below the metadata sent
// (OFFSET_METADATA_TOO_LARGE) still gets the offset: the commit is sent
// again without metadata, since the offset alone is correct.
func TestCommitMetadataTooLarge(t *testing.T) {
	fake := newFake(t, kfake.NumBrokers(1), kfake.SeedTopics(1, "t"))
	var rejected atomic.Int32
	fake.ControlKey(int16(kmsg.OffsetCommit), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		fake.KeepControl()
		tooLarge := false
		resp := offsetCommitReply(kr.(*kmsg.OffsetCommitRequest), func(p kmsg.OffsetCommitRequestTopicPartition) int16 {
			if p.Metadata != nil && len(*p.Metadata) > 50 {
				tooLarge = true
				return kafkaerr.OffsetMetadataTooLarge
			}
			return 0
		})
		if !tooLarge {
			return nil, nil, false // the broker handles it
		}
		rejected.Add(1)
		return resp, nil, true
	})
	cl := newTestClient(t, SeedBrokers(fake.ListenAddrs()...))
	cs, err := NewConsumer(cl, ConsumerGroup("g-big-meta"), SubscribeTopics("t"), DisableAutoCommit(),
		CommitMetadata(strings.Repeat("m", 100)), HandleRecord(func(context.Context, *Record) error { return nil }))
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	tp := TopicPartition{"t", 0}
	commitOnceJoined(t, ctx, cs, map[TopicPartition]int64{tp: 7})
	offs, err := cl.Admin().FetchOffsets(ctx, "g-big-meta")
	if err != nil {
		t.Fatal(err)
	}
	if om := offs[tp]; om.Offset != 7 || om.Metadata != "" || rejected.Load() == 0 {
		t.Fatalf("committed %+v after %d rejections; want offset 7 without metadata", om, rejected.Load())
	}
}

// A commit whose partitions still want a retry after the last attempt
// fails; it never reports success for offsets that were not committed.
func TestCommitRetriesExhausted(t *testing.T) {
	fake := newFake(t, kfake.NumBrokers(1), kfake.SeedTopics(1, "t"))
	var refuse atomic.Bool
	fake.ControlKey(int16(kmsg.OffsetCommit), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		fake.KeepControl()
		if !refuse.Load() {
			return nil, nil, false
		}
		return offsetCommitReply(kr.(*kmsg.OffsetCommitRequest), func(kmsg.OffsetCommitRequestTopicPartition) int16 {
			return kafkaerr.CoordinatorLoadInProgress
		}), nil, true
	})
	cl := newTestClient(t, SeedBrokers(fake.ListenAddrs()...), RetryBackoff(time.Millisecond, 5*time.Millisecond))
	cs, err := NewConsumer(cl, ConsumerGroup("g-exhaust"), SubscribeTopics("t"), DisableAutoCommit(),
		HandleRecord(func(context.Context, *Record) error { return nil }))
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	tp := TopicPartition{"t", 0}
	commitOnceJoined(t, ctx, cs, map[TopicPartition]int64{tp: 3})
	refuse.Store(true)
	err = cs.CommitOffsets(ctx, map[TopicPartition]int64{tp: 9})
	refuse.Store(false)
	if !errors.Is(err, kafkaerr.ForCode(kafkaerr.CoordinatorLoadInProgress)) {
		t.Fatalf("commit refused on every attempt returned %v", err)
	}
	if offs, _ := cl.Admin().FetchOffsets(ctx, "g-exhaust"); offs[tp].Offset != 3 {
		t.Fatalf("committed %+v", offs[tp])
	}
}

// offsetCommitReply answers an OffsetCommit with code(partition) for each
// partition, as a broker would.
func offsetCommitReply(req *kmsg.OffsetCommitRequest, code func(kmsg.OffsetCommitRequestTopicPartition) int16) *kmsg.OffsetCommitResponse {
	resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
	for _, t := range req.Topics {
		rt := kmsg.NewOffsetCommitResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewOffsetCommitResponseTopicPartition()
			rp.Partition = p.Partition
			rp.ErrorCode = code(p)
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

// commitOnceJoined commits offsets, retrying until the member has joined
// (before, the coordinator does not know it).
func commitOnceJoined(t *testing.T, ctx context.Context, cs *Consumer, offsets map[TopicPartition]int64) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for cs.CommitOffsets(ctx, offsets) != nil {
		if time.Now().After(deadline) {
			t.Fatal("no commit went through")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A commit batch merges the offsets of several callers: each hears about
// its own partitions only (a flaky test found Close's final commit failing
// on another caller's partition of a topic deleted meanwhile).
func TestCommitWaiterOutcome(t *testing.T) {
	a, b := TopicPartition{"gone", 0}, TopicPartition{"t", 0}
	failA := errors.New("gone[0]: UNKNOWN_TOPIC_OR_PARTITION")
	w := &commitWaiter{tps: map[TopicPartition]bool{b: true}}
	if err := w.outcome(nil, map[TopicPartition]error{a: failA}, failA); err != nil {
		t.Fatalf("another caller's failed partition reached this one: %v", err)
	}
	wa := &commitWaiter{tps: map[TopicPartition]bool{a: true, b: true}}
	if err := wa.outcome(nil, map[TopicPartition]error{a: failA}, failA); !errors.Is(err, failA) {
		t.Fatalf("own failed partition: %v", err)
	}
	req := errors.New("coordinator unreachable")
	if err := w.outcome(nil, nil, req); !errors.Is(err, req) {
		t.Fatalf("a failed request concerns everyone: %v", err)
	}
	if err := w.outcome([]TopicPartition{b}, map[TopicPartition]error{}, nil); !errors.Is(err, ErrNotAssigned) {
		t.Fatalf("own partition dropped as not owned: %v", err)
	}
}
