package riffle

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/riffle-go/riffle/internal/txn"
)

// ExactlyOnce makes a group consumer consume, transform and produce
// exactly once with p, a transactional producer (TransactionalID) on which
// InitTransactions has returned. The consumer runs p's transactions: one
// is always open while handlers run, and the records a handler produces
// with p (p.Produce or p.ProduceSync, called before the handler returns)
// go into it. At each commit point the consumer stops dispatching, waits
// for the handler calls in progress, sends the positions the handlers
// reached to the transaction with the group's metadata
// (SendOffsetsToTransaction with Consumer.GroupMetadata, KIP-447) and
// commits it, then begins the next one. A read_committed consumer of the
// outputs, of any client, so sees the outputs of every input exactly once,
// and the group's committed offsets move with them.
//
// Commit points are set by every (see CommitEvery), and also come:
//
//   - at a revoke: the transaction commits (or, when a handler outlives
//     RevokeTimeout, aborts) before the partitions are released, so their
//     next owner starts where this one's outputs end;
//   - at a loss (the member was fenced): the transaction aborts, since
//     another member may own the partitions already;
//   - at Close: the transaction commits before the member leaves.
//
// A handler error (or panic), or an abortable transaction error (a record
// that failed, offsets the group's coordinator refused after a rebalance),
// aborts the transaction and rewinds every partition to the offset of the
// last committed transaction (or where it started): the records since
// then are delivered again, as a Java application seeks back after
// abortTransaction. The handler error is passed to OnPartitionError (the
// partition does not stop), and consecutive aborts back off (the client's
// RetryBackoff) before the next transaction. A fatal producer error
// (ErrTransactionFatal, e.g. ErrProducerFenced: another process took the
// transactional id over) stops every partition with that error: close the
// consumer and the producer.
//
// The option implies DisableCommits (the consumer commits nothing itself;
// Commit, CommitOffsets and CommitAsync fail with ErrTransactionState) and
// read_committed isolation for the inputs. The consumer owns p's
// transactions while it runs: do not call BeginTransaction,
// CommitTransaction, AbortTransaction or SendOffsetsToTransaction on p
// meanwhile, nor share p with another consumer. Records produced with p
// outside a handler call (from a goroutine the handler left running, or
// after it returned) are not covered: they may fail with
// ErrTransactionState or land in a later transaction.
//
// A handler call delays the commit point it runs into, so it must finish
// well within the producer's TransactionTimeout; the coordinator aborts a
// transaction open longer. With HandleRecord that is the record being
// handled: a runner given a chunk of a partition's records
// (MaxBatchRecords) stops at the record boundary where a commit point
// comes due and hands the rest over after the commit. With HandleBatch it
// is the whole batch (up to MaxBatchRecords records).
//
// NewShareConsumer refuses it: share groups acknowledge records and have
// no offsets to commit in a transaction.
func ExactlyOnce(p *Producer, every CommitEvery) ConsumerOption {
	return func(c *consumerConfig) { c.eos = &eosConfig{p: p, every: every} }
}

// CommitEvery says how often ExactlyOnce commits its transaction: once
// Interval has passed since the transaction's first input was handled, or
// once Records inputs were handled in it, whichever comes first.
//
// Interval defaults to 100 ms, Kafka Streams' commit interval under
// exactly-once: outputs stay invisible to read_committed consumers until
// their transaction commits, so the interval is the latency added
// downstream, while each commit costs a TxnOffsetCommit, an EndTxn, a
// marker per partition written, and a pause of dispatch while the
// handler calls in progress finish. It must be below the producer's
// TransactionTimeout.
//
// Records (default 0: no count) commits after every Records inputs. With
// HandleRecord it is checked between records (a few more may be handled
// when several partitions run at once); with HandleBatch when a handler
// call returns, so Records 1 commits after every batch.
type CommitEvery struct {
	Interval time.Duration
	Records  int
}

type eosConfig struct {
	p     *Producer
	every CommitEvery
}

// defaultEOSInterval is Kafka Streams' commit.interval.ms under
// exactly_once_v2 (StreamsConfig.EOS_DEFAULT_COMMIT_INTERVAL_MS).
const defaultEOSInterval = 100 * time.Millisecond

