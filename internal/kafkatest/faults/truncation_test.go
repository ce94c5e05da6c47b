package faults_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/riffle-go/riffle"
)

// A real log divergence (KIP-320). A topic of 2 replicas, leader A and
// follower B, with unclean.leader.election.enable and min.insync.replicas=1:
// B is stopped, A takes acks=1 writes that B never gets, and a consumer
// reads them all. Then A is killed, B comes back and becomes leader
// through an unclean election (its log ends where A's did when B
// stopped), takes new records at those same offsets, and A comes back and
// truncates its log to follow B. The consumer, which had read past B's
// log end, gets ErrLogTruncated (a *LogTruncationError naming where the
// logs diverge) through OnPartitionError and, with its reset policy, goes
// on from there: it reads B's new records.
//
// Killing A while B is down leaves one of the three controllers running,
// so the cluster has no quorum until B is back; nothing needs one then.
func TestUncleanElectionTruncationDetected(t *testing.T) {
	need(t)
	s := steps(t)
	admin := client(t)
	tp, pd := topic(t, admin, 2, map[string]string{"unclean.leader.election.enable": "true", "min.insync.replicas": "1"})
	a := pd.Leader
	b := pd.Replicas[0]
	if b == a {
		b = pd.Replicas[1]
	}
	s.log("topic %s: replicas %v, leader A=%d, follower B=%d, epoch %d", tp, pd.Replicas, a, b, pd.LeaderEpoch)
	ctx := timeout(t, 4*time.Minute)

	produce := func(cl *riffle.Client, values ...string) {
		t.Helper()
		p, err := riffle.NewProducer(cl, riffle.DisableIdempotence(), riffle.Acknowledgements(riffle.AcksLeader))
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close(ctx)
		for _, v := range values {
			p.Produce(ctx, &riffle.Record{Topic: tp, Value: []byte(v)}, func(_ *riffle.Record, err error) {
				if err != nil {
					t.Errorf("produce %s: %v", v, err)
				}
			})
		}
		if err := p.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	vals := func(prefix string, from, to int) []string {
		var out []string
		for i := from; i < to; i++ {
			out = append(out, fmt.Sprintf("%s%02d", prefix, i))
		}
		return out
	}
	const shared, onlyA, onlyB = 10, 20, 5
	produce(admin, vals("old", 0, shared)...)

	// The consumer, with its reset policy (the default, latest): on a
	// truncation it goes on where the logs diverge.
	type seen struct {
		offset int64
		value  string
	}
	var mu sync.Mutex
	var got []seen
	var truncs []*riffle.LogTruncationError
	var others []error
	cl := client(t, riffle.MetadataMaxAge(time.Second))
	c, err := riffle.NewConsumer(cl,
		riffle.HandleRecord(func(_ context.Context, r *riffle.Record) error {
			mu.Lock()
			defer mu.Unlock()
			got = append(got, seen{r.Offset, string(r.Value)})
			return nil
		}),
		riffle.OnPartitionError(func(e *riffle.PartitionError) {
			mu.Lock()
			defer mu.Unlock()
			var te *riffle.LogTruncationError
			if errors.As(e, &te) && errors.Is(e, riffle.ErrLogTruncated) {
				truncs = append(truncs, te)
			} else {
				others = append(others, e)
			}
		}))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	if err := c.Assign(riffle.Assignment{TopicPartition: riffle.TopicPartition{Topic: tp}, Start: riffle.AtEarliest()}); err != nil {
		t.Fatal(err)
	}
	position := func() int64 {
		for _, ps := range c.Stats().Partitions {
			return ps.Position
		}
		return -1
	}
	waitPosition := func(want int64) {
		t.Helper()
		eventually(t, time.Minute, fmt.Sprintf("the consumer at %d", want), func() error {
			if p := position(); p != want {
				return fmt.Errorf("at %d", p)
			}
			return nil
		})
	}
	waitPosition(shared)

	s.log("stopping B=%d", b)
	if err := env.cluster.Stop(b); err != nil {
		t.Fatal(err)
	}
	waitPartition(t, admin, tp, time.Minute, func(d riffle.PartitionDetail) error {
		if d.Leader != a || !slices.Equal(d.ISR, []int32{a}) {
			return fmt.Errorf("leader %d, ISR %v", d.Leader, d.ISR)
		}
		return nil
	})
	produce(admin, vals("a-only", shared, shared+onlyA)...)
	waitPosition(shared + onlyA)
	s.log("A=%d has %d records B lacks; the consumer read them all (position %d); killing A", a, onlyA, position())
	if err := env.cluster.Kill(a); err != nil {
		t.Fatal(err)
	}
	s.log("restarting B=%d", b)
	if err := env.cluster.Restart(ctx, b); err != nil {
		t.Fatal(err)
	}
	s.log("B is back; waiting for it to lead")
	// The controller elects B uncleanly once it fences A (its broker
	// session ends) and sees B: on its own (the suite sets
	// unclean.leader.election.interval.ms to 1 s), or when asked.
	var elected riffle.PartitionDetail
	asked := 0
	eventually(t, 90*time.Second, "B leading", func() error {
		d, err := partition(ctx, admin, tp)
		if err != nil {
			return err
		}
		elected = d
		if d.Leader == b {
			return nil
		}
		if d.Leader < 0 {
			asked++
			res, err := admin.Admin().ElectLeaders(ctx, riffle.ElectionUnclean, riffle.TopicPartition{Topic: tp})
			return fmt.Errorf("leader %d, ISR %v; ElectLeaders UNCLEAN: %v %v", d.Leader, d.ISR, res, err)
		}
		return fmt.Errorf("leader %d, ISR %v", d.Leader, d.ISR)
	})
	s.log("B=%d leads at epoch %d, ISR %v (ElectLeaders UNCLEAN asked %d times)", b, elected.LeaderEpoch, elected.ISR, asked)
	produce(admin, vals("b-only", shared, shared+onlyB)...)
	s.log("B took %d new records at offsets %d..%d; restarting A=%d", onlyB, shared, shared+onlyB-1, a)
	if err := env.cluster.Restart(ctx, a); err != nil {
		t.Fatal(err)
	}
	waitPartition(t, admin, tp, time.Minute, func(d riffle.PartitionDetail) error {
		if d.Leader != b || len(d.ISR) != 2 {
			return fmt.Errorf("leader %d, ISR %v", d.Leader, d.ISR)
		}
		return nil
	})
	s.log("A=%d follows B=%d again, in sync", a, b)

	eventually(t, time.Minute, "the consumer reading B's records", func() error {
		mu.Lock()
		defer mu.Unlock()
		if n := len(got); n < shared+onlyA+onlyB {
			return fmt.Errorf("%d records, %d truncations, position %d", n, len(truncs), position())
		}
		return nil
	})
	mu.Lock()
	defer mu.Unlock()
	s.log("truncations reported: %+v; other partition errors: %v", truncs, others)
	for _, e := range others {
		t.Errorf("partition error: %v", e)
	}
	if len(truncs) != 1 {
		t.Fatalf("%d log truncations reported, want 1", len(truncs))
	}
	if te := truncs[0]; te.FetchOffset != shared+onlyA || te.DivergingOffset != shared {
		t.Errorf("truncation %+v: want fetch offset %d, diverging at %d", te, shared+onlyA, shared)
	}
	var want []seen
	for i, v := range vals("old", 0, shared) {
		want = append(want, seen{int64(i), v})
	}
	for i, v := range vals("a-only", shared, shared+onlyA) {
		want = append(want, seen{int64(shared + i), v})
	}
	for i, v := range vals("b-only", shared, shared+onlyB) {
		want = append(want, seen{int64(shared + i), v})
	}
	if !slices.Equal(got, want) {
		t.Errorf("the consumer saw %v, want %v", got, want)
	}
	// What the cluster holds now is B's log: A truncated its own.
	if log := readAll(t, admin, tp); !slices.Equal(log, append(vals("old", 0, shared), vals("b-only", shared, shared+onlyB)...)) {
		t.Errorf("the partition holds %q", log)
	}
}
