package riffle

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"

	"github.com/riffle-go/riffle/internal/assign"
	"github.com/riffle-go/riffle/internal/cluster"
	"github.com/riffle-go/riffle/internal/errs"
	"github.com/riffle-go/riffle/internal/kafkaerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Consumer group administration: list, describe, inspect offsets and lag,
// reset offsets and delete groups. Groups live on their coordinators, so
// every per-group request goes to the coordinator FindCoordinator names,
// and a group whose coordinator moved (NOT_COORDINATOR and friends) is
// retried with a fresh lookup within the client's retry budget.

// Group errors. Kafka error codes match their KafkaError with errors.Is,
// however wrapped.
var (
	// ErrGroupActive is returned by ResetOffsets for a group that has
	// members (any state but Empty or Dead): its members would overwrite
	// the reset offsets with their own commits. Stop them first.
	ErrGroupActive = errors.New("riffle: consumer group is active")
	// ErrNonEmptyGroup (NON_EMPTY_GROUP) is DeleteGroups' answer for a
	// group that still has members.
	ErrNonEmptyGroup = kafkaerr.ForCode(kafkaerr.NonEmptyGroup)
	// ErrGroupIDNotFound (GROUP_ID_NOT_FOUND) is reported for a group the
	// coordinator does not know.
	ErrGroupIDNotFound = kafkaerr.ForCode(kafkaerr.GroupIDNotFound)
	// ErrInvalidGroupID (INVALID_GROUP_ID) is reported for an invalid
	// group id, such as the empty string.
	ErrInvalidGroupID = kafkaerr.ForCode(kafkaerr.InvalidGroupID)
	// ErrGroupAuthorization (GROUP_AUTHORIZATION_FAILED) means the
	// principal may not access the group.
	ErrGroupAuthorization = kafkaerr.ForCode(kafkaerr.GroupAuthorizationFailed)
)

// Group states as brokers report them (classic protocol).
const (
	GroupStateEmpty               = "Empty"
	GroupStateStable              = "Stable"
	GroupStatePreparingRebalance  = "PreparingRebalance"
	GroupStateCompletingRebalance = "CompletingRebalance"
	GroupStateDead                = "Dead"
)

// GroupListing is one group of ListGroups.
type GroupListing struct {
	Group string
	// ProtocolType is "consumer" for consumer groups, "connect" for Kafka
	// Connect workers, and so on; "" for a group that only has committed
	// offsets and never had members.
	ProtocolType string
	// State is e.g. Stable or Empty; "" from brokers older than Kafka 2.6
	// (ListGroups v4), which do not report it.
	State string
}

// ListGroups lists the groups of the cluster, sorted by name. Each broker
// only knows the groups it coordinates, so every broker is asked (in
// parallel, each with its own retries). When some brokers cannot answer,
// the groups of the others are returned together with an error naming the
// brokers that failed: the listing is then incomplete.
func (a *Admin) ListGroups(ctx context.Context) ([]GroupListing, error) {
	return a.listGroups(ctx, "", "listing groups")
}

// listGroups asks every broker for the groups it coordinates, only those
// of groupType when set (ListGroups v5's TypesFilter, e.g. "share"); what
// names the call in an incomplete listing's error.
func (a *Admin) listGroups(ctx context.Context, groupType, what string) ([]GroupListing, error) {
	nodes, err := a.allBrokers(ctx)
	if err != nil {
		return nil, err
	}
	byGroup := map[string]GroupListing{}
	failed := eachBroker(ctx, a, nodes, func(ctx context.Context, node int32) ([]kmsg.ListGroupsResponseGroup, error) {
		req := kmsg.NewPtrListGroupsRequest()
		if groupType != "" {
			req.TypesFilter = []string{groupType}
		}
		resp, err := a.c.cl.Request(ctx, node, cluster.ClassOther, req)
		if err != nil {
			return nil, err
		}
		r := resp.(*kmsg.ListGroupsResponse)
		if groupType != "" && r.Version < 5 {
			return nil, fmt.Errorf("%w: listing %s groups needs ListGroups v5", ErrUnsupported, groupType)
		}
		return r.Groups, kafkaerr.ForCode(r.ErrorCode)
	}, func(_ int32, groups []kmsg.ListGroupsResponseGroup) {
		for _, g := range groups {
			if groupType != "" && g.GroupType != "" && g.GroupType != groupType {
				continue
			}
			byGroup[g.Group] = GroupListing{Group: g.Group, ProtocolType: g.ProtocolType, State: g.GroupState}
		}
	})
	out := make([]GroupListing, 0, len(byGroup))
	for _, g := range byGroup {
		out = append(out, g)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Group < out[j].Group })
	partial, err := incomplete(ctx, what, failed)
	if !partial {
		return nil, err
	}
	return out, err
}

