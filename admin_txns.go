package riffle

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/riffle-go/riffle/internal/cluster"
	"github.com/riffle-go/riffle/internal/errs"
	"github.com/riffle-go/riffle/internal/kafkaerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Transaction administration (KIP-664): list the transactions the
// coordinators know, describe transactional ids, and show the producers
// active on partitions. Transactions live on their coordinators
// (FindCoordinator with the transaction key type), producer state on
// each partition's leader; both are found per call and retried, with
// fresh lookups, when they move. These APIs need Kafka 3.0 or later;
// older brokers answer ErrUnsupported.

// ErrTransactionalIDNotFound (TRANSACTIONAL_ID_NOT_FOUND) is
// DescribeTransactions' answer for a transactional id its coordinator does
// not know: no producer ever initialized it, or it expired
// (transactional.id.expiration.ms).
var ErrTransactionalIDNotFound = kafkaerr.ForCode(kafkaerr.TransactionalIDNotFound)

// Transaction states as coordinators report them.
const (
	// TransactionStateEmpty: the producer is initialized and has no
	// transaction open.
	TransactionStateEmpty = "Empty"
	// TransactionStateOngoing: a transaction is open (partitions or
	// offsets were added to it).
	TransactionStateOngoing = "Ongoing"
	// TransactionStatePrepareCommit: the producer asked to commit; the
	// coordinator is writing the commit markers.
	TransactionStatePrepareCommit = "PrepareCommit"
	// TransactionStatePrepareAbort: the producer asked to abort, or the
	// transaction timed out; the coordinator is writing the abort markers.
	TransactionStatePrepareAbort = "PrepareAbort"
	// TransactionStateCompleteCommit: the last transaction committed.
	TransactionStateCompleteCommit = "CompleteCommit"
	// TransactionStateCompleteAbort: the last transaction aborted.
	TransactionStateCompleteAbort = "CompleteAbort"
	// TransactionStateDead: the transactional id expired.
	TransactionStateDead = "Dead"
	// TransactionStatePrepareEpochFence: a newer producer with the same
	// transactional id is fencing the open transaction.
	TransactionStatePrepareEpochFence = "PrepareEpochFence"
)

// ---- DescribeProducers ----

// ProducerState is a producer active on a partition: one that wrote to it
// recently enough for the leader to keep its state (idempotent or
// transactional).
type ProducerState struct {
	ProducerID    int64
	ProducerEpoch int16
	// LastSequence is the sequence number of the producer's last record
	// on the partition, -1 when unknown.
	LastSequence int32
	// LastTimestamp is the timestamp of the producer's last write on the
	// partition; zero when unknown.
	LastTimestamp time.Time
	// CoordinatorEpoch is the epoch of the transaction coordinator that
	// wrote the producer's last transaction marker, -1 when none.
	CoordinatorEpoch int32
	// CurrentTxnStartOffset is the offset of the first record of the
	// producer's open transaction on the partition, -1 when it has none.
	// An open transaction holds back the partition's last stable offset,
	// and so read_committed consumers, at this offset.
	CurrentTxnStartOffset int64
}

// PartitionProducers is DescribeProducers' answer for one partition.
type PartitionProducers struct {
	TopicPartition
	// Producers are sorted by producer id; empty when none is active.
	Producers []ProducerState
	// Err is the partition's error: ErrUnknownTopicOrPartition for a
	// partition that does not exist (errors.Is also matches
	// ErrUnknownTopic when the whole topic is unknown),
	// ErrTopicAuthorization, or why its leader could not answer. Producers
	// is then empty.
	Err error
}

// String formats the answer with its field names, e.g.
// "t[0]{Producers:[{ProducerID:7 ...}] Err:<nil>}". (Without it, the String of the embedded TopicPartition would be promoted
// and %v would print only the partition.)
func (p PartitionProducers) String() string {
	return fmt.Sprintf("%v{Producers:%+v Err:%v}", p.TopicPartition, p.Producers, p.Err)
}

