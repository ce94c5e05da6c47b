package assign

import (
	"slices"
	"sort"
)

type stickyAssignor struct{ cooperative bool }

func (s stickyAssignor) Name() string {
	if s.cooperative {
		return CooperativeStickyName
	}
	return StickyName
}

func (s stickyAssignor) Cooperative() bool { return s.cooperative }

func (s stickyAssignor) Assign(members []Member, topics map[string]int32) map[string]TopicPartitions {
	return s.AssignRacks(members, topics, nil)
}

// AssignRacks: see Assignor and useRackPreference.
func (s stickyAssignor) AssignRacks(members []Member, topics map[string]int32, racks PartitionRacks) map[string]TopicPartitions {
	ms := sortedMembers(members)
	b := newBalancer(ms, topics)
	b.resolveOwnership()
	b.useRackPreference(racks)
	if b.homogeneous() {
		b.assignHomogeneous()
	} else {
		b.assignGeneral()
	}
	if s.cooperative {
		b.adjustCooperative()
	}
	return b.plan()
}

// balancer holds the state of one sticky balancing run. Topics are numbered
// in name order and members in Java member order; a partition is identified
// within the run by its pid, base[topic]+partition.
type balancer struct {
	ms          []*Member
	names       []string  // topic names, sorted; only subscribed topics with partitions
	counts      []int32   // partition count per topic
	base        []int     // pid of partition 0 per topic
	nparts      int       // total partitions
	subs        [][]int32 // per member: subscribed topic numbers, ascending
	subscribers [][]int32 // per topic: subscribing members, ascending
	topicNums   map[string]int32
	owner       []int32 // per pid: previous owner after conflict resolution, or -1
	assigned    []int32 // per pid: planned member, or -1

	// Racks (KIP-881), nil unless used (see useRackPreference): per pid
	// its replicas' racks, and the owner whose claim was set aside
	// because its rack holds no replica of it (-1: none).
	racks    [][]string
	setAside []int32

	// Claims, for the cooperative adjustment: per pid whether any member
	// claims it, the highest claimed generation and the only member
	// claiming it at that generation (-1 if several do).
	claimed  []bool
	claimGen []int32
	top      []int32

	// General-path state.
	hold     [][]holding // per member, aligned with subs: partitions held
	held     [][]int32   // per member: positions in subs with partitions held
	heldPos  [][]int32   // per member, aligned with subs: position in held, or -1
	load     []int       // per member: partitions held
	nfresh   []int       // per member: fresh partitions held
	stamp    int         // BFS layer stamp for seenM / seenT (see augment)
	seenM    []int
	seenT    []int
	parentM  []int32 // BFS tree: the member that gives to this member
	parentT  []int32 // BFS tree: the topic it gives
	cost     []int   // per member: cost of its BFS tree path (see edgeCost)
	costT    []int   // per topic: least cost[u]+lower bound it was scanned from
	frontier []int32 // BFS buffers
	next     []int32
	nactive  int // members subscribing anything: all a BFS can reach
}

// holding is what a member holds of one topic: partitions it owned before
// this rebalance (kept) and partitions new to it (fresh). Moves take fresh
// partitions first, as moving those costs no stickiness.
type holding struct {
	kept, fresh []int32
}

func (h *holding) n() int { return len(h.kept) + len(h.fresh) }

func newBalancer(ms []*Member, topics map[string]int32) *balancer {
	subsByName, names := subscribers(ms, topics)
	b := &balancer{
		ms:          ms,
		names:       names,
		counts:      make([]int32, len(names)),
		base:        make([]int, len(names)),
		subs:        make([][]int32, len(ms)),
		subscribers: make([][]int32, len(names)),
		topicNums:   make(map[string]int32, len(names)),
	}
	for t, name := range names {
		b.topicNums[name] = int32(t)
		b.counts[t] = topics[name]
		b.base[t] = b.nparts
		b.nparts += int(topics[name])
		for _, mi := range subsByName[name] {
			b.subscribers[t] = append(b.subscribers[t], int32(mi))
			b.subs[mi] = append(b.subs[mi], int32(t)) // t ascends, so subs stays sorted
		}
	}
	b.owner = make([]int32, b.nparts)
	b.assigned = make([]int32, b.nparts)
	for i := range b.owner {
		b.owner[i] = -1
		b.assigned[i] = -1
	}
	return b
}