// GroupMemberDescription describes one member of a group.
type GroupMemberDescription struct {
	MemberID string
	// InstanceID is the static member id (KIP-345), "" for dynamic
	// members.
	InstanceID string
	ClientID   string
	ClientHost string
	// Assigned are the partitions the member owns, decoded from its
	// assignment when the group's protocol type is "consumer" and the
	// group is Stable (brokers send no assignment while rebalancing);
	// sorted.
	Assigned []TopicPartition
	// AssignmentErr is set when the member's assignment could not be
	// decoded (it wraps ErrMalformedResponse); Assigned is then nil.
	AssignmentErr error
}

// GroupDescription describes one group.
type GroupDescription struct {
	Group string
	// Type is "classic" (JoinGroup/SyncGroup) or "consumer" (KIP-848,
	// described with ConsumerGroupDescribe); "" when unknown (Err set).
	Type string
	// State is e.g. Stable, Empty, PreparingRebalance.
	State        string
	ProtocolType string
	// Protocol is the partition assignor the group chose (e.g.
	// "cooperative-sticky"; for a KIP-848 group the broker's assignor,
	// e.g. "uniform"); "" unless Stable for a classic group.
	Protocol string
	// Coordinator is the node id of the group's coordinator, -1 when it
	// could not be found.
	Coordinator int32
	// Members are sorted by member id.
	Members []GroupMemberDescription
	// AuthorizedOperations are what the client's principal may do with
	// the group (KIP-430; Java's includeAuthorizedOperations, which
	// DescribeGroups always asks for): e.g. READ and the DESCRIBE it
	// implies. Not Known when the broker did not report them (before
	// DescribeGroups v3, Kafka 2.3) or Err is set.
	AuthorizedOperations ACLOperationSet
	// Err is the group's error, e.g. ErrGroupIDNotFound for a group that
	// does not exist (whatever the broker's version: older ones describe
	// it as Dead without an error), ErrGroupAuthorization, or why its
	// coordinator could not be reached.
	Err error
}

// DescribeGroups describes groups, one result per distinct group, in
// request order. It finds each group's coordinator and asks every
// coordinator about its groups in one request.
func (a *Admin) DescribeGroups(ctx context.Context, groups ...string) ([]GroupDescription, error) {
	groups = uniqueStrings(groups)
	replies, nodes, failed, err := coordinated(ctx, a, groups,
		func(ctx context.Context, node int32, gs []string) (map[string]kmsg.DescribeGroupsResponseGroup, error) {
			req := kmsg.NewPtrDescribeGroupsRequest()
			req.Groups = gs
			req.IncludeAuthorizedOperations = true
			resp, err := a.c.cl.Request(ctx, node, cluster.ClassOther, req)
			if err != nil {
				return nil, err
			}
			out := map[string]kmsg.DescribeGroupsResponseGroup{}
			for _, g := range resp.(*kmsg.DescribeGroupsResponse).Groups {
				out[g.Group] = g
			}
			return out, nil
		},
		func(g kmsg.DescribeGroupsResponseGroup) int16 { return g.ErrorCode })
	if err != nil {
		return nil, err
	}
	// KIP-848 groups: the classic DescribeGroups lists no members for them
	// (or, on brokers that keep the types apart, says not found); ask
	// ConsumerGroupDescribe about those. A broker without it, or a group
	// that is not a consumer group, keeps the classic answer.
	var maybe848 []string
	for _, name := range groups {
		if g, ok := replies[name]; ok && len(g.Members) == 0 &&
			(g.ErrorCode == 0 || g.ErrorCode == kafkaerr.GroupIDNotFound) {
			maybe848 = append(maybe848, name)
		}
	}
	described848 := a.describe848(ctx, maybe848)
	out := make([]GroupDescription, len(groups))
	for i, name := range groups {
		if d, ok := described848[name]; ok {
			if n, ok := nodes[name]; ok {
				d.Coordinator = n
			}
			out[i] = d
			continue
		}
		d := GroupDescription{Group: name, Coordinator: -1}
		if n, ok := nodes[name]; ok {
			d.Coordinator = n
		}
		g, ok := replies[name]
		if !ok {
			d.Err = failed[name]
			out[i] = d
			continue
		}
		d.State, d.ProtocolType = g.State, g.ProtocolType
		d.Protocol = g.Protocol
		d.Err = withMessage(g.ErrorCode, g.ErrorMessage)
		if d.Err == nil && g.State == GroupStateDead && g.ProtocolType == "" && len(g.Members) == 0 {
			// Before DescribeGroups v6 (KIP-1043), an unknown group is
			// described as Dead rather than reported as not found.
			d.Err = ErrGroupIDNotFound
		}
		if d.Err == nil {
			d.Type = "classic"
			d.AuthorizedOperations = aclOperationsOf(g.AuthorizedOperations)
		}
		for _, m := range g.Members {
			md := GroupMemberDescription{MemberID: m.MemberID, ClientID: m.ClientID, ClientHost: m.ClientHost}
			if m.InstanceID != nil {
				md.InstanceID = *m.InstanceID
			}
			if g.ProtocolType == "consumer" && len(m.MemberAssignment) > 0 {
				tps, err := assign.DecodeAssignment(m.MemberAssignment)
				if err != nil {
					md.AssignmentErr = fmt.Errorf("%w: member %s assignment: %v", errs.ErrMalformed, m.MemberID, err)
				} else {
					md.Assigned = flattenTPs(tps)
				}
			}
			d.Members = append(d.Members, md)
		}
		sort.Slice(d.Members, func(i, j int) bool { return d.Members[i].MemberID < d.Members[j].MemberID })
		out[i] = d
	}
	return out, nil
}

