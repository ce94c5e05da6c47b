package riffle

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/riffle-go/riffle/internal/cluster"
	"github.com/riffle-go/riffle/internal/errs"
	"github.com/riffle-go/riffle/internal/kafkaerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Partition administration: delete records below an offset (on each
// partition's leader), move replicas (KIP-455) and elect leaders (KIP-460)
// through the controller, describe the log directories of brokers, and
// delete a group's committed offsets (on its coordinator).

// Partition errors of these calls. Kafka error codes match their
// KafkaError with errors.Is, however wrapped.
var (
	// ErrElectionNotNeeded (ELECTION_NOT_NEEDED) is ElectLeaders' answer
	// for a partition whose preferred replica leads already.
	ErrElectionNotNeeded = kafkaerr.ForCode(kafkaerr.ElectionNotNeeded)
	// ErrNoReassignmentInProgress (NO_REASSIGNMENT_IN_PROGRESS) answers
	// the cancellation of a reassignment that is not running.
	ErrNoReassignmentInProgress = kafkaerr.ForCode(kafkaerr.NoReassignmentInProgress)
	// ErrGroupSubscribedToTopic (GROUP_SUBSCRIBED_TO_TOPIC) is
	// DeleteGroupOffsets' answer for a partition of a topic the group's
	// members consume.
	ErrGroupSubscribedToTopic = kafkaerr.ForCode(kafkaerr.GroupSubscribedToTopic)
)

// PartitionResult is the outcome of an admin operation for one partition.
// Err is nil on success or a *KafkaError (match with errors.Is), or why
// the broker could not be reached.
type PartitionResult struct {
	TopicPartition
	Err error
}

// String formats the result with its field names, e.g. "t[0]{Err:<nil>}".
// (Without it, the String of the embedded TopicPartition would be promoted
// and %v would print only the partition.)
func (r PartitionResult) String() string {
	return fmt.Sprintf("%v{Err:%v}", r.TopicPartition, r.Err)
}

// PartitionResults is one result per partition.
type PartitionResults []PartitionResult

// Err joins the per-partition errors (nil if every partition succeeded).
func (rs PartitionResults) Err() error {
	var all []error
	for _, r := range rs {
		if r.Err != nil {
			all = append(all, fmt.Errorf("%s: %w", r.TopicPartition, r.Err))
		}
	}
	return errors.Join(all...)
}

// ---- DeleteRecords ----

// DeletedRecords is DeleteRecords' answer for one partition.
type DeletedRecords struct {
	TopicPartition
	// LowWatermark is the partition's new log start offset: records
	// below it are gone. -1 when Err is set.
	LowWatermark int64
	// Err is the partition's error: the *KafkaError OFFSET_OUT_OF_RANGE
	// (KafkaErrorForCode(1)) for an offset above the high watermark, ErrUnknownTopicOrPartition, or why its
	// leader could not answer.
	Err error
}

// String formats the result with its field names, e.g.
// "t[0]{LowWatermark:42 Err:<nil>}". (Without it, the String of the embedded TopicPartition would be promoted
// and %v would print only the partition.)
func (d DeletedRecords) String() string {
	return fmt.Sprintf("%v{LowWatermark:%v Err:%v}", d.TopicPartition, d.LowWatermark, d.Err)
}