// topicNum returns the number of a topic, or -1 if it is not balanced.
func (b *balancer) topicNum(name string) int32 {
	t, ok := b.topicNums[name]
	if !ok {
		return -1
	}
	return t
}

// subPos returns the position of topic t in member m's subscriptions, or -1.
func (b *balancer) subPos(m, t int32) int {
	k, ok := slices.BinarySearch(b.subs[m], t)
	if !ok {
		return -1
	}
	return k
}

// resolveOwnership sets owner from the members' claims: per partition the
// claim with the highest generation wins; if two members claim it at that
// generation nobody owns it (as Java's AbstractStickyAssignor does for
// same-generation conflicts). A partition whose winner no longer subscribes
// its topic is unowned. The result does not depend on claim order.
func (b *balancer) resolveOwnership() {
	b.claimed = make([]bool, b.nparts)
	b.claimGen = make([]int32, b.nparts)
	b.top = make([]int32, b.nparts)
	for i, m := range b.ms {
		mi := int32(i)
		for name, parts := range m.Owned {
			t := b.topicNum(name)
			if t < 0 {
				continue
			}
			for _, p := range parts {
				if p < 0 || p >= b.counts[t] {
					continue
				}
				pid := b.base[t] + int(p)
				switch {
				case !b.claimed[pid]:
					b.claimed[pid], b.claimGen[pid], b.top[pid] = true, m.Generation, mi
				case b.top[pid] == mi: // listed twice by the same member
				case m.Generation > b.claimGen[pid]:
					b.claimGen[pid], b.top[pid] = m.Generation, mi
				case m.Generation == b.claimGen[pid]:
					b.top[pid] = -1
				}
			}
		}
	}
	for t := range b.names {
		for p := range int(b.counts[t]) {
			pid := b.base[t] + p
			if o := b.top[pid]; b.claimed[pid] && o >= 0 && b.subPos(o, int32(t)) >= 0 {
				b.owner[pid] = o
			}
		}
	}
}

// adjustCooperative is CooperativeAdjust on assigned, using the claims
// gathered by resolveOwnership: a partition stays with its planned member
// only if nobody claims it or the planned member is among the claimants at
// the highest generation.
func (b *balancer) adjustCooperative() {
	for t := range b.names {
		for p := range b.counts[t] {
			pid := b.base[t] + int(p)
			m := b.assigned[pid]
			if m < 0 || !b.claimed[pid] || b.top[pid] == m {
				continue
			}
			if b.top[pid] < 0 { // tied claimants: is m one of them?
				mm := b.ms[m]
				if mm.Generation == b.claimGen[pid] && slices.Contains(mm.Owned[b.names[t]], p) {
					continue
				}
			}
			b.assigned[pid] = -1
		}
	}
}

// homogeneous reports whether all members that subscribe any balanced topic
// subscribe the same ones.
func (b *balancer) homogeneous() bool {
	var first []int32
	for _, s := range b.subs {
		if len(s) == 0 {
			continue
		}
		if first == nil {
			first = s
		} else if !slices.Equal(first, s) {
			return false
		}
	}
	return true
}

