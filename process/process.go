// Package process runs a handler on records concurrently, beyond the
// partition count, while commits only ever cover records that finished.
//
// A service bound by slow I/O per record needs concurrency far above its
// partition count (throughput = concurrency / latency), but committing the
// highest finished offset would skip unfinished records after a crash. A
// Processor takes records off a riffle consumer, runs them on up to
// Concurrency goroutines in one of three orderings (ByKey, ByPartition,
// Unordered), and per partition commits the first unfinished offset. The
// records finished above it are listed in the commit metadata, in a compact
// versioned encoding that stays within the broker's limit, so after a
// restart or rebalance only records that really did not finish run again.
//
// Backpressure is per partition: each holds at most Window unfinished
// records, and all together at most MaxBytes; a partition that is full
// stops fetching while the others keep flowing.
//
// Failing records are retried per the RetryPolicy, then either stop their
// partition (the commit stays below them) or go to a DeadLetterFunc (see
// DeadLetterTopic); the record is committed only once that returned nil.
// A panicking handler fails its record.
//
// On revoke, a partition stops starting records, waits (up to the group's
// RevokeTimeout) for the running ones, and commits with metadata before it
// is released; on loss, handler contexts are cancelled and nothing is
// committed. Close drains by its deadline, commits, and leaves the group.
package process

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/riffle-go/riffle"
	rbackoff "github.com/riffle-go/riffle/internal/backoff"
	"github.com/riffle-go/riffle/internal/clientinternal"
	"github.com/riffle-go/riffle/internal/lifecycle"
	"github.com/riffle-go/riffle/internal/sink"
	"github.com/riffle-go/riffle/internal/track"
)

// Processor runs a Handler on the records of a consumer. See the package
// documentation.
type Processor struct {
	cfg     config
	handler Handler
	cs      *riffle.Consumer
	log     *slog.Logger
	txn     *txnDriver // ExactlyOnce; nil otherwise
	// closing is set by Close before it closes the consumer: the final
	// transactional commit then keeps to Close's deadline.
	closing atomic.Bool
	// retryBackoff is the client's RetryBackoff: between transactional
	// retries, and before a transaction after aborts.
	retryBackoff rbackoff.Policy

	life *lifecycle.Group // owns the goroutines running records, and Close
	ctx  context.Context  // life's: handler contexts derive from it

	mu      sync.Mutex
	parts   map[sink.Part]*part
	runq    []*part // partitions that may have a record to start
	running int
	bytes   int64          // held across partitions
	refused map[*part]bool // partitions that refused records: wake on room
	// draining: partitions revoked or replaced whose records still run; a
	// newer assignment of the same partition starts nothing until they
	// end, so a key never runs in two generations at once.
	draining map[sink.Part]*part
	// closed: Close drained the consumer; no record starts any more.
	closed bool
}

// part is one partition's assignment (one engine generation). A record
// carries the part it was started under; a part that was stopped or
// replaced ignores what its records report, by construction.
type part struct {
	tp      riffle.TopicPartition
	gen     uint64
	q       *queue
	ctx     context.Context // handlers; cancelled on loss or Close deadline
	cancel  context.CancelFunc
	stopped chan struct{} // closed when the partition leaves: no retries
	gone    bool          // stopped or replaced
	queued  bool          // in runq
	failed  error         // stopped at a record that failed for good
	badMeta bool          // stopped by unreadable metadata: never commit
	// ExactlyOnce: sealed, no record of the partition may add outputs to
	// a transaction any more (its position was committed for the last
	// time, or it was lost, replaced or rewound); lost, another member
	// may own it, so a transaction with its records must abort.
	sealed, lost bool
	// held (ExactlyOnce): outputs of records finished above the
	// partition's committable offset, kept out of the transaction until
	// every record below them finished, so a transaction never carries
	// the output of a record at or above the offset it commits and the
	// committed offset alone tells any successor where to resume.
	held map[int64][]*riffle.Record
	// handoffNext (ExactlyOnce; under Processor.mu) numbers the
	// releases of the partition's outputs in the order releaseLocked
	// makes them; handoff hands them to the producer in that order, one
	// at a time. Outputs go to the producer after Processor.mu is let
	// go, and Produce may block (a topic's first metadata, a full
	// buffer): without the turns the next record of a key, finishing on
	// another goroutine meanwhile, could hand its outputs over first.
	handoffNext uint64
	handoff     turns
	wake        func()
	// needBytes: the partition refused a record of this size for the byte
	// budget (0: it refused for its window).
	needBytes int64
	idle      chan struct{} // closed when gone and nothing runs

	retries, deadLettered, processed int64
}

