package riffle

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// waitFor polls cond until it holds or d passes (then the test fails).
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// memberIdentity returns the member id and generation (member epoch under
// KIP-848) the member holds now.
func memberIdentity(cs *Consumer) (string, int32) {
	cs.member.mu.Lock()
	defer cs.member.mu.Unlock()
	return cs.member.memberID, cs.member.generation
}

// committedSum sums the group's committed offsets.
func committedSum(t *testing.T, cl *Client, group string) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	offs, err := cl.Admin().FetchOffsets(ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, o := range offs {
		if o.Offset > 0 {
			n += o.Offset
		}
	}
	return n
}

func closeMember(t *testing.T, cs *Consumer) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := cs.Close(ctx); err != nil {
		t.Errorf("close: %v", err)
	}
}

// A revoke that waits 8 s for a running handler (RevokeTimeout allows it)
// does not stop heartbeats: with a 3 s session the member is not fenced,
// the revoke commits where the handler finished, the next owner starts
// there, and nothing is handled twice. Auto-commit is off so that only
// heartbeats keep the member alive. A third member joins during the
// revoke: the coordinator's new rebalance waits for it (classic: no
// JoinGroup before the revoke is done).
func TestGroupHeartbeatsDuringRevoke(t *testing.T) {
	t.Parallel()
	runRevokeHold(t, GroupProtocolClassic)
}

func TestGroupKIP848HeartbeatsDuringRevoke(t *testing.T) {
	t.Parallel()
	runRevokeHold(t, GroupProtocolConsumer)
}

func runRevokeHold(t *testing.T, proto GroupProtocol) {
	const perPartition = 20
	const hold = 8 * time.Second
	fake := newFake(t, kfake.NumBrokers(1), kfake.SeedTopics(2, "hold"), kfake.GroupMinSessionTimeout(100*time.Millisecond),
		kfake.BrokerConfigs(map[string]string{
			"group.consumer.heartbeat.interval.ms": "100",
			"group.consumer.session.timeout.ms":    "3000",
		}))
	cl := newTestClient(t, SeedBrokers(fake.ListenAddrs()...))
	produceN(t, cl, "hold", 2, perPartition)
	var aID atomic.Value
	var revoking atomic.Bool
	var earlyJoins atomic.Int32 // a's JoinGroups while its revoke runs
	fake.ControlKey(int16(kmsg.JoinGroup), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		fake.KeepControl()
		if id, _ := aID.Load().(string); id != "" && kr.(*kmsg.JoinGroupRequest).MemberID == id && revoking.Load() {
			earlyJoins.Add(1)
		}
		return nil, nil, false
	})

	var mu sync.Mutex
	handled := map[[2]int64][]string{}
	gates := [2]chan struct{}{make(chan struct{}), make(chan struct{})}
	var atGate [2]atomic.Bool
	var lost atomic.Value
	mk := func(name string, gated bool) *Consumer {
		cs, err := NewConsumer(newTestClient(t, SeedBrokers(fake.ListenAddrs()...)),
			ConsumerGroup("g-hold"), SubscribeTopics("hold"), WithGroupProtocol(proto), OffsetReset(ResetEarliest),
			SessionTimeout(3*time.Second), HeartbeatInterval(100*time.Millisecond),
			RebalanceTimeout(30*time.Second), RevokeTimeout(20*time.Second), DisableAutoCommit(),
			OnPartitionsLost(func(_ context.Context, tps []TopicPartition) {
				lost.CompareAndSwap(nil, fmt.Sprintf("%s lost %v", name, tps))
			}),
			HandleRecord(func(ctx context.Context, r *Record) error {
				if gated && r.Offset == 5 {
					// A slow record: it ignores ctx, as slow work does.
					atGate[r.Partition].Store(true)
					<-gates[r.Partition]
				}
				mu.Lock()
				k := [2]int64{int64(r.Partition), r.Offset}
				handled[k] = append(handled[k], name)
				mu.Unlock()
				return nil
			}))
		if err != nil {
			t.Fatal(err)
		}
		return cs
	}
	a := mk("a", true)
	waitFor(t, 20*time.Second, "both partitions of a to reach the slow record", func() bool {
		return atGate[0].Load() && atGate[1].Load()
	})
	b := mk("b", false)
	// The rebalance revokes one partition from a; its revoke waits for the
	// slow record. The other partition is kept and goes on.
	revoked := -1
	waitFor(t, 20*time.Second, "a to start revoking a partition", func() bool {
		if ps := a.Stats().Partitions; len(ps) == 1 {
			revoked = 1 - int(ps[0].Partition)
			return true
		}
		return false
	})
	id, _ := memberIdentity(a)
	aID.Store(id)
	revoking.Store(true)
	close(gates[1-revoked])
	c := mk("c", false)
	time.Sleep(hold)
	revoking.Store(false)
	close(gates[revoked])
	waitFor(t, 30*time.Second, "every record to be handled", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(handled) == 2*perPartition
	})
	closeMember(t, c)
	closeMember(t, b)
	closeMember(t, a)
	if l := lost.Load(); l != nil {
		t.Fatalf("fenced while revoking: %v", l)
	}
	if n := earlyJoins.Load(); n > 0 {
		t.Fatalf("a sent %d JoinGroups before its revoke finished", n)
	}
	mu.Lock()
	defer mu.Unlock()
	for k, by := range handled {
		if len(by) != 1 {
			t.Errorf("record %d@%d handled by %v", k[0], k[1], by)
		}
	}
}

