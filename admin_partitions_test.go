package riffle

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestAdminDeleteRecords(t *testing.T) {
	fake := newFake(t, kfake.NumBrokers(3), kfake.SeedTopics(3, "t"))
	cl := newTestClient(t, SeedBrokers(fake.ListenAddrs()[0]))
	adm := cl.Admin()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for p := int32(0); p < 3; p++ {
		produceRaw(t, ctx, cl, fake.LeaderFor("t", p), "t", p, []int64{1, 2, 3, 4})
	}
	// Partition 2's leader moves after the client learned it: the first
	// attempt gets NOT_LEADER, the retry goes to the new leader.
	if _, err := cl.cl.LookupTopic(ctx, "t"); err != nil {
		t.Fatal(err)
	}
	if err := fake.MoveTopicPartition("t", 2, (fake.LeaderFor("t", 2)+1)%3); err != nil {
		t.Fatal(err)
	}

	got, err := adm.DeleteRecords(ctx, map[TopicPartition]int64{
		{"t", 0}:       2,
		{"t", 1}:       OffsetLatest,
		{"t", 2}:       99, // above the high watermark
		{"t", 7}:       0,  // no such partition
		{"missing", 0}: 0,
		{"t", 3}:       -5,
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 6 {
		t.Fatalf("results: %+v", got)
	}
	by := map[TopicPartition]DeletedRecords{}
	for _, d := range got {
		by[d.TopicPartition] = d
	}
	if d := by[TopicPartition{"t", 0}]; d.Err != nil || d.LowWatermark != 2 {
		t.Fatalf("t[0]: %+v", d)
	}
	if d := by[TopicPartition{"t", 1}]; d.Err != nil || d.LowWatermark != 4 {
		t.Fatalf("t[1]: %+v", d)
	}
	if d := by[TopicPartition{"t", 2}]; !errors.Is(d.Err, KafkaErrorForCode(1)) || d.LowWatermark != -1 {
		t.Fatalf("t[2] (offset 99 after a leader move): %+v", d)
	}
	if d := by[TopicPartition{"t", 7}]; !errors.Is(d.Err, ErrUnknownTopicOrPartition) {
		t.Fatalf("t[7]: %+v", d)
	}
	if d := by[TopicPartition{"missing", 0}]; !errors.Is(d.Err, ErrUnknownTopic) {
		t.Fatalf("missing[0]: %+v", d)
	}
	if d := by[TopicPartition{"t", 3}]; !errors.Is(d.Err, ErrInvalidConfig) {
		t.Fatalf("t[3] offset -5: %+v", d)
	}
	if !slices.IsSortedFunc(got, func(a, b DeletedRecords) int {
		if tpLess(a.TopicPartition, b.TopicPartition) {
			return -1
		}
		return 1
	}) {
		t.Fatalf("not sorted: %+v", got)
	}
	offs, err := adm.ListOffsets(ctx, OffsetEarliest, "t")
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range offs {
		if want := map[int32]int64{0: 2, 1: 4, 2: 0}[o.Partition]; o.Offset != want {
			t.Fatalf("log start of t[%d] = %d, want %d", o.Partition, o.Offset, want)
		}
	}
}

func TestAdminReassignments(t *testing.T) {
	fake := newFake(t, kfake.NumBrokers(3), kfake.SeedTopics(2, "t"))
	// kfake has no reassignments in progress: its ListPartitionReassignments
	// always answers none, so a hook answers with one, after a first
	// NOT_CONTROLLER that must be retried.
	var lists atomic.Int32
	fake.ControlKey(int16(kmsg.ListPartitionReassignments), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		fake.KeepControl()
		resp := kr.ResponseKind().(*kmsg.ListPartitionReassignmentsResponse)
		if lists.Add(1) == 1 {
			resp.ErrorCode = 41 // NOT_CONTROLLER
			return resp, nil, true
		}
		rt := kmsg.NewListPartitionReassignmentsResponseTopic()
		rt.Topic = "t"
		rp := kmsg.NewListPartitionReassignmentsResponseTopicPartition()
		rp.Partition, rp.Replicas, rp.AddingReplicas, rp.RemovingReplicas = 1, []int32{0, 1, 2}, []int32{2}, []int32{0}
		rt.Partitions = append(rt.Partitions, rp)
		resp.Topics = append(resp.Topics, rt)
		return resp, nil, true
	})
	cl := newTestClient(t, SeedBrokers(fake.ListenAddrs()...))
	adm := cl.Admin()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	res, err := adm.AlterPartitionReassignments(ctx, map[TopicPartition][]int32{
		{"t", 0}:       {1, 2},
		{"t", 1}:       nil, // cancel: none in progress
		{"missing", 0}: {0},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []TopicPartition{{"missing", 0}, {"t", 0}, {"t", 1}}
	if len(res) != 3 || res[0].TopicPartition != want[0] || res[1].TopicPartition != want[1] || res[2].TopicPartition != want[2] {
		t.Fatalf("results: %+v", res)
	}
	if !errors.Is(res[0].Err, ErrUnknownTopicOrPartition) || res[1].Err != nil || !errors.Is(res[2].Err, ErrNoReassignmentInProgress) {
		t.Fatalf("per-partition errors: %+v", res)
	}

	list, err := adm.ListPartitionReassignments(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if lists.Load() != 2 {
		t.Fatalf("%d list requests, want 2 (NOT_CONTROLLER retried)", lists.Load())
	}
	if len(list) != 1 || list[0].TopicPartition != (TopicPartition{"t", 1}) ||
		!slices.Equal(list[0].Adding, []int32{2}) || !slices.Equal(list[0].Removing, []int32{0}) {
		t.Fatalf("list: %+v", list)
	}
}

func TestAdminElectLeaders(t *testing.T) {
	fake := newFake(t, kfake.NumBrokers(3), kfake.SeedTopics(2, "t"))
	cl := newTestClient(t, SeedBrokers(fake.ListenAddrs()...))
	adm := cl.Admin()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	before := fake.LeaderFor("t", 0)
	res, err := adm.ElectLeaders(ctx, ElectionPreferred, TopicPartition{"t", 0}, TopicPartition{"nope", 0})
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 2 || res[0].TopicPartition != (TopicPartition{"nope", 0}) || !errors.Is(res[0].Err, ErrUnknownTopicOrPartition) || res[1].Err != nil {
		t.Fatalf("results: %+v", res)
	}
	if fake.LeaderFor("t", 0) == before {
		t.Fatal("kfake's election did not happen (it rotates the leader)")
	}
	if !errors.Is(res.Err(), ErrUnknownTopicOrPartition) {
		t.Fatalf("joined: %v", res.Err())
	}
	// Every partition when none is named.
	res, err = adm.ElectLeaders(ctx, ElectionUnclean)
	if err != nil || len(res) != 2 || res.Err() != nil {
		t.Fatalf("all partitions: %+v %v", res, err)
	}
	if _, err := adm.ElectLeaders(ctx, 5); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("bad election type: %v", err)
	}
	// A top-level error is every partition's.
	fake.ControlKey(int16(kmsg.ElectLeaders), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		resp := kr.ResponseKind().(*kmsg.ElectLeadersResponse)
		resp.ErrorCode = 31 // CLUSTER_AUTHORIZATION_FAILED
		return resp, nil, true
	})
	res, err = adm.ElectLeaders(ctx, ElectionPreferred, TopicPartition{"t", 0}, TopicPartition{"t", 1})
	if err != nil || len(res) != 2 || !errors.Is(res[0].Err, ErrClusterAuthorization) || !errors.Is(res[1].Err, ErrClusterAuthorization) {
		t.Fatalf("top-level error: %+v %v", res, err)
	}
}

func TestAdminDescribeLogDirs(t *testing.T) {
	fake := newFake(t, kfake.NumBrokers(2), kfake.SeedTopics(1, "t"))
	cl := newTestClient(t, SeedBrokers(fake.ListenAddrs()...))
	adm := cl.Admin()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	produceRaw(t, ctx, cl, fake.LeaderFor("t", 0), "t", 0, []int64{1, 2})

	all, err := adm.DescribeLogDirs(ctx)
	if err != nil || len(all) != 2 || all[0].Broker != 0 || all[1].Broker != 1 {
		t.Fatalf("every broker: %+v %v", all, err)
	}
	for _, b := range all {
		if b.Err != nil || len(b.Dirs) == 0 {
			t.Fatalf("broker %d: %+v", b.Broker, b)
		}
		var found bool
		for _, d := range b.Dirs {
			for _, p := range d.Partitions {
				if p.TopicPartition == (TopicPartition{"t", 0}) && p.Size > 0 {
					found = true
				}
			}
		}
		if !found {
			t.Fatalf("broker %d: t[0] with its records not listed: %+v", b.Broker, b.Dirs)
		}
	}
	// A broker that does not exist fails alone.
	some, err := adm.DescribeLogDirs(ctx, 1, 9)
	if err != nil || len(some) != 2 || some[0].Err != nil || !errors.Is(some[1].Err, ErrUnknownBroker) {
		t.Fatalf("broker 9: %+v %v", some, err)
	}
}

func TestAdminDeleteGroupOffsets(t *testing.T) {
	fake := newFake(t, kfake.NumBrokers(2), kfake.SeedTopics(2, "t"))
	cl := newTestClient(t, SeedBrokers(fake.ListenAddrs()...))
	adm := cl.Admin()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := adm.ResetOffsets(ctx, "g", AtEarliest(), "t"); err != nil {
		t.Fatal(err)
	}
	res, err := adm.DeleteGroupOffsets(ctx, "g", TopicPartition{"t", 1}, TopicPartition{"t", 1})
	if err != nil || len(res) != 1 || res[0].Err != nil {
		t.Fatalf("delete: %+v %v", res, err)
	}
	left, err := adm.FetchOffsets(ctx, "g")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := left[TopicPartition{"t", 1}]; ok || len(left) != 1 {
		t.Fatalf("offsets left: %v", left)
	}
	res, err = adm.DeleteGroupOffsets(ctx, "no-such-group", TopicPartition{"t", 0}, TopicPartition{"t", 1})
	if err != nil || len(res) != 2 || !errors.Is(res[0].Err, ErrGroupIDNotFound) || !errors.Is(res[1].Err, ErrGroupIDNotFound) {
		t.Fatalf("unknown group: %+v %v", res, err)
	}
}
