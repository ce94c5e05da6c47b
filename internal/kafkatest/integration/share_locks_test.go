package integration_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/riffle-go/riffle"
)

// shareGroupConfigs sets group configs through Admin.AlterGroupConfigs
// and waits until DescribeGroupConfigs reads each back (Kafka applies
// them when the brokers replay the metadata log).
func shareGroupConfigs(t *testing.T, cl *riffle.Client, group string, kv ...string) {
	t.Helper()
	var chs []riffle.GroupConfigChange
	for i := 0; i+1 < len(kv); i += 2 {
		v := kv[i+1]
		chs = append(chs, riffle.GroupConfigChange{Group: group, Name: kv[i], Value: &v})
	}
	res, err := cl.Admin().AlterGroupConfigs(timeout(t, time.Minute), chs...)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.Err != nil {
			t.Fatalf("AlterGroupConfigs %s: %v", r.Group, r.Err)
		}
	}
	for i := 0; i+1 < len(kv); i += 2 {
		groupConfigIs(t, cl, group, kv[i], kv[i+1])
	}
}

// produceValues writes one record per value into partition 0 of topic,
// keyed by the value.
func produceValues(t *testing.T, cl *riffle.Client, topic string, vals ...string) {
	t.Helper()
	p, err := riffle.NewProducer(cl, riffle.WithPartitioner(riffle.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	ctx := timeout(t, time.Minute)
	defer p.Close(ctx)
	var recs []*riffle.Record
	for _, v := range vals {
		recs = append(recs, &riffle.Record{Topic: topic, Key: []byte(v), Value: []byte(v)})
	}
	if err := p.ProduceSync(ctx, recs...); err != nil {
		t.Fatal(err)
	}
}

// deliveryLog records the delivery counts each value was handled with.
type deliveryLog struct {
	mu  sync.Mutex
	got map[string][]int16
}

func (l *deliveryLog) add(r *riffle.Record) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.got[string(r.Value)] = append(l.got[string(r.Value)], r.DeliveryCount)
}

func (l *deliveryLog) of(v string) []int16 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.got[v])
}

// shareLagZero waits until the share group's lag is 0 in every partition
// of topic: every record acknowledged or archived.
func shareLagZero(t *testing.T, cl *riffle.Client, group, topic string, parts int) {
	t.Helper()
	eventually(t, time.Minute, "the share group's lag at 0", func() error {
		offs, err := cl.Admin().DescribeShareGroupOffsets(timeout(t, 30*time.Second), group, topic)
		if err != nil {
			return err
		}
		if len(offs) != parts {
			return fmt.Errorf("offsets %v", offs)
		}
		for _, o := range offs {
			if o.Err != nil || o.Lag != 0 {
				return fmt.Errorf("%v", o)
			}
		}
		return nil
	})
}

