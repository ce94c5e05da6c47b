package riffle

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/riffle-go/riffle/internal/kafkaerr"
	"github.com/riffle-go/riffle/internal/producer"
	"github.com/riffle-go/riffle/internal/txn"
)

// Transaction errors. Every error of a transactional call matches
// ErrTransactionState (a call the state does not allow), or one of the
// classes ErrTransactionAbortable and ErrTransactionFatal, which wrap the
// cause (errors.Is reaches it, e.g. ErrProducerFenced,
// ErrTransactionalIDAuthorization or any Kafka error), or an
// error that left the call's outcome unknown (the context ended, the
// retry budget ran out): the same call may then be made again.
var (
	// ErrTransactionState: the call is not allowed now (Java's
	// IllegalStateException), e.g. a record produced outside a
	// transaction, BeginTransaction before InitTransactions or inside
	// an open transaction, a transactional call on a producer without
	// TransactionalID. The message says what to call instead.
	ErrTransactionState = txn.ErrState
	// ErrTransactionAbortable: the transaction failed and must be
	// aborted with AbortTransaction; the producer then runs the next one
	// (Java's abortable errors, KIP-691). Raised by a record of the
	// transaction that failed (its callback has the cause), by offsets
	// the group's coordinator refused (the consumer lost its partitions:
	// KIP-447), or by the coordinator. Until the abort every
	// transactional call but AbortTransaction, and every Produce,
	// returns it.
	ErrTransactionAbortable = txn.ErrAbortable
	// ErrTransactionFatal: the producer cannot go on; Close it (a new
	// producer with the same TransactionalID may). Every later call and
	// Produce returns it at once. Raised by authorization failures
	// (TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
	// CLUSTER_AUTHORIZATION_FAILED), INVALID_TXN_STATE, an invalid
	// TransactionTimeout, and fencing (ErrProducerFenced).
	ErrTransactionFatal = txn.ErrFatal
	// ErrProducerFenced: another producer with the same TransactionalID
	// ran InitTransactions (or, under transactions v1, the coordinator
	// aborted this producer's transaction after TransactionTimeout and
	// bumped its epoch; see ErrTransactionTimedOut for v2); this one may
	// write nothing more. It matches ErrTransactionFatal.
	ErrProducerFenced = txn.ErrFenced
	// ErrTransactionAborted: the record was not written because its
	// transaction was aborted (its callback gets it).
	ErrTransactionAborted = txn.ErrAborted
	// ErrTransactionalIDAuthorization is
	// TRANSACTIONAL_ID_AUTHORIZATION_FAILED: the principal may not use
	// the transactional id. Fatal (it comes wrapped in
	// ErrTransactionFatal).
	ErrTransactionalIDAuthorization = kafkaerr.ForCode(kafkaerr.TransactionalIDAuthorizationFailed)
	// ErrInvalidTxnState is INVALID_TXN_STATE: the coordinator refused a
	// transition of the transaction's state (Java's
	// InvalidTxnStateException). Fatal. Under transactions v2 (Kafka
	// 4.x) it is what a CommitTransaction gets once the coordinator
	// aborted the transaction for outliving TransactionTimeout (the
	// error then also matches ErrTransactionTimedOut).
	ErrInvalidTxnState = kafkaerr.ForCode(kafkaerr.InvalidTxnState)
	// ErrTransactionTimedOut marks an error of the transaction
	// coordinator (or a producer fenced after a partition leader
	// rejected its epoch) that came once the transaction had been open
	// longer than TransactionTimeout: the coordinator has almost
	// certainly aborted it. The error also matches its cause and class.
	// On Kafka 4.x (transactions v2), after the coordinator aborted a
	// timed-out transaction: CommitTransaction fails with
	// ErrTransactionFatal, ErrInvalidTxnState and this (Java: an
	// InvalidTxnStateException); a record produced fails with
	// ErrTransactionAbortable wrapping INVALID_PRODUCER_EPOCH (Java's
	// InvalidProducerEpochException), and AbortTransaction then
	// succeeds: the producer goes on with the epoch the coordinator
	// bumped, as Java's does. Under v1 both fail with ErrProducerFenced.
	ErrTransactionTimedOut = errors.New("riffle: transaction timed out")
)

// GroupMetadata identifies a consumer group member for
// SendOffsetsToTransaction (Java's ConsumerGroupMetadata): the group's
// coordinator commits the offsets only while the member still belongs to
// the generation that consumed them (KIP-447), so a member that lost its
// partitions in a rebalance cannot commit over the new owner. Get it from
// the consumer that read the records with Consumer.GroupMetadata.
type GroupMetadata struct {
	// GroupID is the consumer group.
	GroupID string
	// GenerationID is the group's generation (classic protocol) or the
	// member epoch (KIP-848); -1 with an empty MemberID commits without
	// the generation check, as Java's ConsumerGroupMetadata(groupId).
	GenerationID int32
	// MemberID is the member's id in the group.
	MemberID string
	// GroupInstanceID is the static member id (InstanceID), "" if none.
	GroupInstanceID string
}

