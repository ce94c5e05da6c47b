package riffle

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// A ListOffsets that outlasts RetryTimeout (a hung broker, or one slower
// than the budget once) is asked again: a review found the partition
// stopped for good (the request's deadline taken for a permanent failure)
// although the broker answers normally right after.
func TestStartOffsetTimeoutRetried(t *testing.T) {
	fake := newFake(t, kfake.NumBrokers(1), kfake.SeedTopics(1, "t"))
	cl := newTestClient(t, SeedBrokers(fake.ListenAddrs()...), RetryTimeout(time.Second))
	produceRecords(t, cl, []*Record{{Topic: "t", Partition: 0, Value: []byte("a")}})
	var slowed atomic.Bool
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	fake.ControlKey(kmsg.ListOffsets.Int16(), func(kmsg.Request) (kmsg.Response, error, bool) {
		if !slowed.Swap(true) { // only the first ListOffsets is slow
			fake.SleepControl(func() {
				select {
				case <-time.After(1500 * time.Millisecond):
				case <-stop:
				}
			})
		} else {
			fake.KeepControl()
		}
		return nil, nil, false
	})
	var got atomic.Int64
	var perr atomic.Pointer[PartitionError]
	cs, err := NewConsumer(cl,
		HandleRecord(func(context.Context, *Record) error { got.Add(1); return nil }),
		OnPartitionError(func(pe *PartitionError) { perr.Store(pe) }))
	if err != nil {
		t.Fatal(err)
	}
	assignAll(t, cs, "t", 1, AtEarliest())
	deadline := time.Now().Add(30 * time.Second)
	for got.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	closeConsumer(t, cs)
	if got.Load() == 0 {
		t.Fatalf("record never consumed; partition error: %v", perr.Load())
	}
}

// Resume of a partition whose start offset could not be resolved (the
// broker refused it for good once) resolves it again: a review found it
// fetching from offset -1, so that the out-of-range answer applied the
// reset policy (latest) in place of the assigned start (earliest).
func TestResumeAfterStartFailureResolvesAgain(t *testing.T) {
	fake := newFake(t, kfake.NumBrokers(1), kfake.SeedTopics(1, "t"))
	cl := newTestClient(t, SeedBrokers(fake.ListenAddrs()...))
	produceRecords(t, cl, []*Record{{Topic: "t", Partition: 0, Value: []byte("a")}})
	var refused atomic.Bool
	fake.ControlKey(kmsg.ListOffsets.Int16(), func(r kmsg.Request) (kmsg.Response, error, bool) {
		if refused.Swap(true) {
			return nil, nil, false // from the second on: answered normally
		}
		fake.KeepControl()
		req := r.(*kmsg.ListOffsetsRequest)
		resp := req.ResponseKind().(*kmsg.ListOffsetsResponse)
		for _, rt := range req.Topics {
			st := kmsg.NewListOffsetsResponseTopic()
			st.Topic = rt.Topic
			for _, rp := range rt.Partitions {
				sp := kmsg.NewListOffsetsResponseTopicPartition()
				sp.Partition = rp.Partition
				sp.ErrorCode = kerrTopicAuthorizationFailed
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil, true
	})
	var got atomic.Int64
	failed := make(chan struct{}, 1)
	cs, err := NewConsumer(cl,
		HandleRecord(func(context.Context, *Record) error { got.Add(1); return nil }),
		OnPartitionError(func(pe *PartitionError) {
			select {
			case failed <- struct{}{}:
			default:
			}
		}))
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close(context.Background())
	assignAll(t, cs, "t", 1, AtEarliest())
	select {
	case <-failed:
	case <-time.After(20 * time.Second):
		t.Fatal("the refused start offset was not reported")
	}
	if err := cs.Resume(TopicPartition{"t", 0}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 20*time.Second, func() bool { return got.Load() == 1 }, func() string {
		return "assigned AtEarliest, resumed after a start-offset failure: record 0 not consumed: " + statsString(cs)
	})
}

// kerrTopicAuthorizationFailed is TOPIC_AUTHORIZATION_FAILED (not retriable).
const kerrTopicAuthorizationFailed = 29