func (e *eosConfig) validate(c *consumerConfig) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: consumer: ExactlyOnce: "+format, append([]any{ErrInvalidConfig}, args...)...)
	}
	switch {
	case e.p == nil:
		return bad("no producer")
	case e.p.txn == nil:
		return bad("the producer has no TransactionalID")
	case c.group.id == "":
		return bad("needs ConsumerGroup (the offsets commit with the group's metadata)")
	case c.sink != nil:
		return bad("a processor commits its own offsets")
	case e.every.Interval < 0 || e.every.Records < 0:
		return bad("negative CommitEvery %+v", e.every)
	}
	if e.every.Interval == 0 {
		e.every.Interval = defaultEOSInterval
	}
	if t := e.p.cfg.txnTimeout; e.every.Interval >= t {
		return bad("commit interval %v not below the producer's TransactionTimeout %v", e.every.Interval, t)
	}
	// The consumer commits nothing itself, and reads only committed
	// inputs: an aborted upstream transaction has no outputs.
	c.group.autoCommit, c.group.noCommits = false, true
	c.isolation = ReadCommitted
	return nil
}

// eos runs the transactions of a consumer under ExactlyOnce. Runners pass
// its gate to run a chunk (enter, leave); the gate closes at a commit
// point, which waits until no chunk runs (hold). The steps that end a
// transaction and begin the next (the loop's commits, revokes, losses,
// Close) take the token, so they run one at a time.
type eos struct {
	cs    *Consumer
	p     *Producer
	every CommitEvery

	token chan struct{}
	wake  chan struct{} // wakes loop

	// For tests: transactions committed (and of them, by a revoke with
	// inputs handled), and aborted.
	commits, revokeCommits, aborts atomic.Int64

	// mu is taken before a partition's mu, never after.
	mu        sync.Mutex
	seq       uint64        // the current transaction; chunks of an earlier one record nothing
	open      bool          // chunks may start
	opened    chan struct{} // closed while open (and once fatal)
	running   int           // chunks started and not yet left, of any transaction
	shut      atomic.Bool   // !open, read by running chunks at each record boundary
	idle      chan struct{} // closed when running drops to 0; nil if nobody waits
	begun     bool          // a transaction is open in the producer
	ending    eosEnd        // an end whose outcome is not known yet
	handled   int           // inputs handled in the transaction
	first     time.Time     // when the first of them was handled
	offsets   map[TopicPartition]eosPos
	failed    error     // a handler's error: the transaction aborts
	fatal     error     // the producer failed for good
	closed    bool      // Close ended the last transaction
	failures  int       // consecutive aborts caused by failures, for the backoff
	holdUntil time.Time // no transaction begins before (backoff)
	rewindDue bool      // an abort happened: rewind before the next begins
}

// eosEnd is how the open transaction is being ended.
type eosEnd int8

const (
	endNone eosEnd = iota
	endCommit
	endAbort
)

// eosPos is the position a partition's handlers reached in the
// transaction: the offset to commit, with the leader epoch of the record
// before it.
type eosPos struct {
	p      *cpart
	offset int64
	epoch  int32
}

func newEOS(cs *Consumer) *eos {
	return &eos{
		cs: cs, p: cs.cfg.eos.p, every: cs.cfg.eos.every,
		token:   make(chan struct{}, 1),
		wake:    make(chan struct{}, 1),
		opened:  make(chan struct{}),
		offsets: map[TopicPartition]eosPos{},
	}
}

// start begins the first transaction and opens the gate.
func (e *eos) start() error {
	if err := e.p.BeginTransaction(); err != nil {
		return fmt.Errorf("ExactlyOnce: %w", err)
	}
	e.mu.Lock()
	e.begun = true
	e.openLocked()
	e.mu.Unlock()
	return nil
}

func (e *eos) openLocked() {
	if !e.open && e.fatal == nil {
		e.open = true
		e.shut.Store(false)
		close(e.opened)
	}
}

func (e *eos) closeGateLocked() {
	if e.open {
		e.open = false
		e.shut.Store(true)
		e.opened = make(chan struct{})
	}
}

func (e *eos) nudge() { nudge(e.wake) }

