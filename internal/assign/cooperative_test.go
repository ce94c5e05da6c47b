package assign

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

func TestDiff(t *testing.T) {
	for _, tc := range []struct {
		name                string
		owned, assigned     TopicPartitions
		wantAdded, wantRevd string
	}{
		{"both empty", nil, nil, "{}", "{}"},
		{"all new", nil, TopicPartitions{"t": {2, 0}}, "{t[0 2]}", "{}"},
		{"all revoked", TopicPartitions{"t": {1}, "u": {0}}, nil, "{}", "{t[1] u[0]}"},
		{"unchanged", TopicPartitions{"t": {0, 1}}, TopicPartitions{"t": {1, 0}}, "{}", "{}"},
		{
			"mixed",
			TopicPartitions{"t": {0, 1, 2}, "u": {0}},
			TopicPartitions{"t": {2, 3}, "v": {5}},
			"{t[3] v[5]}", "{t[0 1] u[0]}",
		},
		{"duplicates and empty lists", TopicPartitions{"t": {1, 1}, "e": {}}, TopicPartitions{"t": {1, 2, 2}, "f": {}}, "{t[2]}", "{}"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			added, revoked := Diff(tc.owned, tc.assigned)
			if added == nil || revoked == nil {
				t.Fatal("nil result")
			}
			if got := tpString(added); got != tc.wantAdded {
				t.Errorf("added = %s, want %s", got, tc.wantAdded)
			}
			if got := tpString(revoked); got != tc.wantRevd {
				t.Errorf("revoked = %s, want %s", got, tc.wantRevd)
			}
		})
	}
}

func TestCooperativeAdjust(t *testing.T) {
	for _, tc := range []struct {
		name    string
		plan    map[string]TopicPartitions
		members []Member
		want    string
	}{
		{
			name: "transfer is withheld, own and free partitions are kept",
			plan: map[string]TopicPartitions{
				"a": {"t": {0, 1}},
				"b": {"t": {2, 3}},
			},
			members: []Member{
				{ID: "a", Owned: TopicPartitions{"t": {0, 1, 2}}, Generation: 4},
				{ID: "b", Owned: TopicPartitions{"t": {3}}, Generation: 4},
			},
			// t/2 moves a => b: a revokes it now, b gets it next round.
			want: "a:{t[0 1]} b:{t[3]} ",
		},
		{
			name: "member that left does not block",
			plan: map[string]TopicPartitions{"a": {"t": {0, 1}}},
			members: []Member{
				{ID: "a", Owned: TopicPartitions{"t": {0}}, Generation: 2},
			},
			want: "a:{t[0 1]} ",
		},
		{
			name: "stale own claim does not count",
			plan: map[string]TopicPartitions{"a": {"t": {0}}, "b": {"t": {1}}},
			members: []Member{
				{ID: "a", Owned: TopicPartitions{"t": {0}}, Generation: 3},
				{ID: "b", Owned: TopicPartitions{"t": {0, 1}}, Generation: 5},
			},
			// b (gen 5) consumes t/0; a's gen 3 claim is stale, so a
			// waits for b to revoke.
			want: "a:{} b:{t[1]} ",
		},
		{
			name: "same generation claimants keep what they are given",
			plan: map[string]TopicPartitions{"a": {"t": {0}}, "b": {"t": {1}}},
			members: []Member{
				{ID: "a", Owned: TopicPartitions{"t": {0, 1}}, Generation: 5},
				{ID: "b", Owned: TopicPartitions{"t": {0, 1}}, Generation: 5},
			},
			want: "a:{t[0]} b:{t[1]} ",
		},
		{
			name: "unknown member in the plan owns nothing",
			plan: map[string]TopicPartitions{"x": {"t": {0, 1}}},
			members: []Member{
				{ID: "a", Owned: TopicPartitions{"t": {0}}, Generation: 1},
			},
			want: "x:{t[1]} ",
		},
		{
			name: "repeated member ids: first wins",
			plan: map[string]TopicPartitions{"a": {"t": {0}}},
			members: []Member{
				{ID: "a", Owned: TopicPartitions{"t": {0}}, Generation: 1},
				{ID: "a", Owned: nil, Generation: 1},
				{ID: "b", Owned: TopicPartitions{"u": {0}}, Generation: 1},
			},
			want: "a:{t[0]} ",
		},
		{
			name: "plan is normalized",
			plan: map[string]TopicPartitions{"a": {"t": {3, 1, 1}, "u": {}}},
			want: "a:{t[1 3]} ",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := planString(tc.plan)
			got := CooperativeAdjust(tc.plan, tc.members)
			if s := planString(got); s != tc.want {
				t.Fatalf("got %s want %s", s, tc.want)
			}
			if planString(tc.plan) != before {
				t.Fatal("input plan modified")
			}
			if again := planString(CooperativeAdjust(got, tc.members)); again != tc.want {
				t.Fatalf("not idempotent: %s", again)
			}
		})
	}
}