// DescribeProducers returns the producers active on each partition, one
// result per distinct partition, in request order. Each partition is
// asked of its leader (leaders in parallel, one request each); a
// partition whose leader moved is retried after a metadata refresh,
// within the client's retry budget.
func (a *Admin) DescribeProducers(ctx context.Context, partitions ...TopicPartition) ([]PartitionProducers, error) {
	all := uniqueTPs(partitions)
	replies, failed, err := leaderRouted(ctx, a, "describe producers", all,
		func(ctx context.Context, leader int32, tps []TopicPartition) (map[TopicPartition]kmsg.DescribeProducersResponseTopicPartition, error) {
			resp, err := a.c.cl.Request(ctx, leader, cluster.ClassOther, describeProducersRequest(tps))
			if err != nil {
				return nil, err
			}
			out := map[TopicPartition]kmsg.DescribeProducersResponseTopicPartition{}
			for _, rt := range resp.(*kmsg.DescribeProducersResponse).Topics {
				for _, rp := range rt.Partitions {
					out[TopicPartition{rt.Topic, rp.Partition}] = rp
				}
			}
			return out, nil
		},
		func(rp kmsg.DescribeProducersResponseTopicPartition) int16 { return rp.ErrorCode })
	if err != nil {
		return nil, err
	}
	out := make([]PartitionProducers, len(all))
	for i, tp := range all {
		rp, ok := replies[tp]
		if !ok {
			out[i] = PartitionProducers{TopicPartition: tp, Err: failed[tp]}
			continue
		}
		r := PartitionProducers{TopicPartition: tp, Err: withMessage(rp.ErrorCode, rp.ErrorMessage)}
		if r.Err == nil {
			r.Producers = producerStates(rp.ActiveProducers)
		}
		out[i] = r
	}
	return out, nil
}

// describeProducersRequest asks about tps, grouped by topic.
func describeProducersRequest(tps []TopicPartition) *kmsg.DescribeProducersRequest {
	req := kmsg.NewPtrDescribeProducersRequest()
	idx := map[string]int{}
	for _, tp := range tps {
		rt := topicEntry(&req.Topics, idx, tp.Topic, func(t string) kmsg.DescribeProducersRequestTopic {
			rt := kmsg.NewDescribeProducersRequestTopic()
			rt.Topic = t
			return rt
		})
		rt.Partitions = append(rt.Partitions, tp.Partition)
	}
	return req
}

func producerStates(aps []kmsg.DescribeProducersResponseTopicPartitionActiveProducer) []ProducerState {
	out := make([]ProducerState, 0, len(aps))
	for _, ap := range aps {
		out = append(out, ProducerState{
			ProducerID: ap.ProducerID, ProducerEpoch: int16(ap.ProducerEpoch),
			LastSequence: ap.LastSequence, LastTimestamp: millisTime(ap.LastTimestamp),
			CoordinatorEpoch: ap.CoordinatorEpoch, CurrentTxnStartOffset: ap.CurrentTxnStartOffset,
		})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ProducerID < out[j].ProducerID })
	return out
}

// millisTime is a broker's time in milliseconds; zero for a negative
// (unknown) one.
func millisTime(ms int64) time.Time {
	if ms < 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms)
}

// uniqueTPs drops repeated partitions, keeping the first occurrence.
func uniqueTPs(in []TopicPartition) []TopicPartition {
	seen := make(map[TopicPartition]bool, len(in))
	out := make([]TopicPartition, 0, len(in))
	for _, tp := range in {
		if !seen[tp] {
			seen[tp] = true
			out = append(out, tp)
		}
	}
	return out
}

// ---- ListTransactions ----

// TransactionFilters narrows ListTransactions. The zero value lists every
// transactional id; set filters combine (a transaction must pass all).
type TransactionFilters struct {
	// States keeps the transactions in one of these states (e.g.
	// TransactionStateOngoing). States a broker does not know are
	// reported in ListTransactions' error.
	States []string
	// ProducerIDs keeps the transactions of these producer ids.
	ProducerIDs []int64
	// MinDuration keeps the transactions open for at least this long
	// (KIP-994). Brokers before Kafka 3.8 (ListTransactions v1) cannot
	// filter by duration and fail with ErrUnsupported.
	MinDuration time.Duration
}

