package crash_test

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

// TestMovesPauseOnlyMovedPartitions: a consumer reads the 6 partitions of
// a topic a feeder writes to while partitions move, three ways: a
// controlled shutdown (SIGTERM: the node hands its leaderships over before
// it exits), a preferred leader election (ElectLeaders, which brings them
// back once the node is restarted and in sync), and a reassignment
// (AlterPartitionReassignments) that takes the node leading most
// partitions out of their replica sets. Each time, the partitions not
// moved keep making progress while the others move (each consumes more
// records within a deadline of the move's start, before the moved ones
// are checked), and the moved ones resume on their new leader within a
// deadline. The longest pause of each kind of partition is measured and
// logged, not asserted.
func TestMovesPauseOnlyMovedPartitions(t *testing.T) {
	need(t)
	admin := client(t)
	healthy(t, admin)
	const parts = 6
	tp := topic(t, admin, "moves", parts)
	must(t, "topic created", awaitInSync(timeout(t, time.Minute), admin, time.Minute))
	feed := newFeeder(t, client(t), tp, "m", 1)
	pr := &progress{times: map[int32][]time.Time{}}
	c, err := riffle.NewConsumer(client(t),
		riffle.HandleRecord(func(_ context.Context, r *riffle.Record) error {
			pr.add(r.Partition)
			return nil
		}),
		riffle.OnPartitionError(func(e *riffle.PartitionError) { t.Logf("consumer: %v", e) }))
	must(t, "consumer", err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c.Close(ctx)
	})
	for p := range int32(parts) {
		must(t, "assign", c.Assign(riffle.Assignment{TopicPartition: riffle.TopicPartition{Topic: tp, Partition: p}, Start: riffle.AtEarliest()}))
	}
	ctx := timeout(t, 5*time.Minute)
	// Flowing everywhere first.
	must(t, "every partition consuming", eventually(time.Minute, func() error { return pr.advanced(nil, 20) }))

	// Controlled shutdown of the node leading most partitions.
	ps, err := describe(ctx, admin, tp)
	must(t, "metadata", err)
	victim, led := mostLed(ps, nil)
	move(t, admin, pr, tp, fmt.Sprintf("controlled shutdown of node %d", victim), led, func() error {
		return env.cluster.Stop(victim)
	})
	must(t, fmt.Sprintf("restarting node %d", victim), env.cluster.Restart(ctx, victim))
	must(t, fmt.Sprintf("node %d back in every ISR", victim), awaitInSync(ctx, admin, 2*time.Minute))

	// Preferred leader election: node victim's partitions go back to it.
	ps, err = describe(ctx, admin, tp)
	must(t, "metadata", err)
	var unpreferred []riffle.TopicPartition
	for _, p := range ps {
		if p.leader != p.replicas[0] {
			unpreferred = append(unpreferred, p.TopicPartition)
		}
	}
	if len(unpreferred) == 0 {
		t.Fatalf("every partition led by its preferred replica after the restart: %v", leaders(ps))
	}
	move(t, admin, pr, tp, "preferred leader election", unpreferred, func() error {
		res, err := admin.Admin().ElectLeaders(ctx, riffle.ElectionPreferred, unpreferred...)
		if err != nil {
			return err
		}
		return res.Err()
	})

	// Reassignment: the node leading most partitions leaves their
	// replica sets (3 replicas to 2), so their leadership moves.
	ps, err = describe(ctx, admin, tp)
	must(t, "metadata", err)
	leader, moved := mostLed(ps, nil)
	target := map[riffle.TopicPartition][]int32{}
	for _, p := range ps {
		if p.leader == leader {
			target[p.TopicPartition] = slices.DeleteFunc(slices.Clone(p.replicas), func(n int32) bool { return n == leader })
		}
	}
	move(t, admin, pr, tp, fmt.Sprintf("reassignment of node %d's partitions to the other two", leader), moved, func() error {
		res, err := admin.Admin().AlterPartitionReassignments(ctx, target)
		if err != nil {
			return err
		}
		if err := res.Err(); err != nil {
			return err
		}
		return eventually(time.Minute, func() error {
			rs, err := admin.Admin().ListPartitionReassignments(ctx, moved...)
			if err != nil {
				return err
			}
			if len(rs) > 0 {
				return fmt.Errorf("in progress: %v", rs)
			}
			return nil
		})
	})
	feed.finish()
}

