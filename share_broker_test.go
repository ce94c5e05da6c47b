package riffle

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// brokerSide is a test dialer that acts out what kfake does not on the
// client's connections: it closes a connection quiet (no byte either
// way) for longer than idle, as a broker does after
// connections.max.idle.ms, and it can refuse requests of given keys by
// closing the connection that carries them. It reads the api key of every
// request frame the client writes.
type brokerSide struct {
	idle   time.Duration // 0: never closes idle connections
	refuse sync.Map      // api key (int16) => true: refused

	mu    sync.Mutex
	conns []*sideConn

	idleClosed      atomic.Int64 // connections closed as idle
	shareIdleClosed atomic.Int64 // of those, ones that had carried a ShareFetch
	refused         atomic.Int64 // requests refused

	stop chan struct{}
	wg   sync.WaitGroup
}

// newBrokerSide starts the dialer; its idle sweeper stops at cleanup.
func newBrokerSide(t testing.TB, idle time.Duration) *brokerSide {
	bs := &brokerSide{idle: idle, stop: make(chan struct{})}
	if idle > 0 {
		bs.wg.Add(1)
		go bs.sweep()
	}
	t.Cleanup(func() {
		close(bs.stop)
		bs.wg.Wait()
	})
	return bs
}

func (bs *brokerSide) sweep() {
	defer bs.wg.Done()
	t := time.NewTicker(bs.idle / 10)
	defer t.Stop()
	for {
		select {
		case <-bs.stop:
			return
		case now := <-t.C:
			bs.mu.Lock()
			keep := bs.conns[:0]
			var quiet []*sideConn
			for _, c := range bs.conns {
				if now.Sub(time.Unix(0, c.last.Load())) > bs.idle {
					quiet = append(quiet, c)
				} else {
					keep = append(keep, c)
				}
			}
			clear(bs.conns[len(keep):])
			bs.conns = keep
			bs.mu.Unlock()
			for _, c := range quiet {
				bs.idleClosed.Add(1)
				if c.shared.Load() {
					bs.shareIdleClosed.Add(1)
				}
				c.Conn.Close()
			}
		}
	}
}

func (bs *brokerSide) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	var d net.Dialer
	nc, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	c := &sideConn{Conn: nc, bs: bs}
	c.touch()
	bs.mu.Lock()
	bs.conns = append(bs.conns, c)
	bs.mu.Unlock()
	return c, nil
}

type sideConn struct {
	net.Conn
	bs     *brokerSide
	last   atomic.Int64 // unix nanos of the last byte either way
	shared atomic.Bool  // carried a ShareFetch

	wmu  sync.Mutex
	wbuf []byte
}

func (c *sideConn) touch() { c.last.Store(time.Now().UnixNano()) }

// Write notes the api key of every complete request frame (size 4, key
// 2) and closes the connection instead of sending a refused one.
func (c *sideConn) Write(b []byte) (int, error) {
	c.wmu.Lock()
	c.wbuf = append(c.wbuf, b...)
	for len(c.wbuf) >= 4 {
		size := int(binary.BigEndian.Uint32(c.wbuf))
		if len(c.wbuf) < 4+size {
			break
		}
		if size >= 2 {
			key := int16(binary.BigEndian.Uint16(c.wbuf[4:]))
			if key == kmsg.ShareFetch.Int16() {
				c.shared.Store(true)
			}
			if _, ok := c.bs.refuse.Load(key); ok {
				c.wmu.Unlock()
				c.bs.refused.Add(1)
				c.Conn.Close()
				return 0, errors.New("brokerSide: request refused")
			}
		}
		c.wbuf = c.wbuf[4+size:]
	}
	c.wmu.Unlock()
	c.touch()
	return c.Conn.Write(b)
}

func (c *sideConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if n > 0 {
		c.touch()
	}
	return n, err
}