// enter admits a chunk into the open transaction, waiting while the gate
// is closed. It returns the transaction's number, or the producer's fatal
// error, or ctx's.
func (e *eos) enter(ctx context.Context) (uint64, error) {
	for {
		e.mu.Lock()
		if e.fatal != nil {
			err := e.fatal
			e.mu.Unlock()
			return 0, err
		}
		if e.open {
			e.running++
			seq := e.seq
			e.mu.Unlock()
			return seq, nil
		}
		ch := e.opened
		e.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
}

// leave ends a chunk of p that entered transaction seq: n inputs were
// handled (p's processed offset is past them), or, with moved, none, but
// p's processed offset moved past markers at its end (a gap that only the
// commit of an offset carries to the group: it is committed too, so an
// idle pipeline's committed lag reaches 0); fail is the handler's
// error, if any: the record it failed on may have produced some of its
// outputs, so the transaction must abort, whether or not the partition is
// still assigned. A chunk of an earlier transaction (aborted while it
// ran) records nothing.
func (e *eos) leave(seq uint64, p *cpart, n int, moved bool, fail error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if seq == e.seq && e.begun && n == 0 && moved && fail == nil {
		p.mu.Lock()
		pos := eosPos{p: p, offset: p.processed, epoch: p.processedEpoch}
		ahead := pos.offset > p.txnBase
		p.mu.Unlock()
		if ahead {
			e.offsets[p.tp] = pos
			if e.first.IsZero() {
				e.first = time.Now()
				e.nudge() // the interval starts
			}
		}
	}
	if seq == e.seq && e.begun {
		pos := eosPos{p: p, offset: -1}
		if n > 0 {
			// Read under e.mu: once this chunk has run, the next
			// chunk of p may run and leave on another runner, and
			// reading first, recording after, let this (earlier)
			// position overwrite its later one: the transaction
			// then committed an offset below records it had
			// handled, which a restart handled again.
			p.mu.Lock()
			pos.offset, pos.epoch = p.processed, p.processedEpoch
			p.mu.Unlock()
		}
		if n > 0 && pos.offset >= 0 {
			e.offsets[p.tp] = pos
			if e.first.IsZero() {
				e.first = time.Now()
				e.nudge() // the interval starts
			}
			e.handled += n
			if e.every.Records > 0 && e.handled >= e.every.Records {
				// Full: no chunk enters until the loop committed
				// (waking it takes long enough for hundreds more).
				e.closeGateLocked()
				e.nudge()
			}
		}
		if fail != nil && e.failed == nil {
			e.failed = fail
			e.closeGateLocked()
			e.nudge()
		}
	}
	e.running--
	if e.running == 0 {
		if e.idle != nil {
			close(e.idle)
			e.idle = nil
		}
		if !e.begun {
			e.nudge() // the next transaction may begin
		}
	}
}

// eosChunk is a HandleRecord chunk running in transaction seq. Between
// its records the chunk asks cut whether to stop, so that a commit point
// comes at the record where it is due, not at the chunk's end (up to
// MaxBatchRecords records later): a crash then redoes at most one
// interval's work, and Records counts records, not chunks.
type eosChunk struct {
	e     *eos
	seq   uint64
	base  int  // inputs the transaction had handled when the chunk's first record finished; -1 before
	moved bool // run moved the partition past markers at its end, handling no record
}

// cut reports whether the chunk stops before its next record, done
// records handled: the gate closed (a commit point came due, or a revoke,
// a failure, Close: each waits for the running chunks), or the inputs of
// the transaction reached CommitEvery.Records. It must not be called with
// a partition's mu held.
func (c *eosChunk) cut(done int) bool {
	if c.base < 0 {
		c.base = c.e.started(c.seq)
	}
	if c.e.shut.Load() {
		return true
	}
	n := c.e.every.Records
	return n > 0 && c.base+done >= n
}

// started starts the interval of transaction seq, if no input of it was
// handled yet, when a chunk finished its first record (leave would only
// when the chunk ends), and returns the inputs the transaction handled in
// the chunks that left.
func (e *eos) started(seq uint64) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	if seq != e.seq || !e.begun {
		return 0
	}
	if e.first.IsZero() {
		e.first = time.Now()
		e.nudge() // the interval starts
	}
	return e.handled
}

// holdGate closes the gate and waits, within ctx, until no chunk runs.
// The gate stays closed until resume.
func (e *eos) holdGate(ctx context.Context) error {
	e.mu.Lock()
	e.closeGateLocked()
	if e.running == 0 {
		e.mu.Unlock()
		return nil
	}
	if e.idle == nil {
		e.idle = make(chan struct{})
	}
	ch := e.idle
	e.mu.Unlock()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("waiting for running handlers: %w", ctx.Err())
	}
}

