package process

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/riffle-go/riffle"
	"github.com/riffle-go/riffle/internal/clientinternal"
	"github.com/riffle-go/riffle/internal/sink"
)

// ExactlyOnce makes the processor consume, transform and produce exactly
// once, with concurrency beyond the partition count, through p, a
// transactional producer (riffle.TransactionalID) on which
// InitTransactions has returned.
//
// A handler does not produce its outputs itself: it hands them to Output
// with its ctx. They are held until the record finishes (the handler
// returned nil, or the dead-letter function did) and then produced into
// the open transaction, in the same step that marks the record finished;
// the outputs of an attempt that failed are dropped with it, so retries
// add nothing. At each commit point (every, see riffle.CommitEvery) the
// processor sends, for every partition with records finished in the
// transaction, the first unfinished offset and the commit metadata that
// lists the records finished above it, to the transaction with the
// group's metadata (KIP-447), and commits it. Handlers keep running
// meanwhile: a commit point only holds records that finish while it
// runs, never waits for a handler.
//
// What holds, in every Mode:
//
//   - The outputs of a record become visible to read_committed readers
//     exactly when the transaction that marks the record finished commits:
//     a crash, a rebalance or an abort at any point leaves each input
//     either finished with its outputs visible once, or unfinished with
//     none of them visible (it runs again).
//   - A record that did not finish (running at a revoke's deadline, lost,
//     failed for good, or its partition's transaction aborted) has produced
//     nothing visible.
//   - ByKey: the records of one key finish one at a time in offset order,
//     so their outputs are produced in that order; with outputs keyed (or
//     partitioned) alike, a reader sees each key's outputs in input order.
//     Different keys interleave.
//   - ByPartition: the outputs of a partition are produced in offset order.
//   - Unordered: outputs are produced in the order records finish; no
//     order between inputs is kept, in the output as in processing.
//
// A revoke stops the partitions, waits for their running records (up to
// the group's RevokeTimeout; those still running are cancelled and stay
// unfinished) and commits the transaction before the partitions are
// released. A loss aborts it (another member may own the partitions). An
// abort, also after an abortable producer error (an output that failed,
// offsets the coordinator refused), moves every partition with records
// finished in the aborted transaction back to its last committed position
// and metadata: those records run again, in the next transaction. A fatal
// producer error (riffle.ErrTransactionFatal, e.g. riffle.ErrProducerFenced)
// stops the processor's commits; it is reported to OnError and every
// partition stops: close the processor and the producer.
//
// The option needs a consumer group (riffle.ConsumerGroup); it implies
// riffle.DisableCommits and riffle.ReadCommitted for the inputs.
// Processor.Commit commits the open transaction. While the processor runs
// it owns p's transactions: do not begin, commit or abort them, nor produce
// with p directly (DeadLetterTopic's writes go through Output under
// ExactlyOnce).
func ExactlyOnce(p *riffle.Producer, every riffle.CommitEvery) Option {
	return func(c *config) { c.eos = &eosConfig{p: p, every: every} }
}

type eosConfig struct {
	p     *riffle.Producer
	every riffle.CommitEvery
}

// defaultEOSInterval is Kafka Streams' commit interval under exactly-once.
const defaultEOSInterval = 100 * time.Millisecond

func (e *eosConfig) validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: process: ExactlyOnce: "+format, append([]any{riffle.ErrInvalidConfig}, args...)...)
	}
	if e.p == nil {
		return bad("no producer")
	}
	txnal, timeout := clientinternal.ProducerTxn(e.p)
	switch {
	case !txnal:
		return bad("the producer has no TransactionalID")
	case e.every.Interval < 0 || e.every.Records < 0:
		return bad("negative CommitEvery %+v", e.every)
	}
	if e.every.Interval == 0 {
		e.every.Interval = defaultEOSInterval
	}
	if e.every.Interval >= timeout {
		return bad("commit interval %v not below the producer's TransactionTimeout %v", e.every.Interval, timeout)
	}
	return nil
}

// ErrNoOutput: Output was called with a context that is not a handler's
// (or dead-letter function's) under ExactlyOnce, or after the call
// returned.
var ErrNoOutput = errors.New("riffle/process: Output needs the context of a running handler under ExactlyOnce")

type outputsKey struct{}