// waitShareStart waits until the group's start offset of every partition
// of t is end: every record before it acknowledged.
func waitShareStart(t testing.TB, cl *Client, partitions int32, end int64) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		offs, err := cl.Admin().DescribeShareGroupOffsets(ctx, "g", "t")
		cancel()
		done := err == nil && len(offs) == int(partitions)
		for _, o := range offs {
			done = done && o.Err == nil && o.StartOffset == end
		}
		if done {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("start offsets never reached %d: %v (err %v)", end, offs, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestShareLeaderHintMovesPartition: a partition's leader moves while the
// member consumes it, and the member's client can get no metadata from
// then on: the CurrentLeader of the old leader's NOT_LEADER_OR_FOLLOWER
// answer (KIP-951) alone moves the partition's fetching to the new leader,
// where every record is delivered once, and the old leader's session
// forgets the partition.
func TestShareLeaderHintMovesPartition(t *testing.T) {
	fake := newShareFake(t, 1, 30*time.Second)
	pcl := shareClient(t, fake)
	produceN(t, pcl, "t", 1, 50)
	shareFromEarliest(t, pcl, "g")
	old := fake.LeaderFor("t", 0)
	var forgot atomic.Int64 // ShareFetches to the old leader forgetting partitions
	fake.ControlKey(kmsg.ShareFetch.Int16(), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		fake.KeepControl()
		if req := kr.(*kmsg.ShareFetchRequest); fake.CurrentNode() == old && len(req.ForgottenTopicsData) > 0 {
			forgot.Add(1)
		}
		return nil, nil, false
	})
	bs := newBrokerSide(t, 0)
	cl := newTestClient(t, SeedBrokers(fake.ListenAddrs()...), Dialer(bs.dial))
	s := newSeen(100)
	half := make(chan struct{})
	var halfOnce sync.Once
	sc, err := NewShareConsumer(cl, ShareGroup("g"), SubscribeTopics("t"), HandleRecord(func(_ context.Context, r *Record) error {
		if r.DeliveryCount != 1 {
			t.Errorf("%d delivered %d times", r.Offset, r.DeliveryCount)
		}
		s.add(r)
		if s.count.Load() == 50 {
			halfOnce.Do(func() { close(half) })
		}
		return nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	waitDone(t, half, "the first 50 records")
	waitShareStart(t, pcl, 1, 50)

	pm, _ := cl.cl.Snapshot().Topics["t"].Partition(0)
	if pm.Leader != old {
		t.Fatalf("the member's metadata has leader %d, the cluster %d", pm.Leader, old)
	}
	bs.refuse.Store(kmsg.Metadata.Int16(), true)
	moved := (old + 1) % 3
	if err := fake.MoveTopicPartition("t", 0, moved); err != nil {
		t.Fatal(err)
	}
	produceN(t, pcl, "t", 1, 50) // pcl's metadata is its own
	waitDone(t, s.done, "every record")
	waitShareStart(t, pcl, 1, 100)
	closeShare(t, sc)

	if pm, _ := cl.cl.Snapshot().Topics["t"].Partition(0); pm.Leader != moved || pm.LeaderEpoch <= 0 {
		t.Errorf("the member's metadata: leader %d epoch %d, want leader %d", pm.Leader, pm.LeaderEpoch, moved)
	}
	if n := cl.cl.HintsApplied(); n == 0 {
		t.Error("no leader hint applied")
	}
	// The old leader's session forgot the partition: closing it cannot
	// release what the member acquired in it elsewhere.
	if forgot.Load() == 0 {
		t.Error("the old leader's session never forgot the partition")
	}
	if st := sc.Stats(); st.Accepted != 100 || st.Redelivered != 0 {
		t.Errorf("stats %+v", st)
	}
	assertShareDrained(t, pcl, "g", "t", 1, 100)
	t.Logf("%d metadata requests refused", bs.refused.Load())
}

// TestShareKeepAliveBeatsBrokerIdleClose: the only runner handles a
// record for longer than the brokers' idle timeout; the fetcher, with
// nothing to fetch, acknowledge or renew (the lock lasts a minute), keeps
// its share session's connection busy enough that the broker never
// closes it (which would end the session and release the record: it
// would be delivered again and its accept refused). With auto-renewal the
// keep-alive renews the running record's lock; without, it is an empty
// ShareAcknowledge.
func TestShareKeepAliveBeatsBrokerIdleClose(t *testing.T) {
	for _, renew := range []bool{true, false} {
		t.Run(fmt.Sprintf("renew=%v", renew), func(t *testing.T) {
			fake := newShareFake(t, 1, time.Minute)
			pcl := shareClient(t, fake)
			produceN(t, pcl, "t", 1, 2)
			shareFromEarliest(t, pcl, "g")
			var empty, renewing atomic.Int64
			fake.ControlKey(kmsg.ShareAcknowledge.Int16(), func(kr kmsg.Request) (kmsg.Response, error, bool) {
				fake.KeepControl()
				req := kr.(*kmsg.ShareAcknowledgeRequest)
				switch {
				case req.ShareSessionEpoch <= 0:
				case len(req.Topics) == 0:
					empty.Add(1)
				case req.IsRenewAck:
					renewing.Add(1)
				}
				return nil, nil, false
			})
			// The "broker" closes connections quiet for 1 s; the client
			// is told 300 ms, so its keep-alive has 700 ms to spare.
			bs := newBrokerSide(t, time.Second)
			cl := newTestClient(t, SeedBrokers(fake.ListenAddrs()...), Dialer(bs.dial), BrokerIdleTimeout(300*time.Millisecond))
			s := newSeen(2)
			sc, err := NewShareConsumer(cl, ShareGroup("g"), SubscribeTopics("t"), Runners(1), ShareAutoRenew(renew),
				HandleRecord(func(ctx context.Context, r *Record) error {
					if r.DeliveryCount != 1 {
						t.Errorf("%d delivered %d times", r.Offset, r.DeliveryCount)
					}
					if r.Offset == 0 {
						select {
						case <-time.After(3 * time.Second): // 3 idle timeouts
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
			st := sc.Stats()
			if st.Accepted != 2 || st.AckErrors != 0 || st.Redelivered != 0 || st.KeepAlives == 0 {
				t.Errorf("stats %+v", st)
			}
			if n := bs.shareIdleClosed.Load(); n != 0 {
				t.Errorf("the broker closed %d share fetch connections as idle", n)
			}
			if renew && (renewing.Load() == 0 || st.Renewed == 0) {
				t.Errorf("keep-alives did not renew: %d renewing requests, %d empty, %d renewed", renewing.Load(), empty.Load(), st.Renewed)
			}
			if !renew && (empty.Load() == 0 || renewing.Load() != 0) {
				t.Errorf("keep-alives: %d empty requests, %d renewing", empty.Load(), renewing.Load())
			}
			assertShareDrained(t, pcl, "g", "t", 1, 2)
			t.Logf("%d keep-alives (%d renewing, %d empty), %d connections closed as idle", st.KeepAlives, renewing.Load(), empty.Load(), bs.idleClosed.Load())
		})
	}
}

// TestShareAckLeaderHint: the leader moves while both runners hold
// records, and the member's client can get no metadata: the
// ShareAcknowledge of an acknowledgement made meanwhile (no runner idle:
// no ShareFetch to carry it) is refused with NOT_LEADER_OR_FOLLOWER and
// the new leader (KIP-951), which moves the partition; the records whose
// acknowledgements the old leader refused come back from the new one once
// their locks end.
func TestShareAckLeaderHint(t *testing.T) {
	fake := newShareFake(t, 1, 3*time.Second)
	pcl := shareClient(t, fake)
	produceN(t, pcl, "t", 1, 2)
	shareFromEarliest(t, pcl, "g")
	old := fake.LeaderFor("t", 0)
	var moved atomic.Bool
	var oldFetches atomic.Int64 // ShareFetches to the old leader naming partitions
	fake.ControlKey(kmsg.ShareFetch.Int16(), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		fake.KeepControl()
		if moved.Load() && fake.CurrentNode() == old && len(kr.(*kmsg.ShareFetchRequest).Topics) > 0 {
			oldFetches.Add(1)
		}
		return nil, nil, false
	})
	bs := newBrokerSide(t, 0)
	cl := newTestClient(t, SeedBrokers(fake.ListenAddrs()...), Dialer(bs.dial))
	var scp atomic.Pointer[ShareConsumer]
	running := make(chan struct{}, 2)
	acked := make(chan struct{})
	release := make(chan struct{})
	s := newSeen(2)
	sc, err := NewShareConsumer(cl, ShareGroup("g"), SubscribeTopics("t"), Runners(2), ShareAutoRenew(false),
		HandleRecord(func(ctx context.Context, r *Record) error {
			if r.DeliveryCount > 1 {
				s.add(r)
				return nil
			}
			running <- struct{}{}
			if r.Offset == 0 {
				<-acked
				if err := scp.Load().Acknowledge(r, AckAccept); err != nil {
					t.Errorf("acknowledge: %v", err)
				}
			}
			<-release
			return nil
		}))
	if err != nil {
		t.Fatal(err)
	}
	scp.Store(sc)
	for range 2 {
		select {
		case <-running:
		case <-time.After(30 * time.Second):
			t.Fatal("the records never ran")
		}
	}
	bs.refuse.Store(kmsg.Metadata.Int16(), true)
	to := (old + 1) % 3
	moved.Store(true)
	if err := fake.MoveTopicPartition("t", 0, to); err != nil {
		t.Fatal(err)
	}
	close(acked)
	deadline := time.Now().Add(30 * time.Second)
	for cl.cl.HintsApplied() == 0 {
		if time.Now().After(deadline) {
			close(release)
			t.Fatal("no leader hint applied")
		}
		time.Sleep(5 * time.Millisecond)
	}
	close(release)
	if pm, _ := cl.cl.Snapshot().Topics["t"].Partition(0); pm.Leader != to {
		t.Errorf("hinted leader %d, want %d", pm.Leader, to)
	}
	if n := oldFetches.Load(); n != 0 {
		t.Errorf("%d ShareFetches to the old leader: the hint may not have come from a ShareAcknowledge", n)
	}
	// The old leader refused both acknowledgements: the records come
	// back from the new one once their locks end.
	waitDone(t, s.done, "both records delivered again by the new leader")
	waitShareStart(t, pcl, 1, 2)
	closeShare(t, sc)
	if st := sc.Stats(); st.AckErrors == 0 || st.Redelivered != 2 {
		t.Errorf("stats %+v", st)
	}
}

// TestShareFetchBatchHook: FetchBatchHooks see a share consumer's
// fetches as they see a Consumer's: every record handed to the handlers
// once, per partition and broker, with its size; no watermark or lag.
func TestShareFetchBatchHook(t *testing.T) {
	fake := newShareFake(t, 3, 30*time.Second)
	pcl := shareClient(t, fake)
	produceN(t, pcl, "t", 3, 100)
	shareFromEarliest(t, pcl, "g")
	h := &recHooks{}
	cl := newTestClient(t, SeedBrokers(fake.ListenAddrs()...), WithHooks(h))
	s := newSeen(300)
	sc, err := NewShareConsumer(cl, ShareGroup("g"), SubscribeTopics("t"), HandleRecord(func(_ context.Context, r *Record) error {
		s.add(r)
		return nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	waitDone(t, s.done, "every record")
	closeShare(t, sc)
	h.mu.Lock()
	defer h.mu.Unlock()
	perPart := map[int32]int{}
	for _, e := range h.fetched {
		perPart[e.Partition] += e.Records
		if e.Topic != "t" || e.Err != nil || e.HighWatermark != -1 || e.Lag != -1 || e.Node != fake.LeaderFor("t", e.Partition) ||
			e.Records > 0 && (e.Bytes <= 0 || e.UncompressedBytes <= 0) {
			t.Errorf("event %+v", e)
		}
	}
	for p := int32(0); p < 3; p++ {
		if perPart[p] != 100 {
			t.Errorf("partition %d: hooks saw %d records, want 100", p, perPart[p])
		}
	}
}
