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

// newShareFake starts a 3-broker cluster with topic "t" of partitions
// partitions and the given acquisition lock duration; expired locks are
// swept every 50 ms.
func newShareFake(t testing.TB, partitions int32, lock time.Duration) *kfake.Cluster {
	t.Helper()
	return newFake(t, kfake.NumBrokers(3), kfake.SeedTopics(partitions, "t"), kfake.BrokerConfigs(map[string]string{
		"group.share.record.lock.duration.ms": fmt.Sprint(lock.Milliseconds()),
		"share.record.lock.sweep.interval.ms": "50",
		"group.share.heartbeat.interval.ms":   "200",
	}))
}

// shareFromEarliest makes the share group start at the earliest offset
// (share.auto.offset.reset, a group config).
func shareFromEarliest(t testing.TB, cl *Client, group string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	v := "earliest"
	res, err := cl.Admin().AlterGroupConfigs(ctx, GroupConfigChange{Group: group, Name: "share.auto.offset.reset", Value: &v})
	if err != nil {
		t.Fatal(err)
	}
	if err := res.Err(); err != nil {
		t.Fatal(err)
	}
}

func shareClient(t testing.TB, fake *kfake.Cluster) *Client {
	return newTestClient(t, SeedBrokers(fake.ListenAddrs()...))
}

// seen counts deliveries per record.
type seen struct {
	mu    sync.Mutex
	n     map[string]int
	count atomic.Int64
	done  chan struct{}
	want  int64
}

func newSeen(want int64) *seen {
	return &seen{n: map[string]int{}, done: make(chan struct{}), want: want}
}

func (s *seen) add(r *Record) {
	s.mu.Lock()
	k := fmt.Sprintf("%d/%d", r.Partition, r.Offset)
	s.n[k]++
	first := s.n[k] == 1
	s.mu.Unlock()
	if first && s.count.Add(1) == s.want {
		close(s.done)
	}
}

func waitDone(t testing.TB, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(60 * time.Second):
		t.Fatalf("gave up waiting: %s", what)
	}
}

func closeShare(t testing.TB, sc *ShareConsumer) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := sc.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if st := sc.Stats(); st.Acquired != 0 {
		t.Fatalf("still acquired after Close: %+v", st)
	}
}

// TestShareThreeMembers: 3 members, 30,000 records over 6 partitions: every
// record accepted exactly once (no lock expires: 30 s), none left acquired
// (a fourth member finds nothing, and the group's start offsets are at the
// end of every partition).
func TestShareThreeMembers(t *testing.T) {
	fake := newShareFake(t, 6, 30*time.Second)
	const perPart = 5000
	pcl := shareClient(t, fake)
	produceN(t, pcl, "t", 6, perPart)
	shareFromEarliest(t, pcl, "g")
	s := newSeen(6 * perPart)
	var members []*ShareConsumer
	for i := 0; i < 3; i++ {
		sc, err := NewShareConsumer(shareClient(t, fake), ShareGroup("g"), SubscribeTopics("t"),
			HandleRecord(func(_ context.Context, r *Record) error {
				if r.DeliveryCount != 1 {
					t.Errorf("%d/%d delivered %d times", r.Partition, r.Offset, r.DeliveryCount)
				}
				s.add(r)
				return nil
			}))
		if err != nil {
			t.Fatal(err)
		}
		members = append(members, sc)
	}
	waitDone(t, s.done, "every record")
	var accepted int64
	for _, sc := range members {
		closeShare(t, sc)
		accepted += sc.Stats().Accepted
	}
	s.mu.Lock()
	for k, n := range s.n {
		if n != 1 {
			t.Errorf("%s handled %d times", k, n)
		}
	}
	s.mu.Unlock()
	if accepted != 6*perPart {
		t.Fatalf("accepted %d, want %d", accepted, 6*perPart)
	}
	assertShareDrained(t, pcl, "g", "t", 6, perPart)
}