// Renewing acquisition locks (KIP-1222, share.renew.acknowledge.enable):
// with the group's lock at 2 s, a handler that runs for several lock
// durations keeps its record, auto-renewed (ShareAutoRenew, the default)
// or renewed by the application (AckRenew in explicit mode): the record is
// delivered once, never expires, and its acceptance counts. The broker
// reports the group's lock duration (ShareStats.LockTimeout).
func TestShareRenewKeepsRecord(t *testing.T) {
	for _, mode := range []string{"auto", "explicit"} {
		t.Run(mode, func(t *testing.T) {
			need(t)
			if !supportsShare(t) {
				return
			}
			cl := client(t)
			tp := topic(t, cl, 1, nil)
			group := name(t, "sg")
			const lock = 2 * time.Second
			shareGroupConfigs(t, cl, group, "share.auto.offset.reset", "earliest",
				"share.record.lock.duration.ms", strconv.Itoa(int(lock.Milliseconds())),
				"share.renew.acknowledge.enable", "true")
			produceValues(t, cl, tp, "long")
			log := &deliveryLog{got: map[string][]int16{}}
			var sc *riffle.ShareConsumer
			ready, release := make(chan struct{}), make(chan struct{})
			held := make(chan *riffle.Record, 1)
			opts := []riffle.ConsumerOption{riffle.ShareGroup(group), riffle.SubscribeTopics(tp),
				riffle.HandleRecord(func(ctx context.Context, r *riffle.Record) error {
					<-ready
					log.add(r)
					if mode == "explicit" {
						held <- r
						return nil // held: the test renews, then accepts
					}
					select {
					case <-release:
					case <-ctx.Done():
						return ctx.Err()
					}
					return nil
				})}
			if mode == "explicit" {
				opts = append(opts, riffle.ShareAcknowledgementMode(riffle.ShareAckExplicit), riffle.ShareAutoRenew(false))
			}
			var err error
			sc, err = riffle.NewShareConsumer(client(t), opts...)
			if err != nil {
				t.Fatal(err)
			}
			defer sc.Close(timeout(t, 30*time.Second))
			close(ready)
			start := time.Now()
			if mode == "explicit" {
				var r *riffle.Record
				select {
				case r = <-held:
				case <-time.After(time.Minute):
					t.Fatal("no record delivered")
				}
				// Renew every lock/4 until the record was held for
				// 3 lock durations.
				for time.Since(start) < 3*lock {
					if err := sc.Acknowledge(r, riffle.AckRenew); err != nil {
						t.Fatalf("AckRenew after %v: %v", time.Since(start).Round(time.Millisecond), err)
					}
					time.Sleep(lock / 4)
				}
				if err := sc.Acknowledge(r, riffle.AckAccept); err != nil {
					t.Fatalf("AckAccept after %v of renewals: %v", time.Since(start).Round(time.Millisecond), err)
				}
			} else {
				// Hold the handler until the consumer renewed the
				// lock twice: the record outlived two lock durations.
				eventually(t, time.Minute, "two renewals", func() error {
					if st := sc.Stats(); st.Renewed < 2 {
						return fmt.Errorf("%d renewals, %d expired", st.Renewed, st.Expired)
					}
					return nil
				})
				close(release)
			}
			shareLagZero(t, cl, group, tp, 1)
			st := sc.Stats()
			t.Logf("held %v: renewed %d, expired %d, redelivered %d, accepted %d, lock %v",
				time.Since(start).Round(time.Millisecond), st.Renewed, st.Expired, st.Redelivered, st.Accepted, st.LockTimeout)
			if got := log.of("long"); !slices.Equal(got, []int16{1}) {
				t.Errorf("delivery counts %v, want one delivery", got)
			}
			if st.Expired != 0 || st.Redelivered != 0 || st.Accepted != 1 || st.Renewed < 2 {
				t.Errorf("stats: renewed %d expired %d redelivered %d accepted %d", st.Renewed, st.Expired, st.Redelivered, st.Accepted)
			}
			if st.LockTimeout != lock {
				t.Errorf("the broker's lock duration %v, want the group's %v", st.LockTimeout, lock)
			}
		})
	}
}

// A record held past the group's acquisition lock
// (share.record.lock.duration.ms, 2 s here) is released by the broker and
// delivered again with delivery count 2; acknowledging the expired
// delivery fails with ErrNotAcquired.
func TestShareLockExpiryRedelivers(t *testing.T) {
	need(t)
	if !supportsShare(t) {
		return
	}
	cl := client(t)
	tp := topic(t, cl, 1, nil)
	group := name(t, "sg")
	shareGroupConfigs(t, cl, group, "share.auto.offset.reset", "earliest", "share.record.lock.duration.ms", "2000")
	produceValues(t, cl, tp, "slow")
	log := &deliveryLog{got: map[string][]int16{}}
	first := make(chan *riffle.Record, 1)
	accepted := make(chan struct{})
	var sc *riffle.ShareConsumer
	ready := make(chan struct{})
	var err error
	sc, err = riffle.NewShareConsumer(client(t), riffle.ShareGroup(group), riffle.SubscribeTopics(tp),
		riffle.ShareAcknowledgementMode(riffle.ShareAckExplicit), riffle.ShareAutoRenew(false),
		riffle.HandleRecord(func(_ context.Context, r *riffle.Record) error {
			<-ready
			log.add(r)
			if r.DeliveryCount == 1 {
				first <- r
				return nil // held, never acknowledged: the lock expires
			}
			if err := sc.Acknowledge(r, riffle.AckAccept); err != nil {
				t.Errorf("accepting the redelivery: %v", err)
			}
			close(accepted)
			return nil
		}))
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close(timeout(t, 30*time.Second))
	close(ready)
	waitFor(t, time.Minute, "the redelivery accepted", accepted)
	if err := sc.Acknowledge(<-first, riffle.AckAccept); !errors.Is(err, riffle.ErrNotAcquired) {
		t.Errorf("acknowledging the expired delivery: %v, want ErrNotAcquired", err)
	}
	shareLagZero(t, cl, group, tp, 1)
	st := sc.Stats()
	t.Logf("stats: expired %d redelivered %d accepted %d, lock %v", st.Expired, st.Redelivered, st.Accepted, st.LockTimeout)
	if got := log.of("slow"); !slices.Equal(got, []int16{1, 2}) {
		t.Errorf("delivery counts %v, want [1 2]", got)
	}
	if st.Expired != 1 || st.Redelivered != 1 || st.Accepted != 1 {
		t.Errorf("stats: expired %d redelivered %d accepted %d, want 1 each", st.Expired, st.Redelivered, st.Accepted)
	}
}

