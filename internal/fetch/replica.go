package fetch

import (
	"slices"
	"time"

	"github.com/riffle-go/riffle/internal/kafkaerr"
)

// ReadReplica is one partition's choice of the broker to fetch from under
// follower fetching (KIP-392): the leader, or the replica the leader named
// as the partition's preferred read replica. The zero value fetches from
// the leader. It does no I/O and reads no clock: the consumer keeps one per
// partition, under the partition's lock, and passes the time in.
//
// The rules are the Java consumer's (FetchCollector, SubscriptionState
// preferredReadReplica):
//
//   - A fetch response whose PreferredReadReplica is a node other than the
//     leader names that replica ([ReadReplica.Named]); the partition is then
//     fetched from it, from the same offset. The preference holds for a
//     time-to-live (the caller passes the client's MetadataMaxAge, Java's
//     metadata.max.age.ms), after which the partition goes back to the
//     leader, which names the replica again or another one: that is how a
//     consumer follows changes of the broker's replica selection. Naming
//     the leader itself clears the preference.
//   - [ReadReplica.Target] is the node to fetch from. The replica stops
//     being used when its time is up, when the partition's leader or
//     leader epoch is no longer the one it was named under, when metadata
//     no longer lists it among the partition's replicas or lists it as
//     offline, or when the broker is no longer in the metadata.
//   - A fetch from the replica that failed, with a partition error that
//     says the replica cannot serve the offset ([ReplicaError]) or with a
//     request failure (connection, unknown broker), clears the preference
//     ([ReadReplica.Failed]): the partition goes back to the leader.
type ReadReplica struct {
	set         bool
	node        int32
	leaderEpoch int32 // the leader epoch it was named under
	until       time.Time
}

// Placement is what metadata says about a partition, for Target.
type Placement struct {
	Leader      int32 // -1: unknown
	LeaderEpoch int32
	Replicas    []int32
	Offline     []int32
	// Known reports whether a broker is in the metadata; nil: none is.
	Known func(node int32) bool
}

// Node returns the preferred read replica, if one is set.
func (r *ReadReplica) Node() (int32, bool) { return r.node, r.set }

// Until returns when the preference expires, if one is set: the caller
// must call Target again by then.
func (r *ReadReplica) Until() (time.Time, bool) { return r.until, r.set }

// Clear drops the preference: the partition is fetched from its leader.
func (r *ReadReplica) Clear() { *r = ReadReplica{} }

// Named applies a fetch response's PreferredReadReplica, node, for a
// partition whose leader (as of the request) is leader with leaderEpoch.
// A negative node changes nothing (the broker named no replica); the
// leader itself clears the preference; another node becomes the preference
// until now+ttl. It reports whether the preference changed.
func (r *ReadReplica) Named(node, leader, leaderEpoch int32, now time.Time, ttl time.Duration) bool {
	switch {
	case node < 0:
		return false
	case node == leader:
		changed := r.set
		r.Clear()
		return changed
	}
	changed := !r.set || r.node != node
	*r = ReadReplica{set: true, node: node, leaderEpoch: leaderEpoch, until: now.Add(ttl)}
	return changed
}

// Failed reports a failed fetch from node: if node is the preferred
// replica, the preference is cleared and Failed returns true (the
// partition goes back to the leader); otherwise nothing changes.
func (r *ReadReplica) Failed(node int32) bool {
	if !r.set || r.node != node {
		return false
	}
	r.Clear()
	return true
}

// Target returns the node to fetch the partition from at now: the
// preferred replica while it is valid for pl (see the type's rules),
// else pl.Leader (-1 when the leader is unknown). An invalid preference is
// cleared.
func (r *ReadReplica) Target(pl Placement, now time.Time) int32 {
	if !r.set {
		return pl.Leader
	}
	if pl.Leader < 0 || r.node == pl.Leader || pl.LeaderEpoch != r.leaderEpoch ||
		!now.Before(r.until) ||
		!slices.Contains(pl.Replicas, r.node) || slices.Contains(pl.Offline, r.node) ||
		pl.Known == nil || !pl.Known(r.node) {
		r.Clear()
		return pl.Leader
	}
	return r.node
}

// ReplicaError reports whether a partition error code, returned by a
// preferred read replica, sends the partition back to its leader rather
// than being handled as the leader's error would be: the replica does not
// have the offset yet or any more (OFFSET_NOT_AVAILABLE,
// OFFSET_OUT_OF_RANGE: the leader decides whether the offset is really
// out of range, so no reset happens on a replica's word), is no longer a
// replica or not available (NOT_LEADER_OR_FOLLOWER, REPLICA_NOT_AVAILABLE,
// UNKNOWN_TOPIC_OR_PARTITION, KAFKA_STORAGE_ERROR), or has another view of
// the leader epoch (FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH); and any
// other retriable error. Authorization and other fatal errors are not
// replica errors: the leader would return them too.
func ReplicaError(code int16) bool {
	switch code {
	case 0:
		return false
	case kafkaerr.OffsetNotAvailable, kafkaerr.OffsetOutOfRange, kafkaerr.NotLeaderForPartition,
		kafkaerr.ReplicaNotAvailable, kafkaerr.UnknownTopicOrPartition, kafkaerr.KafkaStorageError,
		kafkaerr.FencedLeaderEpoch, kafkaerr.UnknownLeaderEpoch:
		return true
	}
	return kafkaerr.Typed(code).Retriable
}
