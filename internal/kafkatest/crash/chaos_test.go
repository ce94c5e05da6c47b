package crash_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/riffle-go/riffle"
)

// The state of the cluster as metadata tells it, and the kills.

// part is one partition's leader, replicas and in-sync replicas.
type part struct {
	riffle.TopicPartition
	leader   int32
	replicas []int32
	isr      []int32
}

// describe returns the partitions of topics (every topic, internal ones
// included, when none is named), asked of any live node.
func describe(ctx context.Context, cl *riffle.Client, topics ...string) ([]part, error) {
	ds, err := cl.Admin().DescribeTopics(ctx, topics)
	if err != nil {
		return nil, err
	}
	var out []part
	for _, d := range ds {
		if d.Err != nil {
			return nil, fmt.Errorf("%s: %w", d.Name, d.Err)
		}
		for _, p := range d.Partitions {
			out = append(out, part{TopicPartition: riffle.TopicPartition{Topic: d.Name, Partition: p.Partition},
				leader: p.Leader, replicas: p.Replicas, isr: p.ISR})
		}
	}
	return out, nil
}

// leaders maps each partition to its leader.
func leaders(ps []part) map[riffle.TopicPartition]int32 {
	out := map[riffle.TopicPartition]int32{}
	for _, p := range ps {
		out[p.TopicPartition] = p.leader
	}
	return out
}

// mostLed is the node leading most of ps, and the partitions it leads. On
// a tie it is the node with the fewest kills in killed (nil: none), then
// the lowest id, so that kills of a balanced cluster go round the nodes.
func mostLed(ps []part, killed map[int32]int) (int32, []riffle.TopicPartition) {
	by := map[int32][]riffle.TopicPartition{}
	for _, p := range ps {
		if p.leader >= 0 {
			by[p.leader] = append(by[p.leader], p.TopicPartition)
		}
	}
	best := int32(-1)
	for n, tps := range by {
		switch {
		case best < 0, len(tps) > len(by[best]):
		case len(tps) < len(by[best]):
			continue
		case killed[n] < killed[best]:
		case killed[n] > killed[best] || n > best:
			continue
		}
		best = n
	}
	return best, by[best]
}

// awaitLeadersOff waits until every partition of topics has a leader other
// than node.
func awaitLeadersOff(ctx context.Context, cl *riffle.Client, node int32, d time.Duration, topics ...string) error {
	return eventually(d, func() error {
		ps, err := describe(ctx, cl, topics...)
		if err != nil {
			return err
		}
		for _, p := range ps {
			if p.leader < 0 || p.leader == node {
				return fmt.Errorf("%s led by %d", p.TopicPartition, p.leader)
			}
		}
		return nil
	})
}

// awaitInSync waits until every replica of every partition of the
// cluster (internal topics included) is in sync: after a restart, the
// node is back in every ISR, so the next kill leaves min.insync.replicas.
func awaitInSync(ctx context.Context, cl *riffle.Client, d time.Duration) error {
	return eventually(d, func() error {
		ps, err := describe(ctx, cl)
		if err != nil {
			return err
		}
		for _, p := range ps {
			if p.leader < 0 || len(p.isr) != len(p.replicas) {
				return fmt.Errorf("%s: leader %d, ISR %v of %v", p.TopicPartition, p.leader, p.isr, p.replicas)
			}
		}
		return nil
	})
}

// electPreferred runs a preferred leader election on every partition and
// waits until each partition of topics is led by its preferred replica.
func electPreferred(ctx context.Context, cl *riffle.Client, d time.Duration, topics ...string) error {
	return eventually(d, func() error {
		res, err := cl.Admin().ElectLeaders(ctx, riffle.ElectionPreferred)
		if err != nil {
			return err
		}
		for _, r := range res {
			if r.Err != nil && !errors.Is(r.Err, riffle.ErrElectionNotNeeded) {
				return fmt.Errorf("%s: %w", r.TopicPartition, r.Err)
			}
		}
		ps, err := describe(ctx, cl, topics...)
		if err != nil {
			return err
		}
		for _, p := range ps {
			if len(p.replicas) == 0 || p.leader != p.replicas[0] {
				return fmt.Errorf("%s led by %d, preferred %v", p.TopicPartition, p.leader, p.replicas)
			}
		}
		return nil
	})
}

// healthy restarts any node that does not run and waits until every
// replica is in sync: a test starts on a whole cluster even after an
// earlier one failed halfway.
func healthy(t *testing.T, cl *riffle.Client) {
	t.Helper()
	ctx := timeout(t, 4*time.Minute)
	for _, n := range env.cluster.Nodes() {
		if !n.Running() {
			t.Logf("node %d does not run; restarting it", n.ID)
			must(t, fmt.Sprintf("restarting node %d", n.ID), env.cluster.Restart(ctx, n.ID))
		}
	}
	must(t, "every replica in sync", awaitInSync(ctx, cl, 2*time.Minute))
}

// watched is a workload the chaos loop watches: while a killed node is
// down, each partition of its topics must make progress.
type watched interface {
	name() string
	topics() []string
	// progress counts the records of each partition handled (or, for a
	// producer, acknowledged) so far.
	progress() map[riffle.TopicPartition]int
}

// kill is one round of the chaos loop.
type kill struct {
	node int32
	// led are the partitions of the scenarios' topics the node led.
	led                        []riffle.TopicPartition
	moved, restarted, rejoined time.Duration
	// progressed is how long after the leaders moved every watched
	// partition had made progress; stalled, per workload, the
	// partitions that made none while the node was down.
	progressed time.Duration
	stalled    map[string][]riffle.TopicPartition
}

