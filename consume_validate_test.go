package riffle

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// truncateAt makes every OffsetForLeaderEpoch answer for topic t say that
// the requested epoch ends at end: the leader's log was truncated there
// (kfake does no replication, so unclean elections must be played).
func truncateAt(fake *kfake.Cluster, end int64) {
	fake.ControlKey(kmsg.OffsetForLeaderEpoch.Int16(), func(r kmsg.Request) (kmsg.Response, error, bool) {
		fake.KeepControl()
		req := r.(*kmsg.OffsetForLeaderEpochRequest)
		resp := req.ResponseKind().(*kmsg.OffsetForLeaderEpochResponse)
		for _, rt := range req.Topics {
			st := kmsg.NewOffsetForLeaderEpochResponseTopic()
			st.Topic = rt.Topic
			for _, rp := range rt.Partitions {
				sp := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
				sp.Partition = rp.Partition
				sp.LeaderEpoch = rp.LeaderEpoch
				sp.EndOffset = end
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil, true
	})
}

// Issue 10, point 6: after a leader change, the consumer checks its fetch
// position against the new leader's log (OffsetForLeaderEpoch with the
// epoch of the last fetched record). A log that ends before the position
// (an unclean election truncated it) is reported as ErrLogTruncated; with
// a reset policy the partition resumes where the logs diverge, with
// ResetNone it stops.
func TestConsumeDetectsLogTruncation(t *testing.T) {
	for _, none := range []bool{false, true} {
		t.Run(fmt.Sprintf("resetNone=%v", none), func(t *testing.T) {
			fake := newFake(t, kfake.NumBrokers(2), kfake.SeedTopics(1, "t"))
			cl := newTestClient(t, SeedBrokers(fake.ListenAddrs()...), MetadataMinAge(10*time.Millisecond))
			var recs []*Record
			for i := range 20 {
				recs = append(recs, &Record{Topic: "t", Value: []byte(fmt.Sprint(i))})
			}
			produceRecords(t, cl, recs)
			var mu sync.Mutex
			var seen []int64
			var perrs []*PartitionError
			opts := []ConsumerOption{
				HandleRecord(func(_ context.Context, r *Record) error {
					mu.Lock()
					seen = append(seen, r.Offset)
					mu.Unlock()
					return nil
				}),
				OnPartitionError(func(pe *PartitionError) {
					mu.Lock()
					perrs = append(perrs, pe)
					mu.Unlock()
				}),
				FetchMaxWait(50 * time.Millisecond),
			}
			if none {
				opts = append(opts, OffsetReset(ResetNone))
			}
			cs, err := NewConsumer(cl, opts...)
			if err != nil {
				t.Fatal(err)
			}
			assignAll(t, cs, "t", 1, AtEarliest())
			count := func() int { mu.Lock(); defer mu.Unlock(); return len(seen) }
			waitUntil(t, 20*time.Second, func() bool { return count() == 20 }, func() string { return statsString(cs) })

			// An unclean election: a new leader whose log ends at 12.
			truncateAt(fake, 12)
			if err := fake.MoveTopicPartition("t", 0, 1-fake.LeaderFor("t", 0)); err != nil {
				t.Fatal(err)
			}
			cl.cl.TriggerMetadata()
			waitUntil(t, 20*time.Second, func() bool { mu.Lock(); defer mu.Unlock(); return len(perrs) > 0 }, func() string { return "no truncation reported: " + statsString(cs) })
			mu.Lock()
			pe := perrs[0]
			mu.Unlock()
			var te *LogTruncationError
			if !errors.Is(pe.Err, ErrLogTruncated) || !errors.As(pe.Err, &te) || te.FetchOffset != 20 || te.DivergingOffset != 12 {
				t.Fatalf("reported %v, want a truncation from 20 diverging at 12", pe)
			}
			if none {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				_, err := cs.Close(ctx)
				if !errors.Is(err, ErrLogTruncated) {
					t.Fatalf("close: %v, want the partition reported stopped by the truncation", err)
				}
				if n := count(); n != 20 {
					t.Fatalf("%d records handled; a stopped partition must not go on", n)
				}
				return
			}
			// Resumed where the logs diverge: 12..19 again (here the
			// records are still there; after a real truncation they
			// would be the new leader's).
			waitUntil(t, 20*time.Second, func() bool { return count() == 28 }, func() string { return statsString(cs) })
			mu.Lock()
			again := append([]int64(nil), seen[20:]...)
			mu.Unlock()
			expectRange(t, "after the truncation", again, 12, 20)
			closeConsumer(t, cs)
		})
	}
}

// A leader change without truncation is checked and passes: nothing is
// reported or handled twice (the leader-move scenario tests do this under
// load); and commits carry the leader epoch of the last handled record.
func TestConsumeLeaderChangeCheckedAndEpochCommitted(t *testing.T) {
	fake := newFake(t, kfake.NumBrokers(2), kfake.SeedTopics(1, "t"), kfake.GroupMinSessionTimeout(100*time.Millisecond))
	cl := newTestClient(t, SeedBrokers(fake.ListenAddrs()...), MetadataMinAge(10*time.Millisecond))
	var recs []*Record
	for i := range 10 {
		recs = append(recs, &Record{Topic: "t", Value: []byte(fmt.Sprint(i))})
	}
	produceRecords(t, cl, recs)
	var mu sync.Mutex
	seen := map[int64]int{}
	var perrs []*PartitionError
	cs, err := NewConsumer(cl, ConsumerGroup("g"), SubscribeTopics("t"), OffsetReset(ResetEarliest), DisableAutoCommit(),
		SessionTimeout(time.Second), HeartbeatInterval(100*time.Millisecond), FetchMaxWait(50*time.Millisecond),
		HandleRecord(func(_ context.Context, r *Record) error {
			mu.Lock()
			seen[r.Offset]++
			mu.Unlock()
			return nil
		}),
		OnPartitionError(func(pe *PartitionError) { mu.Lock(); perrs = append(perrs, pe); mu.Unlock() }))
	if err != nil {
		t.Fatal(err)
	}
	defer closeConsumer(t, cs)
	count := func() int { mu.Lock(); defer mu.Unlock(); return len(seen) }
	waitUntil(t, 20*time.Second, func() bool { return count() == 10 }, func() string { return statsString(cs) })
	if err := fake.MoveTopicPartition("t", 0, 1-fake.LeaderFor("t", 0)); err != nil {
		t.Fatal(err)
	}
	epoch := fake.PartitionInfo("t", 0).Epoch
	cl.cl.TriggerMetadata()
	produceRecords(t, cl, recs) // 10..19, written in the new epoch
	waitUntil(t, 20*time.Second, func() bool { return count() == 20 }, func() string { return statsString(cs) })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := cs.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	for off, n := range seen {
		if n != 1 {
			t.Errorf("offset %d handled %d times", off, n)
		}
	}
	if len(perrs) > 0 {
		t.Errorf("partition errors after a clean leader change: %v", perrs)
	}
	mu.Unlock()
	got, err := cl.Admin().FetchOffsets(ctx, "g")
	if err != nil {
		t.Fatal(err)
	}
	om := got[TopicPartition{"t", 0}]
	if om.Offset != 20 || om.LeaderEpoch != epoch {
		t.Fatalf("committed %+v, want offset 20 with leader epoch %d", om, epoch)
	}
}
