package riffle

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/riffle-go/riffle/internal/kafkaerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// stopAt is where the test group's handler stops on each partition: it
// finishes records 0..stopAt(p)-1 and fails at stopAt(p), so the committed
// offsets differ per partition and lag is left on all of them.
func stopAt(p int32) int64 { return 3 + int64(p) }

// startLagConsumer starts a one-member group "g" on topic "t" (3
// partitions of perPartition records) on its own client, waits until
// every partition stopped at stopAt, and commits. It returns the consumer
// and its member id.
func startLagConsumer(t *testing.T, addrs []string) (*Consumer, string) {
	t.Helper()
	ccl := newTestClient(t, SeedBrokers(addrs...), ClientID("lag-consumer"))
	var mu sync.Mutex
	stopped := map[int32]bool{}
	done := make(chan struct{})
	cs, err := NewConsumer(ccl,
		ConsumerGroup("g"), SubscribeTopics("t"), OffsetReset(ResetEarliest), DisableAutoCommit(),
		SessionTimeout(2*time.Second), HeartbeatInterval(100*time.Millisecond),
		HandleRecord(func(_ context.Context, r *Record) error {
			if r.Offset >= stopAt(r.Partition) {
				return fmt.Errorf("stop here")
			}
			return nil
		}),
		OnPartitionError(func(pe *PartitionError) {
			mu.Lock()
			defer mu.Unlock()
			if pe.Offset != stopAt(pe.Partition) {
				t.Errorf("partition %d stopped at %d, want %d", pe.Partition, pe.Offset, stopAt(pe.Partition))
			}
			if !stopped[pe.Partition] {
				stopped[pe.Partition] = true
				if len(stopped) == 3 {
					close(done)
				}
			}
		}),
	)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close(context.Background()) })
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatalf("the group did not consume up to its stop offsets; stats %+v", cs.Stats())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := cs.Commit(ctx); err != nil {
		t.Fatalf("commit: %v", err)
	}
	cs.member.mu.Lock()
	id := cs.member.memberID
	cs.member.mu.Unlock()
	if id == "" {
		t.Fatal("member has no id")
	}
	return cs, id
}

func committedOffsets(t *testing.T, ctx context.Context, adm *Admin, group string) map[TopicPartition]int64 {
	t.Helper()
	got, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		t.Fatalf("FetchOffsets(%q): %v", group, err)
	}
	out := map[TopicPartition]int64{}
	for tp, om := range got {
		out[tp] = om.Offset
	}
	return out
}

// offsetsOnT builds the expected offsets of topic t's 3 partitions.
func offsetsOnT(f func(p int32) int64) map[TopicPartition]int64 {
	out := map[TopicPartition]int64{}
	for p := int32(0); p < 3; p++ {
		out[TopicPartition{"t", p}] = f(p)
	}
	return out
}