// Auto-commit keeps its own schedule through a rebalance: while the
// member's JoinGroup waits at the coordinator (here held, as when another
// member is slow to rejoin), the partitions it keeps under cooperative-
// sticky go on being processed, and the member goes on committing them.
func TestGroupAutoCommitDuringRebalance(t *testing.T) {
	fake := newFake(t, kfake.NumBrokers(1), kfake.SeedTopics(2, "ac"), kfake.GroupMinSessionTimeout(100*time.Millisecond))
	cl := newTestClient(t, SeedBrokers(fake.ListenAddrs()...))
	produceN(t, cl, "ac", 2, 3000)
	handler := func(ctx context.Context, r *Record) error {
		select {
		case <-time.After(time.Millisecond):
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	opts := []ConsumerOption{ConsumerGroup("g-ac"), SubscribeTopics("ac"), OffsetReset(ResetEarliest),
		SessionTimeout(30 * time.Second), HeartbeatInterval(100 * time.Millisecond), AutoCommitInterval(100 * time.Millisecond),
		HandleRecord(handler)}
	a, err := NewConsumer(newTestClient(t, SeedBrokers(fake.ListenAddrs()...)), opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer closeMember(t, a)
	waitFor(t, 20*time.Second, "a first commit", func() bool { return committedSum(t, cl, "g-ac") > 0 })
	aID, _ := memberIdentity(a)
	held := make(chan struct{})
	release := make(chan struct{})
	var holding, releasing atomic.Bool
	var commitsWhileHeld atomic.Int32 // by a, accepted, while its JoinGroup is held
	fake.ControlKey(int16(kmsg.JoinGroup), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		fake.KeepControl()
		if kr.(*kmsg.JoinGroupRequest).MemberID != aID || !holding.CompareAndSwap(false, true) {
			return nil, nil, false
		}
		close(held)
		fake.SleepControl(func() { <-release })
		releasing.Store(true)
		return nil, nil, false
	})
	fake.ControlKey(int16(kmsg.OffsetCommit), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		fake.KeepControl()
		if kr.(*kmsg.OffsetCommitRequest).MemberID == aID && holding.Load() && !releasing.Load() {
			commitsWhileHeld.Add(1)
		}
		return nil, nil, false
	})
	defer func() {
		select {
		case <-release:
		default:
			close(release)
		}
	}()
	b, err := NewConsumer(newTestClient(t, SeedBrokers(fake.ListenAddrs()...)), opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer closeMember(t, b)
	select {
	case <-held:
	case <-time.After(20 * time.Second):
		t.Fatal("a never rejoined")
	}
	before := committedSum(t, cl, "g-ac")
	waitFor(t, 15*time.Second, "a's commits while its JoinGroup waits", func() bool {
		return commitsWhileHeld.Load() >= 3 && committedSum(t, cl, "g-ac") >= before+50
	})
	close(release)
}

// A JoinGroup answered UNKNOWN_MEMBER_ID means the coordinator no longer
// knows the member, so its partitions may be someone else's: they are lost
// (handlers cancelled, nothing committed, OnPartitionsLost) before it
// joins again under a new id.
func TestGroupJoinUnknownMemberLoses(t *testing.T) {
	fake := newFake(t, kfake.NumBrokers(1), kfake.SeedTopics(1, "uj"), kfake.GroupMinSessionTimeout(100*time.Millisecond))
	cl := newTestClient(t, SeedBrokers(fake.ListenAddrs()...))
	produceN(t, cl, "uj", 1, 20)
	var commits atomic.Int32
	fake.ControlKey(int16(kmsg.OffsetCommit), func(kmsg.Request) (kmsg.Response, error, bool) {
		fake.KeepControl()
		commits.Add(1)
		return nil, nil, false
	})
	var atSlow, cancelled atomic.Bool
	lost := make(chan []TopicPartition, 4)
	a, err := NewConsumer(newTestClient(t, SeedBrokers(fake.ListenAddrs()...)),
		ConsumerGroup("g-uj"), SubscribeTopics("uj"), OffsetReset(ResetEarliest), DisableAutoCommit(),
		SessionTimeout(time.Second), HeartbeatInterval(100*time.Millisecond),
		OnPartitionsLost(func(_ context.Context, tps []TopicPartition) { lost <- tps }),
		HandleRecord(func(ctx context.Context, r *Record) error {
			if r.Offset == 5 && atSlow.CompareAndSwap(false, true) {
				<-ctx.Done() // held until the loss cancels it
				cancelled.Store(true)
				return ctx.Err()
			}
			return nil
		}))
	if err != nil {
		t.Fatal(err)
	}
	defer closeMember(t, a)
	waitFor(t, 20*time.Second, "the handler to reach the held record", atSlow.Load)
	aID, _ := memberIdentity(a)
	fake.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.JoinGroup}, Err: kerr.UnknownMemberID, TopLevel: true,
		When: func(kr kmsg.Request) bool { return kr.(*kmsg.JoinGroupRequest).MemberID == aID }})
	a.member.requestRejoin()
	select {
	case tps := <-lost:
		if !slices.Equal(tps, []TopicPartition{{"uj", 0}}) {
			t.Fatalf("lost %v", tps)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("JoinGroup UNKNOWN_MEMBER_ID did not lose the partitions")
	}
	// Under the 30 s default revoke timeout, which a handler left
	// running would end.
	waitFor(t, 20*time.Second, "the held handler's context to be cancelled", cancelled.Load)
	if n := commits.Load(); n != 0 {
		t.Fatalf("%d commits after the loss", n)
	}
	waitFor(t, 20*time.Second, "a new member id", func() bool {
		id, _ := memberIdentity(a)
		return id != "" && id != aID
	})
}

