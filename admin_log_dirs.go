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

// Log directories (KIP-113, JBOD): a broker with several directories in
// log.dirs keeps each partition replica in one of them, and moves a
// replica to another when asked (AlterReplicaLogDirs): it copies the
// replica into a "future" replica in the destination directory, which
// DescribeLogDirs lists with IsFuture, and swaps the two once the future
// replica caught up. KRaft brokers support several directories since
// Kafka 3.7.

// ErrLogDirNotFound (LOG_DIR_NOT_FOUND) is AlterReplicaLogDirs' answer for
// a destination that is not one of the broker's log.dirs.
var ErrLogDirNotFound = kafkaerr.ForCode(kafkaerr.LogDirNotFound)

// TopicPartitionReplica is a partition's replica on one broker (Java's
// TopicPartitionReplica).
type TopicPartitionReplica struct {
	TopicPartition
	// Broker is the node id of the broker holding the replica.
	Broker int32
}

// String formats the replica as "topic[partition]@broker", e.g. "t[0]@2".
func (r TopicPartitionReplica) String() string {
	return fmt.Sprintf("%v@%d", r.TopicPartition, r.Broker)
}

// ReplicaResult is the outcome of an admin operation for one replica.
// Err is nil on success or a *KafkaError (match with errors.Is), or why
// the broker could not be reached.
type ReplicaResult struct {
	TopicPartitionReplica
	Err error
}

// String formats the result with its field names, e.g.
// "t[0]@2{Err:<nil>}". (Without it, the String of the embedded replica
// would be promoted and %v would print only the replica.)
func (r ReplicaResult) String() string {
	return fmt.Sprintf("%v{Err:%v}", r.TopicPartitionReplica, r.Err)
}

// ReplicaResults is one result per replica.
type ReplicaResults []ReplicaResult

// Err joins the per-replica errors (nil if every replica succeeded).
func (rs ReplicaResults) Err() error {
	var all []error
	for _, r := range rs {
		if r.Err != nil {
			all = append(all, fmt.Errorf("%s: %w", r.TopicPartitionReplica, r.Err))
		}
	}
	return errors.Join(all...)
}

// replicaLess orders replicas by broker, then topic and partition.
func replicaLess(a, b TopicPartitionReplica) bool {
	if a.Broker != b.Broker {
		return a.Broker < b.Broker
	}
	return tpLess(a.TopicPartition, b.TopicPartition)
}

// AlterReplicaLogDirs moves replicas between the log directories of
// their brokers (Java's alterReplicaLogDirs): each replica to the
// directory given, an absolute path among the broker's log.dirs. Each
// broker is asked about its own replicas (brokers in parallel, each with
// its own retries). One result per replica, sorted by broker, topic and
// partition. A result without error means the broker accepted the move:
// the replica is copied in the background, listed by DescribeLogDirs as
// a future replica (IsFuture) in the destination until it caught up and
// replaces the current one; moving a replica to the directory it is in
// succeeds and does nothing. Per replica errors: ErrLogDirNotFound for a
// directory the broker does not have, KAFKA_STORAGE_ERROR for an offline
// one, REPLICA_NOT_AVAILABLE (KafkaErrorForCode(9)) for a replica the
// broker does not hold, ErrClusterAuthorization without ALTER on the
// cluster, ErrUnknownBroker for a broker id the metadata does not
// list, or why the broker could not be reached.
func (a *Admin) AlterReplicaLogDirs(ctx context.Context, dirs map[TopicPartitionReplica]string) (ReplicaResults, error) {
	all := make([]TopicPartitionReplica, 0, len(dirs))
	byBroker := map[int32][]TopicPartitionReplica{}
	for r := range dirs {
		all = append(all, r)
		byBroker[r.Broker] = append(byBroker[r.Broker], r)
	}
	sort.Slice(all, func(i, j int) bool { return replicaLess(all[i], all[j]) })
	if len(all) == 0 {
		return ReplicaResults{}, nil
	}
	brokers := make([]int32, 0, len(byBroker))
	for b := range byBroker {
		brokers = append(brokers, b)
	}
	sort.Slice(brokers, func(i, j int) bool { return brokers[i] < brokers[j] })
	known, err := a.knownBrokers(ctx, brokers)
	if err != nil {
		return nil, err
	}
	got := make(map[TopicPartitionReplica]error, len(all))
	var ask []int32
	for _, b := range brokers {
		if !known[b] {
			for _, r := range byBroker[b] {
				got[r] = fmt.Errorf("%w: %d", ErrUnknownBroker, b)
			}
			continue
		}
		ask = append(ask, b)
	}
	failed := eachBroker(ctx, a, ask, func(ctx context.Context, node int32) (*kmsg.AlterReplicaLogDirsResponse, error) {
		resp, err := a.c.cl.Request(ctx, node, cluster.ClassOther, alterReplicaLogDirsRequest(byBroker[node], dirs))
		if err != nil {
			return nil, err
		}
		return resp.(*kmsg.AlterReplicaLogDirsResponse), nil
	}, func(node int32, r *kmsg.AlterReplicaLogDirsResponse) {
		asked := map[TopicPartition]bool{}
		for _, rep := range byBroker[node] {
			asked[rep.TopicPartition] = true
		}
		for _, rt := range r.Topics {
			for _, rp := range rt.Partitions {
				tp := TopicPartition{rt.Topic, rp.Partition}
				if asked[tp] {
					got[TopicPartitionReplica{tp, node}] = kafkaerr.ForCode(rp.ErrorCode)
				}
			}
		}
	})
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	for j, err := range failed {
		if err != nil {
			for _, r := range byBroker[ask[j]] {
				got[r] = err
			}
		}
	}
	out := make(ReplicaResults, len(all))
	for i, r := range all {
		e, ok := got[r]
		if !ok {
			e = fmt.Errorf("%w: no result for %s in broker %d's response", errs.ErrMalformed, r.TopicPartition, r.Broker)
		}
		out[i] = ReplicaResult{TopicPartitionReplica: r, Err: e}
	}
	return out, nil
}

// alterReplicaLogDirsRequest moves replicas (all of one broker) to their
// directories in dirs, grouped by directory and topic.
func alterReplicaLogDirsRequest(replicas []TopicPartitionReplica, dirs map[TopicPartitionReplica]string) *kmsg.AlterReplicaLogDirsRequest {
	req := kmsg.NewPtrAlterReplicaLogDirsRequest()
	dirAt := map[string]int{}
	topicAt := map[string]map[string]int{}
	sorted := append([]TopicPartitionReplica(nil), replicas...)
	sort.Slice(sorted, func(i, j int) bool { return replicaLess(sorted[i], sorted[j]) })
	for _, r := range sorted {
		path := dirs[r]
		i, ok := dirAt[path]
		if !ok {
			i = len(req.Dirs)
			dirAt[path] = i
			topicAt[path] = map[string]int{}
			d := kmsg.NewAlterReplicaLogDirsRequestDir()
			d.Dir = path
			req.Dirs = append(req.Dirs, d)
		}
		rt := topicEntry(&req.Dirs[i].Topics, topicAt[path], r.Topic, func(t string) kmsg.AlterReplicaLogDirsRequestDirTopic {
			rt := kmsg.NewAlterReplicaLogDirsRequestDirTopic()
			rt.Topic = t
			return rt
		})
		rt.Partitions = append(rt.Partitions, r.Partition)
	}
	return req
}
