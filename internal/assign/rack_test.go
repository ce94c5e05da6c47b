package assign

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// javaRacks builds partition racks as the Java client's assignor tests
// do (AbstractPartitionAssignorTest): brokers numbered across topics in
// the given order, broker i in rack i%numRacks, partition p's replicas on
// the rf brokers from its number on.
func javaRacks(order []string, topics map[string]int32, rf, numRacks int) PartitionRacks {
	out := PartitionRacks{}
	next := 0
	for _, t := range order {
		for range topics[t] {
			var rs []string
			for j := range rf {
				rs = append(rs, fmt.Sprintf("rack-%c", 'a'+(next+j)%numRacks))
			}
			out[t] = append(out[t], rs)
			next++
		}
	}
	return out
}

func racked(id, rack string, topics ...string) Member {
	return Member{ID: id, Topics: topics, Generation: -1, Rack: rack}
}

// parsePlan reads "t1-0 t1-3, t2-0" style lists (Java's test notation),
// one per member.
func parsePlan(ids []string, lists ...string) map[string]TopicPartitions {
	plan := map[string]TopicPartitions{}
	for i, l := range lists {
		tp := TopicPartitions{}
		for _, f := range strings.FieldsFunc(l, func(r rune) bool { return r == ',' || r == ' ' }) {
			var t string
			var p int32
			k := strings.LastIndexByte(f, '-')
			t = f[:k]
			fmt.Sscan(f[k+1:], &p)
			tp[t] = append(tp[t], p)
		}
		plan[ids[i]] = tp
	}
	return plan
}

// rangeRackCase is one case of TestRangeRacksJava.
type rangeRackCase struct {
	name    string
	members []Member
	topics  map[string]int32
	racks   PartitionRacks
	want    map[string]TopicPartitions
}

// rangeRackCases are the expectations of the Java client's
// RangeAssignorTest rack-aware cases (also seeds of FuzzAssignRacks).
func rangeRackCases() []rangeRackCase {
	ids := []string{"consumer0", "consumer1", "consumer2", "consumer3"}
	uniform := map[string]int32{"t1": 6, "t2": 7, "t3": 2}
	all := []string{"t1", "t2", "t3"}
	three := []Member{racked(ids[0], "rack-a", all...), racked(ids[1], "rack-b", all...), racked(ids[2], "rack-c", all...)}
	nonRack := parsePlan(ids, "t1-0, t1-1, t2-0, t2-1, t2-2, t3-0", "t1-2, t1-3, t2-3, t2-4, t3-1", "t1-4, t1-5, t2-5, t2-6")
	co := map[string]int32{"t1": 6, "t2": 6, "t3": 2, "t4": 2}
	coMembers := []Member{racked(ids[0], "rack-a", "t1", "t2"), racked(ids[1], "rack-b", "t1", "t2"),
		racked(ids[2], "rack-b", "t3", "t4"), racked(ids[3], "rack-a", "t3", "t4")}
	coNonRack := parsePlan(ids, "t1-0, t1-1, t1-2, t2-0, t2-1, t2-2", "t1-3, t1-4, t1-5, t2-3, t2-4, t2-5", "t3-0, t4-0", "t3-1, t4-1")
	noRacks := slices.Clone(three)
	for i := range noRacks {
		noRacks[i].Rack = ""
	}
	otherRacks := slices.Clone(three)
	for i := range otherRacks {
		otherRacks[i].Rack = "rack-z"
	}
	return []rangeRackCase{
		{"rf 1 of 3 racks", three, uniform, javaRacks(all, uniform, 1, 3),
			parsePlan(ids, "t1-0, t1-3, t2-0, t2-3, t2-6", "t1-1, t1-4, t2-1, t2-4, t3-0", "t1-2, t1-5, t2-2, t2-5, t3-1")},
		{"rf 2 of 3 racks", three, uniform, javaRacks(all, uniform, 2, 3),
			parsePlan(ids, "t1-0, t1-2, t2-0, t2-2, t2-3, t3-1", "t1-1, t1-3, t2-1, t2-4, t3-0", "t1-4, t1-5, t2-5, t2-6")},
		{"every partition in every rack: not rack-aware", three, uniform, javaRacks(all, uniform, 3, 3), nonRack},
		{"no member racks", noRacks, uniform, javaRacks(all, uniform, 1, 3), nonRack},
		{"member racks hold no replica", otherRacks, uniform, javaRacks(all, uniform, 1, 3), nonRack},
		{"racks unknown", three, uniform, nil, nonRack},
		{"co-partitioned, rf 3 of 2 racks", coMembers, co, javaRacks([]string{"t1", "t2", "t3", "t4"}, co, 3, 2), coNonRack},
		{"co-partitioned, rf 1 of 2 racks", coMembers, co, javaRacks([]string{"t1", "t2", "t3", "t4"}, co, 1, 2),
			parsePlan(ids, "t1-0, t1-2, t1-4, t2-0, t2-2, t2-4", "t1-1, t1-3, t1-5, t2-1, t2-3, t2-5", "t3-1, t4-1", "t3-0, t4-0")},
	}
}

