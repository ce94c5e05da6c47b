package assign

import (
	"fmt"
	"maps"
	"slices"
	"testing"
)

// Limits of the groups FuzzAssignRacks builds (rackGroup's encoding).
const (
	fuzzMaxTopics  = 4
	fuzzMaxParts   = 16
	fuzzMaxRacks   = 4
	fuzzMaxMembers = 8
)

// rackGroup is a group with racks as FuzzAssignRacks builds it from its
// input: topics t0.., members m0.. (static ones with instance ids s0..),
// racks r0.. (names preserve the order of the original names, so an
// encoded table case sorts as the original does).
type rackGroup struct {
	members []Member
	topics  map[string]int32
	racks   PartitionRacks
}

// decodeRackGroup reads a group from fuzz input; missing bytes read as 0,
// so every input is a group. Layout:
//
//	topics-1, then per topic its partition count
//	racks-1 (bit 7: racks unknown, nil)
//	members-1, then per member: rack (racks: none), subscription bit
//	mask, generation+1, flags (bit 0: static)
//	per partition (topics, then partitions, in order): replica rack bit
//	mask, claimants (low and high nibble: member+1, 0 for none)
func decodeRackGroup(data []byte) rackGroup {
	next := func() int {
		if len(data) == 0 {
			return 0
		}
		b := data[0]
		data = data[1:]
		return int(b)
	}
	nt := 1 + next()%fuzzMaxTopics
	topics := map[string]int32{}
	for i := range nt {
		topics[fmt.Sprintf("t%d", i)] = int32(next() % (fuzzMaxParts + 1))
	}
	rb := next()
	nr := 1 + rb&0x7f%fuzzMaxRacks
	nm := 1 + next()%fuzzMaxMembers
	members := make([]Member, nm)
	for i := range members {
		m := Member{ID: fmt.Sprintf("m%d", i), Owned: TopicPartitions{}}
		if r := next() % (nr + 1); r < nr {
			m.Rack = fmt.Sprintf("r%d", r)
		}
		mask := next()
		for t := range nt {
			if mask&(1<<t) != 0 {
				m.Topics = append(m.Topics, fmt.Sprintf("t%d", t))
			}
		}
		m.Generation = int32(next()%6) - 1
		if next()&1 != 0 {
			m.InstanceID = fmt.Sprintf("s%d", i)
		}
		members[i] = m
	}
	racks := PartitionRacks{}
	for ti := range nt {
		t := fmt.Sprintf("t%d", ti)
		racks[t] = make([][]string, topics[t])
		for p := range topics[t] {
			mask := next()
			for r := range nr {
				if mask&(1<<r) != 0 {
					racks[t][p] = append(racks[t][p], fmt.Sprintf("r%d", r))
				}
			}
			c := next()
			for _, k := range []int{c & 0xf, c >> 4} {
				if k = k % (nm + 1); k > 0 {
					members[k-1].Owned[t] = append(members[k-1].Owned[t], p)
				}
			}
		}
	}
	if rb&0x80 != 0 {
		racks = nil
	}
	return rackGroup{members, topics, racks}
}

