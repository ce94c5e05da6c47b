package riffle

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/riffle-go/riffle/internal/kafkaerr"
	"github.com/riffle-go/riffle/internal/wire"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// fetchProxy is a dialer whose connections pass requests through
// untouched and rewrite Fetch responses (kfake never names a preferred
// read replica, and its control functions can only replace a response,
// not edit the one it would give), and Metadata responses when editMeta
// is set (kfake gives its brokers no racks). It owns the frame layer: it reads the
// correlation id, api key and version of every request frame the client
// writes, and for each response frame to a Fetch it decodes the body with
// kmsg, lets edit change it, and writes it back framed with the same
// correlation id. It also counts, per broker, the records each served.
type fetchProxy struct {
	addrs map[string]int32 // broker address => node id

	mu       sync.Mutex
	edit     func(node int32, resp *kmsg.FetchResponse)    // under mu
	editMeta func(node int32, resp *kmsg.MetadataResponse) // under mu; nil: Metadata untouched
	served   map[int32]int                                 // node => fetch responses that carried records
	down     map[int32]bool                                // node => dials fail
	conns    map[int32][]net.Conn
	fetched  map[int32]int // node => fetch responses seen
}

func (px *fetchProxy) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	node, ok := px.addrs[addr]
	px.mu.Lock()
	down := ok && px.down[node]
	px.mu.Unlock()
	if down {
		return nil, fmt.Errorf("proxy: broker %d is down", node)
	}
	var d net.Dialer
	nc, err := d.DialContext(ctx, network, addr)
	if err != nil || !ok {
		return nc, err
	}
	pc := &proxyConn{Conn: nc, px: px, node: node, reqs: map[int32][2]int16{}}
	px.mu.Lock()
	px.conns[node] = append(px.conns[node], pc)
	px.mu.Unlock()
	return pc, nil
}

// takeDown closes node's connections and fails dials to it.
func (px *fetchProxy) takeDown(node int32) {
	px.mu.Lock()
	px.down[node] = true
	cs := px.conns[node]
	px.conns[node] = nil
	px.mu.Unlock()
	for _, c := range cs {
		c.Close()
	}
}

func (px *fetchProxy) counts(node int32) (served, fetched int) {
	px.mu.Lock()
	defer px.mu.Unlock()
	return px.served[node], px.fetched[node]
}

type proxyConn struct {
	net.Conn
	px   *fetchProxy
	node int32

	wmu  sync.Mutex
	wbuf []byte
	reqs map[int32][2]int16 // correlation id => api key, version (under wmu)

	rbuf []byte // a rewritten response not yet read
}

// Write forwards b and notes the header of every complete request frame:
// size (4), api key (2), api version (2), correlation id (4).
func (c *proxyConn) Write(b []byte) (int, error) {
	c.wmu.Lock()
	c.wbuf = append(c.wbuf, b...)
	for len(c.wbuf) >= 4 {
		size := int(binary.BigEndian.Uint32(c.wbuf))
		if len(c.wbuf) < 4+size {
			break
		}
		if size >= 8 {
			h := c.wbuf[4:]
			key, ver := int16(binary.BigEndian.Uint16(h)), int16(binary.BigEndian.Uint16(h[2:]))
			c.reqs[int32(binary.BigEndian.Uint32(h[4:]))] = [2]int16{key, ver}
		}
		c.wbuf = c.wbuf[4+size:]
	}
	c.wmu.Unlock()
	return c.Conn.Write(b)
}

// Read serves whole response frames, rewriting those answering a Fetch.
func (c *proxyConn) Read(b []byte) (int, error) {
	if len(c.rbuf) == 0 {
		var sz [4]byte
		if _, err := io.ReadFull(c.Conn, sz[:]); err != nil {
			return 0, err
		}
		body := make([]byte, binary.BigEndian.Uint32(sz[:]))
		if _, err := io.ReadFull(c.Conn, body); err != nil {
			return 0, err
		}
		frame, err := c.rewrite(body)
		if err != nil {
			return 0, err
		}
		c.rbuf = frame
	}
	n := copy(b, c.rbuf)
	c.rbuf = c.rbuf[n:]
	return n, nil
}

func (c *proxyConn) rewrite(body []byte) ([]byte, error) {
	frame := func(b []byte) []byte {
		return append(binary.BigEndian.AppendUint32(nil, uint32(len(b))), b...)
	}
	if len(body) < 4 {
		return frame(body), nil
	}
	corr := int32(binary.BigEndian.Uint32(body))
	c.wmu.Lock()
	kv, ok := c.reqs[corr]
	delete(c.reqs, corr)
	c.wmu.Unlock()
	c.px.mu.Lock()
	editMeta := c.px.editMeta != nil
	c.px.mu.Unlock()
	if !ok || (kv[0] != kmsg.Fetch.Int16() && (kv[0] != kmsg.Metadata.Int16() || !editMeta)) {
		return frame(body), nil
	}
	resp := kmsg.ResponseForKey(kv[0])
	resp.SetVersion(kv[1])
	flexible := resp.IsFlexible()
	_, rest, err := wire.SplitResponse(body, flexible)
	if err != nil {
		return nil, err
	}
	if err := resp.ReadFrom(rest); err != nil {
		return nil, fmt.Errorf("proxy: undecodable response to key %d: %w", kv[0], err)
	}
	c.px.mu.Lock()
	switch r := resp.(type) {
	case *kmsg.MetadataResponse:
		c.px.editMeta(c.node, r)
	case *kmsg.FetchResponse:
		if c.px.edit != nil {
			c.px.edit(c.node, r)
		}
		c.px.fetched[c.node]++
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				if len(p.RecordBatches) > 0 {
					c.px.served[c.node]++
				}
			}
		}
	}
	c.px.mu.Unlock()
	out := binary.BigEndian.AppendUint32(nil, uint32(corr))
	if flexible {
		out = append(out, 0) // no header tags
	}
	return frame(resp.AppendTo(out)), nil
}

