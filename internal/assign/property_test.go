package assign

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// randomOwnership gives members random, possibly overlapping claims with
// random generations (including stale and unknown ones, claims on
// partitions and topics that do not exist and on unsubscribed topics) to
// exercise conflict resolution.
func randomOwnership(rng *rand.Rand, members []Member, topics map[string]int32) []Member {
	out := slices.Clone(members)
	names := make([]string, 0, len(topics)+1)
	for t := range topics {
		names = append(names, t)
	}
	slices.Sort(names)
	names = append(names, "deleted")
	for i := range out {
		out[i].Generation = rng.Int32N(4) - 1
		out[i].Owned = TopicPartitions{}
		for range rng.IntN(8) {
			t := names[rng.IntN(len(names))]
			out[i].Owned[t] = append(out[i].Owned[t], rng.Int32N(topics[t]+2)-1)
		}
	}
	return out
}

// TestPropertySameSubscriptions: with identical subscriptions every
// assignor assigns every partition exactly once to a subscriber; the
// sticky assignors and roundrobin are balanced (max-min <= 1); range is
// balanced per topic only (that is its definition; across topics it can
// be off by up to the number of topics).
func TestPropertySameSubscriptions(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	everyone := func(string) bool { return true }
	for iter := range 400 {
		members, topics := randomGroup(rng, 1+rng.IntN(15), 1+rng.IntN(6), 25, true)
		if iter%2 == 1 {
			members = randomOwnership(rng, members, topics)
		}
		name := fmt.Sprintf("iter %d", iter)
		for _, a := range []Assignor{Range(), RoundRobin(), Sticky()} {
			plan := a.Assign(members, topics)
			validate(t, name+" "+a.Name(), plan, members, topics, true)
			if a.Name() == RangeName {
				for topic := range topics {
					lo, hi := int(topics[topic]), 0
					for _, tps := range plan {
						lo, hi = min(lo, len(tps[topic])), max(hi, len(tps[topic]))
					}
					if hi-lo > 1 {
						t.Fatalf("%s range: topic %s spread %d: %s", name, topic, hi-lo, planString(plan))
					}
				}
				continue
			}
			if s := spread(plan, everyone); s > 1 {
				t.Fatalf("%s %s: spread %d: %s", name, a.Name(), s, planString(plan))
			}
		}
		// Cooperative-sticky withholds transfers in the first round: what
		// it assigns plus what it withholds is the balanced sticky plan,
		// and the second round (after revocation) is balanced and complete.
		target := Sticky().Assign(members, topics)
		coop := CooperativeSticky().Assign(members, topics)
		validate(t, name+" coop round 1", coop, members, topics, false)
		checkHandover(t, name+" coop round 1", members, coop)
		if got, want := planString(coop), planString(CooperativeAdjust(target, members)); got != want {
			t.Fatalf("%s: cooperative-sticky differs from CooperativeAdjust(sticky):\n%s\n%s", name, got, want)
		}
		for id, tps := range target {
			for topic, ps := range tps {
				have := coop[id][topic]
				for _, p := range ps {
					if _, ok := slices.BinarySearch(have, p); !ok && !claimedByOther(members, id, topic, p) {
						t.Fatalf("%s: coop withheld %s/%d from %s though nobody else owns it", name, topic, p, id)
					}
				}
			}
			if count(coop[id]) > count(tps) {
				t.Fatalf("%s: coop gave %s more than the target", name, id)
			}
		}
		round2 := CooperativeSticky().Assign(withOwned(members, coop, 10), topics)
		validate(t, name+" coop round 2", round2, members, topics, true)
		if n := revocations(withOwned(members, coop, 10), round2); n != 0 {
			t.Fatalf("%s coop round 2 revokes %d partitions: %s", name, n, planString(round2))
		}
		if s := spread(round2, everyone); s > 1 {
			t.Fatalf("%s coop round 2: spread %d: %s", name, s, planString(round2))
		}
	}
}

func claimedByOther(members []Member, id, topic string, p int32) bool {
	for _, m := range members {
		if m.ID != id && slices.Contains(m.Owned[topic], p) {
			return true
		}
	}
	return false
}