// encodeRackGroup is decodeRackGroup's inverse for a group within its
// limits (else it fails): names are replaced by t0.., m0.., r0.., s0.. in
// their sorted order. It also returns the member renaming.
func encodeRackGroup(tb testing.TB, members []Member, topics map[string]int32, racks PartitionRacks) ([]byte, map[string]string) {
	tb.Helper()
	topicNames := slices.Sorted(maps.Keys(topics))
	rackSet := map[string]bool{}
	for _, m := range members {
		if m.Rack != "" {
			rackSet[m.Rack] = true
		}
	}
	for _, ps := range racks {
		for _, rs := range ps {
			for _, r := range rs {
				rackSet[r] = true
			}
		}
	}
	rackNames := slices.Sorted(maps.Keys(rackSet))
	ids := make([]string, 0, len(members))
	for _, m := range members {
		ids = append(ids, m.ID)
	}
	slices.Sort(ids)
	statics := 0
	for _, m := range members {
		if m.InstanceID != "" {
			statics++
		}
	}
	if len(topicNames) == 0 || len(topicNames) > fuzzMaxTopics || len(rackNames) > fuzzMaxRacks ||
		len(ids) == 0 || len(ids) > fuzzMaxMembers || len(slices.Compact(slices.Clone(ids))) != len(ids) || statics > 0 {
		tb.Fatalf("group does not fit the fuzz encoding")
	}
	byID := map[string]Member{}
	for _, m := range members {
		byID[m.ID] = m
	}
	rename := map[string]string{}
	for i, id := range ids {
		rename[id] = fmt.Sprintf("m%d", i)
	}
	out := []byte{byte(len(topicNames) - 1)}
	for _, t := range topicNames {
		if topics[t] < 0 || topics[t] > fuzzMaxParts {
			tb.Fatalf("topic %s: %d partitions do not fit", t, topics[t])
		}
		out = append(out, byte(topics[t]))
	}
	rb := byte(max(len(rackNames), 1) - 1)
	if racks == nil {
		rb |= 0x80
	}
	out = append(out, rb, byte(len(ids)-1))
	for _, id := range ids {
		m := byID[id]
		r := max(len(rackNames), 1) // none
		if m.Rack != "" {
			r = slices.Index(rackNames, m.Rack)
		}
		mask := 0
		for _, t := range m.Topics {
			mask |= 1 << slices.Index(topicNames, t)
		}
		if m.Generation < -1 || m.Generation > 4 {
			tb.Fatalf("generation %d does not fit", m.Generation)
		}
		out = append(out, byte(r), byte(mask), byte(m.Generation+1), 0)
	}
	for _, t := range topicNames {
		for p := range topics[t] {
			mask := 0
			for _, r := range racks.of(t, p) {
				mask |= 1 << slices.Index(rackNames, r)
			}
			var claimants []int
			for i, id := range ids {
				if slices.Contains(byID[id].Owned[t], p) {
					claimants = append(claimants, i+1)
				}
			}
			if len(claimants) > 2 {
				tb.Fatalf("%s/%d has more than two claimants", t, p)
			}
			claimants = append(claimants, 0, 0)
			out = append(out, byte(mask), byte(claimants[0]|claimants[1]<<4))
		}
	}
	for _, m := range members {
		for t, ps := range m.Owned {
			for _, p := range ps {
				if p < 0 || p >= topics[t] {
					tb.Fatalf("claim %s/%d does not fit", t, p)
				}
			}
		}
	}
	return out, rename
}

// rackSeeds returns the rack-aware table cases (TestRangeRacksJava,
// TestStickyRacks) as fuzz inputs, with their assignor and the plan the
// assignor makes of the original case, members renamed as encoded.
func rackSeeds(tb testing.TB) (inputs [][]byte, assignors []Assignor, plans []string) {
	add := func(a Assignor, members []Member, topics map[string]int32, racks PartitionRacks) {
		data, rename := encodeRackGroup(tb, members, topics, racks)
		plan := map[string]TopicPartitions{}
		for id, tp := range a.AssignRacks(members, topics, racks) {
			plan[rename[id]] = tp
		}
		inputs, assignors, plans = append(inputs, data), append(assignors, a), append(plans, planString(plan))
	}
	for _, tc := range rangeRackCases() {
		add(Range(), tc.members, tc.topics, tc.racks)
	}
	for _, tc := range stickyRackCases() {
		add(tc.a, tc.members, tc.topics, tc.racks)
	}
	return inputs, assignors, plans
}

// renamedTopics maps topic names in a plan back through sorted order:
// t0.. of a decoded group to the original names.
func renamedTopics(plan map[string]TopicPartitions, names []string) map[string]TopicPartitions {
	out := map[string]TopicPartitions{}
	for id, tp := range plan {
		out[id] = TopicPartitions{}
		for t, ps := range tp {
			var i int
			fmt.Sscanf(t, "t%d", &i)
			out[id][names[i]] = ps
		}
	}
	return out
}

