package riffle

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/riffle-go/riffle/internal/kafkaerr"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestRetryAtOnce: a produce batch refused because the broker does not
// lead the partition goes again without a backoff only when metadata
// already names another leader.
func TestRetryAtOnce(t *testing.T) {
	for _, tc := range []struct {
		name           string
		code           int16
		sentTo, leader int32
		want           bool
	}{
		{"not leader, moved", kafkaerr.NotLeaderForPartition, 1, 2, true},
		{"fenced epoch, moved", kafkaerr.FencedLeaderEpoch, 1, 2, true},
		{"not leader, metadata unchanged", kafkaerr.NotLeaderForPartition, 1, 1, false},
		{"not leader, no leader known", kafkaerr.NotLeaderForPartition, 1, -1, false},
		{"another retriable error, moved", kafkaerr.RequestTimedOut, 1, 2, false},
		{"no leader error (a request failure), moved", 0, 1, 2, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := retryAtOnce(tc.code, tc.sentTo, tc.leader); got != tc.want {
				t.Errorf("retryAtOnce(%d, %d, %d) = %v, want %v", tc.code, tc.sentTo, tc.leader, got, tc.want)
			}
		})
	}
}

// brokerCode reads the code of a partition's answer off the error classify
// returns for it, and only that: a request failure has none.
func TestBrokerCode(t *testing.T) {
	part := &partState{topic: &topicState{name: "t"}, id: 0}
	for _, code := range []int16{kafkaerr.NotLeaderForPartition, kafkaerr.FencedLeaderEpoch} {
		pr := &kmsg.ProduceResponse{Topics: []kmsg.ProduceResponseTopic{{Topic: "t", Partitions: []kmsg.ProduceResponseTopicPartition{{Partition: 0, ErrorCode: code}}}}}
		_, _, _, perr := classify(part, pr, nil, AcksAll)
		if got := brokerCode(perr, nil); got != code {
			t.Errorf("code %d: brokerCode of classify's error = %d", code, got)
		}
	}
	reqErr := fmt.Errorf("write: %w", ErrRequestTimeout)
	_, _, _, perr := classify(part, nil, reqErr, AcksAll)
	if got := brokerCode(perr, reqErr); got != 0 {
		t.Errorf("request failure: brokerCode = %d, want 0", got)
	}
}

// moveLeader moves t[0] away from its leader in fake: to another of the
// brokers the client knows, or (newBroker) to a broker added now, which
// the client can learn only from the NodeEndpoints of a hint (adding a
// broker makes kfake shuffle the leaders first). It returns the new
// leader.
func moveLeader(t *testing.T, fake *kfake.Cluster, old int32, newBroker bool) int32 {
	t.Helper()
	to := (old + 1) % 3
	if newBroker {
		var err error
		if to, _, err = fake.AddNode(-1, 0); err != nil {
			t.Fatal(err)
		}
	}
	if err := fake.MoveTopicPartition("t", 0, to); err != nil {
		t.Fatal(err)
	}
	return to
}