// assignHomogeneous assigns when every active member can take every
// partition. With P partitions and M members, r = P%M members get P/M+1 and
// the rest P/M; the larger quotas go to the members owning the most, and
// each member keeps as many of its partitions as its quota allows. That
// moves the fewest partitions possible. The rest are dealt round-robin to
// the members below quota, which spreads each topic over the members.
func (b *balancer) assignHomogeneous() {
	var active []int32
	for i, s := range b.subs {
		if len(s) > 0 {
			active = append(active, int32(i))
		}
	}
	if len(active) == 0 {
		return
	}
	owned := make([][]int32, len(b.ms)) // pids, ascending
	for pid, o := range b.owner {
		if o >= 0 {
			owned[o] = append(owned[o], int32(pid))
		}
	}
	m := len(active)
	q, r := b.nparts/m, b.nparts%m
	byOwned := slices.Clone(active)
	sort.SliceStable(byOwned, func(i, j int) bool { return len(owned[byOwned[i]]) > len(owned[byOwned[j]]) })
	deficit := make([]int, len(b.ms))
	for k, i := range byOwned {
		quota := q
		if k < r {
			quota++
		}
		keep := min(len(owned[i]), quota)
		for _, pid := range owned[i][:keep] {
			b.assigned[pid] = i
		}
		deficit[i] = quota - keep
	}
	if b.racks != nil {
		b.fillByRack(active, deficit)
	}
	ring := make([]int32, 0, m)
	for _, i := range active {
		if deficit[i] > 0 {
			ring = append(ring, i)
		}
	}
	pid := 0
	for len(ring) > 0 {
		w := 0
		for _, i := range ring {
			for b.assigned[pid] >= 0 {
				pid++
			}
			b.assigned[pid] = i
			deficit[i]--
			if deficit[i] > 0 {
				ring[w] = i
				w++
			}
		}
		ring = ring[:w]
	}
}

// assignGeneral assigns when subscriptions differ. Members keep what they
// own; unowned partitions go, most constrained topic first, to the least
// loaded subscriber; then partitions move along augmenting paths until no
// member can shed load to a member holding two or more fewer partitions.
func (b *balancer) assignGeneral() {
	nm := len(b.ms)
	b.hold = make([][]holding, nm)
	b.held = make([][]int32, nm)
	b.heldPos = make([][]int32, nm)
	b.load = make([]int, nm)
	b.nfresh = make([]int, nm)
	for i := range b.ms {
		b.hold[i] = make([]holding, len(b.subs[i]))
		b.heldPos[i] = make([]int32, len(b.subs[i]))
		for k := range b.heldPos[i] {
			b.heldPos[i][k] = -1
		}
	}
	unowned := make([][]int32, len(b.names))
	for t := range b.names {
		for p := range b.counts[t] {
			pid := b.base[t] + int(p)
			if o := b.owner[pid]; o >= 0 {
				b.give(o, b.subPos(o, int32(t)), p, true)
			} else {
				unowned[t] = append(unowned[t], p)
			}
		}
	}

	// Phase 1: place unowned partitions, topics with the fewest
	// subscribers first (they have the fewest choices).
	order := make([]int32, len(b.names))
	for t := range order {
		order[t] = int32(t)
	}
	sort.SliceStable(order, func(i, j int) bool {
		return len(b.subscribers[order[i]]) < len(b.subscribers[order[j]])
	})
	minLoad := &heapOf[int32]{less: func(x, y int32) bool {
		if b.load[x] != b.load[y] {
			return b.load[x] < b.load[y]
		}
		return x < y
	}}
	for _, t := range order {
		if len(unowned[t]) == 0 {
			continue
		}
		if b.racks != nil {
			b.placeByRack(t, unowned[t])
			continue
		}
		minLoad.items = append(minLoad.items[:0], b.subscribers[t]...)
		minLoad.init()
		for _, p := range unowned[t] {
			m := minLoad.items[0]
			b.give(m, b.subPos(m, t), p, false)
			minLoad.fix0()
		}
	}

	// Phase 2: augment from the most loaded member that is not stuck.
	type entry struct {
		load int
		m    int32
	}
	maxLoad := &heapOf[entry]{less: func(x, y entry) bool {
		if x.load != y.load {
			return x.load > y.load
		}
		return x.m < y.m
	}}
	lowest := -1
	for i := range b.ms {
		maxLoad.items = append(maxLoad.items, entry{b.load[i], int32(i)})
		if len(b.subs[i]) > 0 {
			b.nactive++
			if lowest < 0 || b.load[i] < lowest {
				lowest = b.load[i]
			}
		}
	}
	maxLoad.init()
	stuck := make([]bool, nm)
	b.seenM = make([]int, nm)
	b.seenT = make([]int, len(b.names))
	b.parentM = make([]int32, nm)
	b.parentT = make([]int32, nm)
	b.cost = make([]int, nm)
	b.costT = make([]int, len(b.names))
	for maxLoad.len() > 0 {
		e := maxLoad.pop()
		if stuck[e.m] || b.load[e.m] != e.load {
			continue // stale entry
		}
		// No member holds less than lowest, and lowest only grows: a
		// member within one of it can never shed load.
		if e.load-2 < lowest {
			stuck[e.m] = true
			continue
		}
		if to, ok := b.augment(e.m); ok {
			maxLoad.push(entry{b.load[e.m], e.m})
			maxLoad.push(entry{b.load[to], to})
			if b.load[to]-1 == lowest {
				lowest = -1
				for i := range b.ms {
					if len(b.subs[i]) > 0 && (lowest < 0 || b.load[i] < lowest) {
						lowest = b.load[i]
					}
				}
			}
		} else {
			// No path now means no path later: a later augmentation
			// starts at a member loaded no more than this one and ends
			// at one loaded at least two less, so if this member could
			// reach any member on that path it could reach its end.
			// Its reachable set is therefore untouched.
			stuck[e.m] = true
		}
	}

	for i := range b.ms {
		for k, t := range b.subs[i] {
			h := &b.hold[i][k]
			for _, p := range h.kept {
				b.assigned[b.base[t]+int(p)] = int32(i)
			}
			for _, p := range h.fresh {
				b.assigned[b.base[t]+int(p)] = int32(i)
			}
		}
	}
}