func TestAdminGroupLifecycle(t *testing.T) {
	fake := newFake(t, kfake.NumBrokers(3), kfake.SeedTopics(3, "t"), kfake.GroupMinSessionTimeout(100*time.Millisecond))
	addrs := fake.ListenAddrs()
	cl := newTestClient(t, SeedBrokers(addrs...))
	const perPartition = 10
	produceN(t, cl, "t", 3, perPartition)
	adm := cl.Admin()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	cs, memberID := startLagConsumer(t, addrs)

	// ListGroups finds the group on its coordinator, whichever broker
	// that is.
	groups, err := adm.ListGroups(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := []GroupListing{{Group: "g", ProtocolType: "consumer", State: GroupStateStable}}; !slices.Equal(groups, want) {
		t.Fatalf("ListGroups = %+v, want %+v", groups, want)
	}

	// DescribeGroups shows the member and everything it owns; an unknown
	// group is reported as such, without hiding the other.
	descs, err := adm.DescribeGroups(ctx, "g", "nope", "g")
	if err != nil {
		t.Fatal(err)
	}
	if len(descs) != 2 {
		t.Fatalf("%d descriptions for 2 distinct groups: %+v", len(descs), descs)
	}
	d := descs[0]
	if d.Group != "g" || d.Err != nil || d.State != GroupStateStable || d.ProtocolType != "consumer" ||
		d.Protocol != CooperativeStickyBalancer().Name() || d.Coordinator != fake.CoordinatorFor("g") || len(d.Members) != 1 {
		t.Fatalf("description of g = %+v (coordinator should be %d)", d, fake.CoordinatorFor("g"))
	}
	m := d.Members[0]
	wantAssigned := []TopicPartition{{"t", 0}, {"t", 1}, {"t", 2}}
	if m.MemberID != memberID || m.ClientID != "lag-consumer" || m.ClientHost == "" || m.InstanceID != "" ||
		m.AssignmentErr != nil || !slices.Equal(m.Assigned, wantAssigned) {
		t.Fatalf("member = %+v, want id %s owning %v", m, memberID, wantAssigned)
	}
	if descs[1].Group != "nope" || !errors.Is(descs[1].Err, ErrGroupIDNotFound) {
		t.Fatalf("description of an unknown group = %+v, want ErrGroupIDNotFound", descs[1])
	}

	// The committed offsets and the lag they leave.
	if got, want := committedOffsets(t, ctx, adm, "g"), offsetsOnT(stopAt); !maps.Equal(got, want) {
		t.Fatalf("committed = %v, want %v", got, want)
	}
	lags, err := adm.GroupLag(ctx, "g")
	if err != nil {
		t.Fatal(err)
	}
	if len(lags) != 3 {
		t.Fatalf("GroupLag = %v, want 3 partitions", lags)
	}
	for i, l := range lags {
		p := int32(i)
		want := PartitionLag{TopicPartition: TopicPartition{"t", p}, Committed: stopAt(p), HighWatermark: perPartition,
			Lag: perPartition - stopAt(p), Member: memberID}
		if l != want {
			t.Errorf("lag[%d] = %v, want %v", i, l, want)
		}
	}

	// An active group keeps its offsets and cannot be deleted.
	// (The state check refuses it before any commit is tried.)
	if _, err := adm.ResetOffsets(ctx, "g", AtEarliest()); !errors.Is(err, ErrGroupActive) || !strings.Contains(err.Error(), "is Stable with 1 member(s)") {
		t.Fatalf("ResetOffsets on a live group: %v, want ErrGroupActive naming the state", err)
	}
	if got, want := committedOffsets(t, ctx, adm, "g"), offsetsOnT(stopAt); !maps.Equal(got, want) {
		t.Fatalf("a refused reset changed the offsets: %v, want %v", got, want)
	}
	res, err := adm.DeleteGroups(ctx, "g")
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 1 || !errors.Is(res[0].Err, ErrNonEmptyGroup) || !errors.Is(res.Err(), ErrNonEmptyGroup) {
		t.Fatalf("deleting a live group: %+v, want ErrNonEmptyGroup", res)
	}

	// Once the member is gone the group is Empty and can be reset.
	// Close reports the partitions its handler stopped.
	_, err = cs.Close(ctx)
	var stopped *StoppedPartitionsError
	if !errors.As(err, &stopped) || len(stopped.Partitions) != 3 {
		t.Fatalf("close: %v, want the 3 stopped partitions", err)
	}
	descs, err = adm.DescribeGroups(ctx, "g")
	if err != nil || descs[0].Err != nil || descs[0].State != GroupStateEmpty || len(descs[0].Members) != 0 {
		t.Fatalf("after close: %+v %v, want an Empty group", descs, err)
	}

	// A preview commits nothing.
	preview, err := adm.PreviewResetOffsets(ctx, "g", AtEarliest())
	if err != nil {
		t.Fatal(err)
	}
	zero := offsetsOnT(func(int32) int64 { return 0 })
	if !maps.Equal(preview, zero) {
		t.Fatalf("preview = %v, want %v", preview, zero)
	}
	if got, want := committedOffsets(t, ctx, adm, "g"), offsetsOnT(stopAt); !maps.Equal(got, want) {
		t.Fatalf("the preview changed the offsets: %v, want %v", got, want)
	}

	for _, tc := range []struct {
		name   string
		to     StartOffset
		topics []string
		want   map[TopicPartition]int64
	}{
		// No topics: the topics the group has offsets for.
		{"earliest", AtEarliest(), nil, zero},
		{"exact", AtOffset(5), []string{"t"}, offsetsOnT(func(int32) int64 { return 5 })},
		{"latest", AtLatest(), []string{"t"}, offsetsOnT(func(int32) int64 { return perPartition })},
		{"exact beyond the end is clamped", AtOffset(1000), nil, offsetsOnT(func(int32) int64 { return perPartition })},
		{"time in the past", AtTime(time.Now().Add(-time.Hour)), nil, zero},
		{"time in the future means the end", AtTime(time.Now().Add(time.Hour)), nil, offsetsOnT(func(int32) int64 { return perPartition })},
		{"exact again", AtOffset(7), nil, offsetsOnT(func(int32) int64 { return 7 })},
	} {
		set, err := adm.ResetOffsets(ctx, "g", tc.to, tc.topics...)
		if err != nil {
			t.Fatalf("%s: ResetOffsets: %v", tc.name, err)
		}
		if !maps.Equal(set, tc.want) {
			t.Fatalf("%s: ResetOffsets returned %v, want %v", tc.name, set, tc.want)
		}
		if got := committedOffsets(t, ctx, adm, "g"); !maps.Equal(got, tc.want) {
			t.Fatalf("%s: committed after reset = %v, want %v", tc.name, got, tc.want)
		}
	}

	// Lag follows the reset; nobody owns the partitions now.
	lags, err = adm.GroupLag(ctx, "g")
	if err != nil {
		t.Fatal(err)
	}
	for i, l := range lags {
		want := PartitionLag{TopicPartition: TopicPartition{"t", int32(i)}, Committed: 7, HighWatermark: perPartition, Lag: perPartition - 7}
		if l != want {
			t.Errorf("lag after reset [%d] = %v, want %v", i, l, want)
		}
	}

	if _, err := adm.ResetOffsets(ctx, "g", AtEarliest(), "no-such-topic"); !errors.Is(err, ErrUnknownTopicOrPartition) {
		t.Fatalf("reset of an unknown topic: %v, want ErrUnknownTopicOrPartition", err)
	}
	if _, err := adm.ResetOffsets(ctx, "g", AtOffset(-3)); err == nil {
		t.Fatal("reset to a negative offset succeeded")
	}

	// Delete: the empty group goes, the unknown one reports why.
	res, err = adm.DeleteGroups(ctx, "g", "nope")
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 2 || res[0].Group != "g" || res[0].Err != nil || res[1].Group != "nope" || !errors.Is(res[1].Err, ErrGroupIDNotFound) {
		t.Fatalf("DeleteGroups = %+v", res)
	}
	if !errors.Is(res.Err(), ErrGroupIDNotFound) || !strings.Contains(res.Err().Error(), `"nope"`) {
		t.Fatalf("joined error %v", res.Err())
	}
	groups, err = adm.ListGroups(ctx)
	if err != nil || len(groups) != 0 {
		t.Fatalf("ListGroups after delete = %+v %v, want none", groups, err)
	}
	if got := committedOffsets(t, ctx, adm, "g"); len(got) != 0 {
		t.Fatalf("offsets of a deleted group: %v", got)
	}
	if _, err := adm.GroupLag(ctx, "g"); !errors.Is(err, ErrGroupIDNotFound) {
		t.Fatalf("lag of a deleted group: %v, want ErrGroupIDNotFound", err)
	}
}

// Groups live on different coordinators: listing must ask every broker,
// and a broker that cannot answer makes the listing incomplete, not
// silently short.
func TestAdminListGroupsEveryBroker(t *testing.T) {
	fake := newFake(t, kfake.NumBrokers(3), kfake.SeedTopics(2, "t"))
	cl := newTestClient(t, SeedBrokers(fake.ListenAddrs()[0]), RetryTimeout(2*time.Second))
	adm := cl.Admin()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	var names []string
	coordinators := map[int32]int{}
	for i := 0; i < 12; i++ {
		g := fmt.Sprintf("grp-%02d", i)
		names = append(names, g)
		coordinators[fake.CoordinatorFor(g)]++
		// A reset of a group that does not exist creates it.
		set, err := adm.ResetOffsets(ctx, g, AtEarliest(), "t")
		if err != nil || len(set) != 2 {
			t.Fatalf("reset %s: %v %v", g, set, err)
		}
	}
	if len(coordinators) < 2 {
		t.Fatalf("every group has the same coordinator (%v): the test proves nothing", coordinators)
	}
	groups, err := adm.ListGroups(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, g := range groups {
		got = append(got, g.Group)
		if g.State != GroupStateEmpty {
			t.Errorf("group %+v, want Empty", g)
		}
	}
	if !slices.Equal(got, names) {
		t.Fatalf("listed %v, want %v", got, names)
	}

	// One broker refuses: the others' groups come back with an error
	// naming it.
	const bad = 1
	fake.ControlKey(int16(kmsg.ListGroups), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		fake.KeepControl()
		if fake.CurrentNode() != bad {
			return nil, nil, false
		}
		resp := kr.ResponseKind().(*kmsg.ListGroupsResponse)
		resp.ErrorCode = kafkaerr.ClusterAuthorizationFailed
		return resp, nil, true
	})
	groups, err = adm.ListGroups(ctx)
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("broker %d:", bad)) || !strings.Contains(err.Error(), "CLUSTER_AUTHORIZATION_FAILED") {
		t.Fatalf("ListGroups with broker %d failing: err %v", bad, err)
	}
	if len(groups) != len(names)-coordinators[bad] {
		t.Fatalf("listed %d groups, want the %d not on broker %d", len(groups), len(names)-coordinators[bad], bad)
	}
	for _, g := range groups {
		if fake.CoordinatorFor(g.Group) == bad {
			t.Fatalf("group %s of the failed broker listed", g.Group)
		}
	}
}

