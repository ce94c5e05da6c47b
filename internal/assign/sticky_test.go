package assign

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// group returns n members m00.. subscribing topics.
func group(n int, topics ...string) []Member {
	out := make([]Member, n)
	for i := range out {
		out[i] = sub(fmt.Sprintf("m%02d", i), topics...)
	}
	return out
}

// stickyScenario is a steady group (members own prev) that changes.
type stickyScenario struct {
	name   string
	before []Member // members before the change, owning nothing
	topics map[string]int32
	// change returns the members and topics after the change, given the
	// members before it owning their current assignment.
	change func(owning []Member, topics map[string]int32) ([]Member, map[string]int32)
	// rangeWorse: range moves strictly more than the minimum here.
	rangeWorse bool
}

func stickyScenarios() []stickyScenario {
	tt := []string{"a", "b", "c"}
	counts := map[string]int32{"a": 7, "b": 7, "c": 7}
	return []stickyScenario{
		{
			name: "member leaves", before: group(6, tt...), topics: counts,
			change: func(m []Member, tp map[string]int32) ([]Member, map[string]int32) {
				return slices.Delete(slices.Clone(m), 2, 3), tp
			},
		},
		{
			name: "first member leaves", before: group(6, tt...), topics: counts, rangeWorse: true,
			change: func(m []Member, tp map[string]int32) ([]Member, map[string]int32) {
				return slices.Clone(m[1:]), tp
			},
		},
		{
			name: "member joins", before: group(6, tt...), topics: counts,
			change: func(m []Member, tp map[string]int32) ([]Member, map[string]int32) {
				return append(slices.Clone(m), sub("m00a", tt...)), tp
			},
		},
		{
			name: "partitions added", before: group(4, tt...), topics: counts, rangeWorse: true,
			change: func(m []Member, tp map[string]int32) ([]Member, map[string]int32) {
				return m, map[string]int32{"a": 7, "b": 12, "c": 7}
			},
		},
		{
			name: "topic added", before: group(4, "a", "b"), topics: counts,
			change: func(m []Member, tp map[string]int32) ([]Member, map[string]int32) {
				m = slices.Clone(m)
				for i := range m {
					m[i].Topics = tt
				}
				return m, tp
			},
		},
		{
			name: "two leave, three join", before: group(7, tt...), topics: counts, rangeWorse: true,
			change: func(m []Member, tp map[string]int32) ([]Member, map[string]int32) {
				m = slices.Delete(slices.Clone(m), 1, 3)
				return append(m, sub("x1", tt...), sub("m03a", tt...), sub("a0", tt...)), tp
			},
		},
		{
			name: "partitions removed (topic recreated smaller)", before: group(3, tt...), topics: counts,
			change: func(m []Member, tp map[string]int32) ([]Member, map[string]int32) {
				return m, map[string]int32{"a": 7, "b": 2, "c": 7}
			},
		},
	}
}

// TestStickyMovesMinimum: after a membership or metadata change, each
// assignor starting from its own steady state, the sticky assignors move
// exactly the fewest partitions a balanced plan requires (cooperative-sticky
// over its two rounds); range, not being sticky, moves more in most of
// these scenarios.
func TestStickyMovesMinimum(t *testing.T) {
	for _, sc := range stickyScenarios() {
		t.Run(sc.name, func(t *testing.T) {
			movedBy := make(map[string]int)
			for _, a := range all() {
				steady := withOwned(sc.before, a.Assign(sc.before, sc.topics), 5)
				after, topics := sc.change(steady, sc.topics)
				prev := ownersOf(after)
				lower := minMoves(prev, after, topics)
				plan := a.Assign(after, topics)
				if a.Cooperative() {
					validate(t, a.Name()+" round 1", plan, after, topics, false)
					checkHandover(t, a.Name()+" round 1", after, plan)
					plan = a.Assign(withOwned(after, plan, 6), topics)
				}
				validate(t, a.Name(), plan, after, topics, true)
				got := moved(prev, after, topics, plan)
				movedBy[a.Name()] = got
				t.Logf("%-18s moved %2d partitions; a balanced plan must move %2d", a.Name(), got, lower)
				if a.Name() == RangeName {
					continue // range is not balanced: the bound does not apply
				}
				if got < lower {
					t.Errorf("%s moved %d, below the computed minimum %d: the bound is wrong", a.Name(), got, lower)
				}
				if s := spread(plan, func(string) bool { return true }); s > 1 {
					t.Errorf("%s: spread %d", a.Name(), s)
				}
				if a.Name() != RoundRobinName && got != lower {
					t.Errorf("%s moved %d partitions, minimum is %d:\nbefore %s\nafter  %s",
						a.Name(), got, lower, planString(ownersPlan(prev)), planString(plan))
				}
			}
			if sc.rangeWorse && movedBy[RangeName] <= movedBy[StickyName] {
				t.Errorf("range moved %d, sticky %d: expected range to move more", movedBy[RangeName], movedBy[StickyName])
			}
		})
	}
}

