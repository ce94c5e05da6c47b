package integration_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/riffle-go/riffle"
)

// ownClockTolerance is how far one owner's interval may reach into the
// next owner's on a partition: both sides run on one machine and stamp
// their callbacks with the same wall clock in milliseconds, so only the
// truncation to milliseconds separates them.
const ownClockTolerance = time.Millisecond

// ownEvent is a rebalance callback of a group member, stamped with the
// wall clock (ms since the epoch).
type ownEvent struct {
	member string
	ev     string // assigned, revoked, lost, gone (closed or killed)
	ms     int64
	parts  []int32
}

// mixedGroup is what every member of a mixed Java and Riffle group saw.
type mixedGroup struct {
	mu      sync.Mutex
	events  []ownEvent
	seen    map[string]int // value: times handled, by anyone
	handled []handledAt
	total   atomic.Int64
}

// handledAt is a record a member handled, and when.
type handledAt struct {
	member string
	part   int32
	offset int64
	ms     int64
}

func (g *mixedGroup) event(e ownEvent) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.events = append(g.events, e)
}

func (g *mixedGroup) record(member string, r *riffle.Record, ms int64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.seen[string(r.Value)]++
	g.handled = append(g.handled, handledAt{member, r.Partition, r.Offset, ms})
	g.total.Add(1)
}

func partsOf(tps []riffle.TopicPartition) []int32 {
	out := make([]int32, len(tps))
	for i, tp := range tps {
		out[i] = tp.Partition
	}
	return out
}

// drainJava feeds a Java member's lines into g until the process exits
// (the goroutine's owner is the process: killed at the latest when the
// test ends). done is closed then.
func (g *mixedGroup) drainJava(t *testing.T, jp *javaProc, id string) (done chan struct{}) {
	done = make(chan struct{})
	go func() {
		defer close(done)
		for s := range jp.pp.Lines() {
			var l javaLine
			if err := json.Unmarshal([]byte(s), &l); err != nil {
				t.Errorf("java %s line %q: %v", id, s, err)
				continue
			}
			switch l.Ev {
			case "rec":
				g.record(id, recordOf(l), l.Ms)
			case "assigned", "revoked", "lost":
				e := ownEvent{member: id, ev: l.Ev, ms: l.Ms}
				for _, tp := range l.Tps {
					e.parts = append(e.parts, tp.P)
				}
				g.event(e)
			}
		}
	}()
	return done
}

// interval is one member's ownership of one partition, [from, to] in ms.
type interval struct {
	member   string
	from, to int64
}

// checkOwnership builds each member's ownership intervals from the events
// (assigned opens, revoked, lost and gone close) and fails on two members
// owning a partition at once beyond ownClockTolerance, or on a member
// handling a record of a partition it did not own then.
func (g *mixedGroup) checkOwnership(t *testing.T, parts int32) {
	t.Helper()
	g.mu.Lock()
	evs := slices.Clone(g.events)
	handled := slices.Clone(g.handled)
	g.mu.Unlock()
	slices.SortStableFunc(evs, func(a, b ownEvent) int { return int(a.ms - b.ms) })
	open := map[string]map[int32]int64{}
	by := map[int32][]interval{}
	for _, e := range evs {
		if open[e.member] == nil {
			open[e.member] = map[int32]int64{}
		}
		switch e.ev {
		case "assigned":
			for _, p := range e.parts {
				if _, ok := open[e.member][p]; !ok {
					open[e.member][p] = e.ms
				}
			}
		case "revoked", "lost":
			for _, p := range e.parts {
				if from, ok := open[e.member][p]; ok {
					by[p] = append(by[p], interval{e.member, from, e.ms})
					delete(open[e.member], p)
				}
			}
		case "gone":
			for p, from := range open[e.member] {
				by[p] = append(by[p], interval{e.member, from, e.ms})
			}
			delete(open, e.member)
		}
	}
	for m, ps := range open {
		for p, from := range ps {
			t.Errorf("%s still owns %d (since %d) after every member is gone", m, p, from)
		}
	}
	tol := ownClockTolerance.Milliseconds()
	outside := 0
	for _, h := range handled {
		if !slices.ContainsFunc(by[h.part], func(iv interval) bool {
			return iv.member == h.member && h.ms >= iv.from-tol && h.ms <= iv.to+tol
		}) {
			if outside++; outside <= 10 {
				t.Errorf("%s handled %d@%d at %d, outside its ownership of %d: %v", h.member, h.part, h.offset, h.ms, h.part, by[h.part])
			}
		}
	}
	handovers, minGap := 0, int64(-1)
	for p := range parts {
		ivs := by[p]
		slices.SortFunc(ivs, func(a, b interval) int { return int(a.from - b.from) })
		for i := 1; i < len(ivs); i++ {
			prev, cur := ivs[i-1], ivs[i]
			if prev.member != cur.member {
				handovers++
				if gap := cur.from - prev.to; minGap < 0 || gap < minGap {
					minGap = gap
				}
			}
			if prev.member != cur.member && cur.from < prev.to-tol {
				t.Errorf("partition %d owned by %s [%d, %d] and %s [%d, %d] at once (%d ms)",
					p, prev.member, prev.from, prev.to, cur.member, cur.from, cur.to, prev.to-cur.from)
			}
		}
		if len(ivs) == 0 {
			t.Errorf("partition %d never owned", p)
		}
	}
	t.Logf("ownership: %d records handled, %d outside their member's ownership; %d callbacks, %d handovers between members over %d partitions, the closest %d ms after the previous owner let go", len(handled), outside, len(evs), handovers, parts, minGap)
}