// useRackPreference decides whether the plan prefers racks (KIP-881; the
// rule of Java's AbstractStickyAssignor, see useRacks) and, if so, sets
// aside the claims of owners whose rack holds no replica of the partition
// they own: like unowned partitions, those go first to a member with room
// whose rack holds a replica, and back to their owner only if none has.
// Claims in a matching rack (or of members without a rack) are kept as
// without racks, so balance and the stickiness of matching claims are
// Assign's. The cooperative adjustment still sees every claim: a
// partition taken from its owner is withheld until the owner revoked it.
func (b *balancer) useRackPreference(racks PartitionRacks) {
	if racks == nil || b.nparts == 0 {
		return
	}
	parts := make([][]string, b.nparts)
	for t, name := range b.names {
		for p := range b.counts[t] {
			parts[b.base[t]+int(p)] = racks.of(name, p)
		}
	}
	mr := make([]string, len(b.ms))
	for i, m := range b.ms {
		mr[i] = m.Rack
	}
	if !useRacks(mr, parts) {
		return
	}
	b.racks = parts
	b.setAside = make([]int32, b.nparts)
	for pid, o := range b.owner {
		b.setAside[pid] = -1
		if o >= 0 && b.ms[o].Rack != "" && !slices.Contains(parts[pid], b.ms[o].Rack) {
			b.setAside[pid], b.owner[pid] = o, -1
		}
	}
}

// inRack reports whether member m has a rack holding a replica of pid.
func (b *balancer) inRack(m int32, pid int) bool {
	r := b.ms[m].Rack
	return r != "" && slices.Contains(b.racks[pid], r)
}

