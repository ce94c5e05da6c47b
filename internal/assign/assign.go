package assign

import (
	"slices"
	"sort"
	"unicode/utf8"
)

// Protocol names of the built-in assignors, as the Java client spells them.
const (
	// RangeName is the protocol name of [Range].
	RangeName = "range"
	// RoundRobinName is the protocol name of [RoundRobin].
	RoundRobinName = "roundrobin"
	// StickyName is the protocol name of [Sticky].
	StickyName = "sticky"
	// CooperativeStickyName is the protocol name of [CooperativeSticky].
	CooperativeStickyName = "cooperative-sticky"
)

// TopicPartitions maps a topic to its partitions. Values produced by this
// package always hold sorted, duplicate-free partitions and no empty lists;
// inputs may be unsorted and may contain duplicates.
type TopicPartitions map[string][]int32

// Member is one group member as the leader sees it: the member's
// subscription and what it reports to own.
type Member struct {
	// ID is the member id the coordinator gave the member.
	ID string
	// InstanceID is the member's group.instance.id (KIP-345 static
	// membership), empty for dynamic members. Static members sort before
	// dynamic ones, by instance id.
	InstanceID string
	// Topics is the member's subscription. Order and duplicates do not
	// matter; topics that do not exist are ignored.
	Topics []string
	// Owned holds the partitions the member currently owns: the
	// OwnedPartitions of the subscription for cooperative members, the
	// previous assignment from the user data for "sticky" members. Only the
	// sticky assignors and CooperativeAdjust use it.
	Owned TopicPartitions
	// Generation is the group generation in which the member got Owned, or
	// -1 if unknown. A partition claimed by several members stays with the
	// claim of the highest generation.
	Generation int32
	// Rack is the member's client.rack (ConsumerProtocolSubscription v3),
	// empty if unset. Range, Sticky and CooperativeSticky use it with the
	// partitions' racks (AssignRacks, KIP-881); RoundRobin ignores it.
	Rack string
}

// Assignor computes a group's assignment on the group leader.
type Assignor interface {
	// Name returns the protocol name sent in JoinGroup: "range",
	// "roundrobin", "sticky" or "cooperative-sticky" for the built-in
	// assignors.
	Name() string
	// Cooperative reports whether the assignor supports the COOPERATIVE
	// rebalance protocol (KIP-429). A group rebalances cooperatively only
	// when the chosen assignor supports it.
	Cooperative() bool
	// Assign returns the plan, member id to assigned partitions, for the
	// given members and topic partition counts. Every member (after
	// dropping repeated member ids, first occurrence wins) has an entry,
	// possibly empty. Every partition of every topic some member subscribes
	// and that has a positive count in topics is assigned at most once, and
	// only to a member that subscribes its topic; all assignors but
	// cooperative-sticky assign every such partition exactly once
	// (cooperative-sticky withholds partitions that still need to be
	// revoked; see CooperativeAdjust). Assign does not modify its inputs
	// and is deterministic.
	Assign(members []Member, topics map[string]int32) map[string]TopicPartitions
	// AssignRacks is Assign knowing the racks of the partitions'
	// replicas (nil: unknown, which is Assign). The rack-aware
	// assignors (range, sticky, cooperative-sticky; KIP-881) then prefer
	// to give a partition to a member whose Rack holds one of its
	// replicas, within the same balance guarantees as Assign; they do so
	// only when some member has a rack that holds replicas and the
	// partitions' racks are not all the same (otherwise the plan is
	// Assign's). A member without a rack matches every partition.
	AssignRacks(members []Member, topics map[string]int32, racks PartitionRacks) map[string]TopicPartitions
}

// Range returns the "range" assignor: for each topic, the members
// subscribing it are sorted (static members first by instance id, then by
// member id) and the partitions are split into contiguous ranges, the first
// partitions%members members getting one extra partition. It is not
// cooperative, matching the Java client.
func Range() Assignor { return rangeAssignor{} }

// RoundRobin returns the "roundrobin" assignor: every partition of every
// subscribed topic, sorted by topic and partition, goes to the next member in
// sorted order (circularly, continuing across topics) that subscribes the
// topic. It is not cooperative, matching the Java client.
func RoundRobin() Assignor { return roundRobinAssignor{} }

