package assign

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"testing"
)

// all returns the four built-in assignors.
func all() []Assignor {
	return []Assignor{Range(), RoundRobin(), Sticky(), CooperativeSticky()}
}

// tpKey identifies one partition.
type tpKey struct {
	t string
	p int32
}

// owners maps each assigned partition to the members it is assigned to.
func owners(plan map[string]TopicPartitions) map[tpKey][]string {
	out := make(map[tpKey][]string)
	for id, tps := range plan {
		for t, ps := range tps {
			for _, p := range ps {
				k := tpKey{t, p}
				out[k] = append(out[k], id)
			}
		}
	}
	return out
}

// count returns the number of partitions in tp.
func count(tp TopicPartitions) int {
	n := 0
	for _, ps := range tp {
		n += len(ps)
	}
	return n
}

// spread returns max-min of the members' partition counts, over the members
// for which include is true.
func spread(plan map[string]TopicPartitions, include func(id string) bool) int {
	lo, hi := -1, -1
	for id, tps := range plan {
		if !include(id) {
			continue
		}
		n := count(tps)
		if lo < 0 || n < lo {
			lo = n
		}
		if n > hi {
			hi = n
		}
	}
	return hi - lo
}

// validate checks the invariants of every plan: one entry per distinct
// member and no other, normalized lists, partitions assigned at most once
// (exactly once if exact) and only to members subscribing their topic,
// and only partitions that exist.
func validate(t *testing.T, name string, plan map[string]TopicPartitions, members []Member, topics map[string]int32, exact bool) {
	t.Helper()
	subscribed := make(map[string]map[string]bool)
	wanted := make(map[tpKey]bool)
	for _, m := range members {
		if subscribed[m.ID] != nil {
			continue
		}
		subscribed[m.ID] = make(map[string]bool)
		for _, topic := range m.Topics {
			subscribed[m.ID][topic] = true
			for p := range topics[topic] {
				wanted[tpKey{topic, p}] = true
			}
		}
	}
	if len(plan) != len(subscribed) {
		t.Fatalf("%s: plan has %d entries for %d members", name, len(plan), len(subscribed))
	}
	for id, tps := range plan {
		subs, ok := subscribed[id]
		if !ok {
			t.Fatalf("%s: plan entry for unknown member %q", name, id)
		}
		for topic, ps := range tps {
			if len(ps) == 0 {
				t.Fatalf("%s: member %s has an empty list for %s", name, id, topic)
			}
			if !slices.IsSorted(ps) || len(slices.Compact(slices.Clone(ps))) != len(ps) {
				t.Fatalf("%s: member %s: %s partitions not normalized: %v", name, id, topic, ps)
			}
			if !subs[topic] {
				t.Fatalf("%s: member %s got %s but does not subscribe it", name, id, topic)
			}
			for _, p := range ps {
				if p < 0 || p >= topics[topic] {
					t.Fatalf("%s: member %s got nonexistent %s/%d", name, id, topic, p)
				}
			}
		}
	}
	got := owners(plan)
	for k, ids := range got {
		if len(ids) > 1 {
			t.Fatalf("%s: %s/%d assigned to %v", name, k.t, k.p, ids)
		}
	}
	if exact {
		for k := range wanted {
			if len(got[k]) != 1 {
				t.Fatalf("%s: %s/%d not assigned", name, k.t, k.p)
			}
		}
	}
}

// ownersOf maps each owned partition to its owner (members' Owned must be
// disjoint).
func ownersOf(members []Member) map[tpKey]string {
	out := make(map[tpKey]string)
	for _, m := range members {
		for t, ps := range m.Owned {
			for _, p := range ps {
				out[tpKey{t, p}] = m.ID
			}
		}
	}
	return out
}