// fillByRack, on the homogeneous path, gives unassigned partitions to
// members below their quota whose rack holds a replica (round robin over
// the members, as Java's assignRackAwareRoundRobin), then partitions set
// aside back to their owners if still below quota. The rest is dealt as
// without racks.
func (b *balancer) fillByRack(active []int32, deficit []int) {
	cur := 0
	for pid := range b.nparts {
		if b.assigned[pid] >= 0 {
			continue
		}
		for k := range len(active) {
			i := active[(cur+k)%len(active)]
			if deficit[i] > 0 && b.inRack(i, pid) {
				b.assigned[pid] = i
				deficit[i]--
				cur = (cur + k + 1) % len(active)
				break
			}
		}
	}
	for pid, o := range b.setAside {
		if o >= 0 && b.assigned[pid] < 0 && deficit[o] > 0 {
			b.assigned[pid] = o
			deficit[o]--
		}
	}
}

// placeByRack, on the general path, places topic t's unowned partitions:
// on the least loaded subscriber whose rack holds a replica, else back on
// the owner whose claim was set aside, else on the least loaded
// subscriber. The augmenting phase then restores balance (moving
// partitions into a rack that holds them first, see take).
func (b *balancer) placeByRack(t int32, parts []int32) {
	for _, p := range parts {
		pid := b.base[t] + int(p)
		best, bestIn := int32(-1), int32(-1)
		for _, m := range b.subscribers[t] {
			if best < 0 || b.load[m] < b.load[best] {
				best = m
			}
			if b.inRack(m, pid) && (bestIn < 0 || b.load[m] < b.load[bestIn]) {
				bestIn = m
			}
		}
		kept := false
		switch o := b.setAside[pid]; {
		case bestIn >= 0:
			best = bestIn
		case o >= 0:
			best, kept = o, true
		}
		b.give(best, b.subPos(best, t), p, kept)
	}
}

// give adds partition p of member m's k-th subscribed topic to m.
func (b *balancer) give(m int32, k int, p int32, kept bool) {
	h := &b.hold[m][k]
	if h.n() == 0 {
		b.heldPos[m][k] = int32(len(b.held[m]))
		b.held[m] = append(b.held[m], int32(k))
	}
	if kept {
		h.kept = append(h.kept, p)
	} else {
		h.fresh = append(h.fresh, p)
		b.nfresh[m]++
	}
	b.load[m]++
}

// take removes a partition of member m's k-th subscribed topic from m,
// for member to, preferring one that is fresh to m (moving it costs no
// stickiness) and, with racks, among those one with a replica in to's
// rack.
func (b *balancer) take(m int32, k int, to int32) int32 {
	h := &b.hold[m][k]
	var p int32
	if b.racks != nil {
		t := b.subs[m][k]
		for _, list := range []*[]int32{&h.fresh, &h.kept} {
			if i := slices.IndexFunc(*list, func(p int32) bool { return b.inRack(to, b.base[t]+int(p)) }); i >= 0 {
				p = (*list)[i]
				*list = slices.Delete(*list, i, i+1)
				if list == &h.fresh {
					b.nfresh[m]--
				}
				b.took(m, k)
				return p
			}
			if len(*list) > 0 {
				break // a fresh partition, even out of to's rack, before a kept one
			}
		}
		// Then a partition whose claim by to was set aside: to takes
		// back what it owned. Such a partition is fresh to m.
		if i := slices.IndexFunc(h.fresh, func(p int32) bool { return b.setAside[b.base[t]+int(p)] == to }); i >= 0 {
			p = h.fresh[i]
			h.fresh = slices.Delete(h.fresh, i, i+1)
			b.nfresh[m]--
			b.took(m, k)
			return p
		}
	}
	if n := len(h.fresh); n > 0 {
		p, h.fresh = h.fresh[n-1], h.fresh[:n-1]
		b.nfresh[m]--
	} else {
		n := len(h.kept)
		p, h.kept = h.kept[n-1], h.kept[:n-1]
	}
	b.took(m, k)
	return p
}