// Sticky returns the eager "sticky" assignor (KIP-54, KIP-341): a balanced
// assignment that moves as few previously owned partitions as possible. The
// plan is the final target; the eager protocol has every member give up all
// partitions before joining, so no cooperative adjustment is needed.
func Sticky() Assignor { return stickyAssignor{} }

// CooperativeSticky returns the "cooperative-sticky" assignor (KIP-429): the
// sticky plan with CooperativeAdjust applied, so that a partition moving
// between members is withheld from its new owner until the current owner
// has revoked it and the group has rebalanced again.
func CooperativeSticky() Assignor { return stickyAssignor{cooperative: true} }

// ByName returns the built-in assignor with the given protocol name.
func ByName(name string) (Assignor, bool) {
	switch name {
	case RangeName:
		return Range(), true
	case RoundRobinName:
		return RoundRobin(), true
	case StickyName:
		return Sticky(), true
	case CooperativeStickyName:
		return CooperativeSticky(), true
	}
	return nil, false
}

// javaCompare compares strings as Java's String.compareTo does: by UTF-16
// code units. That is byte order for valid UTF-8 except that a supplementary
// character (U+10000 and up, a surrogate pair in UTF-16) sorts before the
// BMP characters U+E000..U+FFFF. Strings Java would decode equally (both
// invalid UTF-8) fall back to byte order so the result stays a total order.
func javaCompare(a, b string) int {
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		if a[i] < utf8.RuneSelf && b[j] < utf8.RuneSelf {
			if a[i] != b[j] {
				if a[i] < b[j] {
					return -1
				}
				return 1
			}
			i++
			j++
			continue
		}
		ra, na := utf8.DecodeRuneInString(a[i:])
		rb, nb := utf8.DecodeRuneInString(b[j:])
		if ra != rb {
			return compareUTF16(ra, rb)
		}
		i += na
		j += nb
	}
	switch {
	case len(a)-i < len(b)-j:
		return -1
	case len(a)-i > len(b)-j:
		return 1
	}
	if a < b {
		return -1
	} else if a > b {
		return 1
	}
	return 0
}

// compareUTF16 orders two distinct runes by their UTF-16 encodings.
func compareUTF16(ra, rb rune) int {
	ka, kb := utf16Key(ra), utf16Key(rb)
	if ka < kb {
		return -1
	} else if ka > kb {
		return 1
	}
	if ra < rb { // both supplementary with the same high surrogate
		return -1
	}
	return 1
}

// utf16Key is the first UTF-16 code unit of r.
func utf16Key(r rune) rune {
	if r >= 0x10000 {
		return 0xD800 + (r-0x10000)>>10
	}
	return r
}

// memberLess orders members as Java's AbstractPartitionAssignor.MemberInfo:
// static members (with an instance id) first, by instance id, then dynamic
// members by member id. Equal instance ids fall back to member id.
func memberLess(a, b *Member) bool {
	as, bs := a.InstanceID != "", b.InstanceID != ""
	switch {
	case as && bs:
		if c := javaCompare(a.InstanceID, b.InstanceID); c != 0 {
			return c < 0
		}
	case as:
		return true
	case bs:
		return false
	}
	return javaCompare(a.ID, b.ID) < 0
}

// sortedMembers returns pointers to members with repeated member ids dropped
// (first occurrence wins), in Java's member order.
func sortedMembers(members []Member) []*Member {
	seen := make(map[string]struct{}, len(members))
	out := make([]*Member, 0, len(members))
	for i := range members {
		if _, dup := seen[members[i].ID]; dup {
			continue
		}
		seen[members[i].ID] = struct{}{}
		out = append(out, &members[i])
	}
	sort.SliceStable(out, func(i, j int) bool { return memberLess(out[i], out[j]) })
	return out
}

// emptyPlan returns a plan with an empty entry for every member, sized for
// hint[i] topics for member i (hint may be nil).
func emptyPlan(ms []*Member, hint []int) map[string]TopicPartitions {
	plan := make(map[string]TopicPartitions, len(ms))
	for i, m := range ms {
		n := 0
		if hint != nil {
			n = hint[i]
		}
		plan[m.ID] = make(TopicPartitions, n)
	}
	return plan
}