// notConsumerGroup says whether a ConsumerGroupDescribe answer for a group
// means it is no KIP-848 group: GROUP_ID_NOT_FOUND, or UNSUPPORTED_VERSION
// from a coordinator that lists the API but runs no consumer groups
// (Kafka 3.7 to 3.9 without group.coordinator.rebalance.protocols
// consumer).
func notConsumerGroup(code int16) bool {
	return code == kafkaerr.GroupIDNotFound || code == kafkaerr.UnsupportedVersion
}

// describe848 describes the groups that are KIP-848 consumer groups, with
// their members' current assignments (topic ids resolved to names). It
// returns nothing for the others, and nothing at all when the brokers do
// not support ConsumerGroupDescribe.
func (a *Admin) describe848(ctx context.Context, groups []string) map[string]GroupDescription {
	if len(groups) == 0 {
		return nil
	}
	replies, _, _, err := coordinated(ctx, a, groups,
		func(ctx context.Context, node int32, gs []string) (map[string]kmsg.ConsumerGroupDescribeResponseGroup, error) {
			req := kmsg.NewPtrConsumerGroupDescribeRequest()
			req.Groups = gs
			req.IncludeAuthorizedOperations = true
			resp, err := a.c.cl.Request(ctx, node, cluster.ClassOther, req)
			if err != nil {
				return nil, err
			}
			out := map[string]kmsg.ConsumerGroupDescribeResponseGroup{}
			for _, g := range resp.(*kmsg.ConsumerGroupDescribeResponse).Groups {
				out[g.Group] = g
			}
			return out, nil
		},
		func(g kmsg.ConsumerGroupDescribeResponseGroup) int16 {
			if notConsumerGroup(g.ErrorCode) {
				return 0 // not a consumer group: final, not retried
			}
			return g.ErrorCode
		})
	if err != nil {
		return nil
	}
	var names map[[16]byte]string
	out := map[string]GroupDescription{}
	for name, g := range replies {
		if notConsumerGroup(g.ErrorCode) {
			continue // not a consumer group: the classic answer stands
		}
		d := GroupDescription{Group: name, Type: "consumer", State: g.State, ProtocolType: "consumer",
			Protocol: g.AssignorName, Coordinator: -1}
		if g.ErrorCode != 0 {
			// A consumer group we may not fully describe (e.g. a topic
			// of its assignment is not authorized): say so rather than
			// fall back to "not found".
			d.Err = withMessage(g.ErrorCode, g.ErrorMessage)
			out[name] = d
			continue
		}
		d.AuthorizedOperations = aclOperationsOf(g.AuthorizedOperations)
		for _, m := range g.Members {
			md := GroupMemberDescription{MemberID: m.MemberID, ClientID: m.ClientID, ClientHost: m.ClientHost}
			if m.InstanceID != nil {
				md.InstanceID = *m.InstanceID
			}
			for _, t := range m.Assignment.TopicPartitions {
				topic := t.Topic
				if topic == "" {
					if names == nil {
						names = a.topicNames(ctx)
					}
					topic = names[t.TopicID]
				}
				if topic == "" {
					md.AssignmentErr = fmt.Errorf("%w: member %s: assigned topic id %x is not in the metadata", errs.ErrMalformed, m.MemberID, t.TopicID)
					md.Assigned = nil
					break
				}
				for _, p := range t.Partitions {
					md.Assigned = append(md.Assigned, TopicPartition{topic, p})
				}
			}
			sortTPs(md.Assigned)
			d.Members = append(d.Members, md)
		}
		sort.Slice(d.Members, func(i, j int) bool { return d.Members[i].MemberID < d.Members[j].MemberID })
		out[name] = d
	}
	return out
}

