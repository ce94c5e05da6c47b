package txn

import "github.com/riffle-go/riffle/internal/kafkaerr"

// Op is a transactional request.
type Op uint8

// The transactional requests, and Produce for the records of a
// transaction.
const (
	OpFindCoordinator Op = iota
	OpInitProducerID
	OpAddPartitions
	OpAddOffsets
	OpTxnOffsetCommit
	OpEndTxn
	OpProduce
)

var opNames = [...]string{"FindCoordinator", "InitProducerId", "AddPartitionsToTxn", "AddOffsetsToTxn", "TxnOffsetCommit", "EndTxn", "Produce"}

// String names the request as the protocol does.
func (o Op) String() string {
	if int(o) < len(opNames) {
		return opNames[o]
	}
	return "unknown"
}

// Action is what an answer asks of the producer.
type Action uint8

// Actions, from the mildest to the gravest (Worst picks the gravest).
const (
	// Done: the request succeeded.
	Done Action = iota
	// Retry: send the request again after a backoff.
	Retry
	// Relocate: the coordinator moved or the connection to it failed:
	// look it up again, then send the request again.
	Relocate
	// Abortable: the transaction must be aborted; the producer lives on.
	Abortable
	// AbortableBump: abortable, and the coordinator lost the producer's
	// state: the producer needs a new epoch before its next transaction.
	AbortableBump
	// Fatal: the producer can do nothing more but close.
	Fatal
	// Fenced: fatal; another producer with the same transactional id
	// took over (or the coordinator bumped the epoch past this one).
	Fenced
)

var actionNames = [...]string{"done", "retry", "relocate", "abortable", "abortable (epoch bump)", "fatal", "fenced"}

func (a Action) String() string {
	if int(a) < len(actionNames) {
		return actionNames[a]
	}
	return "unknown"
}

// Worst returns the graver of two actions (for requests answered per
// partition: one fenced partition fences the producer).
func Worst(a, b Action) Action { return max(a, b) }

// Classify maps a response code of op to an action, as the Java client's
// TransactionManager handles each response (KIP-691's classes). A code the
// table does not list is fatal for the coordinator's requests, as in
// Java, and abortable for a record (any failed record fails its
// transaction).
func Classify(op Op, code int16) Action {
	if code == 0 {
		return Done
	}
	if a, ok := everyOp[code]; ok {
		return a
	}
	if int(op) >= len(byOp) {
		return Fatal
	}
	t := byOp[op]
	if a, ok := t.codes[code]; ok {
		return a
	}
	return t.otherwise
}

// everyOp holds the codes that mean the same whatever the request.
var everyOp = map[int16]Action{
	kafkaerr.ProducerFenced:                     Fenced,
	kafkaerr.TransactionalIDAuthorizationFailed: Fatal,
	// KIP-890: the coordinator asks for an abort.
	kafkaerr.TransactionAbortable: Abortable,
}

type opTable struct {
	codes     map[int16]Action
	otherwise Action
}

// coordinatorMoved: the request goes to the coordinator found again.
var coordinatorMoved = map[int16]Action{
	kafkaerr.NotCoordinator:          Relocate,
	kafkaerr.CoordinatorNotAvailable: Relocate,
}

func with(base map[int16]Action, more map[int16]Action) map[int16]Action {
	out := make(map[int16]Action, len(base)+len(more))
	for c, a := range base {
		out[c] = a
	}
	for c, a := range more {
		out[c] = a
	}
	return out
}