// A group mixing Java KafkaConsumer members and Riffle members, with
// members joining, leaving and a Java member crashing (SIGKILL) while a
// producer writes: no record is lost, and no partition has two owners at
// once (each side's rebalance callbacks give timestamped ownership
// intervals). Classic groups with cooperative-sticky and with range (both
// sides offering the same assignor), and a KIP-848 group
// (group.protocol=consumer, the broker's assignor).
func TestJavaRiffleMixedGroup(t *testing.T) {
	peer := needJava(t)
	cl := client(t)
	cases := []struct {
		name     string
		java     []string
		riffle   []riffle.ConsumerOption
		protocol riffle.GroupProtocol
	}{
		{"cooperative-sticky", []string{"--prop", "partition.assignment.strategy=org.apache.kafka.clients.consumer.CooperativeStickyAssignor",
			"--prop", "session.timeout.ms=6000", "--prop", "heartbeat.interval.ms=500"},
			[]riffle.ConsumerOption{riffle.Balancers(riffle.CooperativeStickyBalancer()), riffle.SessionTimeout(6 * time.Second), riffle.HeartbeatInterval(500 * time.Millisecond)},
			riffle.GroupProtocolClassic},
		{"range", []string{"--prop", "partition.assignment.strategy=org.apache.kafka.clients.consumer.RangeAssignor",
			"--prop", "session.timeout.ms=6000", "--prop", "heartbeat.interval.ms=500"},
			[]riffle.ConsumerOption{riffle.Balancers(riffle.RangeBalancer()), riffle.SessionTimeout(6 * time.Second), riffle.HeartbeatInterval(500 * time.Millisecond)},
			riffle.GroupProtocolClassic},
		{"consumer", []string{"--prop", "group.protocol=consumer"}, nil, riffle.GroupProtocolConsumer},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if !supports848(t, tc.protocol) {
				return
			}
			const parts = 6
			tp := topic(t, cl, parts, nil)
			group := name(t, "g")
			g := &mixedGroup{seen: map[string]int{}}

			// A producer writes until the membership script is done.
			p := riffleProducer(t, cl, riffle.WithPartitioner(riffle.RoundRobinPartitioner()), riffle.Linger(5*time.Millisecond))
			stopProducing := make(chan struct{})
			var produced []string
			producerDone := make(chan error, 1)
			go func() { // owned by the test: stopProducing ends it, the test waits for producerDone
				ctx := timeout(t, 5*time.Minute)
				for i := 0; ; i++ {
					select {
					case <-stopProducing:
						producerDone <- nil
						return
					case <-time.After(5 * time.Millisecond):
					}
					v := "m-" + strconv.Itoa(i)
					if err := p.ProduceSync(ctx, &riffle.Record{Topic: tp, Value: []byte(v)}); err != nil {
						producerDone <- err
						return
					}
					produced = append(produced, v)
				}
			}()

			javaArgs := func() []string {
				return append([]string{"group", "--group", group, "--topic", tp}, tc.java...)
			}
			type javaM struct {
				jp   *javaProc
				done chan struct{}
			}
			startJ := func(id string) javaM {
				jp := startJava(t, peer, javaArgs()...)
				return javaM{jp, g.drainJava(t, jp, id)}
			}
			startR := func(id string) *riffle.Consumer {
				opts := append([]riffle.ConsumerOption{
					riffle.OnPartitionsAssigned(func(_ context.Context, tps []riffle.TopicPartition) {
						g.event(ownEvent{member: id, ev: "assigned", ms: time.Now().UnixMilli(), parts: partsOf(tps)})
					}),
					riffle.OnPartitionsRevoked(func(_ context.Context, tps []riffle.TopicPartition) {
						g.event(ownEvent{member: id, ev: "revoked", ms: time.Now().UnixMilli(), parts: partsOf(tps)})
					}),
					riffle.OnPartitionsLost(func(_ context.Context, tps []riffle.TopicPartition) {
						g.event(ownEvent{member: id, ev: "lost", ms: time.Now().UnixMilli(), parts: partsOf(tps)})
					}),
				}, tc.riffle...)
				c, err := riffle.NewConsumer(client(t), append([]riffle.ConsumerOption{riffle.ConsumerGroup(group), riffle.SubscribeTopics(tp),
					riffle.WithGroupProtocol(tc.protocol), riffle.OffsetReset(riffle.ResetEarliest),
					riffle.HandleRecord(func(_ context.Context, r *riffle.Record) error {
						g.record(id, r, time.Now().UnixMilli())
						return nil
					}),
					riffle.OnPartitionError(func(e *riffle.PartitionError) { t.Errorf("%s: partition error: %v", id, e) })}, opts...)...)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _, _ = c.Close(timeout(t, 30*time.Second)) })
				return c
			}
			closeR := func(id string, c *riffle.Consumer) {
				if _, err := c.Close(timeout(t, 30*time.Second)); err != nil {
					t.Errorf("closing %s: %v", id, err)
				}
				g.event(ownEvent{member: id, ev: "gone", ms: time.Now().UnixMilli()})
			}
			stopJ := func(id string, m javaM) {
				m.jp.send("stop")
				waitFor(t, time.Minute, "java "+id+" leaving", m.done)
				g.event(ownEvent{member: id, ev: "gone", ms: time.Now().UnixMilli()})
			}
			killJ := func(id string, m javaM) {
				m.jp.pp.Kill()
				g.event(ownEvent{member: id, ev: "gone", ms: time.Now().UnixMilli()})
				waitFor(t, time.Minute, "java "+id+" dying", m.done)
			}
			// progress waits for the group to handle 100 more records.
			progress := func(what string) {
				t.Helper()
				from := g.total.Load()
				eventually(t, 90*time.Second, what, func() error {
					if n := g.total.Load() - from; n < 100 {
						return fmt.Errorf("%d records handled since", n)
					}
					return nil
				})
			}

			j1 := startJ("java-1")
			r1 := startR("riffle-1")
			progress("java-1 and riffle-1 consuming")
			j2 := startJ("java-2")
			progress("java-2 joined")
			r2 := startR("riffle-2")
			progress("riffle-2 joined")
			stopJ("java-1", j1)
			progress("java-1 left")
			killJ("java-2", j2)
			progress("java-2 crashed")
			closeR("riffle-1", r1)
			progress("riffle-1 left")
			j3 := startJ("java-3")
			progress("java-3 joined")

			close(stopProducing)
			if err := <-producerDone; err != nil {
				t.Fatal(err)
			}
			eventually(t, 2*time.Minute, "every record handled", func() error {
				g.mu.Lock()
				defer g.mu.Unlock()
				missing := 0
				for _, v := range produced {
					if g.seen[v] == 0 {
						missing++
					}
				}
				if missing > 0 {
					return fmt.Errorf("%d of %d records not handled yet", missing, len(produced))
				}
				return nil
			})
			stopJ("java-3", j3)
			closeR("riffle-2", r2)

			g.mu.Lock()
			dups := 0
			for _, v := range produced {
				dups += g.seen[v] - 1
			}
			t.Logf("%d records produced, 0 lost, %d handled again (after java-2's crash, records it handled but had not committed)", len(produced), dups)
			g.mu.Unlock()
			g.checkOwnership(t, parts)
		})
	}
}