// assertShareDrained checks through DescribeShareGroupOffsets that the
// group's start offset of every partition is its end: nothing left
// acquired or available.
func assertShareDrained(t testing.TB, cl *Client, group, topic string, partitions int32, end int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	offs, err := cl.Admin().DescribeShareGroupOffsets(ctx, group, topic)
	if err != nil {
		t.Fatal(err)
	}
	if len(offs) != int(partitions) {
		t.Fatalf("offsets for %d partitions, want %d: %v", len(offs), partitions, offs)
	}
	for _, o := range offs {
		if o.Err != nil || o.StartOffset != end {
			t.Errorf("%v: start offset %d (err %v), want %d", o.TopicPartition, o.StartOffset, o.Err, end)
		}
	}
}

func TestShareConsumerConfig(t *testing.T) {
	fake := newShareFake(t, 1, time.Second)
	cl := shareClient(t, fake)
	h := HandleRecord(func(context.Context, *Record) error { return nil })
	for _, opts := range [][]ConsumerOption{
		{SubscribeTopics("t"), h},
		{ShareGroup("g"), h},
		{ShareGroup("g"), SubscribeTopics("t")},
		{ShareGroup("g"), SubscribeTopics("t"), h, ConsumerGroup("c")},
		{ShareGroup("g"), SubscribeTopics("t"), HandleBatch(func(context.Context, *FetchBatch) error { return nil })},
		{ShareGroup("g"), SubscribeTopics("t"), h, ShareMaxRecords(0)},
	} {
		if _, err := NewShareConsumer(cl, opts...); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%d options: err %v, want ErrInvalidConfig", len(opts), err)
		}
	}
	if _, err := NewConsumer(cl, ShareGroup("g"), h); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("NewConsumer with ShareGroup: %v", err)
	}
}

