package riffle

import (
	"context"
	"fmt"
	"sort"

	"github.com/riffle-go/riffle/internal/cluster"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ListShareGroups lists the share groups (KIP-932) of the cluster, sorted
// by name, asking every broker (ListGroups filtered by the "share" type).
// As with ListGroups, an error naming the brokers that failed comes with
// the groups of the others.
func (a *Admin) ListShareGroups(ctx context.Context) ([]GroupListing, error) {
	return a.listGroups(ctx, "share", "listing share groups")
}

// ShareMemberDescription is one member of a share group.
type ShareMemberDescription struct {
	MemberID    string
	MemberEpoch int32
	ClientID    string
	ClientHost  string
	Rack        string
	Subscribed  []string
	// Assigned are the partitions the member fetches from (shared with
	// other members), sorted.
	Assigned []TopicPartition
}

// ShareGroupDescription describes a share group.
type ShareGroupDescription struct {
	Group      string
	State      string // e.g. Stable, Empty
	GroupEpoch int32
	Assignor   string
	Members    []ShareMemberDescription
	// Err is the group's error (e.g. ErrGroupIDNotFound); the other
	// fields are then empty.
	Err error
}

// DescribeShareGroups describes share groups (ShareGroupDescribe at each
// group's coordinator), in the order asked.
func (a *Admin) DescribeShareGroups(ctx context.Context, groups ...string) ([]ShareGroupDescription, error) {
	groups = uniqueStrings(groups)
	replies, _, failed, err := coordinated(ctx, a, groups,
		func(ctx context.Context, node int32, gs []string) (map[string]kmsg.ShareGroupDescribeResponseGroup, error) {
			req := kmsg.NewPtrShareGroupDescribeRequest()
			req.GroupIDs = gs
			resp, err := a.c.cl.Request(ctx, node, cluster.ClassOther, req)
			if err != nil {
				return nil, err
			}
			out := map[string]kmsg.ShareGroupDescribeResponseGroup{}
			for _, g := range resp.(*kmsg.ShareGroupDescribeResponse).Groups {
				out[g.GroupID] = g
			}
			return out, nil
		},
		func(g kmsg.ShareGroupDescribeResponseGroup) int16 { return g.ErrorCode })
	if err != nil {
		return nil, err
	}
	out := make([]ShareGroupDescription, 0, len(groups))
	for _, g := range groups {
		if ferr, ok := failed[g]; ok {
			out = append(out, ShareGroupDescription{Group: g, Err: ferr})
			continue
		}
		r := replies[g]
		d := ShareGroupDescription{Group: g, Err: withMessage(r.ErrorCode, r.ErrorMessage)}
		if d.Err == nil {
			d.State, d.GroupEpoch, d.Assignor = r.GroupState, r.GroupEpoch, r.Assignor
			for _, m := range r.Members {
				md := ShareMemberDescription{MemberID: m.MemberID, MemberEpoch: m.MemberEpoch, ClientID: m.ClientID, ClientHost: m.ClientHost, Subscribed: m.SubscribedTopicNames}
				if m.RackID != nil {
					md.Rack = *m.RackID
				}
				for _, t := range m.Assignment.TopicPartitions {
					for _, p := range t.Partitions {
						md.Assigned = append(md.Assigned, TopicPartition{t.Topic, p})
					}
				}
				sort.Slice(md.Assigned, func(i, j int) bool { return tpLess(md.Assigned[i], md.Assigned[j]) })
				d.Members = append(d.Members, md)
			}
			sort.Slice(d.Members, func(i, j int) bool { return d.Members[i].MemberID < d.Members[j].MemberID })
		}
		out = append(out, d)
	}
	return out, nil
}

// ShareGroupOffset is a share group's position in one partition: its
// start offset (SPSO: every record before it is acknowledged or archived;
// records at or after it may be acquired, acknowledged or available) and
// the lag the broker computes (-1 if it does not, before
// DescribeShareGroupOffsets v1).
type ShareGroupOffset struct {
	TopicPartition
	StartOffset int64
	LeaderEpoch int32
	Lag         int64
	Err         error
}

// String formats the offset with its field names, e.g.
// "t[0]{StartOffset:10 LeaderEpoch:0 Lag:5 Err:<nil>}". (Without it, the String of the embedded TopicPartition would be promoted
// and %v would print only the partition.)
func (o ShareGroupOffset) String() string {
	return fmt.Sprintf("%v{StartOffset:%v LeaderEpoch:%v Lag:%v Err:%v}", o.TopicPartition, o.StartOffset, o.LeaderEpoch, o.Lag, o.Err)
}

// DescribeShareGroupOffsets returns the share group's start offsets for
// the partitions of topics (every topic the group has state for, when
// none are named), sorted.
func (a *Admin) DescribeShareGroupOffsets(ctx context.Context, group string, topics ...string) ([]ShareGroupOffset, error) {
	var named []kmsg.DescribeShareGroupOffsetsRequestGroupTopic
	if len(topics) > 0 {
		details, err := a.ListTopics(ctx, topics...)
		if err != nil {
			return nil, err
		}
		for _, d := range details {
			if d.Err != nil {
				return nil, fmt.Errorf("topic %q: %w", d.Name, d.Err)
			}
			t := kmsg.NewDescribeShareGroupOffsetsRequestGroupTopic()
			t.Topic = d.Name
			for _, p := range d.Partitions {
				t.Partitions = append(t.Partitions, p.Partition)
			}
			named = append(named, t)
		}
	}
	replies, _, failed, err := coordinated(ctx, a, []string{group},
		func(ctx context.Context, node int32, gs []string) (map[string]kmsg.DescribeShareGroupOffsetsResponseGroup, error) {
			req := kmsg.NewPtrDescribeShareGroupOffsetsRequest()
			rg := kmsg.NewDescribeShareGroupOffsetsRequestGroup()
			rg.GroupID, rg.Topics = gs[0], named
			req.Groups = append(req.Groups, rg)
			resp, err := a.c.cl.Request(ctx, node, cluster.ClassOther, req)
			if err != nil {
				return nil, err
			}
			out := map[string]kmsg.DescribeShareGroupOffsetsResponseGroup{}
			for _, g := range resp.(*kmsg.DescribeShareGroupOffsetsResponse).Groups {
				out[g.GroupID] = g
			}
			return out, nil
		},
		func(g kmsg.DescribeShareGroupOffsetsResponseGroup) int16 { return g.ErrorCode })
	if err != nil {
		return nil, err
	}
	if ferr := failed[group]; ferr != nil {
		return nil, ferr
	}
	g := replies[group]
	if err := withMessage(g.ErrorCode, g.ErrorMessage); err != nil {
		return nil, err
	}
	var out []ShareGroupOffset
	for _, t := range g.Topics {
		for _, p := range t.Partitions {
			lag := p.Lag
			if g.ErrorCode == 0 && lag == 0 && p.StartOffset < 0 {
				lag = -1
			}
			out = append(out, ShareGroupOffset{
				TopicPartition: TopicPartition{t.Topic, p.Partition},
				StartOffset:    p.StartOffset, LeaderEpoch: p.LeaderEpoch, Lag: lag,
				Err: withMessage(p.ErrorCode, p.ErrorMessage),
			})
		}
	}
	sort.Slice(out, func(i, j int) bool { return tpLess(out[i].TopicPartition, out[j].TopicPartition) })
	return out, nil
}

// AlterShareGroupOffsets sets the share group's start offsets (the group
// must have no members: ErrNonEmptyGroup otherwise, as the broker says).
// It returns each partition's error, nil where the offset was set.
func (a *Admin) AlterShareGroupOffsets(ctx context.Context, group string, offsets map[TopicPartition]int64) (map[TopicPartition]error, error) {
	byTopic := map[string][]kmsg.AlterShareGroupOffsetsRequestTopicPartition{}
	for tp, o := range offsets {
		p := kmsg.NewAlterShareGroupOffsetsRequestTopicPartition()
		p.Partition, p.StartOffset = tp.Partition, o
		byTopic[tp.Topic] = append(byTopic[tp.Topic], p)
	}
	req := kmsg.NewPtrAlterShareGroupOffsetsRequest()
	req.GroupID = group
	for t, ps := range byTopic {
		rt := kmsg.NewAlterShareGroupOffsetsRequestTopic()
		rt.Topic, rt.Partitions = t, ps
		req.Topics = append(req.Topics, rt)
	}
	r, err := shareGroupCall(ctx, a, group, req, func(r *kmsg.AlterShareGroupOffsetsResponse) int16 { return r.ErrorCode })
	if err != nil {
		return nil, err
	}
	if err := withMessage(r.ErrorCode, r.ErrorMessage); err != nil {
		return nil, err
	}
	out := map[TopicPartition]error{}
	for _, t := range r.Topics {
		for _, p := range t.Partitions {
			out[TopicPartition{t.Topic, p.Partition}] = withMessage(p.ErrorCode, p.ErrorMessage)
		}
	}
	return out, nil
}

// DeleteShareGroupOffsets deletes the share group's state for topics (the
// group must have no members); a later member starts them afresh per
// share.auto.offset.reset.
func (a *Admin) DeleteShareGroupOffsets(ctx context.Context, group string, topics ...string) (TopicResults, error) {
	req := kmsg.NewPtrDeleteShareGroupOffsetsRequest()
	req.GroupID = group
	for _, t := range uniqueStrings(topics) {
		rt := kmsg.NewDeleteShareGroupOffsetsRequestTopic()
		rt.Topic = t
		req.Topics = append(req.Topics, rt)
	}
	r, err := shareGroupCall(ctx, a, group, req, func(r *kmsg.DeleteShareGroupOffsetsResponse) int16 { return r.ErrorCode })
	if err != nil {
		return nil, err
	}
	if err := withMessage(r.ErrorCode, r.ErrorMessage); err != nil {
		return nil, err
	}
	var out TopicResults
	for _, t := range r.Topics {
		out = append(out, TopicResult{Topic: t.Topic, Err: withMessage(t.ErrorCode, t.ErrorMessage)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Topic < out[j].Topic })
	return out, nil
}

// shareGroupCall sends one request about group to its coordinator, with
// the coordinator retries of coordinated.
func shareGroupCall[R kmsg.Response](ctx context.Context, a *Admin, group string, req kmsg.Request, code func(R) int16) (R, error) {
	var zero R
	replies, _, failed, err := coordinated(ctx, a, []string{group},
		func(ctx context.Context, node int32, _ []string) (map[string]R, error) {
			resp, err := a.c.cl.Request(ctx, node, cluster.ClassOther, req)
			if err != nil {
				return nil, err
			}
			r, ok := resp.(R)
			if !ok {
				return nil, fmt.Errorf("unexpected response %T", resp)
			}
			return map[string]R{group: r}, nil
		}, code)
	if err != nil {
		return zero, err
	}
	if ferr := failed[group]; ferr != nil {
		return zero, ferr
	}
	return replies[group], nil
}