// topicNames maps every topic's id to its name (empty on failure).
func (a *Admin) topicNames(ctx context.Context) map[[16]byte]string {
	req := kmsg.NewPtrMetadataRequest() // nil Topics: all topics
	resp, err := a.c.cl.RequestAny(ctx, req)
	out := map[[16]byte]string{}
	if err != nil {
		return out
	}
	for _, t := range resp.(*kmsg.MetadataResponse).Topics {
		if t.Topic != nil {
			out[t.TopicID] = *t.Topic
		}
	}
	return out
}

// OffsetAndMetadata is a committed offset: the next offset the group will
// consume, with the leader epoch and metadata stored alongside.
type OffsetAndMetadata struct {
	Offset int64
	// LeaderEpoch is the epoch of the last consumed record, -1 if unknown.
	LeaderEpoch int32
	Metadata    string
}

// FetchOffsets returns every committed offset of group. A group with no
// committed offsets, or unknown to the cluster, yields an empty map (some
// brokers answer GROUP_ID_NOT_FOUND for an unknown group; that is folded
// into the empty result). A partition error fails the call, naming the
// partition.
func (a *Admin) FetchOffsets(ctx context.Context, group string) (map[TopicPartition]OffsetAndMetadata, error) {
	replies, _, failed, err := coordinated(ctx, a, []string{group},
		func(ctx context.Context, node int32, gs []string) (map[string]*kmsg.OffsetFetchResponse, error) {
			req := kmsg.NewPtrOffsetFetchRequest()
			req.Group = gs[0]
			req.Topics = nil // all topics
			resp, err := a.c.cl.Request(ctx, node, cluster.ClassOther, req)
			if err != nil {
				return nil, err
			}
			return map[string]*kmsg.OffsetFetchResponse{gs[0]: resp.(*kmsg.OffsetFetchResponse)}, nil
		},
		func(r *kmsg.OffsetFetchResponse) int16 {
			if r.ErrorCode != 0 {
				return r.ErrorCode
			}
			// Per-partition coordinator errors (before OffsetFetch v2
			// there is no group-level code) ask for a retry too.
			for _, t := range r.Topics {
				for _, p := range t.Partitions {
					if isCoordinatorCode(p.ErrorCode) {
						return p.ErrorCode
					}
				}
			}
			return 0
		})
	if err != nil {
		return nil, err
	}
	r, ok := replies[group]
	if !ok {
		return nil, fmt.Errorf("fetching offsets of group %q: %w", group, failed[group])
	}
	out := map[TopicPartition]OffsetAndMetadata{}
	switch r.ErrorCode {
	case 0:
	case kafkaerr.GroupIDNotFound:
		return out, nil
	default:
		return nil, fmt.Errorf("fetching offsets of group %q: %w", group, kafkaerr.ForCode(r.ErrorCode))
	}
	for _, t := range r.Topics {
		for _, p := range t.Partitions {
			tp := TopicPartition{t.Topic, p.Partition}
			if p.ErrorCode != 0 {
				return nil, fmt.Errorf("fetching offsets of group %q: %s: %w", group, tp, kafkaerr.ForCode(p.ErrorCode))
			}
			if p.Offset < 0 {
				continue // no commit
			}
			om := OffsetAndMetadata{Offset: p.Offset, LeaderEpoch: p.LeaderEpoch}
			if p.Metadata != nil {
				om.Metadata = *p.Metadata
			}
			out[tp] = om
		}
	}
	return out, nil
}

// PartitionLag is how far a group is behind on one partition.
type PartitionLag struct {
	TopicPartition
	// Committed is the group's committed offset, -1 when it has none.
	Committed int64
	// HighWatermark is the partition's high watermark (the offset the
	// next record will get), -1 when it could not be listed (see Err).
	HighWatermark int64
	// Lag is HighWatermark - Committed: the records the group has yet
	// to consume. It is -1 when either side is unknown, and negative when
	// the committed offset lies beyond the end of the log.
	Lag int64
	// Member is the id of the member the partition is assigned to now,
	// "" if none.
	Member string
	// Err is why the high watermark could not be listed, e.g.
	// ErrUnknownTopicOrPartition for a deleted topic that still has
	// committed offsets.
	Err error
}

// String renders the lag for logs and test failures.
func (l PartitionLag) String() string {
	s := fmt.Sprintf("%s committed %d high watermark %d lag %d", l.TopicPartition, l.Committed, l.HighWatermark, l.Lag)
	if l.Member != "" {
		s += " member " + l.Member
	}
	if l.Err != nil {
		s += fmt.Sprintf(" (%v)", l.Err)
	}
	return s
}