// TestRangeRacksJava: the expectations of the Java client's
// RangeAssignorTest rack-aware cases.
func TestRangeRacksJava(t *testing.T) {
	for _, tc := range rangeRackCases() {
		t.Run(tc.name, func(t *testing.T) {
			got := Range().AssignRacks(tc.members, tc.topics, tc.racks)
			want := tc.want
			for id := range want {
				if _, ok := got[id]; !ok {
					delete(want, id)
				}
			}
			if g, w := planString(got), planString(want); g != w {
				t.Fatalf("\n got  %s\n want %s", g, w)
			}
			validate(t, "range", got, tc.members, tc.topics, true)
		})
	}
}

// stickyRackCase is one case of TestStickyRacks.
type stickyRackCase struct {
	name    string
	a       Assignor
	members []Member
	topics  map[string]int32
	racks   PartitionRacks
	want    string
}

// stickyRackCases are the sticky assignors' rack-aware table cases (also
// seeds of FuzzAssignRacks).
func stickyRackCases() []stickyRackCase {
	abc := []Member{racked("a", "rack-a", "t"), racked("b", "rack-b", "t"), racked("c", "rack-c", "t")}
	topics := map[string]int32{"t": 6}
	rf1 := javaRacks([]string{"t"}, topics, 1, 3) // partition p in rack p%3
	owning := func(ms []Member, owned ...TopicPartitions) []Member {
		out := slices.Clone(ms)
		for i := range out {
			out[i].Owned, out[i].Generation = owned[i], 3
		}
		return out
	}
	// a owns what is in b's rack and so on.
	shifted := owning(abc, TopicPartitions{"t": {1, 4}}, TopicPartitions{"t": {2, 5}}, TopicPartitions{"t": {0, 3}})
	// a owns one partition in its rack, one in b's; b owns nothing.
	half := owning(abc, TopicPartitions{"t": {0, 1}}, TopicPartitions{}, TopicPartitions{"t": {2, 5}})
	// Different subscriptions: c also reads u (in rack-c only).
	mixedTopics := map[string]int32{"t": 6, "u": 2}
	mixed := []Member{racked("a", "rack-a", "t"), racked("b", "rack-b", "t"), racked("c", "rack-c", "t", "u")}
	mixedRacks := PartitionRacks{"t": rf1["t"], "u": {{"rack-c"}, {"rack-c"}}}
	noRack := slices.Clone(abc)
	noRack[1].Rack = ""
	return []stickyRackCase{
		{"fresh: each member its rack's partitions", Sticky(), abc, topics, rf1, "a:{t[0 3]} b:{t[1 4]} c:{t[2 5]} "},
		{"owners in the wrong racks: moved", Sticky(), shifted, topics, rf1, "a:{t[0 3]} b:{t[1 4]} c:{t[2 5]} "},
		{"cooperative: moves withheld until revoked", CooperativeSticky(), shifted, topics, rf1, "a:{} b:{} c:{} "},
		{"matching claim kept, mismatching one moved", Sticky(), half, topics, rf1, "a:{t[0 3]} b:{t[1 4]} c:{t[2 5]} "},
		{"without racks: sticky as ever", Sticky(), shifted, topics, nil, "a:{t[1 4]} b:{t[2 5]} c:{t[0 3]} "},
		{"every partition in every rack: sticky as ever", Sticky(), shifted, topics, javaRacks([]string{"t"}, topics, 3, 3), "a:{t[1 4]} b:{t[2 5]} c:{t[0 3]} "},
		{"member without a rack takes what is left", Sticky(), noRack, topics, rf1, "a:{t[0 3]} b:{t[1 4]} c:{t[2 5]} "},
		// c holds t[2 5] and u, all in its rack, at first; balance moves
		// one of t to a (neither a's nor b's rack has it).
		{"different subscriptions", Sticky(), mixed, mixedTopics, mixedRacks, "a:{t[0 3 5]} b:{t[1 4]} c:{t[2] u[0 1]} "},
	}
}

func TestStickyRacks(t *testing.T) {
	for _, tc := range stickyRackCases() {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.a.AssignRacks(tc.members, tc.topics, tc.racks)
			if g := planString(got); g != tc.want {
				t.Fatalf("\n got  %s\n want %s", g, tc.want)
			}
			validate(t, tc.a.Name(), got, tc.members, tc.topics, !tc.a.Cooperative())
		})
	}
}

// randomRacks gives members random racks (some none) among n racks and
// partitions random replica racks.
func randomRacks(rng *rand.Rand, members []Member, topics map[string]int32, n int) ([]Member, PartitionRacks) {
	out := slices.Clone(members)
	for i := range out {
		if k := rng.IntN(n + 1); k < n {
			out[i].Rack = fmt.Sprintf("r%d", k)
		}
	}
	racks := PartitionRacks{}
	for t, c := range topics {
		for range c {
			var rs []string
			for range 1 + rng.IntN(n) {
				rs = append(rs, fmt.Sprintf("r%d", rng.IntN(n)))
			}
			racks[t] = append(racks[t], rs)
		}
	}
	return out, racks
}

