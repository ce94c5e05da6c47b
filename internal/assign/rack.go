package assign

import "slices"

// PartitionRacks holds, per topic, the racks of each partition's replicas
// (indexed by partition; a partition out of range or without racks has
// none), for the rack-aware assignors (KIP-881). The group leader builds
// it from metadata: each partition's replicas and the racks of their
// brokers. Order and duplicates do not matter.
type PartitionRacks map[string][][]string

// of returns the racks of partition p of topic t.
func (r PartitionRacks) of(t string, p int32) []string {
	ps := r[t]
	if p < 0 || int(p) >= len(ps) {
		return nil
	}
	return ps[p]
}

// useRacks is Java's AbstractPartitionAssignor.useRackAwareAssignment
// (with rack.aware.assignment.strategy's default): rack-aware assignment
// is used when some member has a rack, some member's rack holds a replica
// of some partition, and the partitions do not all have replicas in the
// same racks (then every member is as close to every partition as any
// other, and racks cannot matter). memberRacks are the members' racks (empty:
// none); parts are the partitions' replica racks.
func useRacks(memberRacks []string, parts [][]string) bool {
	consumer := map[string]bool{}
	for _, r := range memberRacks {
		if r != "" {
			consumer[r] = true
		}
	}
	if len(consumer) == 0 {
		return false
	}
	all := map[string]bool{}
	for _, rs := range parts {
		for _, r := range rs {
			all[r] = true
		}
	}
	shared := false
	for r := range consumer {
		if all[r] {
			shared = true
			break
		}
	}
	if !shared {
		return false
	}
	for _, rs := range parts {
		set := map[string]bool{}
		for _, r := range rs {
			set[r] = true
		}
		if len(set) != len(all) {
			return true // a partition lacks a rack another has
		}
	}
	return false
}

// racksMatch is Java's RangeAssignor racksMatch: a member without a rack
// matches every partition; one with a rack matches the partitions with a
// replica in it.
func racksMatch(memberRack string, partRacks []string) bool {
	return memberRack == "" || slices.Contains(partRacks, memberRack)
}

// rangeTopic is one topic's state in the rack-aware range assignment,
// Java's RangeAssignor.TopicAssignmentState.
type rangeTopic struct {
	name       string
	consumers  []int      // member indexes, in member order
	racks      [][]string // per partition
	unassigned []int32    // in partition order
	assigned   map[int]int
	per, extra int
	needsRacks bool
}

func newRangeTopic(ms []*Member, name string, n int32, consumers []int, racks PartitionRacks) *rangeTopic {
	s := &rangeTopic{name: name, consumers: consumers, racks: make([][]string, n), unassigned: span(0, n),
		assigned: make(map[int]int, len(consumers))}
	for p := range n {
		s.racks[p] = racks.of(name, p)
	}
	if len(consumers) > 0 {
		s.per, s.extra = int(n)/len(consumers), int(n)%len(consumers)
	}
	mr := make([]string, len(consumers))
	for i, mi := range consumers {
		mr[i] = ms[mi].Rack
	}
	s.needsRacks = useRacks(mr, s.racks)
	return s
}

func (s *rangeTopic) maxAssignable(mi int) int {
	n := s.per - s.assigned[mi]
	if s.extra > 0 {
		n++
	}
	return max(0, n)
}

func (s *rangeTopic) give(mi int, ps []int32, out []TopicPartitions, ms []*Member) {
	out[mi][s.name] = append(out[mi][s.name], ps...)
	s.assigned[mi] += len(ps)
	if s.assigned[mi] > s.per {
		s.extra--
	}
	s.unassigned = slices.DeleteFunc(s.unassigned, func(p int32) bool { return slices.Contains(ps, p) })
}

// assignRanges is Java's RangeAssignor.assignRanges: each member in order
// takes, up to what it may still take, the unassigned partitions may
// allows, in partition order.
func (s *rangeTopic) assignRanges(ms []*Member, out []TopicPartitions, may func(mi int, p int32) bool) {
	for _, mi := range s.consumers {
		if len(s.unassigned) == 0 {
			return
		}
		limit := s.maxAssignable(mi)
		var ps []int32
		for _, p := range s.unassigned {
			if len(ps) == limit {
				break
			}
			if may(mi, p) {
				ps = append(ps, p)
			}
		}
		if len(ps) > 0 {
			s.give(mi, ps, out, ms)
		}
	}
}

// rangeWithRacks is Java's RangeAssignor (Kafka 3.5+, KIP-881) when some
// topic needs rack-aware assignment: topics with the same members (and
// member racks) and partition count are co-partitioned and matched
// partition by partition, other topics that need it get rack-matching
// ranges first, and what is left is assigned as ranges, so every member
// still gets its floor or ceiling share of each topic.
func rangeWithRacks(ms []*Member, topics map[string]int32, subs map[string][]int, names []string, racks PartitionRacks, plan map[string]TopicPartitions) bool {
	states := make([]*rangeTopic, 0, len(names))
	any := false
	for _, t := range names {
		s := newRangeTopic(ms, t, topics[t], subs[t], racks)
		states = append(states, s)
		any = any || s.needsRacks
	}
	if !any {
		return false
	}
	out := make([]TopicPartitions, len(ms))
	for i, m := range ms {
		out[i] = plan[m.ID]
	}
	// Group by members (with their racks) and then by partition count.
	type key struct {
		members string
		n       int
	}
	groups := map[key][]*rangeTopic{}
	var order []key
	for _, s := range states {
		k := key{n: len(s.racks)}
		for _, mi := range s.consumers {
			k.members += ms[mi].ID + "\x00" + ms[mi].Rack + "\x00"
		}
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], s)
	}
	for _, k := range order {
		g := groups[k]
		if len(g) > 1 {
			coPartitioned(ms, g, out)
		} else if s := g[0]; s.needsRacks {
			s.assignRanges(ms, out, func(mi int, p int32) bool { return racksMatch(ms[mi].Rack, s.racks[p]) })
		}
	}
	for _, s := range states {
		s.assignRanges(ms, out, func(int, int32) bool { return true })
	}
	for _, tps := range out {
		for t, ps := range tps {
			slices.Sort(ps)
			tps[t] = ps
		}
	}
	return true
}

// coPartitioned is Java's assignCoPartitionedWithRackMatching: partition p
// of every topic of the group goes to the first remaining member that
// matches the racks of p in every topic and may take more of each.
func coPartitioned(ms []*Member, g []*rangeTopic, out []TopicPartitions) {
	remaining := slices.Clone(g[0].consumers)
	n := len(g[0].racks)
	for p := range int32(n) {
		found := -1
		for _, mi := range remaining {
			ok := true
			for _, s := range g {
				if !racksMatch(ms[mi].Rack, s.racks[p]) || s.maxAssignable(mi) <= 0 {
					ok = false
					break
				}
			}
			if ok {
				found = mi
				break
			}
		}
		if found < 0 {
			continue
		}
		for _, s := range g {
			s.give(found, []int32{p}, out, ms)
		}
		full := true
		for _, s := range g {
			if s.maxAssignable(found) > 0 {
				full = false
				break
			}
		}
		if full {
			remaining = slices.DeleteFunc(remaining, func(mi int) bool { return mi == found })
			if len(remaining) == 0 {
				return
			}
		}
	}
}
