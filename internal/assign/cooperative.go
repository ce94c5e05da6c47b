package assign

import "slices"

// Diff compares what a member owns with what it was just assigned. added is
// assigned minus owned (to start consuming) and revoked is owned minus
// assigned (to stop consuming and, under the cooperative protocol, to give
// up before rejoining: a member whose revoked set is not empty must rejoin
// the group so the partitions can be handed to their new owners). Both
// results are non-nil, sorted and hold no empty lists. The inputs are not
// modified.
func Diff(owned, assigned TopicPartitions) (added, revoked TopicPartitions) {
	added, revoked = TopicPartitions{}, TopicPartitions{}
	for t, ps := range assigned {
		if d := minus(normalize(ps), normalize(owned[t])); len(d) > 0 {
			added[t] = d
		}
	}
	for t, ps := range owned {
		if d := minus(normalize(ps), normalize(assigned[t])); len(d) > 0 {
			revoked[t] = d
		}
	}
	return added, revoked
}

// CooperativeAdjust applies the cooperative rebalance rule (KIP-429) to a
// plan: a partition planned for a member is removed from that member's plan
// while another member of members still owns it. The owner, whose plan does
// not contain the partition, revokes it and rejoins; in the next rebalance
// the partition is free and is handed over. Assigning a partition in the
// same round would let two members consume it at once.
//
// "Owns" follows the generation rule of the sticky assignors (KIP-792): a
// member keeps a planned partition it claims itself unless another member
// claims the partition at a strictly higher generation, in which case the
// member's own claim is stale and the partition waits like any transfer.
// Members that claim a partition at the same highest generation each keep
// it if planned; the plan gives it to at most one of them and the others
// revoke it, so no new overlap is created.
//
// This is the adjustment Java's CooperativeStickyAssignor makes; Assign of
// [CooperativeSticky] already applies it, and applying it again changes
// nothing. Members are taken as the group's current members (repeated ids:
// first occurrence wins); plan entries of unknown members are adjusted as if
// the member owned nothing. The result is a new, normalized plan with an
// entry for every plan entry; the inputs are not modified.
func CooperativeAdjust(assignment map[string]TopicPartitions, members []Member) map[string]TopicPartitions {
	seen := make(map[string]struct{}, len(members))
	ms := make([]*Member, 0, len(members))
	for i := range members {
		if _, dup := seen[members[i].ID]; !dup {
			seen[members[i].ID] = struct{}{}
			ms = append(ms, &members[i])
		}
	}
	return cooperativeAdjust(assignment, ms)
}

func cooperativeAdjust(assignment map[string]TopicPartitions, ms []*Member) map[string]TopicPartitions {
	// topic => partition => highest generation claiming it.
	maxGen := make(map[string]map[int32]int32)
	byID := make(map[string]*Member, len(ms))
	for _, m := range ms {
		byID[m.ID] = m
		for t, ps := range m.Owned {
			mt := maxGen[t]
			if mt == nil {
				mt = make(map[int32]int32, len(ps))
				maxGen[t] = mt
			}
			for _, p := range ps {
				if g, ok := mt[p]; !ok || m.Generation > g {
					mt[p] = m.Generation
				}
			}
		}
	}
	out := make(map[string]TopicPartitions, len(assignment))
	for id, tps := range assignment {
		m := byID[id]
		adjusted := make(TopicPartitions, len(tps))
		for t, ps := range tps {
			mt := maxGen[t]
			var mine []int32
			if m != nil {
				mine = normalize(m.Owned[t])
			}
			kept := make([]int32, 0, len(ps))
			for _, p := range normalize(ps) {
				g, claimed := mt[p]
				if claimed {
					if _, own := slices.BinarySearch(mine, p); !own || m.Generation < g {
						continue // still owned elsewhere: hand over next round
					}
				}
				kept = append(kept, p)
			}
			if len(kept) > 0 {
				adjusted[t] = kept
			}
		}
		out[id] = adjusted
	}
	return out
}

// normalize returns ps sorted and without duplicates or negative
// partitions. It returns ps itself when it already is; otherwise a copy.
func normalize(ps []int32) []int32 {
	ok := true
	for i, p := range ps {
		if p < 0 || (i > 0 && ps[i-1] >= p) {
			ok = false
			break
		}
	}
	if ok {
		return ps
	}
	out := make([]int32, 0, len(ps))
	for _, p := range ps {
		if p >= 0 {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// minus returns a minus b; both must be normalized.
func minus(a, b []int32) []int32 {
	var out []int32
	j := 0
	for _, p := range a {
		for j < len(b) && b[j] < p {
			j++
		}
		if j < len(b) && b[j] == p {
			continue
		}
		out = append(out, p)
	}
	return out
}