// TestRackSeedsFaithful: the fuzz seeds are the table cases: decoding an
// encoded case and assigning gives the case's plan.
func TestRackSeedsFaithful(t *testing.T) {
	inputs, assignors, plans := rackSeeds(t)
	var topicNames [][]string
	for _, tc := range rangeRackCases() {
		topicNames = append(topicNames, slices.Sorted(maps.Keys(tc.topics)))
	}
	for _, tc := range stickyRackCases() {
		topicNames = append(topicNames, slices.Sorted(maps.Keys(tc.topics)))
	}
	for i, data := range inputs {
		g := decodeRackGroup(data)
		got := renamedTopics(assignors[i].AssignRacks(g.members, g.topics, g.racks), topicNames[i])
		if planString(got) != plans[i] {
			t.Errorf("seed %d (%s): decoded case gives\n %s\nthe case gives\n %s", i, assignors[i].Name(), planString(got), plans[i])
		}
	}
}

// racksCanMatter is the documented condition for a rack-aware plan: some
// member has a rack holding a replica and the partitions do not all have
// replicas in the same racks. Computed over every partition of every
// topic, it errs towards true (the assignors may look at fewer).
func racksCanMatter(g rackGroup) bool {
	if g.racks == nil {
		return false
	}
	memberRacks := map[string]bool{}
	for _, m := range g.members {
		if m.Rack != "" {
			memberRacks[m.Rack] = true
		}
	}
	held := false
	var first []string
	differ, seen := false, false
	for t, c := range g.topics {
		for p := range c {
			rs := slices.Compact(slices.Sorted(slices.Values(g.racks.of(t, p))))
			for _, r := range rs {
				held = held || memberRacks[r]
			}
			if !seen {
				first, seen = rs, true
			} else if !slices.Equal(first, rs) {
				differ = true
			}
		}
	}
	return held && differ
}

// checkRackPlans checks the rack-aware assignors' promises on one group:
// every partition of a subscribed topic assigned exactly once, only to
// a subscriber; range balanced per topic (floor or ceiling share of every
// topic among its subscribers); sticky balanced (max-min <= 1 with
// identical subscriptions, no member able to pass load along a chain to
// one with two fewer otherwise); cooperative-sticky is
// CooperativeAdjust(sticky), hands over safely and reaches a complete,
// balanced plan within a few rounds (checkRackConvergence); roundrobin
// ignores racks; and when
// racks cannot matter the plans are Assign's.
func checkRackPlans(t *testing.T, g rackGroup) {
	members, topics, racks := g.members, g.topics, g.racks
	rp := Range().AssignRacks(members, topics, racks)
	validate(t, "range", rp, members, topics, true)
	for topic := range topics {
		lo, hi := int(topics[topic]), 0
		for _, m := range members {
			if slices.Contains(m.Topics, topic) {
				n := len(rp[m.ID][topic])
				lo, hi = min(lo, n), max(hi, n)
			}
		}
		if hi-lo > 1 {
			t.Fatalf("range: topic %s spread %d: %s", topic, hi-lo, planString(rp))
		}
	}

	sp := Sticky().AssignRacks(members, topics, racks)
	validate(t, "sticky", sp, members, topics, true)
	same := true
	for _, m := range members[1:] {
		same = same && slices.Equal(m.Topics, members[0].Topics)
	}
	if same {
		if s := spread(sp, func(string) bool { return true }); s > 1 {
			t.Fatalf("sticky: spread %d with identical subscriptions: %s", s, planString(sp))
		}
	} else if from, to, ok := improvable(sp, members); ok {
		t.Fatalf("sticky: %s can pass load to %s: %s", from, to, planString(sp))
	}

	cp := CooperativeSticky().AssignRacks(members, topics, racks)
	validate(t, "cooperative-sticky", cp, members, topics, false)
	if got, want := planString(cp), planString(CooperativeAdjust(sp, members)); got != want {
		t.Fatalf("cooperative-sticky is not CooperativeAdjust(sticky):\n %s\n %s", got, want)
	}
	checkHandover(t, "cooperative-sticky", members, cp)
	checkRackConvergence(t, g, sp, cp)

	if got, want := planString(RoundRobin().AssignRacks(members, topics, racks)), planString(RoundRobin().Assign(members, topics)); got != want {
		t.Fatalf("roundrobin: racks changed the plan:\n %s\n %s", got, want)
	}
	if !racksCanMatter(g) {
		for _, a := range all() {
			if got, want := planString(a.AssignRacks(members, topics, racks)), planString(a.Assign(members, topics)); got != want {
				t.Fatalf("%s: racks that cannot matter changed the plan:\n %s\n %s", a.Name(), got, want)
			}
		}
	}
}

