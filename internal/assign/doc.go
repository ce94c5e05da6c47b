// Package assign implements the consumer-group partition assignors of the
// classic ("consumer") group protocol, wire compatible with the Java client,
// librdkafka and franz-go, so a Riffle member can share a group with any of
// them and any of them can be the leader.
//
// # Assignors
//
// Four assignors are provided under the protocol names the Java client uses
// (range, sticky and cooperative-sticky are rack-aware, see Racks):
//
//   - [Range] ("range"): per topic, the subscribed members are sorted and
//     the partitions are split into contiguous ranges; the first
//     partitions%members members get one extra partition.
//   - [RoundRobin] ("roundrobin"): all partitions of all subscribed topics,
//     sorted by topic then partition, are dealt to the sorted members in
//     turn, skipping members that do not subscribe the partition's topic.
//   - [Sticky] ("sticky", KIP-54/KIP-341, eager): a balanced assignment that
//     keeps as many partitions as possible with their previous owner.
//   - [CooperativeSticky] ("cooperative-sticky", KIP-429): the same plan,
//     adjusted with [CooperativeAdjust] so that no partition is handed to a
//     new member while another member still owns it.
//
// Members are sorted as the Java client sorts them (AbstractPartitionAssignor
// MemberInfo): members with a group.instance.id first, ordered by instance id,
// then the others, ordered by member id; strings compare as Java's
// String.compareTo does (UTF-16 code units). Every assignor is a pure,
// deterministic function of its input: the same members and partition counts
// always give the same plan, whatever the order of the input slices and
// maps.
//
// # Sticky balancing
//
// The sticky assignors first decide who owns what: every member reports the
// partitions it owned ([Member.Owned]) and the generation of that ownership
// ([Member.Generation]). A partition claimed by several members goes to the
// claim with the highest generation; if the highest generation is claimed by
// more than one member the partition is treated as unowned (the Java client
// does the same for same-generation conflicts). Claims on topics that no
// longer exist, on partitions beyond the topic's partition count or on topics
// the claimant no longer subscribes are released. Unlike Java's fast path for identical
// subscriptions, which drops every claim of a member whose generation is
// below the group's highest, a claim nobody contests is kept whatever its
// generation: the claimant may still be consuming the partition, so keeping
// it there is both stickier and, for cooperative groups, safer.
//
// When every member subscribes the same topics the result is optimal: each
// member gets floor(P/M) or ceil(P/M) partitions, the ceil slots go to the
// members that own the most, and exactly the minimum number of previously
// owned partitions moves. Otherwise the assignor places unowned partitions
// on the least loaded eligible member and then moves partitions along
// shortest augmenting paths (member A gives a partition to B, which gives
// one of another topic to C, ...) until no member can shed a partition to a
// member with at least two fewer; that reaches the most even balance the
// subscriptions allow, while movement is kept low (partitions placed in
// this rebalance move before previously owned ones, and of the shortest
// paths one moving the fewest previously owned partitions is taken) but
// is not guaranteed minimal. Preferring those paths also lets a
// cooperative group settle: a plan fed back as the owned partitions is not
// reshuffled along another path as short (FuzzAssignRacks checks that
// cooperative-sticky reaches a fixpoint).
//
// Cost: identical subscriptions take O(P + M log M) after reading the input;
// otherwise O(S + P log M) plus one breadth-first search over the members and
// their held topics per partition moved, where S is the total number of
// subscription entries. Range and roundrobin are O(S + P log M).
//
// # Racks
//
// With the racks of the partitions' replicas ([Assignor.AssignRacks],
// KIP-881; the group leader reads them from metadata) and members' racks
// ([Member.Rack], the member's client.rack), range, sticky and
// cooperative-sticky prefer to give a partition to a member whose rack
// holds one of its replicas, so that the member can fetch from a replica
// in its rack. As in the Java client, they do so only when some member
// has a rack holding replicas and the partitions do not all have replicas
// in the same racks; otherwise the plan is exactly Assign's. A member
// without a rack matches every partition.
//
//   - Range is Java's rack-aware RangeAssignor (Kafka 3.5+): topics with
//     the same subscribers and partition count are matched partition by
//     partition (co-partitioned), other topics get rack-matching ranges
//     first, and the rest is assigned as ranges; every member still gets
//     its floor or ceiling share of every topic.
//   - The sticky assignors set aside a member's claims on partitions with
//     no replica in its rack, keep its other claims as without racks, and
//     fill the members' shares with partitions in their racks first
//     (round robin over the members); a set-aside partition no member in
//     its racks has room for goes back to its owner. With different
//     subscriptions, new partitions go to the least loaded member in their
//     racks and balancing moves partitions into the receiver's rack
//     first, and set-aside partitions back to their owner next. Balance
//     is that of Assign (floor or ceiling with identical subscriptions; no
//     member can pass load to one with two fewer otherwise); claims in the member's rack are kept up to its share;
//     racks take precedence over claims outside the member's rack, which
//     may move (cooperative-sticky withholds them until revoked). The plan
//     is not the Java client's partition for partition (neither is the
//     sticky plan without racks), but obeys the same rules.
//   - Roundrobin is not rack-aware (nor is Java's).
//
// # Cooperative rebalancing
//
// With the COOPERATIVE protocol (KIP-429) members keep consuming during a
// rebalance. The leader's plan therefore must not give a partition to a
// member while another member still owns it: the owner is first told to
// revoke it (its assignment omits it; [Diff] tells a member what to revoke
// and what it gained), rejoins, and the partition is handed over in the next
// rebalance. [CooperativeAdjust] applies that rule to any plan and is already
// applied by [CooperativeSticky]'s Assign; applying it twice is harmless.
//
// # Encodings
//
// [EncodeSubscription] and [DecodeSubscription] handle the JoinGroup
// protocol metadata (ConsumerProtocolSubscription v0-v3, Java's
// ConsumerMemberMetadata), including the assignor-specific user data the
// Java client sends: for "sticky" the previous assignment and generation
// (StickyAssignor user data v1), for "cooperative-sticky" the generation as
// a single int32. [EncodeAssignment] and [DecodeAssignment] handle the
// SyncGroup member assignment (ConsumerProtocolAssignment). Decoders accept
// every version (newer versions are read as the newest known one, as the
// Java client does), never panic and never allocate more than a small
// multiple of their input, whatever length prefixes the input claims.
package assign