// Fenced while a revoke waits for a handler (a heartbeat answers
// ILLEGAL_GENERATION, or FENCED_MEMBER_EPOCH under KIP-848): the revoke is
// abandoned, handlers are cancelled, nothing is committed, and every
// partition is reported lost, not revoked.
func TestGroupFencedDuringRevoke(t *testing.T) {
	for _, proto := range []GroupProtocol{GroupProtocolClassic, GroupProtocolConsumer} {
		t.Run(fmt.Sprint(proto), func(t *testing.T) { runFencedDuringRevoke(t, proto) })
	}
}

func runFencedDuringRevoke(t *testing.T, proto GroupProtocol) {
	fake := newFake(t, kfake.NumBrokers(1), kfake.SeedTopics(2, "fr"), kfake.GroupMinSessionTimeout(100*time.Millisecond),
		kfake.BrokerConfigs(map[string]string{"group.consumer.heartbeat.interval.ms": "100"}))
	cl := newTestClient(t, SeedBrokers(fake.ListenAddrs()...))
	produceN(t, cl, "fr", 2, 20)
	var commits atomic.Int32
	var fence atomic.Value // member id to fence once
	fake.ControlKey(int16(kmsg.OffsetCommit), func(kmsg.Request) (kmsg.Response, error, bool) {
		fake.KeepControl()
		commits.Add(1)
		return nil, nil, false
	})
	fenceOnce := func(memberID string) bool {
		id, _ := fence.Load().(string)
		return id != "" && memberID == id && fence.CompareAndSwap(id, "")
	}
	fake.ControlKey(int16(kmsg.Heartbeat), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		fake.KeepControl()
		req := kr.(*kmsg.HeartbeatRequest)
		if !fenceOnce(req.MemberID) {
			return nil, nil, false
		}
		resp := req.ResponseKind().(*kmsg.HeartbeatResponse)
		resp.ErrorCode = kerr.IllegalGeneration.Code
		return resp, nil, true
	})
	fake.ControlKey(int16(kmsg.ConsumerGroupHeartbeat), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		fake.KeepControl()
		req := kr.(*kmsg.ConsumerGroupHeartbeatRequest)
		if !fenceOnce(req.MemberID) {
			return nil, nil, false
		}
		resp := req.ResponseKind().(*kmsg.ConsumerGroupHeartbeatResponse)
		resp.ErrorCode = kerr.FencedMemberEpoch.Code
		return resp, nil, true
	})
	var atGate [2]atomic.Bool
	var cancelled atomic.Int32
	var mu sync.Mutex
	var lostTPs, revokedTPs []TopicPartition
	gated := true
	var gatedMu sync.Mutex
	a, err := NewConsumer(newTestClient(t, SeedBrokers(fake.ListenAddrs()...)),
		ConsumerGroup("g-fr"), SubscribeTopics("fr"), WithGroupProtocol(proto), OffsetReset(ResetEarliest), DisableAutoCommit(),
		SessionTimeout(2*time.Second), HeartbeatInterval(100*time.Millisecond), RevokeTimeout(20*time.Second),
		RebalanceTimeout(30*time.Second),
		OnPartitionsLost(func(_ context.Context, tps []TopicPartition) {
			mu.Lock()
			lostTPs = append(lostTPs, tps...)
			mu.Unlock()
		}),
		OnPartitionsRevoked(func(_ context.Context, tps []TopicPartition) {
			mu.Lock()
			revokedTPs = append(revokedTPs, tps...)
			mu.Unlock()
		}),
		HandleRecord(func(ctx context.Context, r *Record) error {
			gatedMu.Lock()
			g := gated
			gatedMu.Unlock()
			if g && r.Offset == 5 {
				atGate[r.Partition].Store(true)
				<-ctx.Done() // held until cancelled
				cancelled.Add(1)
				return ctx.Err()
			}
			return nil
		}))
	if err != nil {
		t.Fatal(err)
	}
	defer closeMember(t, a)
	waitFor(t, 20*time.Second, "both partitions to reach the held record", func() bool {
		return atGate[0].Load() && atGate[1].Load()
	})
	b, err := NewConsumer(newTestClient(t, SeedBrokers(fake.ListenAddrs()...)),
		ConsumerGroup("g-fr"), SubscribeTopics("fr"), WithGroupProtocol(proto), OffsetReset(ResetEarliest), DisableAutoCommit(),
		SessionTimeout(2*time.Second), HeartbeatInterval(100*time.Millisecond),
		HandleRecord(func(context.Context, *Record) error { return nil }))
	if err != nil {
		t.Fatal(err)
	}
	defer closeMember(t, b)
	waitFor(t, 20*time.Second, "a to start revoking a partition", func() bool { return len(a.Stats().Partitions) == 1 })
	gatedMu.Lock()
	gated = false
	gatedMu.Unlock()
	aID, _ := memberIdentity(a)
	fence.Store(aID)
	waitFor(t, 20*time.Second, "both held handlers to be cancelled", func() bool { return cancelled.Load() == 2 })
	waitFor(t, 15*time.Second, "the loss callback", func() bool { // under the 20 s RevokeTimeout
		mu.Lock()
		defer mu.Unlock()
		return len(lostTPs) == 2
	})
	if n := commits.Load(); n != 0 {
		t.Fatalf("%d commits after the fence", n)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(revokedTPs) != 0 {
		t.Fatalf("revoked %v while fenced; lost %v", revokedTPs, lostTPs)
	}
}