// byOp is Java's handling of each request's answer; INVALID_PRODUCER_EPOCH
// from a coordinator is an older coordinator's word for fenced.
var byOp = [...]opTable{
	OpFindCoordinator: {map[int16]Action{
		kafkaerr.CoordinatorNotAvailable:   Retry,
		kafkaerr.CoordinatorLoadInProgress: Retry,
		kafkaerr.NotCoordinator:            Retry,
		kafkaerr.RequestTimedOut:           Retry,
		kafkaerr.GroupAuthorizationFailed:  Abortable,
	}, Fatal},
	OpInitProducerID: {with(coordinatorMoved, map[int16]Action{
		kafkaerr.CoordinatorLoadInProgress: Retry,
		kafkaerr.ConcurrentTransactions:    Retry,
		kafkaerr.RequestTimedOut:           Retry,
		kafkaerr.InvalidProducerEpoch:      Fenced,
	}), Fatal},
	// TOPIC_AUTHORIZATION_FAILED, OPERATION_NOT_ATTEMPTED (beside another
	// partition's error, which decides when it is graver) and anything
	// unexpected: the partition is not in the transaction, which must be
	// aborted.
	OpAddPartitions: {with(coordinatorMoved, map[int16]Action{
		kafkaerr.ConcurrentTransactions:    Retry,
		kafkaerr.CoordinatorLoadInProgress: Retry,
		kafkaerr.UnknownTopicOrPartition:   Retry,
		kafkaerr.RequestTimedOut:           Retry,
		kafkaerr.InvalidProducerEpoch:      Fenced,
		kafkaerr.InvalidTxnState:           Fatal,
		kafkaerr.UnknownProducerID:         AbortableBump,
		kafkaerr.InvalidProducerIDMapping:  AbortableBump,
	}), Abortable},
	OpAddOffsets: {with(coordinatorMoved, map[int16]Action{
		kafkaerr.CoordinatorLoadInProgress: Retry,
		kafkaerr.ConcurrentTransactions:    Retry,
		kafkaerr.RequestTimedOut:           Retry,
		kafkaerr.InvalidProducerEpoch:      Fenced,
		kafkaerr.UnknownProducerID:         AbortableBump,
		kafkaerr.InvalidProducerIDMapping:  AbortableBump,
		kafkaerr.GroupAuthorizationFailed:  Abortable,
	}), Fatal},
	// To the group's coordinator. A member that moved on (KIP-447: the
	// consumer that read the offsets no longer owns them) makes the
	// transaction abortable: neither its offsets nor its records may
	// commit.
	OpTxnOffsetCommit: {with(coordinatorMoved, map[int16]Action{
		kafkaerr.RequestTimedOut:           Relocate,
		kafkaerr.CoordinatorLoadInProgress: Retry,
		kafkaerr.UnknownTopicOrPartition:   Retry,
		kafkaerr.ConcurrentTransactions:    Retry,
		kafkaerr.InvalidProducerEpoch:      Fenced,
		kafkaerr.UnknownMemberID:           Abortable,
		kafkaerr.IllegalGeneration:         Abortable,
		kafkaerr.FencedInstanceID:          Abortable,
		kafkaerr.StaleMemberEpoch:          Abortable,
		kafkaerr.GroupIDNotFound:           Abortable,
		kafkaerr.GroupAuthorizationFailed:  Abortable,
	}), Fatal},
	// INVALID_TXN_STATE and anything unexpected are fatal.
	OpEndTxn: {with(coordinatorMoved, map[int16]Action{
		kafkaerr.CoordinatorLoadInProgress: Retry,
		kafkaerr.ConcurrentTransactions:    Retry,
		kafkaerr.RequestTimedOut:           Retry,
		kafkaerr.InvalidProducerEpoch:      Fenced,
		kafkaerr.UnknownProducerID:         AbortableBump,
		kafkaerr.InvalidProducerIDMapping:  AbortableBump,
	}), Fatal},
	// A record: INVALID_PRODUCER_EPOCH from a partition leader means the
	// coordinator bumped the epoch (the transaction timed out, or a new
	// producer took over, KIP-588). A failed record is abortable; the
	// Machine also learns that its epoch is stale (MarkStale), so the
	// abort cannot succeed.
	OpProduce: {map[int16]Action{
		kafkaerr.ClusterAuthorizationFailed: Fatal,
		kafkaerr.UnsupportedVersion:         Fatal,
	}, Abortable},
}