// New returns a processor running h on the records of a new consumer on
// cl. Give it a group with ConsumerOptions(riffle.ConsumerGroup(...),
// riffle.SubscribeTopics(...)), or no group and Assign partitions directly.
// As with any group consumer, a Client carries one group member at a time
// (riffle.ErrClientHasGroupMember).
func New(cl *riffle.Client, h Handler, opts ...Option) (*Processor, error) {
	if h == nil {
		return nil, fmt.Errorf("%w: process: nil handler", riffle.ErrInvalidConfig)
	}
	cfg := defaultConfig()
	for _, o := range opts {
		o(&cfg)
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	life := lifecycle.New()
	clu, log := clientinternal.Access(cl)
	p := &Processor{cfg: cfg, handler: h, life: life, ctx: life.Context(), log: log, retryBackoff: clu.RetryBackoff(),
		parts: map[sink.Part]*part{}, refused: map[*part]bool{}, draining: map[sink.Part]*part{}}
	copts := append([]riffle.ConsumerOption{}, cfg.consumer...)
	if cfg.eos != nil {
		p.txn = newTxnDriver(p, cfg.eos)
		// The offsets commit with the transactions; the inputs of an
		// aborted upstream transaction have no outputs.
		copts = append(copts, riffle.DisableCommits(), riffle.Isolation(riffle.ReadCommitted))
	}
	copts = append(copts, clientinternal.ConsumerSink(sink.Sink[*riffle.Record]((*procSink)(p))).(riffle.ConsumerOption))
	cs, err := riffle.NewConsumer(cl, copts...)
	if err != nil {
		life.Finish()
		return nil, err
	}
	p.cs = cs
	if p.txn != nil {
		err := p.txn.start()
		if err == nil && cs.GroupMetadata().GroupID == "" {
			err = fmt.Errorf("%w: process: ExactlyOnce needs a consumer group (riffle.ConsumerGroup): the offsets commit with the group's metadata", riffle.ErrInvalidConfig)
		}
		if err != nil {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			cs.Close(ctx)
			p.txn.close(ctx)
			life.Finish()
			return nil, err
		}
		if !life.Go(func() { p.txn.loop(p.ctx) }) {
			life.Finish()
			return nil, ErrProcessorClosed
		}
	}
	return p, nil
}

// Consumer returns the underlying consumer (for Pause, Resume and its
// Stats). Its handler options do not apply.
func (p *Processor) Consumer() *riffle.Consumer { return p.cs }

// Assign adds partitions to a processor without a group. After Close it
// returns ErrProcessorClosed.
func (p *Processor) Assign(as ...riffle.Assignment) error {
	if p.life.Closing() {
		return ErrProcessorClosed
	}
	return p.cs.Assign(as...)
}

// Commit synchronously commits, for every partition the group assigned,
// the first unfinished offset with the finished records above it in the
// metadata. The consumer also does this every AutoCommitInterval, on
// revoke and on Close. Under ExactlyOnce it commits the open transaction
// (with those offsets) now. After Close it returns ErrProcessorClosed at
// once.
func (p *Processor) Commit(ctx context.Context) error {
	if p.life.Closing() {
		return ErrProcessorClosed
	}
	if p.txn != nil {
		return p.txn.commitNow(ctx, nil)
	}
	return p.cs.Commit(ctx)
}

// Close stops taking records, waits for running records until ctx ends
// (then cancels their contexts and still waits for their handlers to
// return), commits what finished, and leaves the group. The error names
// partitions whose records were still running at the deadline. Under
// ExactlyOnce the final commit also keeps to ctx: a transaction not
// committed by the deadline is left to the broker's transaction timeout
// (it aborts; its records run again on the next member) and the error,
// wrapping ctx's, says so. From the
// moment Close is called, the processor's methods return
// ErrProcessorClosed; a second or concurrent Close waits for the first (or
// its own ctx) and returns nil.
func (p *Processor) Close(ctx context.Context) error {
	if !p.life.Close() {
		return p.life.AwaitDone(ctx)
	}
	defer p.life.Finish()
	p.closing.Store(true)
	_, err := p.cs.Close(ctx)
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	if p.txn != nil {
		// The consumer's Close committed what finished (Stop); the
		// transaction begun after is empty.
		err = errors.Join(err, p.txn.close(ctx))
	}
	p.life.Stop()
	p.life.Wait()
	return err
}

func (p *Processor) report(err error) {
	if p.cfg.onError != nil {
		p.cfg.onError(err)
	}
}

// procSink is the Processor as the consumer sees it (sink.Sink), kept off
// the Processor's public method set.
type procSink Processor

// Offer implements sink.Sink: the consumer hands records over.
func (s *procSink) Offer(sp sink.Part, b sink.Batch[*riffle.Record]) int {
	return (*Processor)(s).offer(sp, b)
}

// Stop implements sink.Sink.
func (s *procSink) Stop(ctx context.Context, sps []sink.Part, lost bool) (map[sink.Part]sink.Pos, error) {
	return (*Processor)(s).stop(ctx, sps, lost)
}

// Positions implements sink.Sink.
func (s *procSink) Positions(sps []sink.Part) map[sink.Part]sink.Pos {
	return (*Processor)(s).positions(sps)
}

// Offsets implements sink.Sink.
func (s *procSink) Offsets(sps []sink.Part) map[sink.Part]int64 {
	p := (*Processor)(s)
	out := map[sink.Part]int64{}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, sp := range sps {
		if pt := p.parts[sp]; pt != nil {
			out[sp] = pt.q.tr.Committable()
		}
	}
	return out
}

// offer takes records from the consumer.
func (p *Processor) offer(sp sink.Part, b sink.Batch[*riffle.Record]) int {
	var reports []error
	p.mu.Lock()
	pt := p.parts[sp]
	if pt != nil && pt.gen == b.Gen && pt.gone {
		// Rewound (ExactlyOnce abort): the engine restarts the
		// partition in a new generation; this one's records are stale.
		p.mu.Unlock()
		return 0
	}
	if pt == nil || pt.gen != b.Gen {
		if pt != nil {
			p.retireLocked(pt, false)
			pt.sealed = true // its records' outputs would belong to nobody
		}
		var err error
		pt, err = p.newPart(sp, b)
		if err != nil {
			reports = append(reports, err)
		}
		p.parts[sp] = pt
	}
	n := 0
	pt.needBytes = 0
	if pt.failed == nil {
		for _, r := range b.Recs {
			size := recordSize(r)
			if pt.q.pending() >= p.cfg.window {
				break
			}
			if p.bytes > 0 && p.bytes+size > p.cfg.maxBytes {
				pt.needBytes = size
				break
			}
			p.bytes += size
			pt.q.accept(&item{rec: r, size: size})
			n++
		}
		if n == len(b.Recs) && b.Next >= 0 {
			pt.q.advanceTo = b.Next
		}
	}
	if n < len(b.Recs) && pt.failed == nil {
		pt.wake = b.Wake
		p.refused[pt] = true
	}
	p.pumpLocked(pt)
	p.dispatchLocked()
	wakes := p.wakesLocked()
	p.mu.Unlock()
	for _, err := range reports {
		p.report(err)
	}
	for _, w := range wakes {
		w()
	}
	return n
}

// newPart starts a partition generation, seeding its tracker from the
// commit metadata per the policy.
func (p *Processor) newPart(sp sink.Part, b sink.Batch[*riffle.Record]) (*part, error) {
	tp := riffle.TopicPartition(sp)
	ctx, cancel := context.WithCancel(p.ctx)
	pt := &part{tp: tp, gen: b.Gen, ctx: ctx, cancel: cancel, stopped: make(chan struct{})}
	start := max(b.Start, 0)
	var finished []int64
	var bad error
	if b.Meta != "" {
		f, err := track.Decode(start, b.Meta)
		switch {
		case errors.Is(err, track.ErrUnknownVersion):
			// Not ours (another client's, e.g. franz-go's member
			// id): no finished-offset map, so resume at the
			// committed offset; nothing to report.
			p.log.Debug("riffle/process: commit metadata not in the processor's format, resuming at the committed offset",
				"topic", tp.Topic, "partition", tp.Partition, "offset", start, "metadata_bytes", len(b.Meta))
		case err != nil:
			bad = fmt.Errorf("%w: %s at offset %d: %w", ErrBadMetadata, tp, start, err)
		default:
			finished = f
		}
	}
	q, err := newQueue(p.cfg.mode, p.cfg.metaLimit, p.cfg.partLimit, start, finished)
	if err != nil { // Decode's output always seeds; keep the guard anyway
		bad = fmt.Errorf("%w: %s: %w", ErrBadMetadata, tp, err)
		q, _ = newQueue(p.cfg.mode, p.cfg.metaLimit, p.cfg.partLimit, start, nil)
	}
	pt.q = q
	if p.txn != nil {
		p.txn.assignedLocked(sp, sink.Pos{Offset: start, Meta: b.Meta})
	}
	if bad != nil && p.cfg.metaPolicy == FailBadMetadata {
		pt.failed = bad
		pt.badMeta = true
	}
	return pt, bad
}

// pumpLocked moves the partition's incoming records into its tracker and
// queues it for dispatch.
func (p *Processor) pumpLocked(pt *part) {
	pt.q.pump(time.Now(), func(it *item) { p.bytes -= it.size })
	if !pt.queued && !pt.badMeta && pt.q.startable() {
		pt.queued = true
		p.runq = append(p.runq, pt)
	}
}

// dispatchLocked starts records while the global limit allows, one per
// partition in turn.
func (p *Processor) dispatchLocked() {
	for {
		pt, it := p.takeLocked()
		if it == nil {
			return
		}
		if !p.life.Go(func() { p.work(pt, it) }) {
			// Stopping: cannot happen (Close sets closed, under mu,
			// before it stops the goroutines, and takeLocked starts
			// nothing then), but never leave the record counted as
			// running. It stays unfinished: no commit passes it.
			p.running--
			p.bytes -= it.size
			pt.q.done(it, false)
			return
		}
	}
}

// takeLocked returns the next record to start, from the next partition in
// turn, counting it as running; nil when none may start.
func (p *Processor) takeLocked() (*part, *item) {
	for p.running < p.cfg.concurrency && len(p.runq) > 0 && !p.closed {
		pt := p.runq[0]
		p.runq[0] = nil
		p.runq = p.runq[1:]
		pt.queued = false
		if pt.gone || pt.badMeta || p.draining[sink.Part(pt.tp)] != nil {
			continue // a draining predecessor requeues it when done
		}
		it := pt.q.next()
		if it == nil {
			continue
		}
		p.running++
		if pt.q.startable() {
			pt.queued = true
			p.runq = append(p.runq, pt)
		}
		return pt, it
	}
	if len(p.runq) == 0 {
		p.runq = nil // let the backing array go
	}
	return nil, nil
}

// wakesLocked returns the wake functions of partitions that refused
// records and have room now. Room means below a low-water mark (a quarter
// of the window or budget free), so that a full partition is offered
// records in batches, not one per finished record.
func (p *Processor) wakesLocked() []func() {
	if len(p.refused) == 0 {
		return nil
	}
	lowWindow := p.cfg.window - max(1, p.cfg.window/4)
	lowBytes := p.cfg.maxBytes - max(1, p.cfg.maxBytes/4)
	var out []func()
	for pt := range p.refused {
		if pt.gone {
			delete(p.refused, pt)
			continue
		}
		if pt.failed != nil {
			delete(p.refused, pt)
			continue
		}
		if pt.needBytes == 0 && pt.q.pending() > lowWindow {
			continue // refused for its window: wait for its own records
		}
		if pt.needBytes > 0 && p.bytes > 0 && (p.bytes+pt.needBytes > p.cfg.maxBytes || p.bytes > lowBytes) {
			continue // refused for the budget: wait until the record fits
		}
		delete(p.refused, pt)
		if pt.wake != nil {
			out = append(out, pt.wake)
			pt.wake = nil
		}
	}
	return out
}

// work runs records: the one it was started with, then, while there are
// more, the next in turn (a goroutine per running record, reused).
func (p *Processor) work(pt *part, it *item) {
	for pt != nil {
		pt, it = p.runOne(pt, it)
	}
}

// runOne runs one record to its end and returns the next to run, if any.
func (p *Processor) runOne(pt *part, it *item) (*part, *item) {
	start := time.Now()
	attempts, outs, err := p.attempt(pt, it)
	finished := err == nil
	deadLettered := false
	if err != nil && !errors.Is(err, errStopped) && p.cfg.deadLetter != nil {
		dctx, do := p.withOutputs(pt.ctx)
		derr := safeCall(func() error { return p.cfg.deadLetter(dctx, it.rec, err, attempts) })
		if do != nil {
			outs = do.take()
		}
		if h := p.cfg.hooks.OnDeadLetter; h != nil {
			h(pt.tp, it.rec.Offset, derr)
		}
		if derr == nil {
			finished, deadLettered = true, true
		} else {
			err = fmt.Errorf("dead letter: %w (record failed with: %w)", derr, err)
		}
	}
	// ExactlyOnce: a finished record hands its outputs to the open
	// transaction and is marked finished in the same step, inside the
	// gate, so a commit point covers both or neither.
	entered := false
	if finished && p.txn != nil {
		if terr := p.txn.enter(p.ctx); terr != nil {
			finished, err = false, errStopped // fatal or closing: stays unfinished
		} else {
			entered = true
			p.mu.Lock()
			sealed := pt.sealed
			p.mu.Unlock()
			if sealed {
				finished, err = false, errStopped // its last position was committed
			}
		}
	}
	if deadLettered && finished {
		p.mu.Lock()
		pt.deadLettered++
		p.mu.Unlock()
	}
	if h := p.cfg.hooks.OnFinish; h != nil && !errors.Is(err, errStopped) {
		var herr error
		if !finished {
			herr = err
		}
		h(pt.tp, it.rec.Offset, attempts, time.Since(start), herr)
	}
	var reports []error
	p.mu.Lock()
	p.running--
	p.bytes -= it.size
	// A partition being stopped still learns what finished: Stop reads
	// its commit position once the running records are done.
	pt.q.done(it, finished)
	var release []*riffle.Record
	var turn uint64
	if entered && !pt.sealed {
		if finished {
			release = pt.releaseLocked(it.rec.Offset, outs)
			if len(release) > 0 {
				turn = pt.handoffNext
				pt.handoffNext++
			}
		}
		p.txn.finishedLocked(pt, finished)
	}
	if !pt.gone {
		if finished {
			pt.processed++
		} else if !errors.Is(err, errStopped) {
			// Every record failing for good is reported; the partition
			// stops at the lowest: what waits above it is dropped (it
			// stays unfinished, so no commit passes it) and its bytes
			// go back to the other partitions; older records still run,
			// so the commit reaches it.
			re := &RecordError{Topic: pt.tp.Topic, Partition: pt.tp.Partition, Offset: it.rec.Offset, Attempts: attempts, Err: err}
			reports = append(reports, re)
			var prev *RecordError
			if pt.failed == nil || (errors.As(pt.failed, &prev) && re.Offset < prev.Offset) {
				pt.failed = re
			}
			pt.q.dropAbove(it.rec.Offset, func(it *item) { p.bytes -= it.size })
			delete(p.refused, pt)
		}
		p.pumpLocked(pt)
	} else if pt.q.running == 0 {
		if pt.idle != nil {
			close(pt.idle)
			pt.idle = nil
		}
		sp := sink.Part(pt.tp)
		if p.draining[sp] == pt {
			delete(p.draining, sp)
			if cur := p.parts[sp]; cur != nil {
				p.pumpLocked(cur) // its successor may start now
			}
		}
	}
	npt, nit := p.takeLocked()
	p.dispatchLocked()
	wakes := p.wakesLocked()
	p.mu.Unlock()
	if entered {
		// Still inside the gate: the outputs go into the transaction
		// whose positions cover their records, in the order of their
		// release.
		if len(release) > 0 {
			pt.handoff.await(turn)
			p.txn.produce(p.ctx, release)
			pt.handoff.done()
		}
		p.txn.leave()
	}
	for _, e := range reports {
		p.report(e)
	}
	for _, w := range wakes {
		w()
	}
	return npt, nit
}

var errStopped = errors.New("partition stopped")

// attempt calls the handler per the retry policy and returns the number of
// calls, the outputs of the call that succeeded (ExactlyOnce) and the last
// error.
func (p *Processor) attempt(pt *part, it *item) (int, []*riffle.Record, error) {
	rp := p.cfg.retry
	var err error
	for n := 1; ; n++ {
		ctx, o := p.withOutputs(pt.ctx)
		err = safeCall(func() error { return p.handler(ctx, it.rec) })
		var outs []*riffle.Record
		if o != nil {
			outs = o.take() // an attempt's outputs go or fail with it
		}
		if err == nil {
			return n, outs, nil
		}
		if pt.ctx.Err() != nil {
			// Cancelled (lost partition, Close deadline): not the
			// record's failure; it stays unfinished.
			return n, nil, errStopped
		}
		if n >= rp.Attempts || (rp.RetryIf != nil && !rp.RetryIf(err)) {
			return n, nil, err
		}
		if h := p.cfg.hooks.OnRetry; h != nil {
			h(pt.tp, it.rec.Offset, n, err)
		}
		p.mu.Lock()
		pt.retries++
		p.mu.Unlock()
		t := time.NewTimer(backoff(rp, n))
		select {
		case <-t.C:
		case <-pt.stopped:
			t.Stop()
			return n, nil, errStopped
		case <-pt.ctx.Done():
			t.Stop()
			return n, nil, errStopped
		}
	}
}

// backoff is the delay after attempt n: Backoff·2^(n−1) capped at
// MaxBackoff, with jitter in [d/2, d].
func backoff(rp RetryPolicy, n int) time.Duration {
	d := rp.Backoff
	for i := 1; i < n && d < rp.MaxBackoff; i++ {
		d *= 2
	}
	d = min(d, rp.MaxBackoff)
	return d/2 + time.Duration(rand.Int64N(int64(d/2)+1))
}

func safeCall(fn func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: %v", ErrHandlerPanic, r)
		}
	}()
	return fn()
}