// GroupLag returns the lag of group on every partition it has a committed
// offset for or that is assigned to one of its members, sorted by topic
// and partition. A group that does not exist fails with
// ErrGroupIDNotFound. The committed offsets, the assignment and the high
// watermarks are read one after the other, so on a busy group they are a
// close approximation, not a snapshot.
func (a *Admin) GroupLag(ctx context.Context, group string) ([]PartitionLag, error) {
	descs, err := a.DescribeGroups(ctx, group)
	if err != nil {
		return nil, err
	}
	desc := descs[0]
	if desc.Err != nil && !errors.Is(desc.Err, ErrGroupIDNotFound) {
		return nil, fmt.Errorf("describing group %q: %w", group, desc.Err)
	}
	committed, err := a.FetchOffsets(ctx, group)
	if err != nil {
		return nil, err
	}
	if desc.Err != nil && len(committed) == 0 {
		return nil, fmt.Errorf("group %q: %w", group, desc.Err)
	}

	lags := map[TopicPartition]*PartitionLag{}
	get := func(tp TopicPartition) *PartitionLag {
		l, ok := lags[tp]
		if !ok {
			l = &PartitionLag{TopicPartition: tp, Committed: -1, HighWatermark: -1, Lag: -1}
			lags[tp] = l
		}
		return l
	}
	for tp, om := range committed {
		get(tp).Committed = om.Offset
	}
	for _, m := range desc.Members {
		for _, tp := range m.Assigned {
			get(tp).Member = m.MemberID
		}
	}
	topicSet := map[string]bool{}
	for tp := range lags {
		topicSet[tp.Topic] = true
	}
	topics := make([]string, 0, len(topicSet))
	for t := range topicSet {
		topics = append(topics, t)
	}
	sort.Strings(topics)

	if len(topics) > 0 {
		// ListOffsets needs every topic to exist: set the missing ones
		// aside with their error.
		details, err := a.ListTopics(ctx, topics...)
		if err != nil {
			return nil, err
		}
		topicErr := map[string]error{}
		for _, t := range topics {
			topicErr[t] = ErrUnknownTopicOrPartition
		}
		for _, d := range details {
			topicErr[d.Name] = d.Err
		}
		var live []string
		for _, t := range topics {
			if topicErr[t] == nil {
				live = append(live, t)
			}
		}
		hw := map[TopicPartition]ListedOffset{}
		if len(live) > 0 {
			listed, err := a.ListOffsets(ctx, OffsetLatest, live...)
			if err != nil {
				return nil, err
			}
			for _, lo := range listed {
				hw[TopicPartition{lo.Topic, lo.Partition}] = lo
			}
		}
		for tp, l := range lags {
			if e := topicErr[tp.Topic]; e != nil {
				l.Err = e
				continue
			}
			lo, ok := hw[tp]
			switch {
			case !ok:
				l.Err = fmt.Errorf("%w: partition %d not in the topic's metadata", ErrUnknownTopicOrPartition, tp.Partition)
			case lo.Err != nil:
				l.Err = lo.Err
			default:
				l.HighWatermark = lo.Offset
				if l.Committed >= 0 {
					l.Lag = l.HighWatermark - l.Committed
				}
			}
		}
	}
	out := make([]PartitionLag, 0, len(lags))
	for _, l := range lags {
		out = append(out, *l)
	}
	sort.Slice(out, func(i, j int) bool { return tpLess(out[i].TopicPartition, out[j].TopicPartition) })
	return out, nil
}