// ownersPlan turns an owner map back into a plan, for messages.
func ownersPlan(prev map[tpKey]string) map[string]TopicPartitions {
	plan := make(map[string]TopicPartitions)
	for k, id := range prev {
		if plan[id] == nil {
			plan[id] = TopicPartitions{}
		}
		plan[id][k.t] = append(plan[id][k.t], k.p)
	}
	for _, tps := range plan {
		for t := range tps {
			slices.Sort(tps[t])
		}
	}
	return plan
}

// TestStickyMovesMinimumRandom: the same on random groups, including
// starting from an unbalanced (range) plan and from a random subset.
func TestStickyMovesMinimumRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	for iter := range 300 {
		members, topics := randomGroup(rng, 1+rng.IntN(12), 1+rng.IntN(5), 30, true)
		var start map[string]TopicPartitions
		switch iter % 3 {
		case 0:
			start = Sticky().Assign(members, topics)
		case 1:
			start = Range().Assign(members, topics)
		case 2:
			start = RoundRobin().Assign(members, topics)
			for _, tps := range start { // drop some ownership
				for topic := range tps {
					if rng.IntN(3) == 0 {
						delete(tps, topic)
					}
				}
			}
		}
		owning := withOwned(members, start, 7)
		// Churn: drop and add members, grow a topic.
		after := slices.Clone(owning)
		for range rng.IntN(3) {
			if len(after) > 1 {
				i := rng.IntN(len(after))
				after = slices.Delete(after, i, i+1)
			}
		}
		for k := range rng.IntN(3) {
			after = append(after, sub(fmt.Sprintf("n%d", k), members[0].Topics...))
		}
		if rng.IntN(2) == 0 {
			topics = map[string]int32{}
			for _, tp := range members[0].Topics {
				topics[tp] = rng.Int32N(30)
			}
		}
		prev := ownersOf(after)
		lower := minMoves(prev, after, topics)
		for _, a := range []Assignor{Sticky(), CooperativeSticky()} {
			plan := a.Assign(after, topics)
			if a.Cooperative() {
				checkHandover(t, "round 1", after, plan)
				plan = a.Assign(withOwned(after, plan, 8), topics)
			}
			validate(t, a.Name(), plan, after, topics, true)
			if got := moved(prev, after, topics, plan); got != lower {
				t.Fatalf("iter %d %s: moved %d, minimum %d", iter, a.Name(), got, lower)
			}
		}
	}
}