// share.delivery.count.limit (2, the broker's minimum): a record released
// on each delivery is delivered twice, with counts 1 and 2, then archived:
// never delivered again. The group's lag reaches 0 with it archived, and
// a record produced after it is delivered once and accepted while the
// archived one stays away.
func TestShareDeliveryLimitArchives(t *testing.T) {
	need(t)
	if !supportsShare(t) {
		return
	}
	cl := client(t)
	tp := topic(t, cl, 1, nil)
	group := name(t, "sg")
	shareGroupConfigs(t, cl, group, "share.auto.offset.reset", "earliest", "share.delivery.count.limit", "2")
	produceValues(t, cl, tp, "poison", "ok")
	log := &deliveryLog{got: map[string][]int16{}}
	after := make(chan struct{})
	sc, err := riffle.NewShareConsumer(client(t), riffle.ShareGroup(group), riffle.SubscribeTopics(tp),
		riffle.HandleRecord(func(_ context.Context, r *riffle.Record) error {
			log.add(r)
			switch string(r.Value) {
			case "poison":
				return errors.New("cannot process") // implicit mode: released
			case "after":
				close(after)
			}
			return nil
		}))
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close(timeout(t, 30*time.Second))
	eventually(t, time.Minute, "two deliveries of the poison record", func() error {
		if got := log.of("poison"); len(got) < 2 {
			return fmt.Errorf("deliveries %v", got)
		}
		return nil
	})
	shareLagZero(t, cl, group, tp, 1)
	produceValues(t, cl, tp, "after")
	waitFor(t, time.Minute, "the record produced after the archived one", after)
	shareLagZero(t, cl, group, tp, 1)
	st := sc.Stats()
	t.Logf("stats: released %d accepted %d redelivered %d", st.Released, st.Accepted, st.Redelivered)
	if got := log.of("poison"); !slices.Equal(got, []int16{1, 2}) {
		t.Errorf("poison record delivery counts %v, want [1 2] then archived", got)
	}
	if got := log.of("ok"); !slices.Equal(got, []int16{1}) {
		t.Errorf("ok record delivery counts %v", got)
	}
	if got := log.of("after"); !slices.Equal(got, []int16{1}) {
		t.Errorf("after record delivery counts %v", got)
	}
}