// checkRackConvergence rebalances a cooperative-sticky group with racks
// until nothing is withheld and nobody must revoke: that must happen
// within a few rounds, every round must hand over safely, and the
// fixpoint must be complete and as balanced as Assign promises. sp and
// cp are the sticky and cooperative-sticky plans of g.
func checkRackConvergence(t *testing.T, g rackGroup, sp, cp map[string]TopicPartitions) {
	t.Helper()
	members, topics, racks := g.members, g.topics, g.racks
	same := true
	for _, m := range members[1:] {
		same = same && slices.Equal(m.Topics, members[0].Topics)
	}
	cur := members
	for round := 2; ; round++ {
		cur = withOwned(cur, cp, int32(10+round))
		next := CooperativeSticky().AssignRacks(cur, topics, racks)
		validate(t, fmt.Sprintf("cooperative-sticky round %d", round), next, members, topics, false)
		checkHandover(t, fmt.Sprintf("cooperative-sticky round %d", round), cur, next)
		if len(owners(next)) == len(owners(sp)) && revocations(cur, next) == 0 {
			validate(t, "cooperative-sticky fixpoint", next, members, topics, true)
			if same {
				if s := spread(next, func(string) bool { return true }); s > 1 {
					t.Fatalf("cooperative-sticky fixpoint: spread %d: %s", s, planString(next))
				}
			} else if from, to, ok := improvable(next, members); ok {
				t.Fatalf("cooperative-sticky fixpoint: %s can pass load to %s: %s", from, to, planString(next))
			}
			break
		}
		if round > 6 {
			t.Fatalf("cooperative-sticky: no fixpoint after %d rounds: %s", round, planString(next))
		}
		cp = next
	}
}

// TestStickyRacksConverges: inputs FuzzAssignRacks found on which
// cooperative-sticky did not converge. The first has racks: m3 (rack r0,
// where no partition has a replica) has every claim set aside each
// round, and the plan alternated between two equally balanced ones
// (m1:{t0[1 3 5]} m2:{t0[4] t1[0 1 2]} m3:{t0[0 2] t1[3]} and
// m1:{t0[1 3 4]} m2:{t1[0 1 2 3]} m3:{t0[0 2 5]}): fed back, the first
// made m2 shed a fresh t0[5] and then its kept t0[4] instead of giving
// t1[3] back to m3, whose claim was set aside. The second has racks that
// cannot matter (no partition has a replica rack) and different
// subscriptions: fed back, the plan's shortest augmenting path moved two
// kept partitions where another as short moved only fresh ones. Augmenting
// paths now are the cheapest of the shortest (see augment).
func TestStickyRacksConverges(t *testing.T) {
	for _, in := range []string{
		"797001C000021001C010C0101010101212100202029",
		"79070\x8270C9000100Z010C010ZA00ZX00,010%1000010I08000000010101010X0X0X010",
	} {
		g := decodeRackGroup([]byte(in))
		sp := Sticky().AssignRacks(g.members, g.topics, g.racks)
		cp := CooperativeSticky().AssignRacks(g.members, g.topics, g.racks)
		checkRackConvergence(t, g, sp, cp)
	}
}

// FuzzAssignRacks builds groups with racks (members with and without
// racks, partitions' replica racks, claims with generations, possibly
// conflicting) from the input and checks checkRackPlans. The rack-aware
// table cases seed the corpus.
func FuzzAssignRacks(f *testing.F) {
	inputs, _, _ := rackSeeds(f)
	for _, data := range inputs {
		f.Add(data)
	}
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		checkRackPlans(t, decodeRackGroup(data))
	})
}