// topicsPerMember counts, per member, the topics it subscribes in subs.
func topicsPerMember(n int, subs map[string][]int) []int {
	hint := make([]int, n)
	for _, consumers := range subs {
		for _, mi := range consumers {
			hint[mi]++
		}
	}
	return hint
}

// uniqueSorted returns the distinct strings of in, sorted, in a new slice.
func uniqueSorted(in []string) []string {
	out := slices.Clone(in)
	slices.Sort(out)
	return slices.Compact(out)
}

// subscribers returns, for every topic with a positive partition count, the
// members subscribing it in member order, and the sorted names of those
// topics.
func subscribers(ms []*Member, topics map[string]int32) (map[string][]int, []string) {
	subs := make(map[string][]int)
	for i, m := range ms {
		for _, t := range uniqueSorted(m.Topics) {
			if topics[t] > 0 {
				subs[t] = append(subs[t], i)
			}
		}
	}
	names := make([]string, 0, len(subs))
	for t := range subs {
		names = append(names, t)
	}
	slices.Sort(names)
	return subs, names
}

// span returns the partitions start, start+1, ..., start+n-1.
func span(start, n int32) []int32 {
	out := make([]int32, n)
	for i := range out {
		out[i] = start + int32(i)
	}
	return out
}

type rangeAssignor struct{}

func (rangeAssignor) Name() string      { return RangeName }
func (rangeAssignor) Cooperative() bool { return false }

func (a rangeAssignor) Assign(members []Member, topics map[string]int32) map[string]TopicPartitions {
	return a.AssignRacks(members, topics, nil)
}

// AssignRacks: see Assignor. With racks it is Java's rack-aware
// RangeAssignor (Kafka 3.5+): see rangeWithRacks.
func (rangeAssignor) AssignRacks(members []Member, topics map[string]int32, racks PartitionRacks) map[string]TopicPartitions {
	ms := sortedMembers(members)
	subs, names := subscribers(ms, topics)
	plan := emptyPlan(ms, topicsPerMember(len(ms), subs))
	if racks != nil && rangeWithRacks(ms, topics, subs, names, racks, plan) {
		return plan
	}
	for _, t := range names {
		consumers := subs[t]
		n, c := topics[t], int32(len(consumers))
		per, extra := n/c, n%c
		for i, mi := range consumers {
			i := int32(i)
			start := per*i + min(i, extra)
			length := per
			if i < extra {
				length++
			}
			if length > 0 {
				plan[ms[mi].ID][t] = span(start, length)
			}
		}
	}
	return plan
}

type roundRobinAssignor struct{}

func (roundRobinAssignor) Name() string      { return RoundRobinName }
func (roundRobinAssignor) Cooperative() bool { return false }

// AssignRacks: see Assignor. Roundrobin is not rack-aware (nor is the
// Java client's): it is Assign.
func (a roundRobinAssignor) AssignRacks(members []Member, topics map[string]int32, _ PartitionRacks) map[string]TopicPartitions {
	return a.Assign(members, topics)
}

func (roundRobinAssignor) Assign(members []Member, topics map[string]int32) map[string]TopicPartitions {
	ms := sortedMembers(members)
	subs, names := subscribers(ms, topics)
	plan := emptyPlan(ms, topicsPerMember(len(ms), subs))
	next := 0 // the circular iterator's position, kept across topics
	lists := make([][]int32, len(ms))
	for _, t := range names {
		consumers := subs[t] // member indexes, ascending
		for p := range topics[t] {
			// The next subscriber at or after next, wrapping around.
			k, _ := slices.BinarySearch(consumers, next)
			if k == len(consumers) {
				k = 0
			}
			mi := consumers[k]
			lists[mi] = append(lists[mi], p)
			next = (mi + 1) % len(ms)
		}
		for _, mi := range consumers {
			if len(lists[mi]) > 0 {
				plan[ms[mi].ID][t] = lists[mi]
				lists[mi] = nil
			}
		}
	}
	return plan
}