func recordSize(r *riffle.Record) int64 {
	n := int64(len(r.Key) + len(r.Value) + 64)
	for _, h := range r.Headers {
		n += int64(len(h.Key) + len(h.Value))
	}
	return n
}

// retireLocked takes a partition out: records not started are dropped
// (they stay unfinished, so no commit passes them), retries stop, and
// when lost the handlers' contexts are cancelled.
func (p *Processor) retireLocked(pt *part, lost bool) {
	if pt.gone {
		return
	}
	pt.gone = true
	pt.q.dropWaiting(func(it *item) { p.bytes -= it.size })
	close(pt.stopped)
	if lost {
		pt.cancel()
	}
	pt.idle = make(chan struct{})
	if pt.q.running == 0 {
		close(pt.idle)
		pt.idle = nil
	} else {
		p.draining[sink.Part(pt.tp)] = pt
	}
	delete(p.refused, pt)
}

// stop ends partitions (revoke, loss, Close).
func (p *Processor) stop(ctx context.Context, sps []sink.Part, lost bool) (map[sink.Part]sink.Pos, error) {
	type waiting struct {
		pt   *part
		idle chan struct{}
	}
	var ws []waiting
	p.mu.Lock()
	for _, sp := range sps {
		pt := p.parts[sp]
		if pt == nil {
			continue
		}
		delete(p.parts, sp)
		p.retireLocked(pt, lost)
		ws = append(ws, waiting{pt, pt.idle})
	}
	// Their bytes are free: partitions refused for the budget may go on.
	if lost && p.txn != nil {
		for _, w := range ws {
			w.pt.sealed, w.pt.lost = true, true
		}
	}
	wakes := p.wakesLocked()
	p.mu.Unlock()
	for _, w := range wakes {
		w()
	}
	if lost {
		if p.txn != nil {
			p.txn.lose(ctx) // nothing of theirs may commit
		}
		return nil, nil
	}
	var errsOut []error
	for _, w := range ws {
		if w.idle == nil {
			continue
		}
		select {
		case <-w.idle:
		default:
			select {
			case <-w.idle:
			case <-ctx.Done():
				p.mu.Lock()
				n := w.pt.q.running
				p.mu.Unlock()
				errsOut = append(errsOut, fmt.Errorf("%s: %d record(s) still running: %w", w.pt.tp, n, ctx.Err()))
				w.pt.cancel()
			}
		}
	}
	if p.txn != nil {
		// Their positions commit with the transaction, before the
		// partitions are released; the consumer commits nothing. The
		// commit gets time of its own: a revoke's deadline spent on
		// waiting for handlers must not leave its outcome unknown.
		seal := make([]*part, len(ws))
		for i, w := range ws {
			seal[i] = w.pt
		}
		// Close keeps to its caller's deadline, as Consumer.Close does.
		base := context.WithoutCancel(ctx)
		if p.closing.Load() {
			base = ctx
		}
		cctx, cancel := context.WithTimeout(base, txnStopTimeout)
		defer cancel()
		if err := p.txn.commitNow(cctx, seal); err != nil {
			if ctx.Err() != nil && p.closing.Load() {
				err = fmt.Errorf("the open transaction was not committed by the Close deadline and is left to the broker's transaction timeout (it aborts: its outputs never appear, its records run again on the next member): %w", err)
			}
			errsOut = append(errsOut, fmt.Errorf("committing the transaction: %w", err))
		}
		return nil, errors.Join(errsOut...)
	}
	out := map[sink.Part]sink.Pos{}
	p.mu.Lock()
	for _, w := range ws {
		// Safe even with records still running: the committable offset
		// never passes an unfinished record. A partition stopped by
		// unreadable metadata commits nothing: that would overwrite the
		// metadata (maybe a newer version's) with ours.
		if !w.pt.badMeta {
			out[sink.Part(w.pt.tp)] = sink.Pos{Offset: w.pt.q.tr.Committable(), Meta: w.pt.q.tr.Metadata()}
		}
	}
	p.mu.Unlock()
	return out, errors.Join(errsOut...)
}