// outputs collects what one handler (or dead-letter) call hands to Output.
type outputs struct {
	mu     sync.Mutex
	recs   []*riffle.Record
	sealed bool
}

// Output adds recs to the outputs of the record whose handler (or
// dead-letter function) ctx was given to, under ExactlyOnce. They are
// produced into the transaction that marks the record finished, once the
// call returned nil; if it failed, they are dropped. Each record is
// produced as given (topic, key, value, headers; partition chosen by the
// producer's partitioner unless set). Output may be called from
// goroutines the handler starts, until the handler returns.
func Output(ctx context.Context, recs ...*riffle.Record) error {
	o, _ := ctx.Value(outputsKey{}).(*outputs)
	if o == nil {
		return ErrNoOutput
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.sealed {
		return ErrNoOutput
	}
	for _, r := range recs {
		if r == nil {
			return fmt.Errorf("%w: process: Output: nil record", riffle.ErrInvalidConfig)
		}
	}
	o.recs = append(o.recs, recs...)
	return nil
}

// take seals the outputs: later Output calls fail.
func (o *outputs) take() []*riffle.Record {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.sealed = true
	return o.recs
}

// withOutputs returns a handler context that collects outputs, or ctx as
// is without ExactlyOnce.
func (p *Processor) withOutputs(ctx context.Context) (context.Context, *outputs) {
	if p.txn == nil {
		return ctx, nil
	}
	o := &outputs{}
	return context.WithValue(ctx, outputsKey{}, o), o
}

// txnDriver runs the processor's transactions. A record that finishes
// enters its gate, produces its outputs and is marked finished, then
// leaves; a commit point closes the gate and waits for those inside (they
// only hand records to the producer), so the positions it reads cover
// exactly the records whose outputs are in the transaction. The steps that
// end a transaction take the token, one at a time.
//
// Lock order: Processor.mu before txnDriver.mu.
type txnDriver struct {
	p     *Processor
	prod  *riffle.Producer
	every riffle.CommitEvery
	token chan struct{}
	wake  chan struct{}

	commits, aborts atomic.Int64 // for tests and Stats

	mu       sync.Mutex
	open     bool
	opened   chan struct{} // closed while open, and once fatal
	inside   int           // finishers in the gate
	idle     chan struct{} // closed when inside drops to 0; nil if nobody waits
	seq      uint64        // the open transaction's number
	begun    bool          // a transaction is open in the producer
	ending   bool          // a commit's outcome is unknown: only committing again may end it
	sentOffs bool          // the offsets are in the transaction
	finished int           // records finished in it
	first    time.Time     // when the first of them finished
	dirty    map[*part]bool
	failed   error // the transaction must abort
	fatal    error
	closed   bool
	failures int
	hold     time.Time // no transaction begins before (backoff after failures)
	// base is each partition's last committed position (or where it was
	// assigned), which an abort moves it back to.
	base map[sink.Part]sink.Pos
}

func newTxnDriver(p *Processor, c *eosConfig) *txnDriver {
	return &txnDriver{
		p: p, prod: c.p, every: c.every,
		token: make(chan struct{}, 1), wake: make(chan struct{}, 1),
		opened: make(chan struct{}),
		dirty:  map[*part]bool{}, base: map[sink.Part]sink.Pos{},
	}
}

func (d *txnDriver) nudge() {
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

func (d *txnDriver) log() *slog.Logger { return d.p.log }

// start begins the first transaction.
func (d *txnDriver) start() error {
	if err := d.prod.BeginTransaction(); err != nil {
		return fmt.Errorf("process: ExactlyOnce: %w", err)
	}
	d.mu.Lock()
	d.begun = true
	d.openLocked()
	d.mu.Unlock()
	return nil
}

func (d *txnDriver) openLocked() {
	if !d.open && d.fatal == nil && !d.closed {
		d.open = true
		close(d.opened)
	}
}

func (d *txnDriver) closeGateLocked() {
	if d.open {
		d.open = false
		d.opened = make(chan struct{})
	}
}

// enter admits a finishing record into the open transaction, waiting while
// a commit point holds the gate.
func (d *txnDriver) enter(ctx context.Context) error {
	for {
		d.mu.Lock()
		if d.fatal != nil {
			err := d.fatal
			d.mu.Unlock()
			return err
		}
		if d.closed {
			d.mu.Unlock()
			return ErrProcessorClosed
		}
		if d.open {
			d.inside++
			d.mu.Unlock()
			return nil
		}
		ch := d.opened
		d.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// produce hands a finishing record's outputs to the producer, inside the
// gate. An output that fails makes the transaction it was produced in
// abort (the record then runs again); a failure reported after that
// transaction ended is not this one's.
func (d *txnDriver) produce(ctx context.Context, outs []*riffle.Record) {
	if len(outs) == 0 {
		return
	}
	d.mu.Lock()
	seq := d.seq
	d.mu.Unlock()
	for _, r := range outs {
		d.prod.Produce(ctx, r, func(_ *riffle.Record, err error) {
			if err != nil {
				d.failSeq(seq, fmt.Errorf("an output failed: %w", err))
			}
		})
	}
}

// finishedLocked records that pt finished a record in the transaction;
// the caller holds Processor.mu and is inside the gate.
func (d *txnDriver) finishedLocked(pt *part, ok bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.dirty[pt] = true // also when !ok: its outputs may be in; an abort rewinds it
	if !ok {
		return
	}
	if d.finished == 0 {
		d.first = time.Now()
		d.nudge() // the interval starts
	}
	d.finished++
	if d.every.Records > 0 && d.finished >= d.every.Records {
		// Full: no record finishes into it until the loop committed.
		d.closeGateLocked()
		d.nudge()
	}
}

func (d *txnDriver) leave() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.inside--
	if d.inside == 0 && d.idle != nil {
		close(d.idle)
		d.idle = nil
	}
}

// fail makes the open transaction abort.
func (d *txnDriver) fail(err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.failLocked(err)
}

// failSeq makes transaction seq abort, if it is still the open one.
func (d *txnDriver) failSeq(seq uint64, err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.seq == seq {
		d.failLocked(err)
	}
}

func (d *txnDriver) failLocked(err error) {
	if d.begun && d.failed == nil {
		d.failed = err
		d.nudge()
	}
}

// holdGate closes the gate and waits until no finisher is inside. They
// only hand records to the producer, so this is short; ctx bounds it.
func (d *txnDriver) holdGate(ctx context.Context) error {
	d.mu.Lock()
	d.closeGateLocked()
	if d.inside == 0 {
		d.mu.Unlock()
		return nil
	}
	if d.idle == nil {
		d.idle = make(chan struct{})
	}
	ch := d.idle
	d.mu.Unlock()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("waiting for finishing records to hand over their outputs: %w", ctx.Err())
	}
}

func (d *txnDriver) lock(ctx context.Context) error {
	select {
	case d.token <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (d *txnDriver) unlock() { <-d.token }

// loop commits at the commit points and begins transactions until ctx
// ends.
func (d *txnDriver) loop(ctx context.Context) {
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for {
		if wait, ok := d.nextStep(); ok {
			t.Reset(wait)
			select {
			case <-ctx.Done():
				return
			case <-d.wake:
			case <-t.C:
			}
			t.Stop()
		} else {
			select {
			case <-ctx.Done():
				return
			case <-d.wake:
			}
		}
		if d.lock(ctx) != nil {
			return
		}
		d.step(ctx)
		d.unlock()
	}
}

// nextStep returns how long until the loop has something to do (false:
// nothing until woken).
func (d *txnDriver) nextStep() (time.Duration, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	switch {
	case d.fatal != nil || d.closed:
		return 0, false
	case d.ending:
		return 500 * time.Millisecond, true
	case d.failed != nil:
		return 0, true
	case !d.begun:
		return max(time.Until(d.hold), 0), true
	case d.finished == 0:
		return 0, false
	case d.every.Records > 0 && d.finished >= d.every.Records:
		return 0, true
	}
	return max(time.Until(d.first.Add(d.every.Interval)), 0), true
}

// step ends the transaction if a commit point (or a failure) is due and
// begins the next; the caller holds the token.
func (d *txnDriver) step(ctx context.Context) {
	d.mu.Lock()
	due := d.ending || d.failed != nil || d.begun && d.finished > 0 &&
		(!time.Now().Before(d.first.Add(d.every.Interval)) || d.every.Records > 0 && d.finished >= d.every.Records)
	d.mu.Unlock()
	if due {
		if err := d.end(ctx, true, nil); err != nil && ctx.Err() == nil {
			d.log().Warn("ending the transaction failed", "err", err)
		}
	}
	d.resume()
}

// resume begins the next transaction if none is open (after the backoff
// that follows failures) and opens the gate; the caller holds the token.
func (d *txnDriver) resume() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.fatal != nil || d.closed || d.failed != nil || d.ending {
		return
	}
	if !d.begun {
		if time.Now().Before(d.hold) {
			return // the loop comes back
		}
		if err := d.prod.BeginTransaction(); err != nil {
			d.fatalLocked(fmt.Errorf("process: ExactlyOnce: beginning a transaction: %w", err))
			return
		}
		d.begun = true
	}
	d.openLocked()
}

// end ends the open transaction, holding the gate: it commits it when
// commit is set and nothing failed, else aborts it; seal (may be nil) are
// partitions being stopped, which no later finish may add to (they are
// sealed once the gate is held, before positions are read). The caller
// holds the token. The gate stays closed: resume opens it.
func (d *txnDriver) end(ctx context.Context, commit bool, seal []*part) error {
	herr := d.holdGate(ctx)
	if herr != nil {
		// A finisher is stuck handing outputs over (the producer's
		// buffer is full and not draining): the positions cannot be
		// read consistently.
		d.fail(herr)
	}
	p := d.p
	p.mu.Lock()
	for _, pt := range seal {
		pt.sealed = true
	}
	d.mu.Lock()
	if !d.begun {
		d.mu.Unlock()
		p.mu.Unlock()
		return herr
	}
	if d.ending {
		commit = true // only a commit can end it now
	} else if d.failed != nil {
		commit = false
	}
	if commit && d.finished == 0 && !d.ending {
		d.mu.Unlock()
		p.mu.Unlock()
		return nil // nothing to commit: the transaction stays open
	}
	dirty := make([]*part, 0, len(d.dirty))
	for pt := range d.dirty {
		dirty = append(dirty, pt)
	}
	cause := d.failed
	d.mu.Unlock()
	// Positions: per partition, that of its newest generation with records
	// finished in the transaction.
	pos := map[sink.Part]sink.Pos{}
	gens := map[sink.Part]uint64{}
	for _, pt := range dirty {
		if pt.lost {
			commit = false
			if cause == nil {
				cause = fmt.Errorf("%s was lost", pt.tp)
			}
		}
		sp := sink.Part(pt.tp)
		if g, ok := gens[sp]; ok && g > pt.gen {
			continue
		}
		gens[sp] = pt.gen
		if !pt.badMeta {
			// No finished-offset map: records finished above the
			// offset have their outputs held out of the transaction,
			// so every successor must run them again.
			pos[sp] = sink.Pos{Offset: pt.q.tr.Committable()}
		}
	}
	p.mu.Unlock()

	if commit {
		err := d.commit(ctx, pos)
		switch {
		case err == nil:
			d.committed(pos)
			return nil
		case errors.Is(err, riffle.ErrTransactionAbortable) || errors.Is(err, errNotMember):
			cause = err
		case errors.Is(err, riffle.ErrTransactionFatal) || errors.Is(err, riffle.ErrTransactionState) || errors.Is(err, riffle.ErrClosed):
			d.fatalErr(err)
			return err
		default:
			// The outcome is unknown (ctx ended mid-call): the gate
			// stays closed and the loop commits again.
			d.mu.Lock()
			d.ending = d.ending || d.sentOffs || len(pos) == 0
			d.mu.Unlock()
			d.nudge()
			return err
		}
	} else if cause == nil && len(dirty) == 0 {
		// Nothing happened in it (Close): abort it quietly.
		err := d.retry(ctx, func(ctx context.Context) error { return d.prod.AbortTransaction(ctx) })
		if err != nil {
			d.fatalErr(err)
			return err
		}
		d.mu.Lock()
		d.resetLocked()
		d.mu.Unlock()
		return nil
	}
	if cause == nil {
		cause = errors.New("aborted")
	}
	err := d.retry(ctx, func(ctx context.Context) error { return d.prod.AbortTransaction(ctx) })
	if err != nil {
		d.fatalErr(err)
		return err
	}
	d.aborted(dirty, cause)
	return nil
}

var errNotMember = errors.New("the member is not in a generation")

// commit sends pos to the transaction and commits it.
func (d *txnDriver) commit(ctx context.Context, pos map[sink.Part]sink.Pos) error {
	d.mu.Lock()
	sent := d.sentOffs
	d.mu.Unlock()
	if len(pos) > 0 && !sent {
		om := make(map[riffle.TopicPartition]riffle.OffsetAndMetadata, len(pos))
		for sp, at := range pos {
			om[riffle.TopicPartition(sp)] = riffle.OffsetAndMetadata{Offset: at.Offset, LeaderEpoch: -1, Metadata: at.Meta}
		}
		err := d.retry(ctx, func(ctx context.Context) error {
			gm := d.p.cs.GroupMetadata()
			if gm.GenerationID < 0 || gm.MemberID == "" {
				return errNotMember
			}
			return d.prod.SendOffsetsToTransaction(ctx, om, gm)
		})
		if err != nil {
			return err
		}
		d.mu.Lock()
		d.sentOffs = true
		d.mu.Unlock()
	}
	return d.retry(ctx, func(ctx context.Context) error { return d.prod.CommitTransaction(ctx) })
}

// retry calls fn until it returns an outcome: nil or an error of a
// transaction class. Others (a retry budget spent, a connection failure)
// leave the outcome unknown and are retried after a backoff until ctx
// ends.
func (d *txnDriver) retry(ctx context.Context, fn func(context.Context) error) error {
	for n := 1; ; n++ {
		err := fn(ctx)
		if err == nil || errors.Is(err, riffle.ErrTransactionAbortable) || errors.Is(err, riffle.ErrTransactionFatal) ||
			errors.Is(err, riffle.ErrTransactionState) || errors.Is(err, errNotMember) || errors.Is(err, riffle.ErrClosed) ||
			ctx.Err() != nil {
			return err
		}
		d.log().Info("transactional call failed; retrying", "err", err)
		t := time.NewTimer(d.p.retryBackoff.Delay(n, rand.Float64()))
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return err
		}
	}
}

// committed records a commit: the partitions' bases move to pos.
func (d *txnDriver) committed(pos map[sink.Part]sink.Pos) {
	offs := make(map[sink.Part]int64, len(pos))
	d.mu.Lock()
	for sp, at := range pos {
		d.base[sp] = at
		offs[sp] = at.Offset
	}
	d.resetLocked()
	d.failures = 0
	d.mu.Unlock()
	d.commits.Add(1)
	clientinternal.ConsumerCommitted(d.p.cs, offs)
}

// aborted records an abort: the partitions with records finished in it
// go back to their bases (their records run again), after a backoff if a
// failure caused it.
func (d *txnDriver) aborted(dirty []*part, cause error) {
	d.aborts.Add(1)
	d.mu.Lock()
	d.failures++
	d.hold = time.Now().Add(d.p.retryBackoff.Delay(d.failures, rand.Float64()))
	d.resetLocked()
	base := make(map[sink.Part]sink.Pos, len(d.base))
	for sp, at := range d.base {
		base[sp] = at
	}
	d.mu.Unlock()
	d.log().Warn("transaction aborted; partitions rewound to their last committed positions", "cause", cause, "partitions", len(dirty))
	d.p.rewind(dirty, base)
}

func (d *txnDriver) resetLocked() {
	d.seq++
	d.begun, d.ending, d.sentOffs = false, false, false
	d.finished = 0
	d.first = time.Time{}
	d.failed = nil
	d.dirty = map[*part]bool{}
}

// fatalErr stops the transactions if err leaves the producer unable to
// run them.
func (d *txnDriver) fatalErr(err error) {
	if errors.Is(err, riffle.ErrTransactionFatal) || errors.Is(err, riffle.ErrTransactionState) || errors.Is(err, riffle.ErrClosed) {
		d.mu.Lock()
		d.fatalLocked(err)
		d.mu.Unlock()
	}
}

func (d *txnDriver) fatalLocked(err error) {
	if d.fatal != nil {
		return
	}
	d.fatal = err
	if !d.open {
		close(d.opened) // wakes finishers waiting at the gate
	}
	d.open = false
	// failAll takes Processor.mu, which must not be taken under d.mu.
	d.p.life.Go(func() { d.p.failAll(err) })
}

// commitNow is a commit point outside the loop (Processor.Commit, a
// revoke, Close), sealing the partitions in seal.
func (d *txnDriver) commitNow(ctx context.Context, seal []*part) error {
	if err := d.lock(ctx); err != nil {
		if len(seal) > 0 {
			// The transaction is busy past the deadline: what the
			// stopped partitions finished in it must not commit
			// once they are gone.
			d.p.mu.Lock()
			for _, pt := range seal {
				pt.sealed = true
			}
			d.p.mu.Unlock()
			d.fail(fmt.Errorf("partitions stopped while the transaction was busy: %w", err))
		}
		return err
	}
	defer d.unlock()
	err := d.end(ctx, true, seal)
	d.resume()
	d.mu.Lock()
	fatal := d.fatal
	d.mu.Unlock()
	if err == nil && fatal != nil {
		err = fatal
	}
	return err
}

// lose aborts the open transaction after partitions were lost (already
// marked lost and sealed).
func (d *txnDriver) lose(ctx context.Context) {
	d.fail(errors.New("partitions lost"))
	if d.lock(ctx) != nil {
		return
	}
	defer d.unlock()
	if err := d.end(ctx, false, nil); err != nil && ctx.Err() == nil {
		d.log().Warn("aborting the transaction of lost partitions failed", "err", err)
	}
	d.resume()
}

// close ends the driver as the processor closes, after the consumer's
// Close committed what finished: the empty open transaction is aborted
// (which costs no request) and none begins any more.
func (d *txnDriver) close(ctx context.Context) error {
	if err := d.lock(ctx); err != nil {
		return err
	}
	defer d.unlock()
	d.mu.Lock()
	d.closed = true
	d.closeGateLocked()
	fatal := d.fatal
	d.mu.Unlock()
	if fatal != nil {
		return nil // reported already
	}
	return d.end(ctx, false, nil)
}

// stats returns the transactions committed and aborted.
func (d *txnDriver) stats() (commits, aborts int64) { return d.commits.Load(), d.aborts.Load() }

// txnStopTimeout bounds the commit of a revoke or Close under
// ExactlyOnce.
const txnStopTimeout = 30 * time.Second

// assignedLocked records where a partition generation starts: its last
// committed position, until a transaction commits a newer one. The caller
// holds Processor.mu.
func (d *txnDriver) assignedLocked(sp sink.Part, at sink.Pos) {
	d.mu.Lock()
	d.base[sp] = at
	d.mu.Unlock()
}

// rewind moves the partitions whose records finished in an aborted
// transaction back to their last committed positions: each current one is
// retired (its running records cancelled; what they finish is dropped)
// and the engine restarts it at base in a new generation, whose records
// and metadata seed a fresh tracker.
func (p *Processor) rewind(dirty []*part, base map[sink.Part]sink.Pos) {
	var again []sink.Part
	p.mu.Lock()
	for _, pt := range dirty {
		sp := sink.Part(pt.tp)
		if p.parts[sp] != pt || pt.gone {
			// Stopped (a revoke may be waiting for its running
			// records, then commit) or replaced: nothing to
			// restart, but its tracker still counts the records
			// finished in the aborted transaction, so no later
			// commit may read its position; what it finishes from
			// now on is dropped.
			pt.sealed = true
			continue
		}
		if _, ok := base[sp]; !ok {
			continue
		}
		p.retireLocked(pt, true)
		pt.sealed = true
		// It stays in parts, gone: offers of its generation are
		// refused until the engine's next one replaces it.
		again = append(again, sp)
	}
	wakes := p.wakesLocked()
	p.mu.Unlock()
	for _, w := range wakes {
		w()
	}
	for _, sp := range again {
		if !clientinternal.ConsumerRewind(p.cs, sp, base[sp]) {
			p.mu.Lock()
			if pt := p.parts[sp]; pt != nil && pt.gone {
				delete(p.parts, sp)
			}
			p.mu.Unlock()
		}
	}
}

// failAll stops every partition with err, a fatal producer error under
// ExactlyOnce: nothing can commit any more.
func (p *Processor) failAll(err error) {
	p.report(fmt.Errorf("process: ExactlyOnce: the transactional producer failed; every partition stops: %w", err))
	p.mu.Lock()
	for _, pt := range p.parts {
		if pt.gone || pt.failed != nil {
			continue
		}
		pt.failed = err
		pt.q.dropWaiting(func(it *item) { p.bytes -= it.size })
		delete(p.refused, pt)
	}
	p.mu.Unlock()
}
