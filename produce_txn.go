package riffle

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/riffle-go/riffle/internal/batch"
	"github.com/riffle-go/riffle/internal/kafkaerr"
	"github.com/riffle-go/riffle/internal/producer"
	"github.com/riffle-go/riffle/internal/txn"
)

// txnState is the shell of a transactional producer around its pure core
// (internal/txn): it serialises the transactional calls, admits records,
// sends the coordinator's requests and acts on the core's answers.
type txnState struct {
	p       *Producer
	id      string
	timeout time.Duration

	// calls holds one token: InitTransactions, CommitTransaction,
	// AbortTransaction, SendOffsetsToTransaction and Close run one at a
	// time (each waits for the token within its context).
	calls chan struct{}
	// gate mirrors m.Gate() for the lock-free admission of records.
	gate    atomic.Uint64
	addWake chan struct{} // wakes addLoop
	// addBusy holds a token while addLoop sends an AddPartitionsToTxn:
	// an abort waits for it before its EndTxn.
	addBusy chan struct{}

	mu      sync.Mutex // guards the fields below
	m       txn.Machine
	failed  chan struct{}      // closed when m enters an error state; new for each transaction
	start   time.Time          // when the coordinator learnt of the transaction (see timedOut)
	coords  map[coordKey]int32 // known coordinators
	v2      bool               // the coordinator supports KIP-890 (see learn)
	canBump bool               // the coordinator bumps epochs (KIP-360)
	failing uint64             // 1 + the transaction whose records its error state failed
	// offs are the offsets the groups' coordinators accepted for the
	// open transaction, per group, kept only for CommitHooks (see
	// keptOffset): CommitTransaction reports them once it commits.
	offs map[string]map[TopicPartition]OffsetAndMetadata
}

func newTxnState(p *Producer) *txnState {
	s := &txnState{
		p: p, id: p.cfg.transactionalID, timeout: p.cfg.txnTimeout,
		calls:   make(chan struct{}, 1),
		addWake: make(chan struct{}, 1),
		addBusy: make(chan struct{}, 1),
		failed:  make(chan struct{}),
		coords:  map[coordKey]int32{},
	}
	s.gate.Store(s.m.Gate())
	return s
}

// changedLocked publishes the machine's gate after a change and, when the
// machine entered an error state, wakes a waiting commit and fails the
// records that can no longer be sent.
func (s *txnState) changedLocked() {
	s.gate.Store(s.m.Gate())
	st := s.m.State()
	if st != txn.AbortableError && st != txn.FatalError {
		return
	}
	select {
	case <-s.failed:
	default:
		close(s.failed)
	}
	if s.failing != s.m.Seq()+1 {
		// Fail the transaction's records that can no longer be sent
		// now, as the Java client does, rather than at the abort: a
		// ProduceSync waiting for them returns. The mark is taken
		// now: records of a later transaction, produced once this one
		// is aborted, are not this one's.
		s.failing = s.m.Seq() + 1
		err, mark := s.m.Err(), s.p.buf.flushMark()
		s.p.life.Go(func() { s.p.failMarked(s.p.ctx, err, mark) })
	}
}

// txnState returns the state of the producer's transactions (Uninitialized
// without a TransactionalID).
func (p *Producer) txnState() txn.State {
	if p.txn == nil {
		return txn.Uninitialized
	}
	p.txn.mu.Lock()
	defer p.txn.mu.Unlock()
	return p.txn.m.State()
}

func (s *txnState) isV2() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.m.V2()
}