// TestPropertyDifferentSubscriptions: with arbitrary subscriptions every
// partition is still assigned exactly once, only to subscribers, and the
// sticky plans are as balanced as the subscriptions allow: no member can
// pass a partition, directly or along a chain of members, to a member
// holding two or more fewer partitions.
func TestPropertyDifferentSubscriptions(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	coopRounds := make(map[int]int)
	for iter := range 400 {
		members, topics := randomGroup(rng, 1+rng.IntN(15), 1+rng.IntN(8), 20, false)
		if iter%2 == 1 {
			members = randomOwnership(rng, members, topics)
		}
		name := fmt.Sprintf("iter %d", iter)
		for _, a := range []Assignor{Range(), RoundRobin(), Sticky()} {
			plan := a.Assign(members, topics)
			validate(t, name+" "+a.Name(), plan, members, topics, true)
		}
		plan := Sticky().Assign(members, topics)
		if from, to, ok := improvable(plan, members); ok {
			t.Fatalf("%s sticky: %s (%d) can pass load to %s (%d): %s",
				name, from, count(plan[from]), to, count(plan[to]), planString(plan))
		}
		coop := CooperativeSticky().Assign(members, topics)
		validate(t, name+" coop round 1", coop, members, topics, false)
		if got, want := planString(coop), planString(CooperativeAdjust(plan, members)); got != want {
			t.Fatalf("%s: cooperative-sticky differs from CooperativeAdjust(sticky):\n%s\n%s", name, got, want)
		}
		// Rebalance until nothing is withheld and nobody must revoke: that
		// must happen within a few rounds, every round must be safe, and
		// the fixpoint must be complete and as balanced as possible.
		checkHandover(t, name+" coop round 1", members, coop)
		cur := members
		for round := 2; ; round++ {
			cur = withOwned(cur, coop, int32(10+round))
			next := CooperativeSticky().Assign(cur, topics)
			validate(t, fmt.Sprintf("%s coop round %d", name, round), next, members, topics, false)
			checkHandover(t, fmt.Sprintf("%s coop round %d", name, round), cur, next)
			if len(owners(next)) == len(owners(plan)) && revocations(cur, next) == 0 {
				if from, to, ok := improvable(next, members); ok {
					t.Fatalf("%s coop: converged but %s can pass load to %s: %s", name, from, to, planString(next))
				}
				coopRounds[round]++
				break
			}
			if round > 5 {
				t.Fatalf("%s coop: no fixpoint after %d rounds: %s", name, round, planString(next))
			}
			coop = next
		}
	}
	t.Logf("cooperative rounds to converge (round: count): %v", coopRounds)
}

// revocations counts partitions members own but are no longer assigned.
func revocations(members []Member, plan map[string]TopicPartitions) int {
	n := 0
	for _, m := range members {
		_, revoked := Diff(m.Owned, plan[m.ID])
		n += count(revoked)
	}
	return n
}

// checkHandover checks the cooperative rule on a plan: a partition planned
// for a member that another member claims must be claimed by the planned
// member too, at a generation no lower than any other claim.
func checkHandover(t *testing.T, name string, members []Member, plan map[string]TopicPartitions) {
	t.Helper()
	for _, m := range members {
		for topic, ps := range plan[m.ID] {
			for _, p := range ps {
				mine := slices.Contains(m.Owned[topic], p)
				for _, o := range members {
					if o.ID == m.ID || !slices.Contains(o.Owned[topic], p) {
						continue
					}
					if !mine || o.Generation > m.Generation {
						t.Fatalf("%s: %s/%d handed to %s (owns: %v, gen %d) while %s (gen %d) owns it",
							name, topic, p, m.ID, mine, m.Generation, o.ID, o.Generation)
					}
				}
			}
		}
	}
}

// improvable looks, by brute force over the plan, for a member that can
// give a partition along a chain to a member with at least two fewer.
func improvable(plan map[string]TopicPartitions, members []Member) (string, string, bool) {
	subs := make(map[string]map[string]bool)
	for _, m := range members {
		if subs[m.ID] == nil {
			subs[m.ID] = make(map[string]bool)
			for _, t := range m.Topics {
				subs[m.ID][t] = true
			}
		}
	}
	ids := make([]string, 0, len(plan))
	for id := range plan {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, from := range ids {
		seen := map[string]bool{from: true}
		queue := []string{from}
		for len(queue) > 0 {
			u := queue[0]
			queue = queue[1:]
			for topic, ps := range plan[u] {
				if len(ps) == 0 {
					continue
				}
				for _, v := range ids {
					if !seen[v] && subs[v][topic] {
						seen[v] = true
						queue = append(queue, v)
					}
				}
			}
		}
		for v := range seen {
			if count(plan[v])+2 <= count(plan[from]) {
				return from, v, true
			}
		}
	}
	return "", "", false
}

// TestStickyOptimalSmall compares the sticky plan's balance with an
// exhaustive search on small groups: its sum of squared member loads (the
// measure the augmenting-path rule minimizes) must be the minimum.
func TestStickyOptimalSmall(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for iter := range 300 {
		members, topics := randomGroup(rng, 1+rng.IntN(4), 1+rng.IntN(3), 3, false)
		if iter%2 == 1 {
			members = randomOwnership(rng, members, topics)
		}
		var parts []tpKey
		for topic, n := range topics {
			for p := range n {
				parts = append(parts, tpKey{topic, p})
			}
		}
		slices.SortFunc(parts, func(a, b tpKey) int {
			if a.t != b.t {
				if a.t < b.t {
					return -1
				}
				return 1
			}
			return int(a.p - b.p)
		})
		var eligible [][]int
		for _, k := range parts {
			var e []int
			for i, m := range members {
				if slices.Contains(m.Topics, k.t) {
					e = append(e, i)
				}
			}
			eligible = append(eligible, e)
		}
		load := make([]int, len(members))
		best := -1
		var search func(i int)
		search = func(i int) {
			if i == len(parts) {
				s := 0
				for _, l := range load {
					s += l * l
				}
				if best < 0 || s < best {
					best = s
				}
				return
			}
			if len(eligible[i]) == 0 {
				search(i + 1)
				return
			}
			for _, m := range eligible[i] {
				load[m]++
				search(i + 1)
				load[m]--
			}
		}
		search(0)
		plan := Sticky().Assign(members, topics)
		got := 0
		for _, tps := range plan {
			got += count(tps) * count(tps)
		}
		if best >= 0 && got != best {
			t.Fatalf("iter %d: sum of squares %d, optimum %d: %s", iter, got, best, planString(plan))
		}
	}
}