// A pattern subscription keeps its last good topic list when listing the
// cluster's topics fails: a rejoin meanwhile keeps the partitions rather
// than joining with no topics and giving everything up.
func TestGroupPatternKeepsSubscription(t *testing.T) {
	fake := newFake(t, kfake.NumBrokers(1), kfake.SeedTopics(2, "pat-a"), kfake.SeedTopics(1, "other"),
		kfake.GroupMinSessionTimeout(100*time.Millisecond))
	var revoked atomic.Int32
	assigned := make(chan []TopicPartition, 4)
	// A short retry budget: a listing that fails fails fast.
	a, err := NewConsumer(newTestClient(t, SeedBrokers(fake.ListenAddrs()...), RetryTimeout(time.Second)),
		ConsumerGroup("g-pat"), SubscribePattern(regexp.MustCompile("pat-.*")), OffsetReset(ResetEarliest),
		SessionTimeout(time.Second), HeartbeatInterval(100*time.Millisecond),
		OnPartitionsAssigned(func(_ context.Context, tps []TopicPartition) { assigned <- tps }),
		OnPartitionsRevoked(func(_ context.Context, tps []TopicPartition) { revoked.Add(int32(len(tps))) }),
		HandleRecord(func(context.Context, *Record) error { return nil }))
	if err != nil {
		t.Fatal(err)
	}
	defer closeMember(t, a)
	select {
	case tps := <-assigned:
		if !slices.Equal(tps, []TopicPartition{{"pat-a", 0}, {"pat-a", 1}}) {
			t.Fatalf("assigned %v", tps)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("never assigned")
	}
	// From now on, asking for every topic fails.
	var refused atomic.Int32
	fake.ControlKey(int16(kmsg.Metadata), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		fake.KeepControl()
		if kr.(*kmsg.MetadataRequest).Topics != nil {
			return nil, nil, false
		}
		refused.Add(1)
		return nil, errors.New("refused"), true
	})
	var syncs atomic.Int32
	fake.ControlKey(int16(kmsg.SyncGroup), func(kmsg.Request) (kmsg.Response, error, bool) {
		fake.KeepControl()
		syncs.Add(1)
		return nil, nil, false
	})
	_, gen := memberIdentity(a)
	a.member.requestRejoin()
	waitFor(t, 20*time.Second, "the rejoin", func() bool {
		_, g := memberIdentity(a)
		return g > gen && syncs.Load() > 0
	})
	// The assignment is applied right after SyncGroup.
	waitFor(t, 30*time.Second, "the kept partitions", func() bool { return len(a.member.ownedList()) == 2 })
	// A revoke coming later than this would go unseen: a loaded machine
	// can only make this a false pass, never a false failure.
	time.Sleep(200 * time.Millisecond)
	if n := revoked.Load(); n != 0 || len(a.member.ownedList()) != 2 {
		t.Fatalf("rejoined while listing topics failed (%d refused): revoked %d, owns %v", refused.Load(), n, a.member.ownedList())
	}
}