// txnCall returns the producer's transactional state for a transactional
// call, or why there is none.
func (p *Producer) txnCall() (*txnState, error) {
	if p.life.Closing() {
		return nil, ErrProducerClosed
	}
	if p.txn == nil {
		return nil, fmt.Errorf("%w: the producer has no TransactionalID", ErrTransactionState)
	}
	return p.txn, nil
}

// retried reports whether a failed request left its outcome unknown: the
// context ended or the retry budget ran out. The call may be made again.
func retried(a txn.Action) bool { return a == txn.Retry || a == txn.Relocate }

// InitTransactions prepares a transactional producer (see TransactionalID)
// for its first transaction: it finds the transaction coordinator and
// obtains the producer id and epoch (InitProducerId). This fences every
// earlier producer with the same transactional id (their later writes and
// commits fail with ErrProducerFenced) and aborts the transaction they
// left open, so a restarted instance takes over cleanly; run it before
// reading what the earlier instance may have left half done. Retriable
// errors (the coordinator moving or loading, CONCURRENT_TRANSACTIONS while
// the old transaction aborts) are retried within ctx and the client's
// RetryTimeout; if they outlast either, call it again. It fails with
// ErrTransactionFatal for authorization errors or a TransactionTimeout the
// brokers refuse, and with ErrTransactionState when called twice.
//
// It is an explicit step, as in the Java client, rather than part of the
// first BeginTransaction: it blocks on the coordinator, can fail for good,
// and fences the previous instance at a moment the application chooses;
// BeginTransaction does none of that.
func (p *Producer) InitTransactions(ctx context.Context) error {
	s, err := p.txnCall()
	if err != nil {
		return err
	}
	if err := s.lock(ctx); err != nil {
		return err
	}
	defer s.unlock()
	s.mu.Lock()
	err = s.m.Init()
	s.changedLocked()
	s.mu.Unlock()
	if err != nil {
		return err
	}
	id, a, err := s.initProducerID(ctx, nil)
	if err != nil {
		if retried(a) {
			return err
		}
		return s.fail(a, err)
	}
	if err := p.installIdentity(ctx, id); err != nil {
		return err
	}
	s.mu.Lock()
	s.m.Initialized()
	s.changedLocked()
	s.mu.Unlock()
	p.c.log.Info("transactions initialized", "transactional_id", s.id, "producer_id", id.ID, "epoch", id.Epoch)
	return nil
}

// BeginTransaction opens a transaction: records produced from now on, by
// any number of goroutines, and offsets sent with
// SendOffsetsToTransaction, are committed or aborted together. It does no
// I/O (the coordinator learns of the transaction from its first write).
// It fails with ErrTransactionState before InitTransactions, inside an
// open transaction, or while the previous one is being committed or
// aborted; with the transaction's error after an abortable error that was
// not aborted yet; and with the fatal error once the producer failed.
//
// Whether the transaction uses KIP-890 (transactions v2: partitions join
// the transaction with their first batch, and every transaction ends with
// an epoch bump) or the classic protocol (AddPartitionsToTxn before a
// partition's first batch, AddOffsetsToTxn for offsets) is decided here,
// from what the transaction coordinator advertised: v2 when the cluster
// finalized transaction.version 2 and supports the requests that carry it.
func (p *Producer) BeginTransaction() error {
	s, err := p.txnCall()
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.m.Begin(s.v2); err != nil {
		return err
	}
	select {
	case <-s.failed:
		s.failed = make(chan struct{})
	default:
	}
	s.start = time.Time{}
	s.offs = nil
	s.changedLocked()
	return nil
}