// TestLeaderHintConsumer: the leader of the partition a Consumer reads
// moves while its client can get no metadata: the CurrentLeader of the
// old leader's NOT_LEADER_OR_FOLLOWER answer (KIP-951) alone moves the
// partition to the new leader's fetcher, and every record is handled
// once, in order. The new leader may be a broker the client has never
// heard of: the answer's NodeEndpoints name it. Kafka sends those from
// Fetch v16 on, so the fetches must go at v16+ (topics by id); kfake (and
// kmsg, which reads tagged fields at any flexible version) sends them at
// any version, so only the version check below would catch fetches below
// v16.
func TestLeaderHintConsumer(t *testing.T) {
	for _, newBroker := range []bool{false, true} {
		t.Run(map[bool]string{false: "known broker", true: "new broker"}[newBroker], func(t *testing.T) {
			fake := newFake(t, kfake.NumBrokers(3), kfake.SeedTopics(1, "t"))
			pcl := newTestClient(t, SeedBrokers(fake.ListenAddrs()...))
			produceN(t, pcl, "t", 1, 50)

			var (
				minFetchV  atomic.Int32 // lowest Fetch version seen (the producing client fetches nothing)
				moved      atomic.Bool
				oldLeader  atomic.Int32
				hinted     atomic.Int32 // NOT_LEADER answers naming a leader the old leader gave
				afterMoved atomic.Int32 // fetches the new leader served after the move
			)
			minFetchV.Store(1 << 10)
			oldLeader.Store(-1)
			fake.ControlKey(kmsg.Fetch.Int16(), func(kr kmsg.Request) (kmsg.Response, error, bool) {
				fake.KeepControl()
				v := int32(kr.GetVersion())
				for {
					cur := minFetchV.Load()
					if v >= cur || minFetchV.CompareAndSwap(cur, v) {
						break
					}
				}
				if moved.Load() {
					if fake.CurrentNode() == oldLeader.Load() {
						hinted.Add(1)
					} else {
						afterMoved.Add(1)
					}
				}
				return nil, nil, false
			})

			bs := newBrokerSide(t, 0)
			cl := newTestClient(t, SeedBrokers(fake.ListenAddrs()...), Dialer(bs.dial))
			var (
				mu   sync.Mutex
				offs []int64
			)
			half, all := make(chan struct{}), make(chan struct{})
			cs, err := NewConsumer(cl, HandleRecord(func(_ context.Context, r *Record) error {
				if want := fmt.Sprintf("0-%d", r.Offset%50); string(r.Value) != want {
					t.Errorf("offset %d: value %q, want %q", r.Offset, r.Value, want)
				}
				mu.Lock()
				offs = append(offs, r.Offset)
				n := len(offs)
				mu.Unlock()
				switch n {
				case 50:
					close(half)
				case 100:
					close(all)
				}
				return nil
			}))
			if err != nil {
				t.Fatal(err)
			}
			assignAll(t, cs, "t", 1, AtEarliest())
			waitDone(t, half, "the first 50 records")

			old := fake.LeaderFor("t", 0)
			if pm, _ := cl.cl.Snapshot().Topics["t"].Partition(0); pm.Leader != old {
				t.Fatalf("the consumer's metadata has leader %d, the cluster %d", pm.Leader, old)
			}
			bs.refuse.Store(kmsg.Metadata.Int16(), true)
			refusedBefore := bs.refused.Load()
			oldLeader.Store(old)
			moved.Store(true)
			to := moveLeader(t, fake, old, newBroker)
			produceN(t, pcl, "t", 1, 50) // pcl's metadata is its own
			waitDone(t, all, "every record")
			closeConsumer(t, cs)

			mu.Lock()
			defer mu.Unlock()
			for i, o := range offs {
				if o != int64(i) {
					t.Fatalf("handled offsets %v: want 0..99, each once, in order", offs)
				}
			}
			if len(offs) != 100 {
				t.Fatalf("%d records handled, want 100", len(offs))
			}
			if n := cl.cl.HintsApplied(); n == 0 {
				t.Error("no leader hint applied")
			}
			if hinted.Load() == 0 || afterMoved.Load() == 0 {
				t.Errorf("after the move: %d fetches to the old leader, %d to the others", hinted.Load(), afterMoved.Load())
			}
			snap := cl.cl.Snapshot()
			if pm, _ := snap.Topics["t"].Partition(0); pm.Leader != to {
				t.Errorf("the consumer's metadata: leader %d, want %d", pm.Leader, to)
			}
			if _, ok := snap.Brokers[to]; !ok {
				t.Errorf("broker %d unknown to the consumer's client", to)
			}
			if v := minFetchV.Load(); v < 16 {
				t.Errorf("a fetch went at v%d: below v16 the answers name no NodeEndpoints", v)
			}
			t.Logf("metadata requests refused after the move: %d", bs.refused.Load()-refusedBefore)
		})
	}
}

