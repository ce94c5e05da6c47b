package process_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/riffle-go/riffle"
	"github.com/riffle-go/riffle/process"
	"github.com/riffle-go/riffle/rifftest"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Loss: when the member is fenced (a heartbeat answers UNKNOWN_MEMBER_ID),
// running handlers' contexts are cancelled and nothing is committed, even
// for records that had finished; after rejoining, the partition starts
// again from the group's commit.
func TestLossCancelsAndCommitsNothing(t *testing.T) {
	// A short session: the fenced member's old identity expires quickly.
	c, cl := setup(t, rifftest.Topic("l", 1), rifftest.KfakeOption(kfake.GroupMinSessionTimeout(100*time.Millisecond)))
	produce(t, cl, "l", 1, 100, nil)
	var fence atomic.Bool
	kc := c.Kfake()
	kc.ControlKey(int16(kmsg.Heartbeat), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		kc.KeepControl()
		if !fence.CompareAndSwap(true, false) {
			return nil, nil, false
		}
		resp := kr.ResponseKind().(*kmsg.HeartbeatResponse)
		resp.ErrorCode = 25 // UNKNOWN_MEMBER_ID
		return resp, nil, true
	})
	var finishedFirst, cancelled, runs atomic.Int64
	var lost atomic.Bool
	pr, err := process.New(client(t, c), func(ctx context.Context, r *riffle.Record) error {
		runs.Add(1)
		if r.Offset == 10 && !lost.Load() {
			<-ctx.Done() // held until the loss cancels it
			cancelled.Add(1)
			return ctx.Err()
		}
		if !lost.Load() {
			finishedFirst.Add(1)
		}
		return nil
	}, process.Ordering(process.Unordered),
		process.ConsumerOptions(append(groupOpts("g-loss", "l"), riffle.DisableAutoCommit(), riffle.SessionTimeout(time.Second),
			riffle.OnPartitionsLost(func(context.Context, []riffle.TopicPartition) { lost.Store(true) }))...))
	if err != nil {
		t.Fatal(err)
	}
	defer closeBounded(pr)
	waitFor(t, 30*time.Second, "the other records to finish", func() bool { return finishedFirst.Load() == 99 })
	fence.Store(true)
	waitFor(t, 30*time.Second, "the loss", func() bool { return lost.Load() && cancelled.Load() == 1 })
	// Nothing was committed for the lost partition.
	offs, err := cl.Admin().FetchOffsets(context.Background(), "g-loss")
	if err != nil {
		t.Fatal(err)
	}
	if om, ok := offs[riffle.TopicPartition{Topic: "l", Partition: 0}]; ok && om.Offset >= 0 {
		t.Fatalf("the loss committed %+v", om)
	}
	// Rejoined, the partition runs again from the start (no commit).
	waitFor(t, 30*time.Second, "the records to run again", func() bool { return runs.Load() >= 200 })
	ps, ok := pstats(pr, 0)
	if !ok || ps.Err != nil || errors.Is(ps.Err, context.Canceled) {
		t.Fatalf("after rejoining: %+v", ps)
	}
}