// took updates member m's bookkeeping after a partition of its k-th
// subscribed topic was taken.
func (b *balancer) took(m int32, k int) {
	h := &b.hold[m][k]
	if h.n() == 0 { // swap-delete k from held
		pos := b.heldPos[m][k]
		last := b.held[m][len(b.held[m])-1]
		b.held[m][pos] = last
		b.heldPos[m][last] = pos
		b.held[m] = b.held[m][:len(b.held[m])-1]
		b.heldPos[m][k] = -1
	}
	b.load[m]--
}

// augment searches breadth first, from member a, for a member loaded at
// least two less than a that a can reach through a chain of members each
// giving the next a partition of a topic the next subscribes. Of the
// closest such members it picks the least loaded (then the one with the
// cheapest chain, then the first found), shifts one partition along the
// chain and returns that member. Among the shortest chains to a member the
// tree keeps the cheapest (edgeCost summed): moving partitions that are
// fresh to their givers rather than ones they keep, so that a plan fed
// back as the owned partitions is not reshuffled.
func (b *balancer) augment(a int32) (int32, bool) {
	// Stamps are per layer: st0 marks a, st0+d the members and topics
	// first reached at depth d, so anything >= st0 was seen in this
	// search and == st was reached in the current layer.
	b.stamp++
	st0 := b.stamp
	limit := b.load[a] - 2
	b.seenM[a] = st0
	b.cost[a] = 0
	seen := 1
	frontier := append(b.frontier[:0], a)
	next := b.next[:0]
	defer func() { b.frontier, b.next = frontier, next }()
	racks := b.racks != nil
	kc := b.keptCost()
	for len(frontier) > 0 && seen < b.nactive {
		next = next[:0]
		b.stamp++
		st := b.stamp
		// Members reached in this layer at more than the least an
		// edge from the frontier can cost: once all are reached and
		// none is, no edge can improve the tree.
		least := -1
		for _, u := range frontier {
			lb := b.cost[u]
			if b.nfresh[u] == 0 {
				lb += kc
			}
			if least < 0 || lb < least {
				least = lb
			}
		}
		worse := 0
	scan:
		for _, u := range frontier {
			for _, k := range b.held[u] {
				t := b.subs[u][k]
				lb := b.cost[u]
				if len(b.hold[u][k].fresh) == 0 {
					lb += kc
				}
				if b.seenT[t] >= st0 {
					// Scanned before: in an earlier layer it reached
					// all its subscribers; in this one, scan it again
					// only if u may offer cheaper edges.
					if b.seenT[t] != st || lb > b.costT[t] || lb == b.costT[t] && !racks {
						continue
					}
				} else {
					b.seenT[t] = st
					b.costT[t] = lb
				}
				b.costT[t] = min(b.costT[t], lb)
				perMember := racks && lb == b.cost[u] // fresh partitions: the cost depends on c
				for _, c := range b.subscribers[t] {
					switch sc := b.seenM[c]; {
					case sc == st:
						ec := lb
						if perMember {
							ec = b.cost[u] + b.edgeCost(u, int(k), c)
						}
						if ec < b.cost[c] {
							if ec == least {
								worse--
							}
							b.parentM[c], b.parentT[c], b.cost[c] = u, t, ec
						}
					case sc < st0:
						b.seenM[c] = st
						b.parentM[c], b.parentT[c] = u, t
						b.cost[c] = lb
						if perMember {
							b.cost[c] = b.cost[u] + b.edgeCost(u, int(k), c)
						}
						if b.cost[c] > least {
							worse++
						}
						next = append(next, c)
						seen++
					}
					if seen == b.nactive && worse == 0 {
						break scan // nothing left to discover or improve
					}
				}
			}
		}
		best := int32(-1)
		for _, c := range next {
			if b.load[c] <= limit && (best < 0 || b.load[c] < b.load[best] || b.load[c] == b.load[best] && b.cost[c] < b.cost[best]) {
				best = c
			}
		}
		if best >= 0 {
			for c := best; c != a; c = b.parentM[c] {
				b.move(b.parentM[c], c, b.parentT[c])
			}
			return best, true
		}
		frontier, next = next, frontier
	}
	return 0, false
}

