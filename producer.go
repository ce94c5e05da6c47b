package riffle

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/riffle-go/riffle/internal/batch"
	"github.com/riffle-go/riffle/internal/cluster"
	"github.com/riffle-go/riffle/internal/errs"
	"github.com/riffle-go/riffle/internal/lifecycle"
)

// Producer errors. Every record's callback receives nil or an error that
// matches one of these, a Kafka error (errors.Is with the Err* values), or
// a client error such as ErrUnknownTopic.
var (
	// ErrProducerClosed: the producer was closed before the record's
	// outcome was known, or the call was made after Close. For a record
	// that may have been sent, the message says its outcome is unknown.
	// It matches ErrClosed.
	ErrProducerClosed = errs.NewClosed("riffle: producer closed")
	// ErrRecordTooLarge: the record cannot fit in a batch; the error
	// names the limit.
	ErrRecordTooLarge = batch.ErrRecordTooLarge
	// ErrBufferFull: the buffer was full and FailFast is set.
	ErrBufferFull = errors.New("riffle: producer buffer full")
	// ErrDataLoss: the broker's sequence checks showed that records may
	// have been lost (OUT_OF_ORDER_SEQUENCE_NUMBER or UNKNOWN_PRODUCER_ID
	// without log truncation). The records carrying it were not written.
	ErrDataLoss = errors.New("riffle: idempotent producer detected possible data loss")
	// ErrDeliveryTimeout: the record was not sent within DeliveryTimeout
	// (it was never written). The error wraps the last attempt's error,
	// if there was one (e.g. NOT_ENOUGH_REPLICAS), so errors.Is finds it
	// and IsRetriable follows it.
	ErrDeliveryTimeout = errors.New("riffle: delivery timeout expired")
	// ErrInvalidPartition: the record's partition does not exist, still
	// after waiting up to UnknownTopicTimeout for it (partitions added
	// a moment ago reach each broker's metadata a while after
	// CreatePartitions returns).
	ErrInvalidPartition = errs.ErrInvalidPartition
)

// Producer writes records to Kafka. It is idempotent by default: however
// many goroutines produce at once, with retries, broker faults and up to 5
// requests in flight per partition, the broker sees each partition's
// records once, in the order they were produced.
//
// Records are batched per partition (Linger, MaxBatchBytes), compressed on
// the producing goroutine, and sent by one sender per broker with up to 5
// requests in flight per partition. Every record's callback fires exactly
// once, with nil or the error that stopped it.
//
// With TransactionalID the producer is transactional: after
// InitTransactions, records are produced between BeginTransaction and
// CommitTransaction or AbortTransaction, and read_committed consumers see
// a transaction's records, and the offsets sent with it, all at once or
// never.
type Producer struct {
	c   *Client
	cl  *cluster.Cluster
	cfg producerConfig

	life *lifecycle.Group // owns the producer's goroutines and its Close
	ctx  context.Context  // life's: cancelled when Close stops the goroutines
	buf  limiter

	topicsMu sync.Mutex
	topics   atomic.Pointer[map[string]*topicState]
	// released: Close untracked the topics; a topic looked up after that
	// is not added (its reference would never be released).
	released bool

	sinksMu sync.Mutex
	sinks   map[int32]*sink

	id  idState
	txn *txnState // nil unless TransactionalID

	dataLoss []DataLossHook
	written  []BatchWrittenHook
	batchHks []ProduceBatchHook // the client's and the producer's
	// commitHks get the offsets of committed transactions: the client's
	// and the producer's.
	commitHks []CommitHook
}