// PreviewResetOffsets computes the offsets ResetOffsets would commit, without
// committing anything and whatever the group's state: it is the dry run of
// ResetOffsets.
func (a *Admin) PreviewResetOffsets(ctx context.Context, group string, to StartOffset, topics ...string) (map[TopicPartition]int64, error) {
	if to.kind == 0 && to.at < 0 {
		return nil, fmt.Errorf("%w: reset to negative offset %d", ErrInvalidConfig, to.at)
	}
	topics = uniqueStrings(topics)
	if len(topics) == 0 {
		committed, err := a.FetchOffsets(ctx, group)
		if err != nil {
			return nil, err
		}
		set := map[string]bool{}
		for tp := range committed {
			set[tp.Topic] = true
		}
		for t := range set {
			topics = append(topics, t)
		}
		sort.Strings(topics)
		if len(topics) == 0 {
			return map[TopicPartition]int64{}, nil
		}
	}
	details, err := a.ListTopics(ctx, topics...)
	if err != nil {
		return nil, err
	}
	found := map[string]error{}
	for _, d := range details {
		found[d.Name] = d.Err
	}
	for _, t := range topics {
		e, ok := found[t]
		if !ok {
			e = ErrUnknownTopicOrPartition
		}
		if e != nil {
			return nil, fmt.Errorf("topic %q: %w", t, e)
		}
	}

	list := func(ts int64) (map[TopicPartition]int64, error) {
		listed, err := a.ListOffsets(ctx, ts, topics...)
		if err != nil {
			return nil, err
		}
		out := make(map[TopicPartition]int64, len(listed))
		for _, lo := range listed {
			tp := TopicPartition{lo.Topic, lo.Partition}
			if lo.Err != nil {
				return nil, fmt.Errorf("listing offsets of %s: %w", tp, lo.Err)
			}
			out[tp] = lo.Offset
		}
		return out, nil
	}
	switch to.kind {
	case 1:
		return list(OffsetEarliest)
	case 2:
		return list(OffsetLatest)
	case 3:
		at, err := list(to.at)
		if err != nil {
			return nil, err
		}
		var latest map[TopicPartition]int64
		for tp, o := range at {
			if o >= 0 {
				continue
			}
			// No record at or after the time: start after the last
			// one, as Java's --to-datetime does.
			if latest == nil {
				if latest, err = list(OffsetLatest); err != nil {
					return nil, err
				}
			}
			at[tp] = latest[tp]
		}
		return at, nil
	default:
		// An exact offset, clamped to each partition's log as Java's
		// --to-offset does.
		earliest, err := list(OffsetEarliest)
		if err != nil {
			return nil, err
		}
		latest, err := list(OffsetLatest)
		if err != nil {
			return nil, err
		}
		out := make(map[TopicPartition]int64, len(earliest))
		for tp, lo := range earliest {
			out[tp] = min(max(to.at, lo), latest[tp])
		}
		return out, nil
	}
}

// ResetOffsets sets the committed offsets of group on every partition of
// topics (by default, of every topic the group has committed offsets for)
// to the target: AtEarliest, AtLatest, AtTime (the first offset at or
// after the time; the end of the log where no record is that recent) or
// AtOffset (clamped to each partition's earliest and latest offsets; a
// negative offset fails with ErrInvalidConfig). It returns the offsets
// set.
//
// The group must be inactive (Empty, or Dead, which includes a group that
// does not exist yet and is created by the commit); otherwise the call
// fails with ErrGroupActive and nothing is committed. The commit is a
// "simple" one (generation -1, no member id), which the coordinator also
// rejects, as ErrGroupActive, if a member joins in the meantime.
func (a *Admin) ResetOffsets(ctx context.Context, group string, to StartOffset, topics ...string) (map[TopicPartition]int64, error) {
	if err := a.checkInactive(ctx, group); err != nil {
		return nil, err
	}
	offsets, err := a.PreviewResetOffsets(ctx, group, to, topics...)
	if err != nil || len(offsets) == 0 {
		return offsets, err
	}
	if err := a.simpleCommit(ctx, group, offsets); err != nil {
		return nil, err
	}
	return offsets, nil
}

// checkInactive fails with ErrGroupActive unless group is Empty or Dead.
func (a *Admin) checkInactive(ctx context.Context, group string) error {
	descs, err := a.DescribeGroups(ctx, group)
	if err != nil {
		return err
	}
	d := descs[0]
	switch {
	case errors.Is(d.Err, ErrGroupIDNotFound):
		return nil // a new group
	case d.Err != nil:
		return fmt.Errorf("describing group %q: %w", group, d.Err)
	case d.State == GroupStateEmpty || d.State == GroupStateDead:
		return nil
	}
	return fmt.Errorf("%w: group %q is %s with %d member(s); stop them first", ErrGroupActive, group, d.State, len(d.Members))
}