// matched counts the partitions assigned to a member whose rack holds a
// replica.
func matched(plan map[string]TopicPartitions, members []Member, racks PartitionRacks) int {
	n := 0
	for _, m := range members {
		for t, ps := range plan[m.ID] {
			for _, p := range ps {
				if m.Rack != "" && slices.Contains(racks.of(t, p), m.Rack) {
					n++
				}
			}
		}
	}
	return n
}

// TestPropertyRacks: with racks, every assignor's plan is valid and as
// balanced as without them (sticky: max-min <= 1 with the same
// subscriptions, no member able to pass load to another otherwise; range:
// per topic); the sticky assignors keep, per member, at least as many of
// its claims in its rack as its floor share allows; cooperative-sticky
// is CooperativeAdjust of sticky and hands over safely; and when racks
// cannot matter the plan is Assign's.
func TestPropertyRacks(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	everyone := func(string) bool { return true }
	var withRacks, without int
	for iter := range 600 {
		same := iter%2 == 0
		members, topics := randomGroup(rng, 1+rng.IntN(10), 1+rng.IntN(5), 20, same)
		members, racks := randomRacks(rng, members, topics, 1+rng.IntN(4))
		if iter%3 != 0 {
			// Claims from a previous plan (no conflicts), so stickiness
			// can be checked.
			prev := Sticky().Assign(shuffled(rng, members), topics)
			for _, m := range members[:rng.IntN(len(members))+1] {
				delete(prev, m.ID) // some members are new
			}
			members = withOwned(members, prev, 5)
		}
		name := fmt.Sprintf("iter %d", iter)
		for _, a := range []Assignor{Range(), RoundRobin(), Sticky()} {
			plan := a.AssignRacks(members, topics, racks)
			validate(t, name+" "+a.Name(), plan, members, topics, true)
			if a.Name() == RangeName {
				for topic := range topics {
					lo, hi := int(topics[topic]), 0
					for _, m := range members {
						if slices.Contains(m.Topics, topic) {
							n := len(plan[m.ID][topic])
							lo, hi = min(lo, n), max(hi, n)
						}
					}
					if hi-lo > 1 {
						t.Fatalf("%s range: topic %s spread %d: %s", name, topic, hi-lo, planString(plan))
					}
				}
			}
		}
		plan := Sticky().AssignRacks(members, topics, racks)
		if same {
			if s := spread(plan, everyone); s > 1 {
				t.Fatalf("%s sticky: spread %d: %s", name, s, planString(plan))
			}
		} else if from, to, ok := improvable(plan, members); ok {
			t.Fatalf("%s sticky: %s can pass load to %s: %s", name, from, to, planString(plan))
		}
		plain := Sticky().Assign(members, topics)
		if planString(plan) != planString(plain) {
			withRacks++
		} else {
			without++
		}
		if same {
			total := 0
			for _, c := range topics {
				total += int(c)
			}
			floor := total / len(members)
			for _, m := range members {
				keepable, kept := 0, 0
				for tp, ps := range m.Owned {
					for _, p := range ps {
						if m.Rack == "" || slices.Contains(racks.of(tp, p), m.Rack) {
							keepable++
							if slices.Contains(plan[m.ID][tp], p) {
								kept++
							}
						}
					}
				}
				if kept < min(keepable, floor) {
					t.Fatalf("%s sticky: %s kept %d of %d claims in its rack (floor %d): %s", name, m.ID, kept, keepable, floor, planString(plan))
				}
			}
			// Fresh partitions go into racks first: never fewer rack
			// matches than the plan without racks, for a fresh group.
			if iter%3 == 0 && matched(plan, members, racks) < matched(plain, members, racks) {
				t.Fatalf("%s sticky: %d rack matches, %d without racks", name, matched(plan, members, racks), matched(plain, members, racks))
			}
		}
		coop := CooperativeSticky().AssignRacks(members, topics, racks)
		if got, want := planString(coop), planString(CooperativeAdjust(plan, members)); got != want {
			t.Fatalf("%s: cooperative-sticky differs from CooperativeAdjust(sticky):\n%s\n%s", name, got, want)
		}
		checkHandover(t, name+" coop", members, coop)

		// Racks that cannot matter: all the same, or no member has one.
		same3 := PartitionRacks{}
		for tp, c := range topics {
			for range c {
				same3[tp] = append(same3[tp], []string{"r0", "r1", "r2"})
			}
		}
		for _, a := range all() {
			if got, want := planString(a.AssignRacks(members, topics, same3)), planString(a.Assign(members, topics)); got != want {
				t.Fatalf("%s %s: racks all the same changed the plan:\n%s\n%s", name, a.Name(), got, want)
			}
		}
	}
	t.Logf("plans changed by racks: %d, unchanged: %d", withRacks, without)
	if withRacks == 0 {
		t.Fatal("racks never changed a plan: the property test exercises nothing")
	}
}