// A coordinator that moved answers NOT_COORDINATOR; the call finds the
// new one and retries just that group.
func TestAdminGroupCoordinatorMoved(t *testing.T) {
	fake := newFake(t, kfake.NumBrokers(3), kfake.SeedTopics(1, "t"))
	cl := newTestClient(t, SeedBrokers(fake.ListenAddrs()...))
	adm := cl.Admin()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := adm.ResetOffsets(ctx, "moving", AtOffset(0), "t"); err != nil {
		t.Fatal(err)
	}

	var mu sync.Mutex
	refused := 0
	fake.ControlKey(int16(kmsg.DescribeGroups), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		mu.Lock()
		defer mu.Unlock()
		refused++
		req := kr.(*kmsg.DescribeGroupsRequest)
		resp := kr.ResponseKind().(*kmsg.DescribeGroupsResponse)
		for _, g := range req.Groups {
			rg := kmsg.NewDescribeGroupsResponseGroup()
			rg.Group = g
			rg.ErrorCode = kafkaerr.NotCoordinator
			resp.Groups = append(resp.Groups, rg)
		}
		return resp, nil, true
	})
	descs, err := adm.DescribeGroups(ctx, "moving")
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	n := refused
	mu.Unlock()
	if n != 1 || descs[0].Err != nil || descs[0].State != GroupStateEmpty {
		t.Fatalf("after %d NOT_COORDINATOR answers: %+v", n, descs[0])
	}
}

