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
// TransactionManager handles each response (KIP-691's classes). A code it
// does not list is fatal for the coordinator's requests, as in Java, and
// abortable for a record (any failed record fails its transaction).
func Classify(op Op, code int16) Action {
	if code == 0 {
		return Done
	}
	switch code {
	case kafkaerr.ProducerFenced:
		return Fenced
	case kafkaerr.TransactionalIDAuthorizationFailed:
		return Fatal
	case kafkaerr.TransactionAbortable:
		// KIP-890: the coordinator asks for an abort.
		return Abortable
	}
	switch op {
	case OpFindCoordinator:
		switch code {
		case kafkaerr.CoordinatorNotAvailable, kafkaerr.CoordinatorLoadInProgress, kafkaerr.NotCoordinator, kafkaerr.RequestTimedOut:
			return Retry
		case kafkaerr.GroupAuthorizationFailed:
			return Abortable
		}
		return Fatal
	case OpInitProducerID:
		switch code {
		case kafkaerr.NotCoordinator, kafkaerr.CoordinatorNotAvailable:
			return Relocate
		case kafkaerr.CoordinatorLoadInProgress, kafkaerr.ConcurrentTransactions, kafkaerr.RequestTimedOut:
			return Retry
		case kafkaerr.InvalidProducerEpoch:
			// An older coordinator's word for fenced.
			return Fenced
		}
		return Fatal
	case OpAddPartitions:
		switch code {
		case kafkaerr.NotCoordinator, kafkaerr.CoordinatorNotAvailable:
			return Relocate
		case kafkaerr.ConcurrentTransactions, kafkaerr.CoordinatorLoadInProgress, kafkaerr.UnknownTopicOrPartition, kafkaerr.RequestTimedOut:
			return Retry
		case kafkaerr.InvalidProducerEpoch:
			return Fenced
		case kafkaerr.InvalidTxnState:
			return Fatal
		case kafkaerr.UnknownProducerID, kafkaerr.InvalidProducerIDMapping:
			return AbortableBump
		}
		// TOPIC_AUTHORIZATION_FAILED, OPERATION_NOT_ATTEMPTED (beside
		// another partition's error, which decides when it is graver)
		// and anything unexpected: the partition is not in the
		// transaction, which must be aborted.
		return Abortable
	case OpAddOffsets:
		switch code {
		case kafkaerr.NotCoordinator, kafkaerr.CoordinatorNotAvailable:
			return Relocate
		case kafkaerr.CoordinatorLoadInProgress, kafkaerr.ConcurrentTransactions, kafkaerr.RequestTimedOut:
			return Retry
		case kafkaerr.InvalidProducerEpoch:
			return Fenced
		case kafkaerr.UnknownProducerID, kafkaerr.InvalidProducerIDMapping:
			return AbortableBump
		case kafkaerr.GroupAuthorizationFailed:
			return Abortable
		}
		return Fatal
	case OpTxnOffsetCommit:
		switch code {
		case kafkaerr.NotCoordinator, kafkaerr.CoordinatorNotAvailable, kafkaerr.RequestTimedOut:
			// The group coordinator.
			return Relocate
		case kafkaerr.CoordinatorLoadInProgress, kafkaerr.UnknownTopicOrPartition, kafkaerr.ConcurrentTransactions:
			return Retry
		case kafkaerr.InvalidProducerEpoch:
			return Fenced
		case kafkaerr.UnknownMemberID, kafkaerr.IllegalGeneration, kafkaerr.FencedInstanceID,
			kafkaerr.StaleMemberEpoch, kafkaerr.GroupIDNotFound, kafkaerr.GroupAuthorizationFailed:
			// The group moved on (KIP-447: the consumer that read
			// these offsets no longer owns them): the offsets must
			// not commit, and neither may the records.
			return Abortable
		}
		return Fatal
	case OpEndTxn:
		switch code {
		case kafkaerr.NotCoordinator, kafkaerr.CoordinatorNotAvailable:
			return Relocate
		case kafkaerr.CoordinatorLoadInProgress, kafkaerr.ConcurrentTransactions, kafkaerr.RequestTimedOut:
			return Retry
		case kafkaerr.InvalidProducerEpoch:
			return Fenced
		case kafkaerr.UnknownProducerID, kafkaerr.InvalidProducerIDMapping:
			return AbortableBump
		}
		// INVALID_TXN_STATE and anything unexpected.
		return Fatal
	case OpProduce:
		switch code {
		case kafkaerr.ClusterAuthorizationFailed, kafkaerr.UnsupportedVersion:
			return Fatal
		case kafkaerr.InvalidProducerEpoch:
			// KIP-588: from a partition leader it means the
			// coordinator bumped the epoch (the transaction timed
			// out, or a new producer took over). A failed record
			// is abortable; the Machine also learns that its epoch
			// is stale (StaleEpoch), so the abort cannot succeed.
			return Abortable
		}
		return Abortable
	}
	return Fatal
}