// positions returns what a commit may cover now.
func (p *Processor) positions(sps []sink.Part) map[sink.Part]sink.Pos {
	out := map[sink.Part]sink.Pos{}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, sp := range sps {
		if pt := p.parts[sp]; pt != nil && !pt.badMeta {
			out[sp] = sink.Pos{Offset: pt.q.tr.Committable(), Meta: pt.q.tr.Metadata()}
		}
	}
	return out
}

// PartitionStats describes one partition of a Processor.
type PartitionStats struct {
	riffle.TopicPartition
	// Committed is the group's last committed offset (-1 if none, or
	// without a group).
	Committed int64
	// Committable is the offset the next commit covers: the first record
	// not finished.
	Committable int64
	// FinishedAbove counts records finished above Committable (processed
	// but not covered by the offset; the commit metadata lists them).
	FinishedAbove int
	// Running counts records whose handler (or retry wait) is running.
	Running int
	// Waiting counts records taken from the consumer but not started.
	Waiting int
	// OldestAge is how long the oldest unfinished record has been held.
	OldestAge time.Duration
	// MetadataBytes is the size of the commit metadata now.
	MetadataBytes int
	// Processed, Retries, DeadLettered and Skipped (finished before a
	// restart, per the commit metadata) count records since assignment.
	Processed, Retries, DeadLettered, Skipped int64
	// Err is set when the partition stopped at a record that failed for
	// good (*RecordError: the lowest such record) or at unreadable metadata.
	Err error
}

