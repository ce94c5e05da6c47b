package riffle

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Regression tests for bugs found reviewing the share consumer.

// TestShareAcquiresOnlyForIdleRunners: with partitions led by three
// brokers, the member never holds more records than it has runners. Each
// broker's fetcher used to size its fetch from the idle runners without
// reserving them, so the three fetchers, all woken when a runner freed,
// acquired a record each for one idle runner: records waited in the
// queue under their locks (held from other members, and lost to the lock
// when the handlers are slow).
func TestShareAcquiresOnlyForIdleRunners(t *testing.T) {
	fake := newShareFake(t, 3, time.Minute)
	pcl := shareClient(t, fake)
	produceN(t, pcl, "t", 3, 30)
	shareFromEarliest(t, pcl, "g")
	s := newSeen(90)
	var scp atomic.Pointer[ShareConsumer]
	ready := make(chan struct{})
	var mu sync.Mutex
	worst := 0
	sc := newShareMember(t, fake, Runners(1), HandleRecord(func(_ context.Context, r *Record) error {
		<-ready
		st := scp.Load().Stats()
		mu.Lock()
		worst = max(worst, st.Acquired)
		mu.Unlock()
		time.Sleep(2 * time.Millisecond)
		s.add(r)
		return nil
	}))
	scp.Store(sc)
	close(ready)
	waitDone(t, s.done, "every record")
	closeShare(t, sc)
	if worst != 1 {
		t.Fatalf("the member held up to %d records with 1 runner", worst)
	}
	assertShareDrained(t, pcl, "g", "t", 3, 30)
}

// TestShareHeldRecordsSurviveIdleConnection: a fetcher with nothing to
// send (every runner busy, renewals far off) keeps its connection, and so
// its share session, alive. The client's idle reaper used to close it
// after ConnIdleTimeout; the broker then dropped the session and released
// the records it held: the running handler's record was delivered again
// (and its accept refused).
func TestShareHeldRecordsSurviveIdleConnection(t *testing.T) {
	fake := newShareFake(t, 1, time.Minute)
	pcl := shareClient(t, fake)
	produceN(t, pcl, "t", 1, 2)
	shareFromEarliest(t, pcl, "g")
	s := newSeen(2)
	cl := newTestClient(t, SeedBrokers(fake.ListenAddrs()...), ConnIdleTimeout(100*time.Millisecond))
	sc, err := NewShareConsumer(cl, ShareGroup("g"), SubscribeTopics("t"), Runners(1),
		HandleRecord(func(ctx context.Context, r *Record) error {
			if r.DeliveryCount != 1 {
				t.Errorf("%d delivered %d times", r.Offset, r.DeliveryCount)
			}
			if r.Offset == 0 {
				// Many idle timeouts (the reaper looks every 50 ms).
				select {
				case <-time.After(1500 * time.Millisecond):
				case <-ctx.Done():
					return ctx.Err()
				}
			}
			s.add(r)
			return nil
		}))
	if err != nil {
		t.Fatal(err)
	}
	waitDone(t, s.done, "every record")
	closeShare(t, sc)
	if st := sc.Stats(); st.Accepted != 2 || st.AckErrors != 0 || st.Redelivered != 0 {
		t.Fatalf("stats %+v", st)
	}
	assertShareDrained(t, pcl, "g", "t", 1, 2)
}