// followerSetup is a 3-broker cluster with topic "t" (one partition,
// replicated on every broker), a follower allowed to serve it, and a
// client dialing through a fetchProxy.
type followerSetup struct {
	fake             *kfake.Cluster
	px               *fetchProxy
	producer         *Client
	cl               *Client
	leader, follower int32
}

func newFollowerSetup(t *testing.T, opts ...Option) *followerSetup {
	fake := newFake(t, kfake.NumBrokers(3), kfake.SeedTopics(1, "t"))
	s := &followerSetup{fake: fake}
	s.producer = newTestClient(t, SeedBrokers(fake.ListenAddrs()...))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	bs, err := s.producer.Brokers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	s.px = &fetchProxy{addrs: map[string]int32{}, served: map[int32]int{}, down: map[int32]bool{},
		conns: map[int32][]net.Conn{}, fetched: map[int32]int{}}
	for _, b := range bs {
		s.px.addrs[net.JoinHostPort(b.Host, fmt.Sprint(b.Port))] = b.NodeID
	}
	s.leader = fake.LeaderFor("t", 0)
	s.follower = (s.leader + 1) % 3
	fake.SetFollowers("t", 0, []int32{s.follower})
	s.cl = newTestClient(t, append([]Option{SeedBrokers(fake.ListenAddrs()...), Dialer(s.px.dial)}, opts...)...)
	return s
}