// TestLeaderHintProducer: the leader of the partition an idempotent
// producer writes moves while batches are in flight and its client can
// get no metadata: the CurrentLeader (and NodeEndpoints) of the old
// leader's NOT_LEADER_OR_FOLLOWER answers alone move the partition's
// batches to the new leader, with the numbers they had, and the log holds
// every record once, in order.
func TestLeaderHintProducer(t *testing.T) {
	for _, newBroker := range []bool{false, true} {
		t.Run(map[bool]string{false: "known broker", true: "new broker"}[newBroker], func(t *testing.T) {
			fake := newFake(t, kfake.NumBrokers(3), kfake.SeedTopics(1, "t"))
			var (
				minProduceV atomic.Int32
				moved       atomic.Bool
				oldLeader   atomic.Int32
				toOld       atomic.Int32 // produce requests the old leader got after the move
			)
			minProduceV.Store(1 << 10)
			oldLeader.Store(-1)
			fake.ControlKey(kmsg.Produce.Int16(), func(kr kmsg.Request) (kmsg.Response, error, bool) {
				fake.KeepControl()
				v := int32(kr.GetVersion())
				for {
					cur := minProduceV.Load()
					if v >= cur || minProduceV.CompareAndSwap(cur, v) {
						break
					}
				}
				if moved.Load() && fake.CurrentNode() == oldLeader.Load() {
					toOld.Add(1)
				}
				return nil, nil, false
			})

			bs := newBrokerSide(t, 0)
			cl := newTestClient(t, SeedBrokers(fake.ListenAddrs()...), Dialer(bs.dial))
			p, err := NewProducer(cl, WithPartitioner(ManualPartitioner()), Linger(0), MaxBatchBytes(1024))
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			const n = 2000
			var (
				acked  atomic.Int64
				failed atomic.Value
				calls  [n]atomic.Int32
			)
			var to int32
			for i := 0; i < n; i++ {
				if i == n/4 {
					// Some acknowledged, the rest buffered or in
					// flight: move the leader now.
					waitUntil(t, 30*time.Second, func() bool { return acked.Load() >= n/8 },
						func() string { return fmt.Sprintf("%d records acknowledged", acked.Load()) })
					old := fake.LeaderFor("t", 0)
					if pm, _ := cl.cl.Snapshot().Topics["t"].Partition(0); pm.Leader != old {
						t.Fatalf("the producer's metadata has leader %d, the cluster %d", pm.Leader, old)
					}
					bs.refuse.Store(kmsg.Metadata.Int16(), true)
					oldLeader.Store(old)
					moved.Store(true)
					to = moveLeader(t, fake, old, newBroker)
				}
				p.Produce(ctx, &Record{Topic: "t", Partition: 0, Value: []byte(strconv.Itoa(i))}, func(r *Record, err error) {
					i, _ := strconv.Atoi(string(r.Value))
					calls[i].Add(1)
					if err != nil {
						failed.CompareAndSwap(nil, fmt.Errorf("record %s: %w", r.Value, err))
					}
					acked.Add(1)
				})
			}
			if err := p.Flush(ctx); err != nil {
				t.Fatalf("flush: %v", err)
			}
			if err, _ := failed.Load().(error); err != nil {
				t.Fatal(err)
			}
			for i := range calls {
				if c := calls[i].Load(); c != 1 {
					t.Fatalf("record %d: callback fired %d times", i, c)
				}
			}
			if err := p.Close(ctx); err != nil {
				t.Fatal(err)
			}
			if n := cl.cl.HintsApplied(); n == 0 {
				t.Error("no leader hint applied")
			}
			if toOld.Load() == 0 {
				t.Error("no produce request reached the old leader after the move: the hint was not tested")
			}
			snap := cl.cl.Snapshot()
			if pm, _ := snap.Topics["t"].Partition(0); pm.Leader != to {
				t.Errorf("the producer's metadata: leader %d, want %d", pm.Leader, to)
			}
			if v := minProduceV.Load(); v < 10 {
				t.Errorf("a produce went at v%d: below v10 the answers carry no leader hints", v)
			}

			// The log, read by a client of its own.
			rcl := newTestClient(t, SeedBrokers(fake.ListenAddrs()...))
			recs := readPartition(t, ctx, rcl, "t", 0)
			got := make([]int, len(recs))
			for i, r := range recs {
				got[i], _ = strconv.Atoi(string(r.Value))
				if r.Offset != int64(i) {
					t.Fatalf("record %d at offset %d", i, r.Offset)
				}
			}
			want := make([]int, n)
			for i := range want {
				want[i] = i
			}
			if !slices.Equal(got, want) {
				t.Fatalf("the log holds %d records, not 0..%d once each in order: %v", len(got), n-1, got)
			}
		})
	}
}

// TestShareLeaderErrorsBackOff: a broker answers a share member's fetches
// with NOT_LEADER_OR_FOLLOWER naming no leader, and the member can get no
// metadata that would move the partition: its fetcher fetches again only
// after the client's RetryBackoff, not in a loop, and consumes once
// metadata and the leader are back.
func TestShareLeaderErrorsBackOff(t *testing.T) {
	fake := newShareFake(t, 1, 30*time.Second)
	pcl := shareClient(t, fake)
	produceN(t, pcl, "t", 1, 10)
	shareFromEarliest(t, pcl, "g")
	bs := newBrokerSide(t, 0)
	// Backoffs of 100 ms (the test clients' start at 10 ms).
	cl := newTestClient(t, SeedBrokers(fake.ListenAddrs()...), Dialer(bs.dial), RetryBackoff(100*time.Millisecond, 100*time.Millisecond))
	s := newSeen(20)
	first := make(chan struct{})
	var firstOnce sync.Once
	sc, err := NewShareConsumer(cl, ShareGroup("g"), SubscribeTopics("t"), HandleRecord(func(_ context.Context, r *Record) error {
		s.add(r)
		if s.count.Load() == 10 {
			firstOnce.Do(func() { close(first) })
		}
		return nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	waitDone(t, first, "the first 10 records")
	waitShareStart(t, pcl, 1, 10)

	leader := fake.LeaderFor("t", 0)
	bs.refuse.Store(kmsg.Metadata.Int16(), true)
	h := fake.Fault(kfake.Fault{
		Keys:       []kmsg.Key{kmsg.ShareFetch},
		Nodes:      []int32{leader},
		Topic:      "t",
		Partitions: []int32{0},
		Err:        kerr.NotLeaderForPartition,
		Count:      -1,
	})
	wctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := h.Wait(wctx, 1); err != nil {
		t.Fatalf("no ShareFetch faulted: %v", err)
	}
	// For a second, count the fetches the broker answered with the
	// error. With a backoff of at least 80 ms (100 ms, jitter 0.2)
	// there are about 12; without one, a fetch per round trip. A
	// slower machine only makes fewer a second, but its sleep can
	// overrun: the bound is per second measured.
	during, took := countOver(time.Second, func() int64 { return int64(h.Hits()) })
	h.Remove()
	bs.refuse.Delete(kmsg.Metadata.Int16())
	if during > rateLimit(25, took) {
		t.Errorf("%d faulted ShareFetches in %v (want at most 25 a second): the fetcher does not back off", during, took)
	}
	t.Logf("%d faulted ShareFetches in %v", during, took)

	produceN(t, pcl, "t", 1, 10)
	waitDone(t, s.done, "the records produced after the fault")
	closeShare(t, sc)
}