// Under KIP-848 the broker matches a pattern (SubscribedTopicRegex): the
// member does not list the cluster's topics on every heartbeat, and still
// gets topics created later.
func TestGroupKIP848PatternBrokerSide(t *testing.T) {
	fake := newFake(t, kfake.NumBrokers(1), kfake.SeedTopics(2, "rx-a"), kfake.SeedTopics(1, "other"),
		kfake.BrokerConfigs(map[string]string{"group.consumer.heartbeat.interval.ms": "100"}))
	var hbs, listAll, names atomic.Int32
	var regex atomic.Value
	fake.ControlKey(int16(kmsg.ConsumerGroupHeartbeat), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		fake.KeepControl()
		req := kr.(*kmsg.ConsumerGroupHeartbeatRequest)
		hbs.Add(1)
		if len(req.SubscribedTopicNames) > 0 {
			names.Add(1)
		}
		if req.SubscribedTopicRegex != nil {
			regex.Store(*req.SubscribedTopicRegex)
		}
		return nil, nil, false
	})
	fake.ControlKey(int16(kmsg.Metadata), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		fake.KeepControl()
		if kr.(*kmsg.MetadataRequest).Topics == nil {
			listAll.Add(1)
		}
		return nil, nil, false
	})
	cl := newTestClient(t, SeedBrokers(fake.ListenAddrs()...))
	var mu sync.Mutex
	got := map[TopicPartition]bool{}
	a, err := NewConsumer(newTestClient(t, SeedBrokers(fake.ListenAddrs()...)),
		ConsumerGroup("g-rx"), SubscribePattern(regexp.MustCompile("rx-.*")), WithGroupProtocol(GroupProtocolConsumer),
		OnPartitionsAssigned(func(_ context.Context, tps []TopicPartition) {
			mu.Lock()
			for _, tp := range tps {
				got[tp] = true
			}
			mu.Unlock()
		}),
		HandleRecord(func(context.Context, *Record) error { return nil }))
	if err != nil {
		t.Fatal(err)
	}
	defer closeMember(t, a)
	has := func(n int) func() bool {
		return func() bool {
			mu.Lock()
			defer mu.Unlock()
			return len(got) == n
		}
	}
	waitFor(t, 20*time.Second, "rx-a's partitions", has(2))
	h0, l0 := hbs.Load(), listAll.Load()
	waitFor(t, 20*time.Second, "20 heartbeats", func() bool { return hbs.Load() >= h0+20 })
	if n := listAll.Load() - l0; n > 3 {
		t.Fatalf("%d listings of every topic in 20 heartbeats", n)
	}
	if re, _ := regex.Load().(string); re != "rx-.*" || names.Load() != 0 {
		t.Fatalf("heartbeats carried regex %q and topic names %d times", re, names.Load())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := cl.Admin().CreateTopics(ctx, TopicSpec{Name: "rx-b", Partitions: 1, ReplicationFactor: 1}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, "the new topic's partition", has(3))
	mu.Lock()
	defer mu.Unlock()
	for tp := range got {
		if tp.Topic == "other" {
			t.Fatalf("assigned %v", tp)
		}
	}
}