// NewProducer returns a producer using the client's connections. Invalid
// or contradictory options (idempotence with acks=1, more than 5 in flight)
// fail with ErrInvalidConfig. On a closed Client it returns
// ErrClientClosed (which matches ErrClosed) at once.
func NewProducer(c *Client, opts ...ProducerOption) (*Producer, error) {
	if err := c.closedErr("NewProducer"); err != nil {
		return nil, err
	}
	cfg := defaultProducerConfig()
	for _, o := range opts {
		o(&cfg)
	}
	if err := cfg.validate(c.cfg.requestTimeout); err != nil {
		return nil, err
	}
	life := lifecycle.New()
	p := &Producer{
		c: c, cl: c.cl, cfg: cfg, life: life, ctx: life.Context(),
		sinks: map[int32]*sink{},
	}
	p.buf.init(cfg.maxBufferedBytes, cfg.maxBufferedRecords, cfg.transactionalID != "")
	empty := map[string]*topicState{}
	p.topics.Store(&empty)
	p.id.wake = make(chan struct{}, 1)
	p.dataLoss = hooksOf[DataLossHook](cfg.hooks)
	p.written = hooksOf[BatchWrittenHook](cfg.hooks)
	p.batchHks = append(hooksOf[ProduceBatchHook](cfg.hooks), c.hooks.produce...)
	p.commitHks = append(hooksOf[CommitHook](cfg.hooks), c.hooks.commit...)
	p.life.Go(p.idLoop, p.expireLoop)
	if cfg.transactionalID != "" {
		p.txn = newTxnState(p)
		p.life.Go(p.txn.addLoop)
	}
	return p, nil
}

// pendingRecord is a buffered record and its callback.
type pendingRecord struct {
	rec   *Record
	fn    func(*Record, error)
	size  int       // what it counts in the buffer (bufferedSize)
	bound int       // upper bound of its encoded size (batch.RecordSizeBound, from batch.Sizes)
	gen   *flushGen // counts the record until its outcome
}

// recordOverhead is what the producer holds for each buffered record
// besides its payload and its encoding: the Record, which stays reachable
// until its callback, and its queue entry.
const recordOverhead = int(unsafe.Sizeof(Record{}) + unsafe.Sizeof(pendingRecord{}))

// bufferedSize is what a record counts against MaxBufferedBytes: the
// memory the producer holds for it until its outcome. That is its key,
// value and headers (the Record keeps them reachable until the callback),
// their encoding in a batch (bound, the upper bound batch.Sizes gave), and
// recordOverhead. Counting the payload alone let a buffer of small records
// hold three to four times the memory the option names.
func bufferedSize(r *Record, bound int) int {
	return r.size() + bound + recordOverhead + len(r.Headers)*int(unsafe.Sizeof(Header{}))
}

// pbatch is the payload of a sealed batch in the sequence state machine.
type pbatch struct {
	enc  *batch.Encoded
	recs []pendingRecord
	// part takes recs back for its next batch once the callbacks ran
	// (nil: recs is left to the GC).
	part    *partState
	created time.Time
	done    atomic.Bool // callbacks fired
	sealErr error
	// lastErr is the error of the batch's last attempt, if it failed
	// (guarded by part.mu), named when the delivery timeout fails it.
	lastErr   error
	wireBytes int
	rawBytes  int // before compression
}

// Produce buffers rec for sending and calls fn exactly once with the
// outcome (fn may be nil). Callbacks of one partition run in order on the
// producer's goroutines; a record that fails before it is buffered (no
// topic, too large, the producer closed...) gets its callback on the
// caller's goroutine, before Produce returns. Callbacks must be fast and
// must not block. Producing again from a callback is fine unless the
// buffer is full and FailFast is off, and so is AbortTransaction; Flush,
// Close and CommitTransaction wait for callbacks to return, so calling
// them from one deadlocks. Produce blocks only while the buffer is full
// (see MaxBufferedBytes, FailFast) or the topic's metadata is first looked
// up, and returns when ctx ends; in that case fn is called with ctx's
// error. The error fn gets names where the record failed once: its
// partition ("t[1]: …"), or, when it failed before it had one, its topic
// (`topic "t": …`); errors.Is sees through that.
// After the record is written, rec.Partition and rec.Offset are set.
// The producer reads rec's fields until fn is called; do not modify them.
// Once Close was called, fn is called at once with ErrProducerClosed (and
// with ErrClientClosed once the Client is closed).
//
// On a transactional producer (TransactionalID) a record belongs to the
// open transaction; produced outside one (before BeginTransaction, or
// once CommitTransaction or AbortTransaction began), fn gets
// ErrTransactionState at once, and after an abortable or fatal error
// that error. A record of the transaction that fails makes the
// transaction abortable (CommitTransaction then fails); records of an
// aborted transaction that were not written get ErrTransactionAborted.
func (p *Producer) Produce(ctx context.Context, rec *Record, fn func(*Record, error)) {
	p.produce(ctx, rec, fn, false)
}