// TestCooperativeRounds simulates cooperative rebalances of a running
// group through membership changes: in every round no partition is handed
// to a member while another still owns it (so no partition is ever owned
// twice), the round after each change reaches the balanced sticky target
// with no further revocation, and the total movement is the minimum.
func TestCooperativeRounds(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	cs := CooperativeSticky()
	for iter := range 200 {
		same := iter%4 != 3
		members, topics := randomGroup(rng, 2+rng.IntN(10), 1+rng.IntN(4), 24, same)
		gen := int32(1)
		cur := withOwned(members, cs.Assign(members, topics), gen) // fresh group: nothing withheld
		validate(t, "initial", ownedPlan(cur), cur, topics, true)
		for change := range 4 {
			// Change membership: someone leaves, someone joins.
			next := slices.Clone(cur)
			if rng.IntN(2) == 0 && len(next) > 1 {
				i := rng.IntN(len(next))
				next = slices.Delete(next, i, i+1)
			}
			if rng.IntN(2) == 0 {
				j := sub(fmt.Sprintf("j%d-%d", iter, change), members[rng.IntN(len(members))].Topics...)
				next = append(next, j)
			}
			prev := ownersOf(next)
			lower := -1
			if same {
				lower = minMoves(prev, next, topics)
			}
			for round := 1; ; round++ {
				name := fmt.Sprintf("iter %d change %d round %d", iter, change, round)
				plan := cs.Assign(next, topics)
				validate(t, name, plan, next, topics, false)
				checkHandover(t, name, next, plan)
				gen++
				synced := withOwned(next, plan, gen)
				// Members own what they were assigned; nothing may be
				// owned twice.
				for k, ids := range owners(ownedPlan(synced)) {
					if len(ids) > 1 {
						t.Fatalf("%s: %s/%d owned by %v", name, k.t, k.p, ids)
					}
				}
				if revocations(next, plan) == 0 {
					validate(t, name+" final", plan, next, topics, true)
					if same {
						if s := spread(plan, func(string) bool { return true }); s > 1 {
							t.Fatalf("%s: spread %d", name, s)
						}
						if got := moved(prev, next, topics, plan); got != lower {
							t.Fatalf("%s: moved %d, minimum %d", name, got, lower)
						}
					}
					if same && round > 2 {
						t.Fatalf("%s: target reached only after %d rounds", name, round)
					}
					cur = synced
					break
				}
				if round > 4 {
					t.Fatalf("%s: no fixpoint", name)
				}
				next = synced
			}
		}
	}
}

// ownedPlan returns the members' Owned as a plan.
func ownedPlan(members []Member) map[string]TopicPartitions {
	plan := make(map[string]TopicPartitions, len(members))
	for _, m := range members {
		plan[m.ID] = m.Owned
		if plan[m.ID] == nil {
			plan[m.ID] = TopicPartitions{}
		}
	}
	return plan
}