// TestStickyJavaDocExamples replays the StickyAssignor javadoc scenarios.
func TestStickyJavaDocExamples(t *testing.T) {
	tt := []string{"t0", "t1", "t2", "t3"}
	counts := map[string]int32{"t0": 2, "t1": 2, "t2": 2, "t3": 2}
	// C0 [t0p0, t1p1, t3p0], C1 [t0p1, t2p0, t3p1], C2 [t1p0, t2p1];
	// C1 leaves. Java: C0 keeps its three and C2 its two, and both end
	// with four.
	members := []Member{
		{ID: "C0", Topics: tt, Owned: TopicPartitions{"t0": {0}, "t1": {1}, "t3": {0}}, Generation: 1},
		{ID: "C2", Topics: tt, Owned: TopicPartitions{"t1": {0}, "t2": {1}}, Generation: 1},
	}
	for _, a := range []Assignor{Sticky(), CooperativeSticky()} {
		plan := a.Assign(members, counts)
		validate(t, a.Name(), plan, members, counts, true)
		for _, m := range members {
			if count(plan[m.ID]) != 4 {
				t.Fatalf("%s: %s has %d partitions: %s", a.Name(), m.ID, count(plan[m.ID]), planString(plan))
			}
			if _, revoked := Diff(m.Owned, plan[m.ID]); len(revoked) != 0 {
				t.Fatalf("%s: %s lost %v", a.Name(), m.ID, revoked)
			}
		}
	}

	// C0 subscribes t0, C1 t0,t1, C2 t0,t1,t2 (1, 2, 3 partitions); after
	// the balanced C0 [t0p0], C1 [t1p0, t1p1], C2 [t2p0, t2p1, t2p2], C0
	// leaves: Java's sticky result is C1 [t0p0, t1p0, t1p1], C2 unchanged
	// (roundrobin would instead move t1p1 and t2p0 around).
	counts = map[string]int32{"t0": 1, "t1": 2, "t2": 3}
	members = []Member{
		{ID: "C1", Topics: []string{"t0", "t1"}, Owned: TopicPartitions{"t1": {0, 1}}, Generation: 1},
		{ID: "C2", Topics: []string{"t0", "t1", "t2"}, Owned: TopicPartitions{"t2": {0, 1, 2}}, Generation: 1},
	}
	want := "C1:{t0[0] t1[0 1]} C2:{t2[0 1 2]} "
	for _, a := range []Assignor{Sticky(), CooperativeSticky()} {
		if got := planString(a.Assign(members, counts)); got != want {
			t.Fatalf("%s: got %s want %s", a.Name(), got, want)
		}
	}
}