// DeleteRecords deletes the records of each partition below the given
// offset (OffsetLatest, -1: every record, up to the high watermark), as
// Java's deleteRecords does. Each partition goes to its leader (leaders in
// parallel); a partition whose leader moved is retried after a metadata
// refresh. One result per partition, sorted by topic and partition. A
// negative offset other than OffsetLatest fails its partition with
// ErrInvalidConfig.
func (a *Admin) DeleteRecords(ctx context.Context, before map[TopicPartition]int64) ([]DeletedRecords, error) {
	all := sortedTPs(before)
	bad := map[TopicPartition]error{}
	var valid []TopicPartition
	for _, tp := range all {
		if o := before[tp]; o < 0 && o != OffsetLatest {
			bad[tp] = fmt.Errorf("%w: delete records of %s before offset %d", ErrInvalidConfig, tp, o)
			continue
		}
		valid = append(valid, tp)
	}
	replies, failed, err := leaderRouted(ctx, a, "delete records", valid,
		func(ctx context.Context, leader int32, tps []TopicPartition) (map[TopicPartition]kmsg.DeleteRecordsResponseTopicPartition, error) {
			req := kmsg.NewPtrDeleteRecordsRequest()
			req.TimeoutMillis = int32(a.c.cfg.requestTimeout.Milliseconds())
			idx := map[string]int{}
			for _, tp := range tps {
				rt := topicEntry(&req.Topics, idx, tp.Topic, func(t string) kmsg.DeleteRecordsRequestTopic {
					rt := kmsg.NewDeleteRecordsRequestTopic()
					rt.Topic = t
					return rt
				})
				rp := kmsg.NewDeleteRecordsRequestTopicPartition()
				rp.Partition = tp.Partition
				rp.Offset = before[tp]
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp, err := a.c.cl.Request(ctx, leader, cluster.ClassOther, req)
			if err != nil {
				return nil, err
			}
			out := map[TopicPartition]kmsg.DeleteRecordsResponseTopicPartition{}
			for _, rt := range resp.(*kmsg.DeleteRecordsResponse).Topics {
				for _, rp := range rt.Partitions {
					out[TopicPartition{rt.Topic, rp.Partition}] = rp
				}
			}
			return out, nil
		},
		func(rp kmsg.DeleteRecordsResponseTopicPartition) int16 { return rp.ErrorCode })
	if err != nil {
		return nil, err
	}
	out := make([]DeletedRecords, len(all))
	for i, tp := range all {
		d := DeletedRecords{TopicPartition: tp, LowWatermark: -1}
		rp, ok := replies[tp]
		switch {
		case bad[tp] != nil:
			d.Err = bad[tp]
		case !ok:
			d.Err = failed[tp]
		case rp.ErrorCode != 0:
			d.Err = kafkaerr.ForCode(rp.ErrorCode)
		default:
			d.LowWatermark = rp.LowWatermark
		}
		out[i] = d
	}
	return out, nil
}

// ---- controller requests with a top-level error code ----

// controllerOp sends the request build returns to the controller (see
// controllerRequest) and sends it again, after a metadata refresh, while
// the response's top-level code (per code) is retriable: NOT_CONTROLLER
// when the controller moved. A final top-level error is returned with
// the response.
func (a *Admin) controllerOp(ctx context.Context, build func() kmsg.Request, code func(kmsg.Response) (int16, *string)) (kmsg.Response, error) {
	cl := a.c.cl
	var resp kmsg.Response
	err := cl.Retry(ctx, func(ctx context.Context) error {
		r, err := a.controllerRequestOnce(ctx, build())
		if err != nil {
			return err
		}
		resp = r
		c, msg := code(r)
		if c != 0 && kafkaerr.Typed(c).Retriable {
			cl.TriggerMetadata()
			return withMessage(c, msg)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if c, msg := code(resp); c != 0 {
		return resp, withMessage(c, msg)
	}
	return resp, nil
}

// controllerRequestOnce is one attempt of controllerRequest.
func (a *Admin) controllerRequestOnce(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	cl := a.c.cl
	snap := cl.Snapshot()
	if _, ok := snap.Brokers[snap.Controller]; !ok {
		var err error
		if snap, err = cl.RefreshOnce(ctx); err != nil {
			return nil, err
		}
	}
	var resp kmsg.Response
	var err error
	if _, ok := snap.Brokers[snap.Controller]; ok {
		resp, err = cl.Request(ctx, snap.Controller, cluster.ClassOther, req)
	} else {
		resp, err = cl.RequestAnyOnce(ctx, req)
	}
	if err != nil && errs.IsRetriable(err) {
		cl.TriggerMetadata()
	}
	return resp, err
}

// partitionResults turns per-partition codes of a response into results
// for want (sorted), ErrMalformedResponse for a partition it lacks.
func partitionResults(want []TopicPartition, got map[TopicPartition]error) PartitionResults {
	out := make(PartitionResults, len(want))
	for i, tp := range want {
		e, ok := got[tp]
		if !ok {
			e = fmt.Errorf("%w: no result for %s in the response", errs.ErrMalformed, tp)
		}
		out[i] = PartitionResult{TopicPartition: tp, Err: e}
	}
	return out
}

// ---- partition reassignments ----

// AlterPartitionReassignments moves the replicas of partitions (KIP-455):
// each partition's new replica list, the first the preferred leader; a nil
// list cancels the partition's reassignment in progress
// (ErrNoReassignmentInProgress when there is none). It goes to the
// controller, retried when the controller moved. One result per
// partition, sorted; a top-level error (e.g.
// CLUSTER_AUTHORIZATION_FAILED) is every partition's.
func (a *Admin) AlterPartitionReassignments(ctx context.Context, replicas map[TopicPartition][]int32) (PartitionResults, error) {
	all := sortedTPs(replicas)
	if len(all) == 0 {
		return PartitionResults{}, nil
	}
	resp, err := a.controllerOp(ctx, func() kmsg.Request {
		req := kmsg.NewPtrAlterPartitionAssignmentsRequest()
		req.TimeoutMillis = int32(a.c.cfg.requestTimeout.Milliseconds())
		idx := map[string]int{}
		for _, tp := range all {
			rt := topicEntry(&req.Topics, idx, tp.Topic, func(t string) kmsg.AlterPartitionAssignmentsRequestTopic {
				rt := kmsg.NewAlterPartitionAssignmentsRequestTopic()
				rt.Topic = t
				return rt
			})
			rp := kmsg.NewAlterPartitionAssignmentsRequestTopicPartition()
			rp.Partition = tp.Partition
			if rs := replicas[tp]; rs != nil {
				rp.Replicas = append([]int32{}, rs...)
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		return req
	}, func(r kmsg.Response) (int16, *string) {
		x := r.(*kmsg.AlterPartitionAssignmentsResponse)
		return x.ErrorCode, x.ErrorMessage
	})
	if resp == nil {
		return nil, err
	}
	got := map[TopicPartition]error{}
	for _, rt := range resp.(*kmsg.AlterPartitionAssignmentsResponse).Topics {
		for _, rp := range rt.Partitions {
			got[TopicPartition{rt.Topic, rp.Partition}] = withMessage(rp.ErrorCode, rp.ErrorMessage)
		}
	}
	if err != nil { // top-level: every partition's
		for _, tp := range all {
			got[tp] = err
		}
	}
	return partitionResults(all, got), nil
}

// PartitionReassignment is a reassignment in progress.
type PartitionReassignment struct {
	TopicPartition
	// Replicas is the current replica set (old and new replicas).
	Replicas []int32
	// Adding are the replicas being added, Removing those being removed.
	Adding   []int32
	Removing []int32
}

// String formats the reassignment with its field names, e.g.
// "t[0]{Replicas:[1 2 3] Adding:[3] Removing:[1]}". (Without it, the String of the embedded TopicPartition would be promoted
// and %v would print only the partition.)
func (r PartitionReassignment) String() string {
	return fmt.Sprintf("%v{Replicas:%v Adding:%v Removing:%v}", r.TopicPartition, r.Replicas, r.Adding, r.Removing)
}

// ListPartitionReassignments lists the reassignments in progress of the
// given partitions, or of every partition when none is given, sorted. It
// asks the controller, retried when the controller moved.
func (a *Admin) ListPartitionReassignments(ctx context.Context, partitions ...TopicPartition) ([]PartitionReassignment, error) {
	tps := uniqueTPs(partitions)
	sortTPs(tps)
	resp, err := a.controllerOp(ctx, func() kmsg.Request {
		req := kmsg.NewPtrListPartitionReassignmentsRequest()
		req.TimeoutMillis = int32(a.c.cfg.requestTimeout.Milliseconds())
		idx := map[string]int{}
		for _, tp := range tps {
			rt := topicEntry(&req.Topics, idx, tp.Topic, func(t string) kmsg.ListPartitionReassignmentsRequestTopic {
				rt := kmsg.NewListPartitionReassignmentsRequestTopic()
				rt.Topic = t
				return rt
			})
			rt.Partitions = append(rt.Partitions, tp.Partition)
		}
		if len(tps) == 0 {
			req.Topics = nil // all
		}
		return req
	}, func(r kmsg.Response) (int16, *string) {
		x := r.(*kmsg.ListPartitionReassignmentsResponse)
		return x.ErrorCode, x.ErrorMessage
	})
	if err != nil {
		return nil, fmt.Errorf("listing partition reassignments: %w", err)
	}
	out := []PartitionReassignment{}
	for _, rt := range resp.(*kmsg.ListPartitionReassignmentsResponse).Topics {
		for _, rp := range rt.Partitions {
			out = append(out, PartitionReassignment{TopicPartition: TopicPartition{rt.Topic, rp.Partition},
				Replicas: rp.Replicas, Adding: rp.AddingReplicas, Removing: rp.RemovingReplicas})
		}
	}
	sort.Slice(out, func(i, j int) bool { return tpLess(out[i].TopicPartition, out[j].TopicPartition) })
	return out, nil
}

// ---- ElectLeaders ----

// ElectionType is the kind of leader election of ElectLeaders.
type ElectionType int8

// Election types (KIP-460), with their wire values.
// ElectionPreferred moves leadership back to each partition's
// preferred replica (the first of its replicas) if it is in sync.
const ElectionPreferred ElectionType = 0

// ElectionUnclean elects a leader among all live replicas, in sync or
// not, when the partition has no leader: records may be lost.
const ElectionUnclean ElectionType = 1

// String returns PREFERRED or UNCLEAN.
func (t ElectionType) String() string {
	switch t {
	case ElectionPreferred:
		return "PREFERRED"
	case ElectionUnclean:
		return "UNCLEAN"
	}
	return fmt.Sprintf("ElectionType(%d)", int8(t))
}

// ElectLeaders runs leader elections of the given type on partitions, or
// on every partition when none is given (then the result lists the
// partitions the controller reports: Kafka 4.4 reports only those it
// elected a leader for, none on a balanced cluster). It goes to the controller, retried
// when the controller moved. One result per partition, sorted:
// ErrElectionNotNeeded when the preferred replica leads already,
// ErrUnknownTopicOrPartition, or a top-level error (e.g.
// CLUSTER_AUTHORIZATION_FAILED) for every partition. An unknown election
// type fails the call with ErrInvalidConfig.
func (a *Admin) ElectLeaders(ctx context.Context, typ ElectionType, partitions ...TopicPartition) (PartitionResults, error) {
	if typ != ElectionPreferred && typ != ElectionUnclean {
		return nil, fmt.Errorf("%w: election type %v", ErrInvalidConfig, typ)
	}
	tps := uniqueTPs(partitions)
	sortTPs(tps)
	resp, err := a.controllerOp(ctx, func() kmsg.Request {
		req := kmsg.NewPtrElectLeadersRequest()
		req.ElectionType = int8(typ)
		req.TimeoutMillis = int32(a.c.cfg.requestTimeout.Milliseconds())
		idx := map[string]int{}
		for _, tp := range tps {
			rt := topicEntry(&req.Topics, idx, tp.Topic, func(t string) kmsg.ElectLeadersRequestTopic {
				rt := kmsg.NewElectLeadersRequestTopic()
				rt.Topic = t
				return rt
			})
			rt.Partitions = append(rt.Partitions, tp.Partition)
		}
		if len(tps) == 0 {
			req.Topics = nil // all
		}
		return req
	}, func(r kmsg.Response) (int16, *string) {
		return r.(*kmsg.ElectLeadersResponse).ErrorCode, nil
	})
	if resp == nil {
		return nil, err
	}
	got := map[TopicPartition]error{}
	for _, rt := range resp.(*kmsg.ElectLeadersResponse).Topics {
		for _, rp := range rt.Partitions {
			got[TopicPartition{rt.Topic, rp.Partition}] = withMessage(rp.ErrorCode, rp.ErrorMessage)
		}
	}
	if len(tps) == 0 {
		tps = sortedTPs(got)
	}
	if err != nil {
		for _, tp := range tps {
			got[tp] = err
		}
	}
	// Leaders moved: lookups should see it.
	a.c.cl.TriggerMetadata()
	return partitionResults(tps, got), nil
}

// ---- DescribeLogDirs ----

// LogDirPartition is one partition replica in a log directory.
type LogDirPartition struct {
	TopicPartition
	// Size is the replica's size on disk, in bytes.
	Size int64
	// OffsetLag is how far the replica is behind the partition's high
	// watermark (for a future replica, behind the current one).
	OffsetLag int64
	// IsFuture marks a replica being moved into this directory.
	IsFuture bool
}

// String formats the replica with its field names, e.g.
// "t[0]{Size:1024 OffsetLag:0 IsFuture:false}". (Without it, the String of the embedded TopicPartition would be promoted
// and %v would print only the partition.)
func (p LogDirPartition) String() string {
	return fmt.Sprintf("%v{Size:%v OffsetLag:%v IsFuture:%v}", p.TopicPartition, p.Size, p.OffsetLag, p.IsFuture)
}

// LogDir is one log directory of a broker.
type LogDir struct {
	Path string
	// TotalBytes and UsableBytes are the volume's size and free space,
	// -1 when the broker does not say (before Kafka 3.3).
	TotalBytes  int64
	UsableBytes int64
	// Partitions are sorted.
	Partitions []LogDirPartition
	// Err is the directory's error, e.g. KAFKA_STORAGE_ERROR for an
	// offline directory.
	Err error
}

// BrokerLogDirs is DescribeLogDirs' answer for one broker.
type BrokerLogDirs struct {
	Broker int32
	// Dirs are sorted by path.
	Dirs []LogDir
	// Err is why the broker could not answer, or its top-level error
	// (e.g. CLUSTER_AUTHORIZATION_FAILED).
	Err error
}

// DescribeLogDirs describes the log directories of brokers, and the
// partition replicas in them, one result per distinct broker in request
// order; every broker of the cluster, by id, when none is given. Each
// broker is asked about itself, brokers in parallel, each with its own
// retries.
func (a *Admin) DescribeLogDirs(ctx context.Context, brokers ...int32) ([]BrokerLogDirs, error) {
	cl := a.c.cl
	brokers = uniqueInt32s(brokers)
	if len(brokers) == 0 {
		all, err := a.allBrokers(ctx)
		if err != nil {
			return nil, err
		}
		brokers = all
	}
	known, err := a.knownBrokers(ctx, brokers)
	if err != nil {
		return nil, err
	}
	out := make([]BrokerLogDirs, len(brokers))
	var ask []int32
	at := make(map[int32]int, len(brokers))
	for i, node := range brokers {
		out[i] = BrokerLogDirs{Broker: node, Dirs: []LogDir{}}
		if !known[node] {
			out[i].Err = fmt.Errorf("%w: %d", ErrUnknownBroker, node)
			continue
		}
		at[node] = i
		ask = append(ask, node)
	}
	failed := eachBroker(ctx, a, ask, func(ctx context.Context, node int32) (*kmsg.DescribeLogDirsResponse, error) {
		req := kmsg.NewPtrDescribeLogDirsRequest()
		req.Topics = nil // all
		resp, err := cl.Request(ctx, node, cluster.ClassOther, req)
		if err != nil {
			return nil, err
		}
		return resp.(*kmsg.DescribeLogDirsResponse), nil
	}, func(node int32, r *kmsg.DescribeLogDirsResponse) {
		out[at[node]] = logDirsOf(node, r)
	})
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	for j, err := range failed {
		if err != nil {
			out[at[ask[j]]].Err = err
		}
	}
	return out, nil
}

// logDirsOf is node's answer to DescribeLogDirs, sorted.
func logDirsOf(node int32, r *kmsg.DescribeLogDirsResponse) BrokerLogDirs {
	b := BrokerLogDirs{Broker: node, Dirs: []LogDir{}}
	if r.ErrorCode != 0 {
		b.Err = kafkaerr.ForCode(r.ErrorCode)
		return b
	}
	for _, d := range r.Dirs {
		ld := LogDir{Path: d.Dir, TotalBytes: d.TotalBytes, UsableBytes: d.UsableBytes, Err: kafkaerr.ForCode(d.ErrorCode)}
		for _, t := range d.Topics {
			for _, p := range t.Partitions {
				ld.Partitions = append(ld.Partitions, LogDirPartition{TopicPartition: TopicPartition{t.Topic, p.Partition},
					Size: p.Size, OffsetLag: p.OffsetLag, IsFuture: p.IsFuture})
			}
		}
		sort.Slice(ld.Partitions, func(x, y int) bool {
			return tpLess(ld.Partitions[x].TopicPartition, ld.Partitions[y].TopicPartition)
		})
		b.Dirs = append(b.Dirs, ld)
	}
	sort.Slice(b.Dirs, func(x, y int) bool { return b.Dirs[x].Path < b.Dirs[y].Path })
	return b
}

// ErrUnknownBroker is the error of a broker id the cluster's metadata does
// not list (after a refresh), in the calls that address brokers by id.
var ErrUnknownBroker = errors.New("riffle: unknown broker id")

// knownBrokers reports which of ids the metadata lists, refreshing it
// once if some are missing.
func (a *Admin) knownBrokers(ctx context.Context, ids []int32) (map[int32]bool, error) {
	cl := a.c.cl
	snap := cl.Snapshot()
	for _, id := range ids {
		if _, ok := snap.Brokers[id]; !ok && id >= 0 {
			if err := cl.RefreshMetadata(ctx); err != nil {
				return nil, err
			}
			snap = cl.Snapshot()
			break
		}
	}
	out := map[int32]bool{}
	for _, id := range ids {
		_, out[id] = snap.Brokers[id]
	}
	return out, nil
}

// ---- OffsetDelete ----

// DeleteGroupOffsets deletes the committed offsets of group on partitions
// (Java's deleteConsumerGroupOffsets, KIP-496), one result per distinct
// partition, sorted. A partition of a topic the group's members consume
// fails with ErrGroupSubscribedToTopic; a group-level error (e.g.
// ErrGroupIDNotFound, or why the coordinator could not
// be reached) is every partition's. The request goes to the group's
// coordinator, retried when it moved.
func (a *Admin) DeleteGroupOffsets(ctx context.Context, group string, partitions ...TopicPartition) (PartitionResults, error) {
	tps := uniqueTPs(partitions)
	sortTPs(tps)
	if len(tps) == 0 {
		return PartitionResults{}, nil
	}
	replies, _, failed, err := coordinated(ctx, a, []string{group},
		func(ctx context.Context, node int32, gs []string) (map[string]*kmsg.OffsetDeleteResponse, error) {
			req := kmsg.NewPtrOffsetDeleteRequest()
			req.Group = gs[0]
			idx := map[string]int{}
			for _, tp := range tps {
				rt := topicEntry(&req.Topics, idx, tp.Topic, func(t string) kmsg.OffsetDeleteRequestTopic {
					rt := kmsg.NewOffsetDeleteRequestTopic()
					rt.Topic = t
					return rt
				})
				rp := kmsg.NewOffsetDeleteRequestTopicPartition()
				rp.Partition = tp.Partition
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp, err := a.c.cl.Request(ctx, node, cluster.ClassOther, req)
			if err != nil {
				return nil, err
			}
			return map[string]*kmsg.OffsetDeleteResponse{gs[0]: resp.(*kmsg.OffsetDeleteResponse)}, nil
		},
		func(r *kmsg.OffsetDeleteResponse) int16 { return r.ErrorCode })
	if err != nil {
		return nil, err
	}
	got := map[TopicPartition]error{}
	r, ok := replies[group]
	switch {
	case !ok:
		for _, tp := range tps {
			got[tp] = failed[group]
		}
	case r.ErrorCode != 0:
		for _, tp := range tps {
			got[tp] = kafkaerr.ForCode(r.ErrorCode)
		}
	default:
		for _, rt := range r.Topics {
			for _, rp := range rt.Partitions {
				got[TopicPartition{rt.Topic, rp.Partition}] = kafkaerr.ForCode(rp.ErrorCode)
			}
		}
	}
	return partitionResults(tps, got), nil
}