// CommitTransaction commits the open transaction. It closes the
// transaction to new records (a record produced from now on fails with
// ErrTransactionState), waits until every record produced before it has
// its outcome and its callback has returned (so it must not be called
// from a callback), and, if all were written, asks the coordinator to commit
// (EndTxn): the records and the offsets sent with it become visible to
// read_committed consumers at once. The producer's CommitHooks then get
// those offsets, one CommitEvent per group with Transactional set.
//
// If a record of the transaction failed, or one fails meanwhile, it
// returns an error matching ErrTransactionAbortable that wraps the first
// failure, without committing: call AbortTransaction. A fatal error
// (ErrTransactionFatal, ErrProducerFenced) means the producer can do
// nothing more; when the transaction was open longer than
// TransactionTimeout it also matches ErrTransactionTimedOut (on Kafka 4.x
// with ErrInvalidTxnState: the coordinator aborted it).
// Retriable coordinator errors are retried within ctx and the client's
// RetryTimeout; if either ends first, the outcome is unknown and it
// returns that error: call CommitTransaction again to finish the commit
// (once the commit request may have reached the coordinator, only a
// commit can finish the transaction).
func (p *Producer) CommitTransaction(ctx context.Context) error {
	s, err := p.txnCall()
	if err != nil {
		return err
	}
	if err := s.lock(ctx); err != nil {
		return err
	}
	defer s.unlock()
	start := time.Now()
	s.mu.Lock()
	err = s.m.BeginCommit()
	failed := s.failed
	s.changedLocked()
	s.mu.Unlock()
	if err != nil {
		return err
	}
	if err := p.flushUntil(ctx, failed); err != nil {
		if errors.Is(err, errTxnFailed) {
			return s.err()
		}
		return err
	}
	s.mu.Lock()
	err, started := s.m.Err(), s.m.Started()
	if err == nil && started {
		s.m.EndSent()
	}
	s.mu.Unlock()
	if err != nil {
		return err
	}
	if started {
		next, a, err := s.endTxn(ctx, true)
		if err != nil {
			if retried(a) {
				return err
			}
			return s.fail(a, err)
		}
		if next != nil {
			if err := p.installIdentity(ctx, *next); err != nil {
				return err
			}
		}
	}
	// Committed: the offsets sent in the transaction are the groups'.
	if offs := s.complete(); len(offs) > 0 && len(p.commitHks) > 0 {
		p.reportTxnCommit(offs, start)
	}
	return nil
}

// AbortTransaction aborts the open transaction, or the one an abortable
// error (ErrTransactionAbortable) stopped. It closes the transaction to new
// records, waits for the produce requests in flight, fails every record
// not yet written with ErrTransactionAborted (records already written stay
// invisible to read_committed consumers, as do the offsets sent), and asks
// the coordinator to abort (EndTxn). When the failure broke the
// partitions' sequence numbers, it also bumps the producer epoch (KIP-360).
// Then the producer is ready for BeginTransaction. It waits for the
// records' outcomes, not for their callbacks: a record's callback may
// call it.
//
// If a partition leader answered that the producer's epoch is stale (the
// coordinator aborted the transaction after TransactionTimeout, or another
// producer with the same TransactionalID took over), the transaction is
// already aborted. Under transactions v2 the abort still asks the
// coordinator, which answers a producer whose timed-out transaction it
// aborted with the epoch it bumped: the abort succeeds and the producer
// goes on (as Java's). A producer another one fenced (or any under v1)
// fails with ErrProducerFenced. A commit that may have reached the coordinator cannot
// be aborted (ErrTransactionState: call CommitTransaction again).
// Retriable errors are handled as in CommitTransaction: if ctx or the
// retry budget ends first, call AbortTransaction again.
func (p *Producer) AbortTransaction(ctx context.Context) error {
	s, err := p.txnCall()
	if err != nil {
		return err
	}
	if err := s.lock(ctx); err != nil {
		return err
	}
	defer s.unlock()
	return p.abort(ctx)
}

// abort aborts the transaction; the caller holds the token of the calls.
func (p *Producer) abort(ctx context.Context) error {
	s := p.txn
	s.mu.Lock()
	err := s.m.BeginAbort()
	s.changedLocked()
	s.mu.Unlock()
	if err != nil {
		return err
	}
	if err := p.failUnsent(ctx, ErrTransactionAborted); err != nil {
		return err
	}
	if err := s.awaitAdds(ctx); err != nil {
		return err
	}
	s.mu.Lock()
	stale, started, needBump, canBump := s.m.StaleEpoch(), s.m.Started(), s.m.NeedBump(), s.canBump
	if !stale && started {
		s.m.EndSent()
	}
	s.mu.Unlock()
	if stale && !(started && s.isV2()) {
		// Only the coordinator bumps the epoch past ours, and it does
		// so when it aborts our transaction itself: under v1 there is
		// nothing left to abort, and no epoch this producer may use.
		return s.fail(txn.Fenced, s.timedOut(fmt.Errorf("a partition leader rejected the epoch of transactional id %q: the coordinator aborted the transaction (TransactionTimeout %v) or another producer took the id over",
			s.id, s.timeout)))
	}
	// Under v2 the coordinator decides: after aborting a timed-out
	// transaction with one epoch bump it takes our abort as a retry of
	// its own and answers the new epoch (Java then goes on); a producer
	// that another one fenced gets PRODUCER_FENCED.
	var next *producer.Identity
	if started {
		n, a, err := s.endTxn(ctx, false)
		switch {
		case a == txn.AbortableBump:
			// The coordinator lost the producer's state: a new epoch
			// starts over (Java goes straight to InitProducerId).
			needBump = true
		case err != nil && retried(a):
			return err
		case err != nil:
			return s.fail(a, err)
		}
		next = n
	}
	if stale && next == nil {
		return s.fail(txn.Fenced, s.timedOut(fmt.Errorf("a partition leader rejected the epoch of transactional id %q and the coordinator's abort gave no new one: another producer took the id over", s.id)))
	}
	if next == nil && needBump {
		if !canBump {
			return s.fail(txn.Fatal, fmt.Errorf("the transaction of %q broke its sequence numbers and the coordinator cannot bump the producer epoch (InitProducerId v3+, Kafka 2.5)", s.id))
		}
		cur := p.currentIdentity()
		id, a, err := s.initProducerID(ctx, &cur)
		if err != nil {
			if retried(a) {
				return err
			}
			return s.fail(a, err)
		}
		next = &id
	}
	if next != nil {
		if err := p.installIdentity(ctx, *next); err != nil {
			return err
		}
	}
	s.complete()
	return nil
}