// TransactionListing is one transactional id of ListTransactions.
type TransactionListing struct {
	TransactionalID string
	// ProducerID is the id the coordinator gave the transactional id's
	// producer.
	ProducerID int64
	// State is e.g. TransactionStateOngoing or TransactionStateEmpty.
	State string
}

// ListTransactions lists the transactional ids the cluster knows, with
// their producer id and state, sorted by transactional id. Each broker
// only knows the ids it coordinates, so every broker is asked (in
// parallel, each with its own retries). When some brokers cannot answer,
// the listings of the others are returned together with an error naming
// the brokers that failed: the listing is then incomplete. The error also
// says (wrapping ErrInvalidConfig) which filter states the brokers do not
// know; the listing is complete then, for the states they know.
func (a *Admin) ListTransactions(ctx context.Context, filters TransactionFilters) ([]TransactionListing, error) {
	if filters.MinDuration < 0 {
		return nil, fmt.Errorf("%w: negative transaction duration filter %v", ErrInvalidConfig, filters.MinDuration)
	}
	nodes, err := a.allBrokers(ctx)
	if err != nil {
		return nil, err
	}
	var (
		byID      = map[string]TransactionListing{}
		unknown   = map[string]bool{}
		unknownBy []int32
	)
	failed := eachBroker(ctx, a, nodes, func(ctx context.Context, node int32) (*kmsg.ListTransactionsResponse, error) {
		req := kmsg.NewPtrListTransactionsRequest()
		req.StateFilters = filters.States
		req.ProducerIDFilters = filters.ProducerIDs
		cn, err := a.c.cl.Conn(ctx, node, cluster.ClassOther)
		if err != nil {
			return nil, err
		}
		if filters.MinDuration > 0 {
			req.DurationFilterMillis = filters.MinDuration.Milliseconds()
			if v, ok := cn.Versions().Max(req.Key(), req.MaxVersion()); ok && v < 1 {
				return nil, fmt.Errorf("%w: ListTransactions v%d cannot filter by duration (v1, Kafka 3.8, can)", errs.ErrUnsupported, v)
			}
		}
		resp, err := cn.Request(ctx, req)
		if err != nil {
			return nil, err
		}
		r := resp.(*kmsg.ListTransactionsResponse)
		return r, kafkaerr.ForCode(r.ErrorCode)
	}, func(node int32, r *kmsg.ListTransactionsResponse) {
		for _, s := range r.UnknownStateFilters {
			unknown[s] = true
		}
		if len(r.UnknownStateFilters) > 0 {
			unknownBy = append(unknownBy, node)
		}
		for _, t := range r.TransactionStates {
			if _, dup := byID[t.TransactionalID]; !dup {
				byID[t.TransactionalID] = TransactionListing{TransactionalID: t.TransactionalID, ProducerID: t.ProducerID, State: t.TransactionState}
			}
		}
	})
	out := make([]TransactionListing, 0, len(byID))
	for _, t := range byID {
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].TransactionalID < out[j].TransactionalID })
	var all []error
	partial, err := incomplete(ctx, "listing transactions", failed)
	if !partial {
		return nil, err
	}
	if err != nil {
		all = append(all, err)
	}
	if len(unknown) > 0 {
		states := make([]string, 0, len(unknown))
		for s := range unknown {
			states = append(states, s)
		}
		sort.Strings(states)
		slices.Sort(unknownBy)
		all = append(all, fmt.Errorf("%w: transaction states %q unknown to brokers %v", ErrInvalidConfig, states, unknownBy))
	}
	return out, errors.Join(all...)
}

// ---- DescribeTransactions ----