// move gives one partition of topic t from member from to member to,
// preferring a partition that is fresh to from.
func (b *balancer) move(from, to, t int32) {
	p := b.take(from, b.subPos(from, t), to)
	pid := b.base[t] + int(p)
	b.give(to, b.subPos(to, t), p, b.owner[pid] == to || b.racks != nil && b.setAside[pid] == to)
}

// keptCost is the cost of a move that takes a partition its giver keeps
// (owned it before): more than any path of other moves costs.
func (b *balancer) keptCost() int {
	if b.racks == nil {
		return 1
	}
	return b.nactive + 1
}

// edgeCost rates member u giving member c a partition of u's k-th
// subscribed topic by what take would move: keptCost for a partition u
// keeps; 0 for one fresh to u, except with racks, where only a fresh
// partition with a replica in c's rack or whose claim by c was set aside
// costs 0 and another fresh one 1.
func (b *balancer) edgeCost(u int32, k int, c int32) int {
	h := &b.hold[u][k]
	if len(h.fresh) == 0 {
		return b.keptCost()
	}
	if b.racks == nil {
		return 0
	}
	t := b.subs[u][k]
	for _, p := range h.fresh {
		pid := b.base[t] + int(p)
		if b.setAside[pid] == c || b.inRack(c, pid) {
			return 0
		}
	}
	return 1
}

// plan converts assigned into the member id keyed plan.
func (b *balancer) plan() map[string]TopicPartitions {
	hint := make([]int, len(b.ms))
	for _, m := range b.assigned {
		if m >= 0 {
			hint[m]++
		}
	}
	for i := range hint {
		hint[i] = min(hint[i], len(b.subs[i]))
	}
	plan := emptyPlan(b.ms, hint)
	tps := make([]TopicPartitions, len(b.ms))
	for i, m := range b.ms {
		tps[i] = plan[m.ID]
	}
	lists := make([][]int32, len(b.ms))
	for t, name := range b.names {
		var touched []int32
		for p := range b.counts[t] {
			m := b.assigned[b.base[t]+int(p)]
			if m < 0 {
				continue
			}
			if len(lists[m]) == 0 {
				touched = append(touched, m)
			}
			lists[m] = append(lists[m], p)
		}
		for _, m := range touched {
			tps[m][name] = lists[m]
			lists[m] = nil
		}
	}
	return plan
}

// heapOf is a binary heap ordered by less (the least item on top).
type heapOf[T any] struct {
	items []T
	less  func(x, y T) bool
}

func (h *heapOf[T]) len() int { return len(h.items) }

func (h *heapOf[T]) init() {
	for i := len(h.items)/2 - 1; i >= 0; i-- {
		h.down(i)
	}
}

func (h *heapOf[T]) push(x T) {
	h.items = append(h.items, x)
	for i := len(h.items) - 1; i > 0; {
		parent := (i - 1) / 2
		if !h.less(h.items[i], h.items[parent]) {
			break
		}
		h.items[i], h.items[parent] = h.items[parent], h.items[i]
		i = parent
	}
}

func (h *heapOf[T]) pop() T {
	top := h.items[0]
	last := len(h.items) - 1
	h.items[0] = h.items[last]
	h.items = h.items[:last]
	if last > 0 {
		h.down(0)
	}
	return top
}

// fix0 restores the heap after the top item's key grew.
func (h *heapOf[T]) fix0() { h.down(0) }

func (h *heapOf[T]) down(i int) {
	n := len(h.items)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		c := l
		if r := l + 1; r < n && h.less(h.items[r], h.items[l]) {
			c = r
		}
		if !h.less(h.items[c], h.items[i]) {
			return
		}
		h.items[i], h.items[c] = h.items[c], h.items[i]
		i = c
	}
}