// SendOffsetsToTransaction commits consumer offsets in the open
// transaction (Java's sendOffsetsToTransaction): offsets maps each
// partition to the next offset the group should consume, and the group's
// coordinator applies them only if the transaction commits, so records
// consumed, transformed and produced are processed exactly once. group is
// the consumer's Consumer.GroupMetadata: the coordinator refuses the
// offsets (ErrTransactionAbortable, wrapping ILLEGAL_GENERATION,
// UNKNOWN_MEMBER_ID or FENCED_INSTANCE_ID) if the member lost its
// partitions meanwhile (KIP-447), so one transactional producer per
// process serves every partition. The consumer must not commit these
// offsets itself (DisableCommits).
//
// Under transactions v1 the group is first added to the transaction
// (AddOffsetsToTxn); under v2 the TxnOffsetCommit adds it. It returns when
// the coordinator holds the offsets for the transaction. It fails with
// ErrTransactionState outside an open transaction, and like
// CommitTransaction for the rest.
func (p *Producer) SendOffsetsToTransaction(ctx context.Context, offsets map[TopicPartition]OffsetAndMetadata, group GroupMetadata) error {
	s, err := p.txnCall()
	if err != nil {
		return err
	}
	if group.GroupID == "" {
		return fmt.Errorf("%w: SendOffsetsToTransaction needs the group's id", ErrInvalidConfig)
	}
	if err := s.lock(ctx); err != nil {
		return err
	}
	defer s.unlock()
	s.mu.Lock()
	err = s.m.CheckOffsets()
	needAdd := s.m.NeedAddOffsets(group.GroupID)
	s.mu.Unlock()
	if err != nil || len(offsets) == 0 {
		return err
	}
	if needAdd {
		if a, err := s.addOffsets(ctx, group.GroupID); err != nil {
			if retried(a) {
				return err
			}
			return s.fail(a, err)
		}
	}
	// Under v2 the transaction starts with this request.
	s.mu.Lock()
	s.m.OffsetsAdded(group.GroupID)
	s.startedLocked()
	s.mu.Unlock()
	if a, err := s.txnOffsetCommit(ctx, offsets, group); err != nil {
		if retried(a) {
			return err
		}
		return s.fail(a, err)
	}
	return nil
}

// err returns the machine's error.
func (s *txnState) err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.m.Err()
}

// complete ends a commit or abort. It returns the offsets kept for the
// CommitHooks (see keptOffset), which the next transaction starts without.
func (s *txnState) complete() map[string]map[TopicPartition]OffsetAndMetadata {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.m.Completed()
	s.changedLocked()
	offs := s.offs
	s.offs = nil
	return offs
}

// closeTxn ends the producer's transactions on Close: an open transaction
// is aborted (as the Java client does), a failed producer's records fail
// with its error, and the rest is flushed.
func (p *Producer) closeTxn(ctx context.Context) error {
	s := p.txn
	if err := s.lock(ctx); err != nil {
		return err
	}
	defer s.unlock()
	s.mu.Lock()
	st, ferr := s.m.State(), s.m.Err()
	s.mu.Unlock()
	switch st {
	case txn.InTransaction, txn.AbortableError, txn.Aborting, txn.Committing:
		p.c.log.Info("aborting the open transaction on Close", "transactional_id", s.id)
		err := p.abort(ctx)
		switch {
		case err == nil, errors.Is(err, ErrTransactionState):
			// Aborted, or a commit that must be left to the
			// coordinator (it may have reached it).
		case errors.Is(err, ErrTransactionFatal):
			return p.failUnsent(ctx, err)
		default:
			return err
		}
	case txn.FatalError:
		return p.failUnsent(ctx, ferr)
	}
	return p.flush(ctx)
}