func (p *Producer) produce(ctx context.Context, rec *Record, fn func(*Record, error), sync bool) {
	if fn == nil {
		fn = func(*Record, error) {}
	}
	if p.life.Closing() {
		p.failUnbatched(rec, fn, ErrProducerClosed, -1)
		return
	}
	if p.cl.Closing() {
		p.failUnbatched(rec, fn, ErrClientClosed, -1)
		return
	}
	if err := p.id.stopped(); err != nil {
		p.failUnbatched(rec, fn, err, -1)
		return
	}
	var gate uint64
	if p.txn != nil {
		g, err := p.txn.admit()
		if err != nil {
			p.failUnbatched(rec, fn, err, -1)
			return
		}
		gate = g
	}
	if rec.Topic == "" {
		p.failAdmitted(rec, fn, fmt.Errorf("%w: producer: record without a topic", errs.ErrConfig))
		return
	}
	if rec.Timestamp.IsZero() {
		rec.Timestamp = time.Now()
	}
	br := toBatchRecord(rec)
	encSize, bound := batch.Sizes(&br)
	if encSize > p.cfg.maxBatchBytes {
		p.failAdmitted(rec, fn, fmt.Errorf("topic %q: %w: %d bytes encoded (MaxBatchBytes %d)", rec.Topic, ErrRecordTooLarge, encSize, p.cfg.maxBatchBytes))
		return
	}
	size := bufferedSize(rec, bound)
	gen, err := p.buf.acquire(ctx, int64(size), p.cfg.failFast)
	if err != nil {
		p.failAdmitted(rec, fn, err)
		return
	}
	if p.txn != nil {
		// The record now counts in a flush generation: make sure its
		// transaction still takes records, so that a commit that began
		// meanwhile either waits for it or never sees it.
		if err := p.txn.readmit(gate); err != nil {
			p.buf.failOne(int64(size), gen, func() { p.failUnbatched(rec, fn, err, -1) })
			return
		}
	}
	ts, err := p.topic(ctx, rec.Topic)
	if err == nil && encSize > ts.maxBatch {
		err = fmt.Errorf("topic %q: %w: %d bytes encoded (max.message.bytes %d)", rec.Topic, ErrRecordTooLarge, encSize, ts.maxBatch)
	}
	if err == nil && isManual(p.cfg.partitioner) && int(rec.Partition) >= len(ts.partitions()) {
		err = p.awaitPartition(ctx, ts, rec.Partition)
	}
	var part *partState
	if err == nil {
		part, err = ts.pick(p, rec)
	}
	if err != nil {
		p.buf.failOne(int64(size), gen, func() { p.failAdmitted(rec, fn, err) })
		return
	}
	part.append(pendingRecord{rec: rec, fn: fn, size: size, bound: bound, gen: gen}, sync)
}