// Close hands the partitions back like a revoke, in the Java client's
// order: the final commit, then OnPartitionsRevoked for every partition
// still owned, then leaving the group.
func TestGroupCloseRevokes(t *testing.T) {
	for _, proto := range []GroupProtocol{GroupProtocolClassic, GroupProtocolConsumer} {
		t.Run(fmt.Sprint(proto), func(t *testing.T) { runCloseRevokes(t, proto) })
	}
}

func runCloseRevokes(t *testing.T, proto GroupProtocol) {
	fake := newFake(t, kfake.NumBrokers(1), kfake.SeedTopics(2, "cr"), kfake.GroupMinSessionTimeout(100*time.Millisecond),
		kfake.BrokerConfigs(map[string]string{"group.consumer.heartbeat.interval.ms": "100"}))
	cl := newTestClient(t, SeedBrokers(fake.ListenAddrs()...))
	produceN(t, cl, "cr", 2, 30)
	var left atomic.Bool
	fake.ControlKey(int16(kmsg.LeaveGroup), func(kmsg.Request) (kmsg.Response, error, bool) {
		fake.KeepControl()
		left.Store(true)
		return nil, nil, false
	})
	fake.ControlKey(int16(kmsg.ConsumerGroupHeartbeat), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		fake.KeepControl()
		if kr.(*kmsg.ConsumerGroupHeartbeatRequest).MemberEpoch < 0 {
			left.Store(true)
		}
		return nil, nil, false
	})
	var n atomic.Int32
	var mu sync.Mutex
	var calls [][]TopicPartition
	var problems []string
	cs, err := NewConsumer(newTestClient(t, SeedBrokers(fake.ListenAddrs()...)),
		ConsumerGroup("g-cr"), SubscribeTopics("cr"), WithGroupProtocol(proto), OffsetReset(ResetEarliest),
		DisableAutoCommit(), SessionTimeout(time.Second), HeartbeatInterval(100*time.Millisecond),
		OnPartitionsRevoked(func(_ context.Context, tps []TopicPartition) {
			sum := committedSum(t, cl, "g-cr")
			mu.Lock()
			defer mu.Unlock()
			calls = append(calls, tps)
			if sum != 60 {
				problems = append(problems, fmt.Sprintf("committed %d of 60 before the callback", sum))
			}
			if left.Load() {
				problems = append(problems, "left the group before the callback")
			}
		}),
		HandleRecord(func(context.Context, *Record) error { n.Add(1); return nil }))
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, "every record", func() bool { return n.Load() == 60 })
	closeMember(t, cs)
	mu.Lock()
	defer mu.Unlock()
	if len(calls) != 1 || !slices.Equal(calls[0], []TopicPartition{{"cr", 0}, {"cr", 1}}) || len(problems) > 0 {
		t.Fatalf("OnPartitionsRevoked calls %v; %v", calls, problems)
	}
	if !left.Load() {
		t.Fatal("never left the group")
	}
}