// simpleCommit commits offsets for group outside any generation.
func (a *Admin) simpleCommit(ctx context.Context, group string, offsets map[TopicPartition]int64) error {
	tps := make([]TopicPartition, 0, len(offsets))
	for tp := range offsets {
		tps = append(tps, tp)
	}
	sort.Slice(tps, func(i, j int) bool { return tpLess(tps[i], tps[j]) })
	replies, _, failed, err := coordinated(ctx, a, []string{group},
		func(ctx context.Context, node int32, gs []string) (map[string]*kmsg.OffsetCommitResponse, error) {
			req := kmsg.NewPtrOffsetCommitRequest()
			req.Group = gs[0]
			req.Generation = -1
			req.MemberID = ""
			addCommitOffsets(req, tps, offsets, nil, nil, "")
			resp, err := a.c.cl.Request(ctx, node, cluster.ClassOther, req)
			if err != nil {
				return nil, err
			}
			return map[string]*kmsg.OffsetCommitResponse{gs[0]: resp.(*kmsg.OffsetCommitResponse)}, nil
		},
		func(r *kmsg.OffsetCommitResponse) int16 {
			for _, t := range r.Topics {
				for _, p := range t.Partitions {
					if isCoordinatorCode(p.ErrorCode) {
						return p.ErrorCode
					}
				}
			}
			return 0
		})
	if err != nil {
		return err
	}
	r, ok := replies[group]
	if !ok {
		return fmt.Errorf("committing offsets of group %q: %w", group, failed[group])
	}
	got := map[TopicPartition]bool{}
	var all []error
	for _, t := range r.Topics {
		for _, p := range t.Partitions {
			tp := TopicPartition{t.Topic, p.Partition}
			got[tp] = true
			switch p.ErrorCode {
			case 0:
			case kafkaerr.UnknownMemberID, kafkaerr.IllegalGeneration, kafkaerr.RebalanceInProgress:
				// Someone joined since the state check.
				return fmt.Errorf("%w: group %q got members while resetting: %w", ErrGroupActive, group, kafkaerr.ForCode(p.ErrorCode))
			default:
				all = append(all, fmt.Errorf("%s: %w", tp, kafkaerr.ForCode(p.ErrorCode)))
			}
		}
	}
	for _, tp := range tps {
		if !got[tp] {
			all = append(all, fmt.Errorf("%s: %w: no result in the commit response", tp, errs.ErrMalformed))
		}
	}
	if err := errors.Join(all...); err != nil {
		return fmt.Errorf("committing offsets of group %q: %w", group, err)
	}
	return nil
}

// GroupResult is the outcome of an admin operation for one group. Err is
// nil on success or a *KafkaError (match with errors.Is, e.g.
// ErrNonEmptyGroup, ErrGroupIDNotFound), or why the group's coordinator
// could not be reached.
type GroupResult struct {
	Group string
	Err   error
}

// GroupResults is one result per group, in request order.
type GroupResults []GroupResult

// Err joins the per-group errors (nil if every group succeeded).
func (rs GroupResults) Err() error {
	var all []error
	for _, r := range rs {
		if r.Err != nil {
			all = append(all, fmt.Errorf("group %q: %w", r.Group, r.Err))
		}
	}
	return errors.Join(all...)
}

// DeleteGroups deletes groups with their committed offsets, one result
// per distinct group, in request order. Only groups without members can
// be deleted: others report ErrNonEmptyGroup; unknown ones
// ErrGroupIDNotFound.
func (a *Admin) DeleteGroups(ctx context.Context, groups ...string) (GroupResults, error) {
	groups = uniqueStrings(groups)
	replies, _, failed, err := coordinated(ctx, a, groups,
		func(ctx context.Context, node int32, gs []string) (map[string]int16, error) {
			req := kmsg.NewPtrDeleteGroupsRequest()
			req.Groups = gs
			resp, err := a.c.cl.Request(ctx, node, cluster.ClassOther, req)
			if err != nil {
				return nil, err
			}
			out := map[string]int16{}
			for _, g := range resp.(*kmsg.DeleteGroupsResponse).Groups {
				out[g.Group] = g.ErrorCode
			}
			return out, nil
		},
		func(code int16) int16 { return code })
	if err != nil {
		return nil, err
	}
	out := make(GroupResults, len(groups))
	for i, g := range groups {
		code, ok := replies[g]
		if !ok {
			out[i] = GroupResult{Group: g, Err: failed[g]}
			continue
		}
		out[i] = GroupResult{Group: g, Err: kafkaerr.ForCode(code)}
	}
	return out, nil
}

// coordinatorKind is what a coordinator coordinates: FindCoordinator's
// key type, and the noun for the keys in errors.
type coordinatorKind struct {
	keyType int8
	noun    string
}

var (
	groupCoordinator = coordinatorKind{0, "group"}
	txnCoordinator   = coordinatorKind{1, "transactional id"}
)

// findCoordinator asks any broker for the coordinator of key.
func (a *Admin) findCoordinator(ctx context.Context, kind coordinatorKind, key string) (int32, error) {
	req := kmsg.NewPtrFindCoordinatorRequest()
	req.CoordinatorKey = key
	req.CoordinatorKeys = []string{key}
	req.CoordinatorType = kind.keyType
	resp, err := a.c.cl.RequestAny(ctx, req)
	if err != nil {
		return -1, err
	}
	r := resp.(*kmsg.FindCoordinatorResponse)
	code, msg, node := r.ErrorCode, r.ErrorMessage, r.NodeID
	if len(r.Coordinators) > 0 {
		c := r.Coordinators[0]
		code, msg, node = c.ErrorCode, c.ErrorMessage, c.NodeID
	}
	if err := withMessage(code, msg); err != nil {
		return -1, err
	}
	return node, nil
}