func (e *eos) lock(ctx context.Context) error {
	select {
	case e.token <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (e *eos) unlock() { <-e.token }

// loop commits at the commit points of every, finishes ends whose outcome
// was unknown, and begins transactions, until ctx ends.
func (e *eos) loop(ctx context.Context) {
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for {
		if d, ok := e.nextStep(); ok {
			t.Reset(d)
			select {
			case <-ctx.Done():
				return
			case <-e.wake:
			case <-t.C:
			}
			if !t.Stop() {
				select {
				case <-t.C:
				default:
				}
			}
		} else {
			select {
			case <-ctx.Done():
				return
			case <-e.wake:
			}
		}
		if e.lock(ctx) != nil {
			return
		}
		e.step(ctx)
		e.unlock()
	}
}

// nextStep returns how long until the loop has something to do (ok false:
// nothing until woken).
func (e *eos) nextStep() (time.Duration, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	now := time.Now()
	switch {
	case e.fatal != nil || e.closed:
		return 0, false
	case e.ending != endNone:
		return e.cs.c.cfg.retryBackoff.Delay(1, rand.Float64()), true
	case e.failed != nil:
		return 0, true
	case !e.begun:
		if e.running > 0 {
			return 0, false // leave wakes the loop
		}
		return max(e.holdUntil.Sub(now), 0), true
	case e.first.IsZero():
		return 0, false // nothing handled yet
	case e.every.Records > 0 && e.handled >= e.every.Records:
		return 0, true
	}
	return max(e.first.Add(e.every.Interval).Sub(now), 0), true
}

// step does what is due; the caller holds the token.
func (e *eos) step(ctx context.Context) {
	e.mu.Lock()
	due := e.ending != endNone || e.failed != nil ||
		e.begun && !e.first.IsZero() && (!time.Now().Before(e.first.Add(e.every.Interval)) ||
			e.every.Records > 0 && e.handled >= e.every.Records)
	e.mu.Unlock()
	if due {
		if err := e.holdGate(ctx); err != nil {
			return // closing: Close ends the transaction
		}
		if err := e.end(ctx, true); err != nil && ctx.Err() == nil {
			e.cs.c.log.Warn("ending the transaction failed; retrying", "group", e.cs.cfg.group.id, "err", err)
		}
	}
	e.resume()
}

// resume begins the next transaction once the last one ended and no chunk
// of it runs (rewinding the partitions first after an abort), and opens
// the gate; the caller holds the token.
func (e *eos) resume() {
	e.mu.Lock()
	if e.fatal != nil || e.closed || e.ending != endNone || e.failed != nil {
		e.mu.Unlock()
		return
	}
	if !e.begun {
		if e.running > 0 {
			e.mu.Unlock()
			return // the last chunk to leave wakes the loop
		}
		if e.rewindDue {
			// No chunk runs (the gate is closed and none
			// entered since), so the positions are final: a chunk
			// of the aborted transaction still running at the
			// abort moved its partition on, and is rewound too.
			e.rewindDue = false
			e.mu.Unlock()
			e.rewind()
			e.mu.Lock()
		}
		if time.Now().Before(e.holdUntil) {
			e.mu.Unlock()
			return // the loop comes back
		}
		if err := e.p.BeginTransaction(); err != nil {
			e.mu.Unlock()
			e.failFatal(fmt.Errorf("ExactlyOnce: beginning a transaction: %w", err))
			return
		}
		e.begun = true
	}
	e.openLocked()
	e.mu.Unlock()
}

// end ends the open transaction, the gate held: it commits it when commit
// is set, no handler failed and every partition it has offsets of is
// still the member's; otherwise (or when the commit fails abortable) it
// aborts it, and the partitions are rewound before the next one begins.
// An end whose outcome is unknown when ctx ends is finished by the loop.
// The caller holds the token.
func (e *eos) end(ctx context.Context, commit bool) error {
	e.mu.Lock()
	if !e.begun {
		e.mu.Unlock()
		return nil
	}
	failure, inputs, handled := e.failed != nil, e.handled > 0, e.handled
	switch {
	case e.ending != endNone:
		commit = e.ending == endCommit
	case failure:
		commit = false
	case commit && e.handled == 0 && len(e.offsets) == 0:
		// Nothing to commit: the transaction stays open. (A chunk
		// that started the interval and then handled nothing, e.g.
		// its partition was reset, leaves no input behind. Offsets
		// alone, past markers, are committed: leave.)
		e.first = time.Time{}
		e.mu.Unlock()
		return nil
	}
	offs := make(map[TopicPartition]eosPos, len(e.offsets))
	for tp, pos := range e.offsets {
		offs[tp] = pos
	}
	e.mu.Unlock()

	if commit {
		e.setEnding(endCommit)
		err := e.commit(ctx, offs)
		switch {
		case err == nil:
			e.cs.c.log.Debug("transaction committed", "group", e.cs.cfg.group.id, "partitions", len(offs), "inputs", handled, "offsets", eosOffsets(offs))
			e.committed(offs)
			return nil
		case errors.Is(err, ErrTransactionAbortable) || errors.Is(err, errNotOwned):
			e.cs.c.log.Warn("transaction aborted", "group", e.cs.cfg.group.id, "err", err)
			failure = true
		default:
			e.fatalErr(err)
			return err // fatal, or unknown: the loop finishes the commit
		}
	}
	e.setEnding(endAbort)
	err := e.retry(ctx, func(ctx context.Context) error { return e.p.AbortTransaction(ctx) })
	switch {
	case err == nil:
		e.aborted(failure, inputs)
		return nil
	case errors.Is(err, ErrTransactionState) && e.p.txnState() == txn.Committing:
		// The commit may have reached the coordinator (a revoke's or
		// Close's deadline ended it): only a commit can finish it. Its
		// offsets were accepted, so committing it is consistent.
		e.setEnding(endCommit)
		return e.end(ctx, true)
	}
	e.fatalErr(err)
	return err
}

// eosOffsets logs a transaction's offsets, formatted only if logged.
type eosOffsets map[TopicPartition]eosPos

func (o eosOffsets) LogValue() slog.Value {
	tps := sortedTPs(o)
	s := make([]string, len(tps))
	for i, tp := range tps {
		s[i] = fmt.Sprintf("%s@%d", tp, o[tp].offset)
	}
	return slog.StringValue(strings.Join(s, " "))
}

func (e *eos) setEnding(how eosEnd) {
	e.mu.Lock()
	e.ending = how
	e.mu.Unlock()
}

// fatalErr stops the consumer's partitions if err leaves the producer
// unable to run transactions for the consumer: a fatal error, the
// producer closed, or a transaction ended behind the consumer's back.
func (e *eos) fatalErr(err error) {
	if errors.Is(err, ErrTransactionFatal) || errors.Is(err, ErrTransactionState) || errors.Is(err, ErrClosed) {
		e.failFatal(err)
	}
}

// errNotOwned: the transaction has offsets of a partition the member no
// longer owns (it was lost meanwhile): it must abort.
var errNotOwned = errors.New("offsets of a partition no longer owned")

// commit sends offs to the transaction and commits it.
func (e *eos) commit(ctx context.Context, offs map[TopicPartition]eosPos) error {
	if e.p.txnState() == txn.InTransaction {
		om := make(map[TopicPartition]OffsetAndMetadata, len(offs))
		for tp, pos := range offs {
			om[tp] = OffsetAndMetadata{Offset: pos.offset, LeaderEpoch: pos.epoch, Metadata: e.cs.cfg.group.commitMetadata}
		}
		if len(om) > 0 {
			err := e.retry(ctx, func(ctx context.Context) error {
				// Read at each attempt: the generation may move on,
				// and a member that lost a partition must not
				// commit it (its generation alone may still pass).
				gm := e.cs.GroupMetadata()
				if gm.GenerationID < 0 || gm.MemberID == "" {
					return fmt.Errorf("%w: the member is not in a generation", errNotOwned)
				}
				if err := e.owns(offs); err != nil {
					return err
				}
				return e.p.SendOffsetsToTransaction(ctx, om, gm)
			})
			if err != nil {
				return err
			}
		}
	}
	return e.retry(ctx, func(ctx context.Context) error { return e.p.CommitTransaction(ctx) })
}

// owns reports errNotOwned unless the member owns every partition of offs.
func (e *eos) owns(offs map[TopicPartition]eosPos) error {
	m := e.cs.member
	m.mu.Lock()
	defer m.mu.Unlock()
	var lost []TopicPartition
	for tp := range offs {
		if m.owned[tp] == 0 {
			lost = append(lost, tp)
		}
	}
	if len(lost) > 0 {
		sortTPs(lost)
		return fmt.Errorf("%w: %v", errNotOwned, lost)
	}
	return nil
}

// retry calls fn until it returns an outcome: nil, or an error of a
// transaction class (abortable, fatal, state, errNotOwned). An error that
// leaves the outcome unknown (the retry budget ran out, a connection
// failed) is retried after a backoff until ctx ends.
func (e *eos) retry(ctx context.Context, fn func(context.Context) error) error {
	for failures := 1; ; failures++ {
		err := fn(ctx)
		if err == nil || errors.Is(err, ErrTransactionAbortable) || errors.Is(err, ErrTransactionFatal) ||
			errors.Is(err, ErrTransactionState) || errors.Is(err, errNotOwned) || errors.Is(err, ErrClosed) {
			return err
		}
		if ctx.Err() != nil {
			return err
		}
		e.cs.c.log.Info("transactional call failed; retrying", "group", e.cs.cfg.group.id, "err", err)
		t := time.NewTimer(e.cs.c.cfg.retryBackoff.Delay(failures, rand.Float64()))
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return err
		}
	}
}

// committed records a commit: the partitions' committed positions move
// to offs, and the next transaction starts empty.
func (e *eos) committed(offs map[TopicPartition]eosPos) {
	c := e.cs.member.commits
	for tp, pos := range offs {
		pos.p.mu.Lock()
		pos.p.txnBase, pos.p.txnBaseEpoch = pos.offset, pos.epoch
		pos.p.mu.Unlock()
		c.mu.Lock()
		c.committed[tp] = pos.offset
		c.mu.Unlock()
	}
	e.commits.Add(1)
	e.mu.Lock()
	e.resetLocked()
	e.failures = 0
	e.mu.Unlock()
}

// aborted records an abort: the partitions are rewound to their committed
// positions before the next transaction begins (once no chunk of the
// aborted one runs), and after a backoff if a failure caused the abort.
func (e *eos) aborted(failure, inputs bool) {
	if inputs {
		e.aborts.Add(1)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if failure {
		e.failures++
		e.holdUntil = time.Now().Add(e.cs.c.cfg.retryBackoff.Delay(e.failures, rand.Float64()))
	}
	e.rewindDue = true
	e.resetLocked()
}

func (e *eos) resetLocked() {
	e.seq++
	e.begun = false
	e.ending = endNone
	e.handled = 0
	e.first = time.Time{}
	e.failed = nil
	e.offsets = map[TopicPartition]eosPos{}
}

// rewind moves every partition that handled records since its last
// committed position back to it (Java applications seek to the committed
// offsets after abortTransaction).
func (e *eos) rewind() {
	cs := e.cs
	cs.mu.Lock()
	ps := make([]*cpart, 0, len(cs.parts))
	for _, p := range cs.parts {
		ps = append(ps, p)
	}
	cs.mu.Unlock()
	n := 0
	for _, p := range ps {
		p.mu.Lock()
		if p.state != stateRevoked && p.txnBase >= 0 && (p.processed != p.txnBase || p.state == stateFailed) {
			p.err, p.fetchErr = nil, nil
			p.resetLocked(atCommitted(p.txnBase, p.txnBaseEpoch))
			n++
		}
		p.mu.Unlock()
	}
	if n > 0 {
		cs.c.log.Info("transaction aborted; partitions rewound to their committed offsets", "group", cs.cfg.group.id, "partitions", n)
	}
}

// failFatal stops every partition with err, a fatal producer error: no
// transaction begins any more.
func (e *eos) failFatal(err error) {
	e.mu.Lock()
	first := e.fatal == nil
	if first {
		e.fatal = err
		if !e.open {
			close(e.opened) // wakes the runners waiting at the gate
		}
		e.open = false
		e.shut.Store(true)
	}
	e.mu.Unlock()
	if !first {
		return
	}
	e.cs.c.log.Error("transactional producer failed; the consumer's partitions stop", "group", e.cs.cfg.group.id, "err", err)
	e.cs.mu.Lock()
	ps := make([]*cpart, 0, len(e.cs.parts))
	for _, p := range e.cs.parts {
		ps = append(ps, p)
	}
	e.cs.mu.Unlock()
	for _, p := range ps {
		e.stop(p, err)
	}
}

// stop stops p with err (a fatal producer error).
func (e *eos) stop(p *cpart, err error) {
	p.mu.Lock()
	if p.state == stateRevoked || p.state == stateFailed {
		p.queued = false
		p.mu.Unlock()
		return
	}
	pe := &PartitionError{Topic: p.tp.Topic, Partition: p.tp.Partition, Offset: p.position, Err: err}
	p.state, p.err, p.queued = stateFailed, pe, false
	p.mu.Unlock()
	p.syncHooks()
	e.cs.reportError(pe)
}

// revoke gives tps up: the gate is held until the running handlers
// finished (within RevokeTimeout), the partitions are removed, and the
// transaction commits (aborts if a handler is still running) before the
// member releases them. It fails only if ctx ended first: the partitions
// then stay owned for the loss that follows.
func (e *eos) revoke(ctx context.Context, tps []TopicPartition) error {
	rctx, cancel := context.WithTimeout(ctx, e.cs.cfg.group.revokeTimeout)
	defer cancel()
	if err := e.lock(rctx); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		// A commit point waits for a slow handler, or an end for the
		// coordinator: give the partitions up as lost (handlers
		// cancelled) and make the transaction abort, since their
		// outputs may be in it without their offsets.
		e.cs.remove(rctx, true, tps)
		e.mu.Lock()
		if e.begun && e.failed == nil {
			e.failed = fmt.Errorf("revoke of %v: the transaction was busy for RevokeTimeout %v", tps, e.cs.cfg.group.revokeTimeout)
			e.closeGateLocked()
			e.nudge()
		}
		e.mu.Unlock()
		e.cs.member.groupError(fmt.Errorf("revoke timeout %v: the transaction was busy; partitions %v given up as lost and the transaction aborts", e.cs.cfg.group.revokeTimeout, tps))
		return nil
	}
	defer e.unlock()
	herr := e.holdGate(rctx)
	_, _, rerr := e.cs.remove(rctx, false, tps)
	if ctx.Err() != nil {
		e.resume()
		return ctx.Err()
	}
	if herr != nil || rerr != nil {
		e.cs.member.groupError(fmt.Errorf("revoke timeout %v: %w (the transaction aborts: the outputs of a handler still running must not commit)", e.cs.cfg.group.revokeTimeout, errors.Join(herr, rerr)))
	}
	cctx, ccancel := context.WithTimeout(ctx, e.cs.cfg.group.revokeTimeout)
	e.mu.Lock()
	handled := e.handled > 0
	e.mu.Unlock()
	commits := e.commits.Load()
	err := e.end(cctx, herr == nil && rerr == nil)
	if handled && e.commits.Load() > commits {
		e.revokeCommits.Add(1)
	}
	ccancel()
	e.resume()
	if err != nil && ctx.Err() == nil {
		e.cs.c.log.Warn("ending the transaction on revoke failed", "group", e.cs.cfg.group.id, "err", err)
	}
	return ctx.Err()
}

// lose aborts the transaction after the member lost tps (already removed,
// their handlers cancelled): another member may own them, so nothing of
// theirs may commit. The next transaction begins once their handlers
// returned.
func (e *eos) lose(ctx context.Context) {
	if e.lock(ctx) != nil {
		return
	}
	defer e.unlock()
	e.mu.Lock()
	e.closeGateLocked()
	e.mu.Unlock()
	if err := e.end(ctx, false); err != nil && ctx.Err() == nil {
		e.cs.c.log.Warn("aborting the transaction of lost partitions failed", "group", e.cs.cfg.group.id, "err", err)
	}
	e.resume()
}

// final ends the last transaction as the consumer closes: it commits what
// the handlers finished (aborts if one still runs when ctx ends), and no
// transaction begins any more.
func (e *eos) final(ctx context.Context) error {
	if err := e.lock(ctx); err != nil {
		return err
	}
	defer e.unlock()
	herr := e.holdGate(ctx)
	e.mu.Lock()
	e.closed = true
	if e.fatal != nil {
		e.mu.Unlock()
		return nil // the partitions report it
	}
	e.mu.Unlock()
	err := e.end(ctx, herr == nil)
	if err == nil {
		e.mu.Lock()
		begun := e.begun
		e.mu.Unlock()
		if begun {
			// Nothing was handled: the empty transaction is
			// aborted, which costs no request.
			err = e.end(ctx, false)
		}
	}
	return errors.Join(herr, err)
}