// outageDeadline bounds the wait, with the killed node down and the
// leaders moved, for every watched partition to make progress.
const outageDeadline = 30 * time.Second

// awaitProgress waits until every partition of each workload's topics
// (of ps) made progress since snap, and returns, per workload, those that
// did not within the deadline.
func awaitProgress(ws []watched, ps []part, snap map[string]map[riffle.TopicPartition]int) map[string][]riffle.TopicPartition {
	return awaitProgressWithin(ws, ps, snap, outageDeadline)
}

func awaitProgressWithin(ws []watched, ps []part, snap map[string]map[riffle.TopicPartition]int, d time.Duration) map[string][]riffle.TopicPartition {
	pending := func() map[string][]riffle.TopicPartition {
		out := map[string][]riffle.TopicPartition{}
		for _, w := range ws {
			now := w.progress()
			for _, p := range ps {
				if slices.Contains(w.topics(), p.Topic) && now[p.TopicPartition] <= snap[w.name()][p.TopicPartition] {
					out[w.name()] = append(out[w.name()], p.TopicPartition)
				}
			}
		}
		return out
	}
	_ = eventually(d, func() error {
		if len(pending()) > 0 {
			return errNotYet
		}
		return nil
	})
	return pending()
}

var errNotYet = errors.New("not yet")

// stallsOf lists, for the workload named, the kills during which some of
// its partitions made no progress.
func stallsOf(kills []kill, name string) []string {
	var out []string
	for i, k := range kills {
		if tps := k.stalled[name]; len(tps) > 0 {
			out = append(out, fmt.Sprintf("kill %d (node %d): %v made no progress in %v", i+1, k.node, tps, outageDeadline))
		}
	}
	return out
}

// hits says whether the kill took the leadership of a partition of topic.
func (k kill) hits(topic string) bool {
	return slices.ContainsFunc(k.led, func(tp riffle.TopicPartition) bool { return tp.Topic == topic })
}

// chaos kills rounds times the node leading most partitions of topics
// (SIGKILL), waits until their leadership moved off it, restarts it on
// its storage, waits until it is back in every ISR, and elects the
// preferred leaders again, so that the next victim leads about a third of
// every topic's partitions. Each step has a deadline; before the first
// kill and after each round the workloads run for settle. While the node
// is down (after its leaderships moved, before the restart) every
// partition of each workload of ws must make progress (kill.stalled).
func chaos(t *testing.T, cl *riffle.Client, rounds int, settle time.Duration, ws []watched, topics ...string) []kill {
	t.Helper()
	ctx := timeout(t, time.Duration(rounds)*5*time.Minute)
	var kills []kill
	killed := map[int32]int{}
	// Every workload under way on every partition first: a share
	// group's first assignment waits for __share_group_state to be
	// created and its partitions initialized, several seconds on a
	// fresh cluster.
	ps, err := describe(ctx, cl, topics...)
	must(t, "metadata", err)
	none := map[string]map[riffle.TopicPartition]int{}
	if left := awaitProgressWithin(ws, ps, none, 2*time.Minute); len(left) > 0 {
		t.Fatalf("before the first kill, no progress in 2m on %v", left)
	}
	time.Sleep(settle)
	for i := range rounds {
		ps, err = describe(ctx, cl, topics...)
		must(t, "metadata", err)
		k := kill{}
		k.node, k.led = mostLed(ps, killed)
		killed[k.node]++
		began := time.Now()
		must(t, fmt.Sprintf("killing node %d", k.node), env.cluster.Kill(k.node))
		must(t, fmt.Sprintf("kill %d: the leadership of node %d's partitions moving", i+1, k.node),
			awaitLeadersOff(ctx, cl, k.node, time.Minute, topics...))
		k.moved = time.Since(began)
		at := time.Now()
		snap := map[string]map[riffle.TopicPartition]int{}
		for _, w := range ws {
			snap[w.name()] = w.progress()
		}
		k.stalled = awaitProgress(ws, ps, snap)
		k.progressed = time.Since(at)
		at = time.Now()
		must(t, fmt.Sprintf("kill %d: restarting node %d", i+1, k.node), env.cluster.Restart(ctx, k.node))
		k.restarted = time.Since(at)
		at = time.Now()
		must(t, fmt.Sprintf("kill %d: node %d back in every ISR", i+1, k.node), awaitInSync(ctx, cl, 2*time.Minute))
		k.rejoined = time.Since(at)
		must(t, fmt.Sprintf("kill %d: preferred leaders", i+1), electPreferred(ctx, cl, time.Minute, topics...))
		t.Logf("kill %d: SIGKILL node %d (led %d partitions of the scenarios): leaders moved in %v, every partition progressed %v later (stalled: %v), restarted in %v, in every ISR %v later",
			i+1, k.node, len(k.led), k.moved.Round(100*time.Millisecond), k.progressed.Round(100*time.Millisecond), k.stalled,
			k.restarted.Round(100*time.Millisecond), k.rejoined.Round(100*time.Millisecond))
		kills = append(kills, k)
		time.Sleep(settle)
	}
	return kills
}

// hitCount is how many of kills took leaderships of topic's partitions.
func hitCount(kills []kill, topics ...string) int {
	n := 0
	for _, k := range kills {
		if slices.ContainsFunc(topics, k.hits) {
			n++
		}
	}
	return n
}