// isCoordinatorCode reports codes that mean "ask the coordinator again,
// maybe elsewhere".
func isCoordinatorCode(code int16) bool {
	switch code {
	case kafkaerr.NotCoordinator, kafkaerr.CoordinatorNotAvailable, kafkaerr.CoordinatorLoadInProgress:
		return true
	}
	return false
}

// coordinated sends per-group requests to the groups' coordinators (see
// coordinatedBy).
func coordinated[T any](ctx context.Context, a *Admin, groups []string,
	send func(ctx context.Context, node int32, groups []string) (map[string]T, error),
	code func(T) int16,
) (replies map[string]T, nodes map[string]int32, failed map[string]error, err error) {
	return coordinatedBy(ctx, a, groupCoordinator, groups, send, code)
}

// coordinatedBy sends per-key requests (groups, transactional ids) to the
// keys' coordinators: it finds each key's coordinator of kind, calls send
// once per coordinator with its keys (coordinators in parallel), and
// retries, with fresh lookups, the keys whose reply code (per code) says
// the coordinator moved or is loading, within the client's retry budget.
//
// It returns the final reply of every key that got one (whatever its
// code), the coordinator each key was last sent to, and for the other
// keys why they got none. The error is for the whole call: the caller's
// context ended or the client closed.
func coordinatedBy[T any](ctx context.Context, a *Admin, kind coordinatorKind, groups []string,
	send func(ctx context.Context, node int32, groups []string) (map[string]T, error),
	code func(T) int16,
) (replies map[string]T, nodes map[string]int32, failed map[string]error, err error) {
	cl := a.c.cl
	replies, nodes, failed = map[string]T{}, map[string]int32{}, map[string]error{}
	pending := groups
	err = cl.Retry(ctx, func(ctx context.Context) error {
		var (
			mu      sync.Mutex
			retry   []string
			lastErr error
		)
		byNode := map[int32][]string{}
		for _, g := range pending {
			node, err := a.findCoordinator(ctx, kind, g)
			if err != nil {
				if errs.IsRetriable(err) {
					retry = append(retry, g)
					lastErr = fmt.Errorf("finding the coordinator of %s %q: %w", kind.noun, g, err)
				} else {
					failed[g] = fmt.Errorf("finding the coordinator: %w", err)
				}
				continue
			}
			nodes[g] = node
			byNode[node] = append(byNode[node], g)
		}
		var wg sync.WaitGroup
		for node, gs := range byNode {
			wg.Add(1)
			go func() {
				defer wg.Done()
				got, err := send(ctx, node, gs)
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					if errs.IsRetriable(err) {
						retry = append(retry, gs...)
						lastErr = fmt.Errorf("coordinator %d: %w", node, err)
					} else {
						for _, g := range gs {
							failed[g] = fmt.Errorf("coordinator %d: %w", node, err)
						}
					}
					return
				}
				for _, g := range gs {
					r, ok := got[g]
					switch {
					case !ok:
						failed[g] = fmt.Errorf("coordinator %d: %w: no result for %s in the response", node, errs.ErrMalformed, kind.noun)
					case isCoordinatorCode(code(r)):
						retry = append(retry, g)
						lastErr = fmt.Errorf("coordinator %d: %s %q: %w", node, kind.noun, g, kafkaerr.ForCode(code(r)))
					default:
						replies[g] = r
						delete(failed, g)
					}
				}
			}()
		}
		wg.Wait()
		pending = retry
		if len(retry) > 0 {
			return lastErr // retriable: every cause above is
		}
		return nil
	})
	if err != nil {
		if ctx.Err() != nil || errors.Is(err, errs.ErrClientClosed) {
			return nil, nil, nil, err
		}
		for _, g := range pending {
			failed[g] = err
		}
	}
	return replies, nodes, failed, nil
}

// flattenTPs turns an assignment into a sorted list.
func flattenTPs(tps assign.TopicPartitions) []TopicPartition {
	var out []TopicPartition
	for t, ps := range tps {
		for _, p := range ps {
			out = append(out, TopicPartition{t, p})
		}
	}
	sort.Slice(out, func(i, j int) bool { return tpLess(out[i], out[j]) })
	return out
}

func tpLess(a, b TopicPartition) bool {
	if a.Topic != b.Topic {
		return a.Topic < b.Topic
	}
	return a.Partition < b.Partition
}

// uniqueStrings drops repeated strings, keeping the first occurrence.
func uniqueStrings(in []string) []string {
	seen := make(map[string]bool, len(in))
	out := make([]string, 0, len(in))
	for _, s := range in {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}