// lock takes the token of the transactional calls.
func (s *txnState) lock(ctx context.Context) error {
	select {
	case s.calls <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s *txnState) unlock() { <-s.calls }

// fail applies an error of action a to the machine and returns what the
// caller reports.
func (s *txnState) fail(a txn.Action, err error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	err = s.m.Fail(a, err)
	s.changedLocked()
	return err
}

// admit lets a record into the open transaction: it returns the gate the
// record was admitted under, or why it may not be produced.
func (s *txnState) admit() (uint64, error) {
	if g := s.gate.Load(); g&1 == 1 {
		return g, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.m.CheckSend(); err != nil {
		return 0, err
	}
	return s.m.Gate(), nil
}

// readmit checks, once the record counts in the producer's buffer (its
// flush generation), that the transaction it was admitted to still takes
// records. A commit closes the gate before it marks what it flushes, so a
// record that passes here is flushed by that commit; one that does not
// may not be, and fails.
func (s *txnState) readmit(g uint64) error {
	if s.gate.Load() == g {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.m.CheckSend(); err != nil {
		return err
	}
	return fmt.Errorf("%w: the transaction ended while the record was produced", ErrTransactionState)
}

// recordFailed makes the transaction abortable (or the producer fatal)
// when a record admitted to it failed: Java's maybeTransitionToErrorState.
// Failures the transaction itself caused (an abort, the producer
// closing, its error state) change nothing.
func (s *txnState) recordFailed(err error) {
	if errors.Is(err, txn.ErrAborted) || errors.Is(err, txn.ErrState) || errors.Is(err, txn.ErrAbortable) ||
		errors.Is(err, txn.ErrFatal) || errors.Is(err, ErrClosed) {
		return
	}
	a := txn.Abortable
	var ke *KafkaError
	if errors.As(err, &ke) {
		a = txn.Classify(txn.OpProduce, ke.Code)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if ke != nil && ke.Code == kafkaerr.InvalidProducerEpoch {
		s.m.MarkStale()
	}
	s.m.Fail(a, err)
	s.changedLocked()
}

// keptOffset keeps, for the CommitHooks, an offset the coordinator of
// group accepted for the open transaction (a later one of the partition
// replaces it, as at the coordinator).
func (s *txnState) keptOffset(group string, tp TopicPartition, om OffsetAndMetadata) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.offs == nil {
		s.offs = map[string]map[TopicPartition]OffsetAndMetadata{}
	}
	g := s.offs[group]
	if g == nil {
		g = map[TopicPartition]OffsetAndMetadata{}
		s.offs[group] = g
	}
	g[tp] = om
}

// requireBump records that the sequences of the current epoch are broken:
// the abort bumps the epoch.
func (s *txnState) requireBump() {
	s.mu.Lock()
	s.m.RequireBump()
	s.mu.Unlock()
}

// mayPin reports whether part's batches may be sent now (the sender
// calls it under part's lock). Under v1 a partition not yet in the
// transaction waits for addLoop, which wakes it once added.
func (s *txnState) mayPin(part *partState) bool {
	s.mu.Lock()
	ok, ask := s.m.SendAllowed(txn.TP{Topic: part.topic.name, Partition: part.id})
	s.mu.Unlock()
	if ask {
		select {
		case s.addWake <- struct{}{}:
		default:
		}
	}
	return ok
}

// wrote records (v2) that a batch of part went into a request.
func (s *txnState) wrote(part *partState) {
	s.mu.Lock()
	if s.m.V2() {
		s.m.Wrote(txn.TP{Topic: part.topic.name, Partition: part.id})
		s.startedLocked()
	}
	s.mu.Unlock()
}

func (s *txnState) startedLocked() {
	if s.start.IsZero() && s.m.Started() {
		s.start = time.Now()
	}
}

// addLoop adds the partitions batches wait for to the transaction (v1),
// all waiting partitions in one AddPartitionsToTxn, and wakes them.
func (s *txnState) addLoop() {
	for {
		select {
		case <-s.p.ctx.Done():
			return
		case <-s.addWake:
		}
		more := true
		for more && s.p.ctx.Err() == nil {
			more = s.addOnce()
		}
	}
}

// addOnce adds the partitions waiting to be added and reports whether
// there were any.
func (s *txnState) addOnce() bool {
	select {
	case s.addBusy <- struct{}{}:
	case <-s.p.ctx.Done():
		return false
	}
	defer func() { <-s.addBusy }()
	s.mu.Lock()
	tps, seq := s.m.Wanted(), s.m.Seq()
	s.mu.Unlock()
	if len(tps) == 0 {
		return false
	}
	a, err := s.addPartitions(s.p.ctx, seq, tps)
	switch {
	case errors.Is(err, errTxnMovedOn) || s.p.ctx.Err() != nil:
		return true
	case err != nil:
		if retried(a) {
			// The retry budget ran out: the records cannot be
			// sent in this transaction.
			a = txn.Abortable
		}
		s.p.c.log.Warn("adding partitions to the transaction failed", "transactional_id", s.id, "err", err)
		s.fail(a, err)
		return true
	}
	s.mu.Lock()
	s.m.Added(seq, tps)
	s.startedLocked()
	s.mu.Unlock()
	s.p.wakePartitions(tps)
	return true
}

// awaitAdds waits until no AddPartitionsToTxn is on its way (see addBusy).
func (s *txnState) awaitAdds(ctx context.Context) error {
	select {
	case s.addBusy <- struct{}{}:
		<-s.addBusy
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// wakePartitions offers the partitions to their senders.
func (p *Producer) wakePartitions(tps []txn.TP) {
	topics := *p.topics.Load()
	for _, tp := range tps {
		ts := topics[tp.Topic]
		if ts == nil {
			continue
		}
		if parts := ts.partitions(); int(tp.Partition) < len(parts) {
			part := parts[tp.Partition]
			part.mu.Lock()
			part.wakeLocked()
			part.mu.Unlock()
		}
	}
}

// failUnsent fails, with cause, every record produced so far that has no
// outcome yet, as soon as nothing of its partition is in flight: records
// not yet sent, and batches whose requests were answered but must be
// sent again. Their transaction is aborted (or the producer failed), so
// whether the broker wrote them no longer matters; but a batch that took
// its sequence numbers leaves a hole in them, so it asks for an epoch
// bump. Records produced after it started (in a later transaction) are
// left alone. It returns when every earlier record has its outcome, or
// ctx's error.
func (p *Producer) failUnsent(ctx context.Context, cause error) error {
	return p.failMarked(ctx, cause, p.buf.flushMark())
}

// failMarked is failUnsent for the records of the flush generations of
// mark.
func (p *Producer) failMarked(ctx context.Context, cause error, mark []*flushGen) error {
	wait := time.Millisecond
	for {
		for _, ts := range *p.topics.Load() {
			for _, part := range ts.partitions() {
				if part.dropUnsent(cause, mark) {
					p.txn.requireBump()
				}
			}
		}
		ch, pending := p.buf.pendingBefore(mark, true) // outcomes: a callback may abort
		if !pending {
			return nil
		}
		// Answers of requests in flight do not signal the buffer:
		// look again shortly.
		t := time.NewTimer(wait)
		select {
		case <-ch:
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		}
		t.Stop()
		wait = min(2*wait, 50*time.Millisecond)
	}
}

func inMark(mark []*flushGen, g *flushGen) bool {
	for _, m := range mark {
		if m == g {
			return true
		}
	}
	return false
}

// dropUnsent fails with cause the partition's records of the flush
// generations of mark, if none of its requests is in flight, and reports
// whether a dropped batch had taken sequence numbers. A transaction's
// records all precede the next one's (the abort fails them all before it
// completes), so the sealed batches are either all of mark or all later.
func (s *partState) dropUnsent(cause error, mark []*flushGen) (pinned bool) {
	s.mu.Lock()
	if s.seq.Inflight() > 0 || len(s.open) == 0 && s.seq.Len() == 0 {
		s.mu.Unlock()
		return false
	}
	var open []pendingRecord
	keep := s.open[:0:0]
	for _, pr := range s.open {
		if inMark(mark, pr.gen) {
			open = append(open, pr)
		} else {
			keep = append(keep, pr)
		}
	}
	if len(open) > 0 {
		s.open = keep
		s.openBytes = 0
		if len(keep) > 0 {
			s.openBytes = batch.BatchOverhead
			for _, pr := range keep {
				s.openBytes += pr.bound
			}
		} else {
			s.due = false
			if s.linger != nil {
				s.linger.Stop()
			}
		}
	}
	var batches []*producer.Batch
	if bs := s.seq.Batches(); len(bs) > 0 && inMark(mark, bs[0].Payload.(*pbatch).recs[0].gen) {
		batches = s.seq.TakeAll()
		s.retries, s.backoff = 0, time.Time{}
	}
	s.mu.Unlock()
	err := fmt.Errorf("%s[%d]: %w", s.topic.name, s.id, cause)
	if len(open) > 0 {
		s.p.finish(&pbatch{recs: open}, s.topic.name, s.id, -1, err)
	}
	for _, b := range batches {
		pinned = pinned || b.Pinned()
		s.p.finish(b.Payload.(*pbatch), s.topic.name, s.id, -1, err)
	}
	return pinned
}

// installIdentity makes id the producer's, restarting every partition's
// sequences (all are quiesced: nothing is buffered between transactions).
func (p *Producer) installIdentity(ctx context.Context, id producer.Identity) error {
	for {
		p.id.mu.Lock()
		p.id.ready = true
		p.id.mu.Unlock()
		if p.resetAll(id) {
			p.c.log.Debug("transactional producer epoch", "transactional_id", p.cfg.transactionalID, "producer_id", id.ID, "epoch", id.Epoch)
			return nil
		}
		// A partition still has an answer to come: wait for it.
		t := time.NewTimer(5 * time.Millisecond)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		}
	}
}
