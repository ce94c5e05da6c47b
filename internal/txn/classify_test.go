package txn

import (
	"errors"
	"testing"

	"github.com/riffle-go/riffle/internal/errs"
	"github.com/riffle-go/riffle/internal/kafkaerr"
)

// The Java client's handling of each response, request by request
// (TransactionManager's handlers; Sender for records).
func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		op   Op
		code int16
		want Action
	}{
		{OpFindCoordinator, 0, Done},
		{OpFindCoordinator, kafkaerr.CoordinatorNotAvailable, Retry},
		{OpFindCoordinator, kafkaerr.TransactionalIDAuthorizationFailed, Fatal},
		{OpFindCoordinator, kafkaerr.GroupAuthorizationFailed, Abortable},
		{OpFindCoordinator, kafkaerr.InvalidRequest, Fatal},

		{OpInitProducerID, kafkaerr.NotCoordinator, Relocate},
		{OpInitProducerID, kafkaerr.CoordinatorNotAvailable, Relocate},
		{OpInitProducerID, kafkaerr.CoordinatorLoadInProgress, Retry},
		{OpInitProducerID, kafkaerr.ConcurrentTransactions, Retry},
		{OpInitProducerID, kafkaerr.RequestTimedOut, Retry},
		{OpInitProducerID, kafkaerr.TransactionalIDAuthorizationFailed, Fatal},
		{OpInitProducerID, kafkaerr.ClusterAuthorizationFailed, Fatal},
		{OpInitProducerID, kafkaerr.ProducerFenced, Fenced},
		{OpInitProducerID, kafkaerr.InvalidProducerEpoch, Fenced},
		{OpInitProducerID, kafkaerr.InvalidTransactionTimeout, Fatal},

		{OpAddPartitions, kafkaerr.NotCoordinator, Relocate},
		{OpAddPartitions, kafkaerr.ConcurrentTransactions, Retry},
		{OpAddPartitions, kafkaerr.CoordinatorLoadInProgress, Retry},
		{OpAddPartitions, kafkaerr.UnknownTopicOrPartition, Retry},
		{OpAddPartitions, kafkaerr.ProducerFenced, Fenced},
		{OpAddPartitions, kafkaerr.InvalidProducerEpoch, Fenced},
		{OpAddPartitions, kafkaerr.TransactionalIDAuthorizationFailed, Fatal},
		{OpAddPartitions, kafkaerr.InvalidTxnState, Fatal},
		{OpAddPartitions, kafkaerr.TopicAuthorizationFailed, Abortable},
		{OpAddPartitions, kafkaerr.OperationNotAttempted, Abortable},
		{OpAddPartitions, kafkaerr.UnknownProducerID, AbortableBump},
		{OpAddPartitions, kafkaerr.InvalidProducerIDMapping, AbortableBump},
		{OpAddPartitions, kafkaerr.TransactionAbortable, Abortable},

		{OpAddOffsets, kafkaerr.CoordinatorNotAvailable, Relocate},
		{OpAddOffsets, kafkaerr.ConcurrentTransactions, Retry},
		{OpAddOffsets, kafkaerr.ProducerFenced, Fenced},
		{OpAddOffsets, kafkaerr.GroupAuthorizationFailed, Abortable},
		{OpAddOffsets, kafkaerr.InvalidProducerIDMapping, AbortableBump},
		{OpAddOffsets, kafkaerr.InvalidTxnState, Fatal},

		{OpTxnOffsetCommit, kafkaerr.NotCoordinator, Relocate},
		{OpTxnOffsetCommit, kafkaerr.RequestTimedOut, Relocate},
		{OpTxnOffsetCommit, kafkaerr.CoordinatorLoadInProgress, Retry},
		{OpTxnOffsetCommit, kafkaerr.UnknownTopicOrPartition, Retry},
		{OpTxnOffsetCommit, kafkaerr.UnknownMemberID, Abortable},
		{OpTxnOffsetCommit, kafkaerr.IllegalGeneration, Abortable},
		{OpTxnOffsetCommit, kafkaerr.FencedInstanceID, Abortable},
		{OpTxnOffsetCommit, kafkaerr.GroupAuthorizationFailed, Abortable},
		{OpTxnOffsetCommit, kafkaerr.ProducerFenced, Fenced},
		{OpTxnOffsetCommit, kafkaerr.InvalidProducerEpoch, Fenced},
		{OpTxnOffsetCommit, kafkaerr.TransactionalIDAuthorizationFailed, Fatal},
		{OpTxnOffsetCommit, kafkaerr.UnsupportedForMessageFormat, Fatal},

		{OpEndTxn, kafkaerr.NotCoordinator, Relocate},
		{OpEndTxn, kafkaerr.ConcurrentTransactions, Retry},
		{OpEndTxn, kafkaerr.CoordinatorLoadInProgress, Retry},
		{OpEndTxn, kafkaerr.ProducerFenced, Fenced},
		{OpEndTxn, kafkaerr.InvalidProducerEpoch, Fenced},
		{OpEndTxn, kafkaerr.TransactionalIDAuthorizationFailed, Fatal},
		{OpEndTxn, kafkaerr.InvalidTxnState, Fatal},
		{OpEndTxn, kafkaerr.UnknownProducerID, AbortableBump},
		{OpEndTxn, kafkaerr.TransactionAbortable, Abortable},

		{OpProduce, kafkaerr.InvalidProducerEpoch, Abortable},
		{OpProduce, kafkaerr.MessageTooLarge, Abortable},
		{OpProduce, kafkaerr.InvalidTxnState, Abortable},
		{OpProduce, kafkaerr.ProducerFenced, Fenced},
		{OpProduce, kafkaerr.TransactionalIDAuthorizationFailed, Fatal},
		{OpProduce, kafkaerr.ClusterAuthorizationFailed, Fatal},
	} {
		if got := Classify(tc.op, tc.code); got != tc.want {
			t.Errorf("%s %s: %s, want %s", tc.op, kafkaerr.Typed(tc.code).Name, got, tc.want)
		}
	}
}

// Per-partition answers: the gravest decides.
func TestWorst(t *testing.T) {
	if Worst(Retry, Fenced) != Fenced || Worst(Abortable, Relocate) != Abortable || Worst(Done, Done) != Done {
		t.Fatal("Worst does not pick the gravest")
	}
}

// Class errors are never retriable, whatever their cause says, and each
// wraps its cause.
func TestWrap(t *testing.T) {
	cause := kafkaerr.ForCode(kafkaerr.NotEnoughReplicas) // retriable
	for _, a := range []Action{Abortable, AbortableBump, Fatal, Fenced} {
		err := Wrap(a, cause)
		if !errors.Is(err, cause) || errs.IsRetriable(err) {
			t.Errorf("%s: %v retriable %v", a, err, errs.IsRetriable(err))
		}
		if Wrap(a, err) != err {
			t.Errorf("%s wrapped twice", a)
		}
	}
	if !errors.Is(Wrap(Fenced, cause), ErrFatal) || errors.Is(Wrap(Fatal, cause), ErrFenced) {
		t.Fatal("fenced is not fatal, or fatal is fenced")
	}
	if Wrap(Retry, cause) != cause {
		t.Fatal("Retry wrapped")
	}
}