// moved counts partitions whose previous owner is still a member able to
// keep them (subscribes, partition exists) but that the plan puts
// elsewhere or withholds.
func moved(prev map[tpKey]string, members []Member, topics map[string]int32, plan map[string]TopicPartitions) int {
	subs := make(map[string]map[string]bool)
	for _, m := range members {
		subs[m.ID] = make(map[string]bool)
		for _, t := range m.Topics {
			subs[m.ID][t] = true
		}
	}
	now := owners(plan)
	n := 0
	for k, id := range prev {
		if !subs[id][k.t] || k.p >= topics[k.t] {
			continue
		}
		if ids := now[k]; len(ids) != 1 || ids[0] != id {
			n++
		}
	}
	return n
}

// minMoves is the fewest partitions that must leave their previous owner
// for a balanced plan when every member subscribes all topics: with P
// partitions and M members, P%M members may hold P/M+1 (best given to the
// members owning most) and the others P/M.
func minMoves(prev map[tpKey]string, members []Member, topics map[string]int32) int {
	total := 0
	for _, t := range members[0].Topics {
		total += int(topics[t])
	}
	ownedN := make(map[string]int)
	for k, id := range prev {
		if k.p < topics[k.t] {
			ownedN[id]++
		}
	}
	counts := make([]int, 0, len(members))
	for _, m := range members {
		counts = append(counts, ownedN[m.ID])
	}
	sort.Sort(sort.Reverse(sort.IntSlice(counts)))
	q, r := total/len(members), total%len(members)
	n := 0
	for i, c := range counts {
		quota := q
		if i < r {
			quota++
		}
		n += max(0, c-quota)
	}
	return n
}

// withOwned returns members with Owned set from plan and Generation gen.
func withOwned(members []Member, plan map[string]TopicPartitions, gen int32) []Member {
	out := slices.Clone(members)
	for i := range out {
		out[i].Owned = plan[out[i].ID]
		out[i].Generation = gen
	}
	return out
}

// planString renders a plan deterministically, for failure messages and
// equality checks.
func planString(plan map[string]TopicPartitions) string {
	ids := make([]string, 0, len(plan))
	for id := range plan {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	var sb strings.Builder
	for _, id := range ids {
		fmt.Fprintf(&sb, "%s:%s ", id, tpString(plan[id]))
	}
	return sb.String()
}

func tpString(tp TopicPartitions) string {
	ts := make([]string, 0, len(tp))
	for t := range tp {
		ts = append(ts, t)
	}
	slices.Sort(ts)
	var sb strings.Builder
	sb.WriteString("{")
	for i, t := range ts {
		if i > 0 {
			sb.WriteString(" ")
		}
		fmt.Fprintf(&sb, "%s%v", t, tp[t])
	}
	sb.WriteString("}")
	return sb.String()
}

// randomGroup builds members m00.. subscribing topics; if same, all
// subscribe every topic, else each a random non-empty subset.
func randomGroup(rng *rand.Rand, nMembers, nTopics int, maxParts int32, same bool) ([]Member, map[string]int32) {
	topics := make(map[string]int32)
	names := make([]string, nTopics)
	for i := range names {
		names[i] = fmt.Sprintf("t%d", i)
		topics[names[i]] = rng.Int32N(maxParts + 1)
	}
	members := make([]Member, nMembers)
	for i := range members {
		members[i] = Member{ID: fmt.Sprintf("m%02d", i), Generation: -1}
		if same {
			members[i].Topics = slices.Clone(names)
			continue
		}
		for _, n := range names {
			if rng.IntN(2) == 0 {
				members[i].Topics = append(members[i].Topics, n)
			}
		}
		if len(members[i].Topics) == 0 {
			members[i].Topics = []string{names[rng.IntN(nTopics)]}
		}
	}
	return members, topics
}

// shuffled returns a copy of members in random order with shuffled topic
// lists.
func shuffled(rng *rand.Rand, members []Member) []Member {
	out := slices.Clone(members)
	rng.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	for i := range out {
		ts := slices.Clone(out[i].Topics)
		rng.Shuffle(len(ts), func(a, b int) { ts[a], ts[b] = ts[b], ts[a] })
		out[i].Topics = ts
	}
	return out
}