// ProduceSync produces recs and waits for all of them; it does not wait for
// linger. It returns nil if every record was written, otherwise the
// records' errors joined (each names its partition once, "t[1]: …", or,
// for a record that failed before it had one, its topic). If ctx ends
// first, it returns ctx's error; the records' outcomes still arrive later
// (they are not cancelled). After Close it returns ErrProducerClosed at
// once.
func (p *Producer) ProduceSync(ctx context.Context, recs ...*Record) error {
	if p.life.Closing() {
		return ErrProducerClosed
	}
	var mu sync.Mutex
	var all []error
	// The last callback closes done: no goroutine waits for them, so
	// none outlives a ctx that ended first.
	var left atomic.Int64
	left.Store(int64(len(recs)))
	done := make(chan struct{})
	if len(recs) == 0 {
		close(done)
	}
	for _, r := range recs {
		p.produce(ctx, r, func(r *Record, err error) {
			if err != nil {
				mu.Lock()
				all = append(all, err) // named by recordError
				mu.Unlock()
			}
			if left.Add(-1) == 0 {
				close(done)
			}
		}, true)
	}
	select {
	case <-done:
		mu.Lock()
		defer mu.Unlock()
		return errors.Join(all...)
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Flush sends every buffered record without waiting for linger and waits
// until every record produced before Flush was called has its outcome and
// its callback has returned, or ctx ends. Records produced meanwhile do not delay it. Once Close was
// called it returns ErrProducerClosed at once (Close flushes).
func (p *Producer) Flush(ctx context.Context) error {
	if p.life.Closing() {
		return ErrProducerClosed
	}
	return p.flush(ctx)
}

// failAdmitted fails a record that was admitted to the producer (and to
// its transaction, which a failed record makes abortable) before it joined
// a batch.
func (p *Producer) failAdmitted(rec *Record, fn func(*Record, error), err error) {
	if p.txn != nil {
		p.txn.recordFailed(err)
	}
	p.failUnbatched(rec, fn, err, -1)
}

// failUnbatched gives rec, which failed before it joined a batch, its
// outcome: the ProduceBatchHooks see it as an Unbatched batch of one
// record (partition: the one chosen, or -1), then fn gets err.
func (p *Producer) failUnbatched(rec *Record, fn func(*Record, error), err error, partition int32) {
	err = recordError(rec.Topic, partition, err)
	if len(p.batchHks) > 0 {
		p.unbatchedDone(rec, partition, err)
	}
	fn(rec, err)
}

func (p *Producer) flush(ctx context.Context) error { return p.flushUntil(ctx, nil) }

// errTxnFailed: the transaction a flush waited for entered an error state.
var errTxnFailed = errors.New("the transaction failed")

// flushUntil flushes like Flush; it gives up with errTxnFailed when stop
// closes (a commit stops waiting for records once its transaction failed).
func (p *Producer) flushUntil(ctx context.Context, stop <-chan struct{}) error {
	mark := p.buf.flushMark()
	var ready []readyPart
	for {
		ready = ready[:0]
		for _, ts := range *p.topics.Load() {
			for _, part := range ts.partitions() {
				if to := part.flush(); to != nil {
					ready = append(ready, readyPart{to, part})
				}
			}
		}
		addReady(ready)
		ch, pending := p.buf.pendingBefore(mark, false)
		if !pending {
			return nil
		}
		select {
		case <-ch:
		case <-stop:
			return errTxnFailed
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Close flushes, then stops the producer. Records that have no outcome when
// ctx ends fail with ErrProducerClosed (saying whether they may have been
// written). Every callback has fired when Close returns, and every
// goroutine of the producer has stopped; the producer's topics are no
// longer refreshed for it. Close does not close the Client. From the
// moment Close is called, the producer's methods fail with
// ErrProducerClosed; a second or concurrent Close waits for the first (or
// its own ctx) and returns nil.
func (p *Producer) Close(ctx context.Context) error {
	if !p.life.Close() {
		return p.life.AwaitDone(ctx)
	}
	defer p.life.Finish()
	var ferr error
	if p.txn != nil {
		ferr = p.closeTxn(ctx)
	} else {
		ferr = p.flush(ctx)
	}
	p.life.Stop()
	p.life.Wait()
	for _, ts := range *p.topics.Load() {
		for _, part := range ts.partitions() {
			part.failAll(ctx.Err())
		}
	}
	p.untrackTopics()
	if ferr != nil {
		return fmt.Errorf("producer closed before every record was delivered: %w", ferr)
	}
	return nil
}

func toBatchRecord(r *Record) batch.Record {
	return batch.Record{Key: r.Key, Value: r.Value, Headers: headersToBatch(r.Headers), Timestamp: r.Timestamp.UnixMilli()}
}

// topicState is a topic's partitioner and partitions.
type topicState struct {
	name     string
	maxBatch int
	seen     atomic.Pointer[cluster.Snapshot] // metadata last checked for growth

	mu    sync.Mutex // guards tp and parts growth
	tp    TopicPartitioner
	parts atomic.Pointer[[]*partState]
}

func (t *topicState) partitions() []*partState {
	if ps := t.parts.Load(); ps != nil {
		return *ps
	}
	return nil
}

// topic returns the topic's state, looking the topic up on first use.
func (p *Producer) topic(ctx context.Context, name string) (*topicState, error) {
	if ts, ok := (*p.topics.Load())[name]; ok {
		if snap := p.cl.Snapshot(); snap != ts.seen.Load() {
			// Metadata changed since we last looked: partitions may
			// have been added.
			ts.seen.Store(snap)
			ts.grow(p)
		}
		return ts, nil
	}
	// The producer holds a reference to each of its topics, so metadata
	// refreshes keep them, until Close. Concurrent first uses each take
	// one; all but the winner's are released.
	p.cl.TrackTopics(name)
	w := p.topicWait()
	tm, err := p.cl.LookupTopicWait(ctx, name, w)
	if err != nil {
		p.cl.UntrackTopics(name)
		return nil, err
	}
	maxBatch := p.cfg.maxBatchBytes
	if mmb := p.topicMaxMessageBytes(ctx, name); mmb > 0 && mmb < maxBatch {
		maxBatch = mmb
	}
	p.topicsMu.Lock()
	defer p.topicsMu.Unlock()
	cur := *p.topics.Load()
	if ts, ok := cur[name]; ok {
		p.cl.UntrackTopics(name)
		return ts, nil
	}
	if p.released {
		p.cl.UntrackTopics(name)
		return nil, ErrProducerClosed
	}
	ts := &topicState{name: name, maxBatch: maxBatch, tp: p.cfg.partitioner.ForTopic(name)}
	parts := make([]*partState, len(tm.Partitions))
	for i := range parts {
		parts[i] = newPartState(p, ts, int32(i))
	}
	ts.parts.Store(&parts)
	next := make(map[string]*topicState, len(cur)+1)
	for k, v := range cur {
		next[k] = v
	}
	next[name] = ts
	p.topics.Store(&next)
	return ts, nil
}

// untrackTopics releases the producer's reference to each of its topics
// (on Close).
func (p *Producer) untrackTopics() {
	p.topicsMu.Lock()
	defer p.topicsMu.Unlock()
	p.released = true
	for name := range *p.topics.Load() {
		p.cl.UntrackTopics(name)
	}
}

// topicMaxMessageBytes reads the topic's max.message.bytes, so batches
// never exceed what the broker accepts. Best effort: 0 if unknown.
func (p *Producer) topicMaxMessageBytes(ctx context.Context, topic string) int {
	cfgs, err := p.c.Admin().DescribeTopicConfigs(ctx, topic)
	if err != nil || len(cfgs) != 1 || cfgs[0].Err != nil {
		return 0
	}
	for _, c := range cfgs[0].Configs {
		if c.Name == "max.message.bytes" && c.Value != nil {
			n, err := strconv.Atoi(*c.Value)
			if err == nil && n > 0 {
				return n
			}
		}
	}
	return 0
}

// topicWait is the producer's wait for a topic or partition the metadata
// does not show yet: UnknownTopicTimeout if given, else the client's.
func (p *Producer) topicWait() cluster.TopicWait {
	w := p.cl.TopicWait()
	if p.cfg.unknownTopicSet {
		w.For, w.Option = p.cfg.unknownTopicWait, "UnknownTopicTimeout"
	}
	return w
}

// awaitPartition waits, up to UnknownTopicTimeout, for the metadata to
// show partition of ts (added by CreatePartitions a moment ago, perhaps),
// and adds it to ts.
func (p *Producer) awaitPartition(ctx context.Context, ts *topicState, partition int32) error {
	w := p.topicWait()
	if _, err := p.cl.AwaitPartition(ctx, ts.name, partition, w); err != nil {
		return err
	}
	ts.seen.Store(p.cl.Snapshot())
	ts.grow(p)
	return nil
}

// grow adds partitions the metadata shows beyond those known.
func (t *topicState) grow(p *Producer) {
	tm := p.cl.Snapshot().Topics[t.name]
	if tm == nil || len(tm.Partitions) <= len(t.partitions()) {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	cur := t.partitions()
	if len(tm.Partitions) <= len(cur) {
		return
	}
	next := append([]*partState(nil), cur...)
	for i := len(cur); i < len(tm.Partitions); i++ {
		next = append(next, newPartState(p, t, int32(i)))
	}
	t.parts.Store(&next)
}

// pick chooses rec's partition.
func (t *topicState) pick(p *Producer, rec *Record) (*partState, error) {
	parts := t.partitions()
	n := len(parts)
	if isManual(p.cfg.partitioner) {
		if rec.Partition < 0 || int(rec.Partition) >= n {
			return nil, fmt.Errorf("%w: %s[%d] (topic has %d partitions)", ErrInvalidPartition, t.name, rec.Partition, n)
		}
		return parts[rec.Partition], nil
	}
	var i int
	if _, ok := t.tp.(concurrentSafe); ok {
		i = t.tp.Partition(rec, n)
	} else {
		t.mu.Lock()
		i = t.tp.Partition(rec, n)
		t.mu.Unlock()
	}
	if i < 0 || i >= n {
		return nil, fmt.Errorf("%w: partitioner chose %s[%d] (topic has %d partitions)", ErrInvalidPartition, t.name, i, n)
	}
	rec.Partition = int32(i)
	return parts[i], nil
}

// countGens counts recs off their flush generations with count. Records of
// a batch mostly share one generation: they are counted in runs.
func (p *Producer) countGens(recs []pendingRecord, count func(*flushGen, int64)) {
	var g *flushGen
	run := int64(0)
	for _, pr := range recs {
		if pr.gen != g {
			if g != nil {
				count(g, run)
			}
			g, run = pr.gen, 0
		}
		run++
	}
	if g != nil {
		count(g, run)
	}
}

// finish fires the callbacks of a batch exactly once.
func (p *Producer) finish(b *pbatch, topic string, partition int32, baseOffset int64, err error) {
	if b.done.Swap(true) {
		return
	}
	err = recordError(topic, partition, err)
	if err != nil && p.txn != nil {
		// Before the buffer is released: a commit waiting for these
		// records sees the transaction failed when they are done.
		p.txn.recordFailed(err)
	}
	var bytes int64
	for i, pr := range b.recs {
		pr.rec.Partition = partition
		if err == nil {
			if baseOffset >= 0 {
				pr.rec.Offset = baseOffset + int64(i)
			} else {
				pr.rec.Offset = -1
			}
		}
		bytes += int64(pr.size)
	}
	if b.enc != nil {
		// No request references the batch any more: resends only start
		// after earlier requests drained, and this is its last outcome.
		b.enc.Release()
		b.enc = nil
	}
	// Free the buffer before the callbacks: a callback that produces
	// again must find the room this batch held. The records have their
	// outcome now (an abort waits for that); they are finished (a Flush or
	// a commit waits for that) only once their callbacks returned.
	p.buf.free(bytes, int64(len(b.recs)))
	if p.buf.outcomes {
		p.countGens(b.recs, p.buf.outcome)
	}
	if len(p.batchHks) > 0 {
		p.batchDone(b, topic, partition, err)
	}
	for _, pr := range b.recs {
		pr.fn(pr.rec, err)
	}
	p.countGens(b.recs, p.buf.finished)
	if b.part != nil {
		b.part.recycle(b.recs)
	}
}
