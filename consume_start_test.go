package riffle

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// slowBroker makes every request of the given keys that node serves wait
// d before kfake answers it: a slow (overloaded, far away) broker. The
// waits end when the test does. answered, if not nil, is set when a
// request of the first key has waited and is about to be answered.
func slowBroker(t testing.TB, fake *kfake.Cluster, node int32, d time.Duration, answered *atomic.Bool, keys ...kmsg.Key) {
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	for i, k := range keys {
		fake.ControlKey(k.Int16(), func(kmsg.Request) (kmsg.Response, error, bool) {
			fake.KeepControl()
			if fake.CurrentNode() == node {
				fake.SleepControl(func() {
					select {
					case <-time.After(d):
					case <-stop:
					}
				})
				if i == 0 && answered != nil {
					answered.Store(true)
				}
			}
			return nil, nil, false
		})
	}
}

// Issue 10, point 1: a slow broker delays only the partitions it leads at
// consumer start. With start offsets resolved by one ListOffsets round for
// all leaders, no partition started before the slow broker answered; now
// each leader is asked on its own, and every partition of the healthy
// brokers is read to its end before the slow broker even answers its
// ListOffsets (and so before any record of its partitions).
func TestConsumeStartNotDelayedBySlowBroker(t *testing.T) {
	for _, start := range []StartOffset{AtEarliest(), AtTime(time.UnixMilli(0))} {
		t.Run(start.String(), func(t *testing.T) {
			t.Parallel()
			fake := newFake(t, kfake.NumBrokers(3), kfake.SeedTopics(6, "t"))
			cl := newTestClient(t, SeedBrokers(fake.ListenAddrs()...))
			const per = 20
			var recs []*Record
			for p := int32(0); p < 6; p++ {
				for i := range per {
					recs = append(recs, &Record{Topic: "t", Partition: p, Value: []byte(fmt.Sprint(i))})
				}
			}
			produceRecords(t, cl, recs)
			slow := fake.LeaderFor("t", 0)
			var slowParts, fastParts []int32
			for p := int32(0); p < 6; p++ {
				if fake.LeaderFor("t", p) == slow {
					slowParts = append(slowParts, p)
				} else {
					fastParts = append(fastParts, p)
				}
			}
			if len(fastParts) == 0 {
				t.Skip("kfake put every partition on one broker")
			}
			var slowListed atomic.Bool
			slowBroker(t, fake, slow, 3*time.Second, &slowListed, kmsg.ListOffsets, kmsg.Fetch)

			var mu sync.Mutex
			counts := map[int32]int{}
			fastDoneFirst := true
			var fastDoneBeforeSlowListed *bool
			fastDone := func() bool {
				for _, p := range fastParts {
					if counts[p] < per {
						return false
					}
				}
				return true
			}
			cs, err := NewConsumer(cl, HandleRecord(func(_ context.Context, r *Record) error {
				mu.Lock()
				defer mu.Unlock()
				if fake.LeaderFor("t", r.Partition) == slow && !fastDone() {
					fastDoneFirst = false
				}
				counts[r.Partition]++
				if fastDoneBeforeSlowListed == nil && fastDone() {
					v := !slowListed.Load()
					fastDoneBeforeSlowListed = &v
				}
				return nil
			}))
			if err != nil {
				t.Fatal(err)
			}
			assignAll(t, cs, "t", 6, start)
			waitUntil(t, 60*time.Second, func() bool {
				mu.Lock()
				defer mu.Unlock()
				for p := int32(0); p < 6; p++ {
					if counts[p] < per {
						return false
					}
				}
				return true
			}, func() string { return statsString(cs) })
			closeConsumer(t, cs)
			mu.Lock()
			defer mu.Unlock()
			if fastDoneBeforeSlowListed == nil || !*fastDoneBeforeSlowListed {
				t.Fatalf("the healthy brokers' partitions %v were read only after the slow broker answered ListOffsets: it delayed them", fastParts)
			}
			if !fastDoneFirst {
				t.Fatalf("a record of the slow broker's partitions %v was handled before the healthy partitions %v were read: the slow broker delayed them", slowParts, fastParts)
			}
		})
	}
}