// TransactionDescription describes one transactional id.
type TransactionDescription struct {
	TransactionalID string
	// Coordinator is the node id of the id's transaction coordinator, -1
	// when it could not be found.
	Coordinator int32
	// State is e.g. TransactionStateOngoing; "" when Err is set.
	State         string
	ProducerID    int64
	ProducerEpoch int16
	// Timeout is the transaction timeout the producer asked for: the
	// coordinator aborts a transaction open for longer.
	Timeout time.Duration
	// StartTime is when the open transaction started; zero when none is
	// open.
	StartTime time.Time
	// Partitions are the partitions in the open transaction, sorted;
	// empty when none is open.
	Partitions []TopicPartition
	// Err is the id's error: ErrTransactionalIDNotFound for an id the
	// coordinator does not know, TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
	// or why its coordinator could not be reached.
	Err error
}

// DescribeTransactions describes transactional ids, one result per
// distinct id, in request order. It finds each id's transaction
// coordinator and asks every coordinator about its ids in one request.
func (a *Admin) DescribeTransactions(ctx context.Context, ids ...string) ([]TransactionDescription, error) {
	ids = uniqueStrings(ids)
	replies, nodes, failed, err := coordinatedBy(ctx, a, txnCoordinator, ids,
		func(ctx context.Context, node int32, ids []string) (map[string]kmsg.DescribeTransactionsResponseTransactionState, error) {
			req := kmsg.NewPtrDescribeTransactionsRequest()
			req.TransactionalIDs = ids
			resp, err := a.c.cl.Request(ctx, node, cluster.ClassOther, req)
			if err != nil {
				return nil, err
			}
			out := map[string]kmsg.DescribeTransactionsResponseTransactionState{}
			for _, s := range resp.(*kmsg.DescribeTransactionsResponse).TransactionStates {
				out[s.TransactionalID] = s
			}
			return out, nil
		},
		func(s kmsg.DescribeTransactionsResponseTransactionState) int16 { return s.ErrorCode })
	if err != nil {
		return nil, err
	}
	out := make([]TransactionDescription, len(ids))
	for i, id := range ids {
		d := TransactionDescription{TransactionalID: id, Coordinator: -1, ProducerID: -1, ProducerEpoch: -1}
		if n, ok := nodes[id]; ok {
			d.Coordinator = n
		}
		s, ok := replies[id]
		switch {
		case !ok:
			d.Err = failed[id]
		case s.ErrorCode != 0:
			d.Err = kafkaerr.ForCode(s.ErrorCode)
		default:
			d.State, d.ProducerID, d.ProducerEpoch = s.State, s.ProducerID, s.ProducerEpoch
			d.Timeout = time.Duration(s.TimeoutMillis) * time.Millisecond
			d.StartTime = millisTime(s.StartTimestamp)
			for _, t := range s.Topics {
				for _, p := range t.Partitions {
					d.Partitions = append(d.Partitions, TopicPartition{t.Topic, p})
				}
			}
			sort.Slice(d.Partitions, func(i, j int) bool { return tpLess(d.Partitions[i], d.Partitions[j]) })
		}
		out[i] = d
	}
	return out, nil
}

// ---- AbortTransaction ----

// Errors of Admin.AbortTransaction.
var (
	// ErrInvalidProducerEpoch (INVALID_PRODUCER_EPOCH) is
	// Admin.AbortTransaction's answer when the partition's leader knows
	// the producer at a newer epoch than the spec's: the transaction the
	// spec names is no longer the producer's current one.
	ErrInvalidProducerEpoch = kafkaerr.ForCode(kafkaerr.InvalidProducerEpoch)
	// ErrTransactionCoordinatorFenced (TRANSACTION_COORDINATOR_FENCED) is
	// Admin.AbortTransaction's answer when the partition's last
	// transaction marker came from a newer coordinator epoch than the
	// spec's.
	ErrTransactionCoordinatorFenced = kafkaerr.ForCode(kafkaerr.TransactionCoordinatorFenced)
)