// consumeChecked starts a consumer of t[0] from the earliest offset that
// checks every record comes exactly once and in order, and returns a
// function waiting until n records came.
func consumeChecked(t *testing.T, cl *Client) (*Consumer, func(n int)) {
	var mu sync.Mutex
	next := int64(0)
	cond := sync.NewCond(&mu)
	cs, err := NewConsumer(cl, FetchMaxWait(50*time.Millisecond), HandleRecord(func(ctx context.Context, r *Record) error {
		mu.Lock()
		defer mu.Unlock()
		if r.Offset != next {
			t.Errorf("record at offset %d, want %d (duplicated or skipped)", r.Offset, next)
		}
		if want := fmt.Sprintf("0-%d", r.Offset); string(r.Value) != want {
			t.Errorf("value %q at offset %d", r.Value, r.Offset)
		}
		next = r.Offset + 1
		cond.Broadcast()
		return nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close(context.Background()) })
	if err := cs.Assign(Assignment{TopicPartition{"t", 0}, AtEarliest()}); err != nil {
		t.Fatal(err)
	}
	// A hang guard only: the test waits for records, never for time.
	guard := time.AfterFunc(60*time.Second, func() {
		mu.Lock()
		t.Errorf("timed out at offset %d", next)
		next = 1 << 62
		cond.Broadcast()
		mu.Unlock()
	})
	t.Cleanup(func() { guard.Stop() })
	wait := func(n int) {
		mu.Lock()
		defer mu.Unlock()
		for next < int64(n) {
			cond.Wait()
		}
		if next >= 1<<62 {
			t.FailNow()
		}
	}
	return cs, wait
}

func readReplicaOf(cs *Consumer) int32 {
	for _, ps := range cs.Stats().Partitions {
		return ps.ReadReplica
	}
	return -2
}

// produceRange writes records i in [from, to) of partition 0, values "0-i".
func produceRange(t *testing.T, cl *Client, from, to int) {
	t.Helper()
	p, err := NewProducer(cl, WithPartitioner(ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var recs []*Record
	for i := from; i < to; i++ {
		recs = append(recs, &Record{Topic: "t", Partition: 0, Value: []byte(fmt.Sprintf("0-%d", i))})
	}
	if err := p.ProduceSync(ctx, recs...); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestFollowerFetching: a consumer with Rack("b") whose leader names a
// follower as preferred read replica fetches from the follower, from the
// offset it had reached (the leader's answer naming it also carries
// records here: they are delivered, and the follower goes on after them),
// and every record arrives exactly once, in order. Then the follower fails
// (partition errors, or its connections and dials fail): the partition
// goes back to the leader, still with no record lost or repeated.
func TestFollowerFetching(t *testing.T) {
	for _, failure := range []string{"OFFSET_NOT_AVAILABLE", "NOT_LEADER_OR_FOLLOWER", "FENCED_LEADER_EPOCH", "OFFSET_OUT_OF_RANGE", "connection"} {
		t.Run(failure, func(t *testing.T) {
			s := newFollowerSetup(t, Rack("b"))
			var racks sync.Map // racks seen in fetch requests, via kfake
			s.fake.ControlKey(kmsg.Fetch.Int16(), func(req kmsg.Request) (kmsg.Response, error, bool) {
				racks.Store(req.(*kmsg.FetchRequest).Rack, true)
				return nil, nil, false // observe only
			})
			failing := false
			s.px.mu.Lock()
			s.px.edit = func(node int32, resp *kmsg.FetchResponse) {
				for i := range resp.Topics {
					for j := range resp.Topics[i].Partitions {
						p := &resp.Topics[i].Partitions[j]
						switch {
						case node == s.leader && !failing:
							p.PreferredReadReplica = s.follower
						case node == s.follower && failing && failure != "connection":
							code := map[string]int16{
								"OFFSET_NOT_AVAILABLE":   kafkaerr.OffsetNotAvailable,
								"NOT_LEADER_OR_FOLLOWER": kafkaerr.NotLeaderForPartition,
								"FENCED_LEADER_EPOCH":    kafkaerr.FencedLeaderEpoch,
								"OFFSET_OUT_OF_RANGE":    kafkaerr.OffsetOutOfRange,
							}[failure]
							*p = kmsg.NewFetchResponseTopicPartition()
							p.Partition, p.ErrorCode, p.HighWatermark = 0, code, -1
						}
					}
				}
			}
			s.px.mu.Unlock()

			const n = 200
			produceRange(t, s.producer, 0, n)
			cs, wait := consumeChecked(t, s.cl)
			wait(n)
			// More records while the follower serves: they come from it.
			produceRange(t, s.producer, n, 2*n)
			wait(2 * n)
			fromFollower, _ := s.px.counts(s.follower)
			if fromFollower == 0 {
				t.Fatalf("the follower served no records (leader served %v)", s.px.served)
			}
			if got := readReplicaOf(cs); got != s.follower {
				t.Errorf("Stats ReadReplica = %d, want the follower %d", got, s.follower)
			}
			if _, ok := racks.Load("b"); !ok {
				t.Error("no fetch request carried Rack \"b\"")
			}

			// The follower fails; the leader stops naming it.
			s.px.mu.Lock()
			failing = true
			leaderBefore := s.px.served[s.leader]
			s.px.mu.Unlock()
			if failure == "connection" {
				s.px.takeDown(s.follower)
			}
			produceRange(t, s.producer, 2*n, 3*n)
			wait(3 * n)
			if leaderAfter, _ := s.px.counts(s.leader); leaderAfter == leaderBefore {
				t.Fatal("the leader served nothing after the follower failed")
			}
			if got := readReplicaOf(cs); got != -1 {
				t.Errorf("Stats ReadReplica = %d after the follower failed, want -1", got)
			}
			for _, ps := range cs.Stats().Partitions {
				if ps.Err != nil {
					t.Errorf("partition stopped: %v", ps.Err)
				}
			}
		})
	}
}

// TestFollowerFetchingReasksLeader: the preference expires after
// MetadataMaxAge, and the partition goes back to the leader, which is
// asked again (here it names the follower only once, so the partition
// stays with the leader).
func TestFollowerFetchingReasksLeader(t *testing.T) {
	s := newFollowerSetup(t, Rack("b"), MetadataMinAge(10*time.Millisecond), MetadataMaxAge(200*time.Millisecond))
	named := false
	s.px.mu.Lock()
	s.px.edit = func(node int32, resp *kmsg.FetchResponse) {
		if node != s.leader || named {
			return
		}
		for i := range resp.Topics {
			for j := range resp.Topics[i].Partitions {
				resp.Topics[i].Partitions[j].PreferredReadReplica = s.follower
				named = true
			}
		}
	}
	s.px.mu.Unlock()
	const n = 100
	produceRange(t, s.producer, 0, n)
	cs, wait := consumeChecked(t, s.cl)
	wait(n)
	// Wait (by condition) for the follower to have been fetched from (the
	// leader's answer naming it carried every record so far) and then for
	// the leader to be fetched from again.
	var leaderAt int
	guard := time.Now().Add(60 * time.Second) // a hang guard, not an assertion on time
	for {
		s.px.mu.Lock()
		if s.px.fetched[s.follower] > 0 && leaderAt == 0 {
			leaderAt = s.px.fetched[s.leader]
		}
		done := leaderAt > 0 && s.px.fetched[s.leader] > leaderAt
		s.px.mu.Unlock()
		if done {
			break
		}
		if time.Now().After(guard) {
			t.Fatalf("the leader was not fetched from again after the follower served (fetches %v, records %v)", s.px.fetched, s.px.served)
		}
		time.Sleep(10 * time.Millisecond)
	}
	produceRange(t, s.producer, n, 2*n)
	wait(2 * n)
	if got := readReplicaOf(cs); got != -1 {
		t.Errorf("Stats ReadReplica = %d after the preference expired, want -1", got)
	}
}