// progress keeps when each partition's records were handled.
type progress struct {
	mu    sync.Mutex
	times map[int32][]time.Time
}

func (p *progress) add(part int32) {
	p.mu.Lock()
	p.times[part] = append(p.times[part], time.Now())
	p.mu.Unlock()
}

func (p *progress) counts() map[int32]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[int32]int{}
	for part, ts := range p.times {
		out[part] = len(ts)
	}
	return out
}

// advanced says whether each partition of since (every partition seen,
// when nil) handled n records more than since says.
func (p *progress) advanced(since map[int32]int, n int, parts ...int32) error {
	now := p.counts()
	if since == nil {
		if len(now) == 0 {
			return errors.New("nothing handled")
		}
		for part := range now {
			parts = append(parts, part)
		}
	}
	for _, part := range parts {
		if got := now[part] - since[part]; got < n {
			return fmt.Errorf("partition %d: %d records since, want %d", part, got, n)
		}
	}
	return nil
}

// maxPause is the longest time partition part handled nothing between
// from and to.
func (p *progress) maxPause(part int32, from, to time.Time) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	last, longest := from, time.Duration(0)
	for _, ts := range p.times[part] {
		if ts.Before(from) {
			continue
		}
		if ts.After(to) {
			break
		}
		longest = max(longest, ts.Sub(last))
		last = ts
	}
	return max(longest, to.Sub(last))
}

// move runs op, which moves the leadership of the partitions moved of
// topic, while the consumer reads: the others must each handle
// progressRecords more within unmovedDeadline of op's start (checked
// while op may still run), the moved ones must have a new leader and
// handle progressRecords more within movedDeadline. It logs the longest
// pause of the moved and of the other partitions from op's start until
// the moved ones resumed.
func move(t *testing.T, admin *riffle.Client, pr *progress, topic, what string, moved []riffle.TopicPartition, op func() error) {
	t.Helper()
	const (
		progressRecords = 20
		unmovedDeadline = 30 * time.Second
		movedDeadline   = 90 * time.Second
	)
	ctx := timeout(t, 3*time.Minute)
	ps, err := describe(ctx, admin, topic)
	must(t, "metadata", err)
	before := leaders(ps)
	var movedParts, others []int32
	for _, p := range ps {
		if slices.Contains(moved, p.TopicPartition) {
			movedParts = append(movedParts, p.Partition)
		} else {
			others = append(others, p.Partition)
		}
	}
	if len(movedParts) == 0 || len(others) == 0 {
		t.Fatalf("%s: moves %v of %s's partitions: want some moved and some not", what, movedParts, topic)
	}
	since := pr.counts()
	start := time.Now()
	opDone := make(chan error, 1)
	go func() { opDone <- op() }()

	othersErr := eventually(unmovedDeadline, func() error { return pr.advanced(since, progressRecords, others...) })
	othersAt := time.Since(start)
	movedErr := eventually(movedDeadline, func() error {
		ps, err := describe(ctx, admin, topic)
		if err != nil {
			return err
		}
		now := leaders(ps)
		for _, tp := range moved {
			if now[tp] < 0 || now[tp] == before[tp] {
				return fmt.Errorf("%s still led by %d", tp, now[tp])
			}
		}
		return pr.advanced(since, progressRecords, movedParts...)
	})
	resumed := time.Now()
	var opErr error
	select {
	case opErr = <-opDone:
	case <-time.After(2 * time.Minute):
		opErr = errors.New("not done after 2m")
	}
	var movedPause, otherPause time.Duration
	for _, p := range movedParts {
		movedPause = max(movedPause, pr.maxPause(p, start, resumed))
	}
	for _, p := range others {
		otherPause = max(otherPause, pr.maxPause(p, start, resumed))
	}
	t.Logf("accounting move (%s): moved=%v others=%v others_progressed_in=%v moved_resumed_in=%v longest_pause_moved=%v longest_pause_others=%v",
		what, movedParts, others, othersAt.Round(10*time.Millisecond), resumed.Sub(start).Round(10*time.Millisecond),
		movedPause.Round(10*time.Millisecond), otherPause.Round(10*time.Millisecond))
	if opErr != nil {
		t.Fatalf("%s: %v", what, opErr)
	}
	if othersErr != nil {
		t.Errorf("%s: the partitions not moved stalled: %v", what, othersErr)
	}
	if movedErr != nil {
		t.Fatalf("%s: the moved partitions did not resume: %v", what, movedErr)
	}
}