// AbortTransactionSpec names the open transaction of one producer on one
// partition (Java's AbortTransactionSpec). DescribeProducers gives its
// fields: the ProducerState whose CurrentTxnStartOffset is not -1 is a
// producer with a transaction open on the partition, with its
// ProducerID, ProducerEpoch and CoordinatorEpoch.
type AbortTransactionSpec struct {
	TopicPartition
	ProducerID    int64
	ProducerEpoch int16
	// CoordinatorEpoch is the epoch of the transaction coordinator the
	// abort marker is written in the name of: the partition's leader
	// refuses one older than the last it saw for the producer
	// (ErrTransactionCoordinatorFenced). DescribeProducers answers -1
	// for a producer no marker was written for yet: pass 0 then, as
	// Java's kafka-transactions tool does.
	CoordinatorEpoch int32
}

// String formats the spec with its field names, e.g. "t[0]{ProducerID:7
// ProducerEpoch:0 CoordinatorEpoch:3}". (Without it, the String of the
// embedded TopicPartition would be promoted and %v would print only the
// partition.)
func (s AbortTransactionSpec) String() string {
	return fmt.Sprintf("%v{ProducerID:%d ProducerEpoch:%d CoordinatorEpoch:%d}", s.TopicPartition, s.ProducerID, s.ProducerEpoch, s.CoordinatorEpoch)
}

// AbortTransaction aborts a hanging transaction on one partition (Java's
// abortTransaction, KIP-664): it writes an abort marker for the spec's
// producer to the partition, as the transaction coordinator would have
// (WriteTxnMarkers to the partition's leader, retried after a metadata
// refresh when the leader moved). The records the transaction wrote are
// then aborted, and the partition's last stable offset, which held
// read_committed consumers at the transaction's first record, moves on.
// It is for a transaction its coordinator lost track of, which no
// timeout will end; the coordinator is not told (a transaction it still
// knows ends on its own, by its producer or its timeout). It needs
// DESCRIBE on the topic, to find the leader (ErrTopicAuthorization
// without), and CLUSTER_ACTION on the cluster (ErrClusterAuthorization
// without).
// Errors: ErrInvalidProducerEpoch, ErrTransactionCoordinatorFenced,
// ErrUnknownTopicOrPartition, ErrUnknownTopic, or why the leader could
// not answer.
func (a *Admin) AbortTransaction(ctx context.Context, spec AbortTransactionSpec) error {
	tp := spec.TopicPartition
	replies, failed, err := leaderRouted(ctx, a, "abort transaction", []TopicPartition{tp},
		func(ctx context.Context, leader int32, tps []TopicPartition) (map[TopicPartition]kmsg.WriteTxnMarkersResponseMarkerTopicPartition, error) {
			req := kmsg.NewPtrWriteTxnMarkersRequest()
			m := kmsg.NewWriteTxnMarkersRequestMarker()
			m.ProducerID, m.ProducerEpoch, m.CoordinatorEpoch = spec.ProducerID, spec.ProducerEpoch, spec.CoordinatorEpoch
			m.Committed = false
			mt := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
			mt.Topic, mt.Partitions = tp.Topic, []int32{tp.Partition}
			m.Topics = append(m.Topics, mt)
			req.Markers = append(req.Markers, m)
			resp, err := a.c.cl.Request(ctx, leader, cluster.ClassOther, req)
			if err != nil {
				return nil, err
			}
			out := map[TopicPartition]kmsg.WriteTxnMarkersResponseMarkerTopicPartition{}
			for _, rm := range resp.(*kmsg.WriteTxnMarkersResponse).Markers {
				if rm.ProducerID != spec.ProducerID {
					continue
				}
				for _, rt := range rm.Topics {
					for _, rp := range rt.Partitions {
						out[TopicPartition{rt.Topic, rp.Partition}] = rp
					}
				}
			}
			return out, nil
		},
		func(rp kmsg.WriteTxnMarkersResponseMarkerTopicPartition) int16 { return rp.ErrorCode })
	if err != nil {
		return err
	}
	rp, ok := replies[tp]
	if !ok {
		return fmt.Errorf("aborting the transaction of %v: %w", spec, failed[tp])
	}
	if err := kafkaerr.ForCode(rp.ErrorCode); err != nil {
		return fmt.Errorf("aborting the transaction of %v: %w", spec, err)
	}
	return nil
}