// TestShareGroupOffsetsWithMembers: share group offsets through Admin: after a member consumed both
// partitions and left, DescribeShareGroupOffsets says lag 0;
// AlterShareGroupOffsets moves partition 0 back to offset 0 (lag back to
// its record count), and the next member gets exactly partition 0's
// records again, as first deliveries; DeleteShareGroupOffsets drops the
// topic's state, and a member after that starts the topic afresh
// (share.auto.offset.reset earliest): every record again. With a member
// in the group, altering is refused.
func TestShareGroupOffsetsWithMembers(t *testing.T) {
	need(t)
	if !supportsShare(t) {
		return
	}
	cl := client(t)
	tp := topic(t, cl, 2, nil)
	group := name(t, "sg")
	ctx := timeout(t, 4*time.Minute)
	shareGroupConfigs(t, cl, group, "share.auto.offset.reset", "earliest")
	p, err := riffle.NewProducer(cl, riffle.WithPartitioner(riffle.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	const per = 10
	var recs []*riffle.Record
	for part := range int32(2) {
		for i := range per {
			v := fmt.Sprintf("%d/%d", part, i)
			recs = append(recs, &riffle.Record{Topic: tp, Partition: part, Value: []byte(v)})
		}
	}
	if err := p.ProduceSync(ctx, recs...); err != nil {
		t.Fatal(err)
	}
	p.Close(ctx)

	// consume runs a member until it handled want records, then closes
	// it, and returns what it handled (value -> delivery counts).
	consume := func(what string, want int) map[string][]int16 {
		t.Helper()
		log := &deliveryLog{got: map[string][]int16{}}
		var n sync.WaitGroup
		n.Add(want)
		var count int
		var mu sync.Mutex
		sc, err := riffle.NewShareConsumer(client(t), riffle.ShareGroup(group), riffle.SubscribeTopics(tp),
			riffle.HandleRecord(func(_ context.Context, r *riffle.Record) error {
				log.add(r)
				mu.Lock()
				if count++; count <= want {
					n.Done()
				}
				mu.Unlock()
				return nil
			}))
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		go func() { n.Wait(); close(done) }()
		waitFor(t, 2*time.Minute, what, done)
		shareLagZero(t, cl, group, tp, 2)
		if _, err := cl.Admin().AlterShareGroupOffsets(ctx, group, map[riffle.TopicPartition]int64{{Topic: tp, Partition: 0}: 0}); err == nil {
			t.Errorf("%s: AlterShareGroupOffsets with a member in the group succeeded", what)
		} else {
			t.Logf("%s: AlterShareGroupOffsets with a member: %v", what, err)
		}
		if err := sc.Close(ctx); err != nil {
			t.Fatal(err)
		}
		log.mu.Lock()
		defer log.mu.Unlock()
		return log.got
	}
	everyOnce := func(got map[string][]int16, parts ...int) {
		t.Helper()
		if len(got) != per*len(parts) {
			t.Errorf("%d records handled, want %d: %v", len(got), per*len(parts), got)
		}
		for _, part := range parts {
			for i := range per {
				if c := got[fmt.Sprintf("%d/%d", part, i)]; !slices.Equal(c, []int16{1}) {
					t.Errorf("record %d/%d: delivery counts %v, want [1]", part, i, c)
				}
			}
		}
	}
	everyOnce(consume("the first member", 2*per), 0, 1)

	// The group is empty once the member left: the broker may take a
	// moment to say so.
	eventually(t, time.Minute, "AlterShareGroupOffsets", func() error {
		res, err := cl.Admin().AlterShareGroupOffsets(ctx, group, map[riffle.TopicPartition]int64{{Topic: tp, Partition: 0}: 0})
		if err != nil {
			return err
		}
		for tp, e := range res {
			if e != nil {
				return fmt.Errorf("%v: %w", tp, e)
			}
		}
		return nil
	})
	eventually(t, time.Minute, "the altered offsets described", func() error {
		offs, err := cl.Admin().DescribeShareGroupOffsets(ctx, group, tp)
		if err != nil {
			return err
		}
		if len(offs) != 2 || offs[0].StartOffset != 0 || offs[0].Lag != per || offs[1].Lag != 0 {
			return fmt.Errorf("%v", offs)
		}
		return nil
	})
	everyOnce(consume("the member after the alter", per), 0)

	eventually(t, time.Minute, "DeleteShareGroupOffsets", func() error {
		res, err := cl.Admin().DeleteShareGroupOffsets(ctx, group, tp)
		if err != nil {
			return err
		}
		return res.Err()
	})
	offs, err := cl.Admin().DescribeShareGroupOffsets(ctx, group, tp)
	t.Logf("after DeleteShareGroupOffsets: %v %v", offs, err)
	if err == nil {
		for _, o := range offs {
			if o.Err == nil && o.StartOffset >= 0 {
				t.Errorf("offsets after the delete: %v", o)
			}
		}
	}
	everyOnce(consume("the member after the delete", 2*per), 0, 1)
}