// An offset read for a partition is committed only while the member still
// owns the partition under the ownership it was read under: once the
// partition's revoke started (the revoke commits it itself) or it was lost
// (another member may own it), an offset read before is dropped and
// reported, never sent.
func TestCommitDropsPartitionsNoLongerOwned(t *testing.T) {
	fake := newFake(t, kfake.NumBrokers(1), kfake.SeedTopics(2, "own"))
	var smu sync.Mutex
	sent := map[TopicPartition][]int64{}
	fake.ControlKey(int16(kmsg.OffsetCommit), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		fake.KeepControl()
		smu.Lock()
		defer smu.Unlock()
		for _, rt := range kr.(*kmsg.OffsetCommitRequest).Topics {
			for _, p := range rt.Partitions {
				tp := TopicPartition{rt.Topic, p.Partition}
				sent[tp] = append(sent[tp], p.Offset)
			}
		}
		return nil, nil, false
	})
	assigned := make(chan []TopicPartition, 4)
	cs, err := NewConsumer(newTestClient(t, SeedBrokers(fake.ListenAddrs()...)),
		ConsumerGroup("g-own"), SubscribeTopics("own"), DisableAutoCommit(),
		OnPartitionsAssigned(func(_ context.Context, tps []TopicPartition) { assigned <- tps }),
		HandleRecord(func(context.Context, *Record) error { return nil }))
	if err != nil {
		t.Fatal(err)
	}
	defer closeMember(t, cs)
	select {
	case <-assigned:
	case <-time.After(20 * time.Second):
		t.Fatal("never assigned")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	tp0, tp1 := TopicPartition{"own", 0}, TopicPartition{"own", 1}
	_, _, own := cs.member.ownedPositions()
	cs.member.retoken([]TopicPartition{tp0}) // tp0's revoke starts
	err = cs.member.commits.commitSync(ctx, map[TopicPartition]int64{tp0: 7, tp1: 7}, nil, own)
	if !errors.Is(err, ErrNotAssigned) {
		t.Fatalf("commit over a revoke: %v", err)
	}
	cs.member.lose(ctx) // fenced
	err = cs.member.commits.commitSync(ctx, map[TopicPartition]int64{tp1: 9}, nil, own)
	if !errors.Is(err, ErrNotAssigned) {
		t.Fatalf("commit after a loss: %v", err)
	}
	smu.Lock()
	defer smu.Unlock()
	if !slices.Equal(sent[tp0], nil) || !slices.Equal(sent[tp1], []int64{7}) {
		t.Fatalf("sent %v", sent)
	}
}