// String formats every field with its name, e.g.
// "events[3]{Committed:100 Committable:118 ... Err:<nil>}". (Without it,
// the String of the embedded riffle.TopicPartition would be promoted and %v
// would print only "events[3]".)
func (s PartitionStats) String() string {
	return fmt.Sprintf("%v{Committed:%v Committable:%v FinishedAbove:%v Running:%v Waiting:%v OldestAge:%v MetadataBytes:%v Processed:%v Retries:%v DeadLettered:%v Skipped:%v Err:%v}",
		s.TopicPartition, s.Committed, s.Committable, s.FinishedAbove, s.Running, s.Waiting, s.OldestAge,
		s.MetadataBytes, s.Processed, s.Retries, s.DeadLettered, s.Skipped, s.Err)
}

// Stats describes a Processor.
type Stats struct {
	Running   int   // records running across partitions
	HeldBytes int64 // bytes of records held (waiting or running)
	// TxnCommitted and TxnAborted count transactions under ExactlyOnce.
	TxnCommitted, TxnAborted int64
	Partitions               []PartitionStats
}

// Stats returns a snapshot.
func (p *Processor) Stats() Stats {
	committed := map[riffle.TopicPartition]int64{}
	for _, cp := range p.cs.Stats().Partitions {
		committed[cp.TopicPartition] = cp.Committed
	}
	now := time.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	st := Stats{Running: p.running, HeldBytes: p.bytes}
	if p.txn != nil {
		st.TxnCommitted, st.TxnAborted = p.txn.stats()
	}
	for _, pt := range p.parts {
		q := pt.q
		st.Partitions = append(st.Partitions, PartitionStats{
			TopicPartition: pt.tp,
			Committed:      -1,
			Committable:    q.tr.Committable(),
			FinishedAbove:  q.tr.FinishedAbove(),
			Running:        q.running,
			Waiting:        q.pending() - q.running,
			OldestAge:      q.oldestAge(now),
			MetadataBytes:  q.tr.MetadataSize(),
			Processed:      pt.processed,
			Retries:        pt.retries,
			DeadLettered:   pt.deadLettered,
			Skipped:        q.skipped,
			Err:            pt.failed,
		})
	}
	for i := range st.Partitions {
		if c, ok := committed[st.Partitions[i].TopicPartition]; ok {
			st.Partitions[i].Committed = c
		}
	}
	sort.Slice(st.Partitions, func(i, j int) bool {
		a, b := st.Partitions[i], st.Partitions[j]
		if a.Topic != b.Topic {
			return a.Topic < b.Topic
		}
		return a.Partition < b.Partition
	})
	return st
}