// Brokers before DescribeGroups v6 describe an unknown group as Dead; it
// is reported as not found all the same.
func TestAdminDescribeGroupsOldBroker(t *testing.T) {
	fake := newFake(t, kfake.NumBrokers(1), kfake.SeedTopics(1, "t"))
	cl := newTestClient(t, SeedBrokers(fake.ListenAddrs()...), MaxVersions(int16(kmsg.DescribeGroups), 5))
	adm := cl.Admin()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := adm.ResetOffsets(ctx, "known", AtOffset(0), "t"); err != nil {
		t.Fatal(err)
	}
	descs, err := adm.DescribeGroups(ctx, "unknown", "known")
	if err != nil {
		t.Fatal(err)
	}
	if !errors.Is(descs[0].Err, ErrGroupIDNotFound) || descs[0].State != GroupStateDead {
		t.Fatalf("unknown group: %+v, want Dead and ErrGroupIDNotFound", descs[0])
	}
	if descs[1].Err != nil || descs[1].State != GroupStateEmpty {
		t.Fatalf("known group: %+v", descs[1])
	}
}

// A KIP-848 group is described with ConsumerGroupDescribe: members and
// their assignments (topic ids resolved), state and type; lag sees its
// members, and ResetOffsets refuses while it has members.
func TestAdminDescribeKIP848Group(t *testing.T) {
	fake := newFake(t, kfake.NumBrokers(2), kfake.SeedTopics(3, "t"),
		kfake.BrokerConfigs(map[string]string{"group.consumer.heartbeat.interval.ms": "100"}))
	addrs := fake.ListenAddrs()
	cl := newTestClient(t, SeedBrokers(addrs...))
	produceN(t, cl, "t", 3, 10)
	ccl := newTestClient(t, SeedBrokers(addrs...), ClientID("kip848-member"))
	var done sync.Map
	cs, err := NewConsumer(ccl, ConsumerGroup("g848"), SubscribeTopics("t"), WithGroupProtocol(GroupProtocolConsumer),
		OffsetReset(ResetEarliest),
		HandleRecord(func(_ context.Context, r *Record) error { done.Store(r.Partition, r.Offset); return nil }))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		cs.Close(ctx)
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	adm := cl.Admin()
	var d GroupDescription
	deadline := time.Now().Add(20 * time.Second)
	for {
		descs, err := adm.DescribeGroups(ctx, "g848", "nope")
		if err != nil {
			t.Fatal(err)
		}
		if !errors.Is(descs[1].Err, ErrGroupIDNotFound) {
			t.Fatalf("unknown group described as %+v", descs[1])
		}
		d = descs[0]
		if len(d.Members) == 1 && len(d.Members[0].Assigned) == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("description of the KIP-848 group: %+v", d)
		}
		time.Sleep(50 * time.Millisecond)
	}
	m := d.Members[0]
	if d.Type != "consumer" || d.Err != nil || d.State != GroupStateStable || d.Coordinator != fake.CoordinatorFor("g848") ||
		m.ClientID != "kip848-member" || m.AssignmentErr != nil ||
		!slices.Equal(m.Assigned, []TopicPartition{{"t", 0}, {"t", 1}, {"t", 2}}) {
		t.Fatalf("description %+v", d)
	}
	if _, err := adm.ResetOffsets(ctx, "g848", AtEarliest(), "t"); !errors.Is(err, ErrGroupActive) {
		t.Fatalf("reset of an active KIP-848 group: %v, want ErrGroupActive", err)
	}
	lag, err := adm.GroupLag(ctx, "g848")
	if err != nil || len(lag) != 3 {
		t.Fatalf("lag %+v, %v", lag, err)
	}
	for _, l := range lag {
		if l.Member == "" {
			t.Fatalf("lag row without its member: %+v", l)
		}
	}
	// A consumer group the caller may not fully describe reports that
	// error, not "not found" (which would let a reset through).
	fake.ControlKey(int16(kmsg.ConsumerGroupDescribe), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		fake.KeepControl()
		req := kr.(*kmsg.ConsumerGroupDescribeRequest)
		resp := req.ResponseKind().(*kmsg.ConsumerGroupDescribeResponse)
		for _, g := range req.Groups {
			rg := kmsg.NewConsumerGroupDescribeResponseGroup()
			rg.Group = g
			rg.ErrorCode = 29 // TOPIC_AUTHORIZATION_FAILED
			resp.Groups = append(resp.Groups, rg)
		}
		return resp, nil, true
	})
	descs, err := adm.DescribeGroups(ctx, "g848")
	if err != nil {
		t.Fatal(err)
	}
	if d := descs[0]; d.Type != "consumer" || !errors.Is(d.Err, kafkaerr.ForCode(29)) {
		t.Fatalf("description with a describe error: %+v", d)
	}
	if _, err := adm.ResetOffsets(ctx, "g848", AtEarliest(), "t"); err == nil || errors.Is(err, ErrGroupIDNotFound) {
		t.Fatalf("reset while the group could not be described: %v", err)
	}
}