// TestStickyGenerations: conflicting claims resolve to the highest
// generation; equal top generations leave the partition unowned; claims
// that cannot be kept are released.
func TestStickyGenerations(t *testing.T) {
	topics := map[string]int32{"t": 4}
	tt := []string{"t"}
	for _, tc := range []struct {
		name    string
		members []Member
		// want maps member => partitions it must keep (subset check).
		want map[string][]int32
		// notWith maps member => partitions it must not get.
		notWith map[string][]int32
	}{
		{
			name: "higher generation wins",
			members: []Member{
				{ID: "a", Topics: tt, Owned: TopicPartitions{"t": {0, 1}}, Generation: 5},
				{ID: "b", Topics: tt, Owned: TopicPartitions{"t": {1, 2}}, Generation: 6},
			},
			want:    map[string][]int32{"a": {0}, "b": {1, 2}},
			notWith: map[string][]int32{"a": {1}},
		},
		{
			name: "higher generation wins regardless of member order",
			members: []Member{
				{ID: "b", Topics: tt, Owned: TopicPartitions{"t": {1, 2}}, Generation: 4},
				{ID: "a", Topics: tt, Owned: TopicPartitions{"t": {0, 1}}, Generation: 9},
			},
			want:    map[string][]int32{"a": {0, 1}, "b": {2}},
			notWith: map[string][]int32{"b": {1}},
		},
		{
			name: "unknown generation loses",
			members: []Member{
				{ID: "a", Topics: tt, Owned: TopicPartitions{"t": {0, 1}}, Generation: -1},
				{ID: "b", Topics: tt, Owned: TopicPartitions{"t": {0, 3}}, Generation: 0},
			},
			want:    map[string][]int32{"a": {1}, "b": {0, 3}},
			notWith: map[string][]int32{"a": {0}},
		},
		{
			name: "claims beyond the partition count and duplicates are ignored",
			members: []Member{
				{ID: "a", Topics: tt, Owned: TopicPartitions{"t": {3, 3, 7, -1}}, Generation: 2},
				{ID: "b", Topics: tt, Owned: TopicPartitions{"t": {0, 0}}, Generation: 2},
			},
			want: map[string][]int32{"a": {3}, "b": {0}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, a := range []Assignor{Sticky(), CooperativeSticky()} {
				plan := a.Assign(tc.members, topics)
				for id, ps := range tc.want {
					for _, p := range ps {
						if !slices.Contains(plan[id]["t"], p) {
							t.Errorf("%s: %s should keep t/%d: %s", a.Name(), id, p, planString(plan))
						}
					}
				}
				for id, ps := range tc.notWith {
					for _, p := range ps {
						if slices.Contains(plan[id]["t"], p) {
							t.Errorf("%s: %s should not get t/%d: %s", a.Name(), id, p, planString(plan))
						}
					}
				}
			}
		})
	}

	// A claim on a topic the claimant no longer subscribes is released:
	// the claimant gets nothing of it. Cooperative-sticky withholds those
	// partitions until the claimant has revoked them (it still consumes
	// them), also from b, whose claim on t/0 is older.
	members := []Member{
		{ID: "a", Topics: []string{"u"}, Owned: TopicPartitions{"t": {0, 1, 2}}, Generation: 9},
		{ID: "b", Topics: tt, Owned: TopicPartitions{"t": {0}}, Generation: 1},
		{ID: "c", Topics: tt, Generation: -1},
	}
	if got, want := planString(Sticky().Assign(members, topics)), "a:{} b:{t[0 2]} c:{t[1 3]} "; got != want {
		t.Fatalf("sticky: got %s want %s", got, want)
	}
	if got, want := planString(CooperativeSticky().Assign(members, topics)), "a:{} b:{} c:{t[3]} "; got != want {
		t.Fatalf("cooperative-sticky: got %s want %s", got, want)
	}

	// Equal top generation: neither claimant is preferred. With three
	// members and three partitions the sticky plan gives the contested
	// partition to the member that owns nothing, and cooperative-sticky
	// withholds it until both claimants have revoked it.
	members = []Member{
		{ID: "a", Topics: tt, Owned: TopicPartitions{"t": {0, 1}}, Generation: 3},
		{ID: "b", Topics: tt, Owned: TopicPartitions{"t": {1, 2}}, Generation: 3},
		{ID: "c", Topics: tt, Generation: -1},
	}
	three := map[string]int32{"t": 3}
	if got, want := planString(Sticky().Assign(members, three)), "a:{t[0]} b:{t[2]} c:{t[1]} "; got != want {
		t.Fatalf("sticky: got %s want %s", got, want)
	}
	if got, want := planString(CooperativeSticky().Assign(members, three)), "a:{t[0]} b:{t[2]} c:{} "; got != want {
		t.Fatalf("cooperative-sticky: got %s want %s", got, want)
	}
}

// TestStickyMovesNewPartitionsFirst: with different subscriptions, when a
// member must pass on a partition of a topic it holds both old and newly
// placed partitions of, the new one moves. Here b's stale claim on t0 is
// released, t0/0 first lands on b2 and t1/1 on a; balancing then passes
// one t1 partition from a to b2 and t0/0 from b2 to c: a must keep t1/0.
func TestStickyMovesNewPartitionsFirst(t *testing.T) {
	members := []Member{
		{ID: "a", Topics: []string{"t1"}, Owned: TopicPartitions{"t0": {0}, "t1": {0}}, Generation: 1},
		{ID: "b2", Topics: []string{"t0", "t1"}, Generation: -1},
		{ID: "c", Topics: []string{"t0"}, Generation: -1},
	}
	topics := map[string]int32{"t0": 1, "t1": 2}
	if got, want := planString(Sticky().Assign(members, topics)), "a:{t1[0]} b2:{t1[1]} c:{t0[0]} "; got != want {
		t.Fatalf("sticky: got %s want %s", got, want)
	}
	// a still consumes t0/0 (it has not revoked it yet), so
	// cooperative-sticky withholds it from c for one round.
	if got, want := planString(CooperativeSticky().Assign(members, topics)), "a:{t1[0]} b2:{t1[1]} c:{} "; got != want {
		t.Fatalf("cooperative-sticky: got %s want %s", got, want)
	}
}