func newShareMember(t testing.TB, fake *kfake.Cluster, opts ...ConsumerOption) *ShareConsumer {
	t.Helper()
	sc, err := NewShareConsumer(shareClient(t, fake), append([]ConsumerOption{ShareGroup("g"), SubscribeTopics("t")}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return sc
}

// TestShareReleaseRedelivers: a released record comes back with delivery
// count 2. The lock lasts 5 minutes, so only the release can bring it back
// within the test.
func TestShareReleaseRedelivers(t *testing.T) {
	fake := newShareFake(t, 1, 5*time.Minute)
	pcl := shareClient(t, fake)
	produceN(t, pcl, "t", 1, 20)
	shareFromEarliest(t, pcl, "g")
	s := newSeen(20)
	var scp atomic.Pointer[ShareConsumer]
	ready := make(chan struct{})
	sc := newShareMember(t, fake, ShareAcknowledgementMode(ShareAckExplicit), HandleRecord(func(_ context.Context, r *Record) error {
		<-ready
		sc := scp.Load()
		switch r.DeliveryCount {
		case 1:
			return sc.Acknowledge(r, AckRelease)
		case 2:
			s.add(r)
			return sc.Acknowledge(r, AckAccept)
		}
		t.Errorf("%d delivered %d times", r.Offset, r.DeliveryCount)
		return nil
	}))
	scp.Store(sc)
	close(ready)
	waitDone(t, s.done, "every record twice")
	closeShare(t, sc)
	if st := sc.Stats(); st.Released != 20 || st.Accepted != 20 || st.Redelivered != 20 {
		t.Fatalf("stats %+v", st)
	}
	assertShareDrained(t, pcl, "g", "t", 1, 20)
}

// TestShareRejectArchives: rejected records are never delivered again; the
// group's start offset passes them.
func TestShareRejectArchives(t *testing.T) {
	fake := newShareFake(t, 2, 5*time.Minute)
	pcl := shareClient(t, fake)
	produceN(t, pcl, "t", 2, 50)
	shareFromEarliest(t, pcl, "g")
	s := newSeen(100)
	var scp atomic.Pointer[ShareConsumer]
	ready := make(chan struct{})
	sc := newShareMember(t, fake, HandleRecord(func(_ context.Context, r *Record) error {
		<-ready
		if r.DeliveryCount != 1 {
			t.Errorf("%d/%d delivered %d times", r.Partition, r.Offset, r.DeliveryCount)
		}
		s.add(r)
		if r.Offset%2 == 1 {
			return scp.Load().Acknowledge(r, AckReject) // overrides the implicit accept
		}
		return nil
	}))
	scp.Store(sc)
	close(ready)
	waitDone(t, s.done, "every record")
	closeShare(t, sc) // sends the last acknowledgements
	// Everything rejected or accepted: the start offsets reach the end,
	// so nothing can be delivered again.
	assertShareDrained(t, pcl, "g", "t", 2, 50)
	if st := sc.Stats(); st.Rejected != 50 || st.Accepted != 50 || st.Released != 0 {
		t.Fatalf("stats %+v", st)
	}
}

// TestShareRenewKeepsLongHandlers: handlers run 3× the 1 s lock; renewal
// keeps their records, which are never delivered again.
func TestShareRenewKeepsLongHandlers(t *testing.T) {
	fake := newShareFake(t, 1, time.Second)
	pcl := shareClient(t, fake)
	produceN(t, pcl, "t", 1, 4)
	shareFromEarliest(t, pcl, "g")
	s := newSeen(4)
	var deliveries atomic.Int64
	sc := newShareMember(t, fake, Runners(4), HandleRecord(func(ctx context.Context, r *Record) error {
		deliveries.Add(1)
		if r.DeliveryCount != 1 {
			t.Errorf("%d delivered %d times", r.Offset, r.DeliveryCount)
		}
		select {
		case <-time.After(3 * time.Second):
		case <-ctx.Done():
			return ctx.Err()
		}
		s.add(r)
		return nil
	}))
	waitDone(t, s.done, "every record")
	closeShare(t, sc)
	assertShareDrained(t, pcl, "g", "t", 1, 4)
	st := sc.Stats()
	if deliveries.Load() != 4 || st.Accepted != 4 || st.Renewed == 0 || st.Expired != 0 {
		t.Fatalf("deliveries %d, stats %+v", deliveries.Load(), st)
	}
}

// TestShareMembershipChurn: members join and leave every few hundred ms
// while one stays; nothing is lost, and a record handled twice was
// delivered again by the broker (its later delivery count is above 1):
// its holder left without acknowledging it.
func TestShareMembershipChurn(t *testing.T) {
	fake := newShareFake(t, 6, 2*time.Second)
	const perPart = 2000
	pcl := shareClient(t, fake)
	produceN(t, pcl, "t", 6, perPart)
	shareFromEarliest(t, pcl, "g")
	s := newSeen(6 * perPart)
	var mu sync.Mutex
	maxCount := map[string]int16{}
	h := HandleRecord(func(_ context.Context, r *Record) error {
		mu.Lock()
		k := fmt.Sprintf("%d/%d", r.Partition, r.Offset)
		maxCount[k] = max(maxCount[k], r.DeliveryCount)
		mu.Unlock()
		time.Sleep(time.Millisecond)
		s.add(r)
		return nil
	})
	stable := newShareMember(t, fake, h, ShareMaxRecords(50))
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var cycles atomic.Int64
	wg.Add(1)
	// A fixed number of churn cycles, not churn until every record is
	// handled: on a loaded machine each join and leave costs the stable
	// member more, and churn without end could keep it from finishing
	// within any guard (a run under load took 47 s, another passed 60).
	const churnCycles = 30
	go func() {
		defer wg.Done()
		for i := 0; i < churnCycles; i++ {
			cycles.Add(1)
			sc := newShareMember(t, fake, h, ShareMaxRecords(50))
			select {
			case <-stop:
				closeShare(t, sc)
				return
			case <-time.After(time.Duration(150+50*(i%5)) * time.Millisecond):
			}
			closeShare(t, sc)
		}
	}()
	select { // a hang guard of a loaded machine's size
	case <-s.done:
	case <-time.After(3 * time.Minute):
		t.Fatalf("gave up waiting: %d of %d records handled after %d churn cycles", s.count.Load(), s.want, cycles.Load())
	}
	close(stop)
	wg.Wait()
	closeShare(t, stable)
	s.mu.Lock()
	for k, n := range s.n {
		if n > 1 && maxCount[k] < 2 {
			t.Errorf("%s handled %d times but never delivered again", k, n)
		}
	}
	s.mu.Unlock()
	assertShareDrained(t, pcl, "g", "t", 6, perPart)
	t.Logf("%d members joined and left", cycles.Load())
}