// releaseLocked returns, in offset order, the outputs that may join the
// transaction now that the record at off finished with outs: those of
// every held record below the partition's committable offset, off's
// included; off's are held if a record below it has not finished. The
// caller holds p.mu.
func (pt *part) releaseLocked(off int64, outs []*riffle.Record) []*riffle.Record {
	c := pt.q.tr.Committable()
	if off >= c {
		if len(outs) > 0 {
			if pt.held == nil {
				pt.held = map[int64][]*riffle.Record{}
			}
			pt.held[off] = outs
		}
		return nil
	}
	if len(pt.held) == 0 {
		return outs
	}
	offs := []int64{off}
	for o := range pt.held {
		if o < c {
			offs = append(offs, o)
		}
	}
	if len(offs) == 1 {
		return outs
	}
	sort.Slice(offs, func(i, j int) bool { return offs[i] < offs[j] })
	var out []*riffle.Record
	for _, o := range offs {
		if o == off {
			out = append(out, outs...)
			continue
		}
		out = append(out, pt.held[o]...)
		delete(pt.held, o)
	}
	return out
}

// turns lets numbered callers through one at a time, in number order
// (from 0): the caller with number n waits until the n before it were
// done.
type turns struct {
	mu   sync.Mutex
	cond *sync.Cond
	next uint64
}

// await waits for turn n.
func (t *turns) await(n uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.cond == nil {
		t.cond = sync.NewCond(&t.mu)
	}
	for t.next != n {
		t.cond.Wait()
	}
}

// done ends the current turn.
func (t *turns) done() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.next++
	if t.cond != nil {
		t.cond.Broadcast()
	}
}
