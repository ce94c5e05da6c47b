package riffle

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/riffle-go/riffle/internal/batch"
	"github.com/riffle-go/riffle/internal/producer"
)

// partState is one partition of the producer: its open batch and the
// sequence state machine of its sealed batches. Its lock is its own; no
// other partition ever waits for it (compression happens under it).
type partState struct {
	p     *Producer
	topic *topicState
	id    int32

	mu        sync.Mutex
	bld       *batch.Builder
	open      []pendingRecord
	openBytes int // upper bound of the open batch's encoded size
	openSince time.Time
	// due: the open batch should go as soon as the partition can send it
	// (linger passed or zero, or a synchronous produce), but an earlier
	// sealed batch is still waiting for the sender. It stays open and
	// takes more records until that one is sent (sealDueLocked), so a
	// backlog batches naturally instead of becoming one tiny batch, and
	// one request, per record.
	due       bool
	linger    *time.Timer
	seq       *producer.Partition
	retries   int
	backoff   time.Time // no sends before this
	wakeTimer *time.Timer
	failed    error // set by failAll; later appends fail at once
	// spare is the record slice of a finished batch, empty, for the
	// next batch to start with (see recycle).
	spare []pendingRecord
}

func newPartState(p *Producer, t *topicState, id int32) *partState {
	return &partState{
		p: p, topic: t, id: id,
		seq: producer.NewPartition(p.cfg.maxInflight, p.cfg.idempotent),
	}
}

// append adds a record to the open batch, sealing it when full or, when
// due (no linger, synchronous produce), as soon as nothing waits for the
// sender. Records are encoded when their batch is sealed, not here: under
// the partition's lock a record is only queued, so many goroutines
// producing to one partition hold it for very little time (encoding each
// record in turn under the lock made them queue on it; with many runnable
// goroutines Go's mutex parks them, leaving cores idle). The producer reads
// the Record until its callback (see Produce).
func (s *partState) append(pr pendingRecord, sync bool) {
	s.mu.Lock()
	if s.failed == nil && s.p.ctx.Err() != nil {
		// The producer closed while this record was on its way here
		// (looking up a new topic, say); nothing would send it.
		s.failed = ErrProducerClosed
	}
	if s.failed != nil {
		s.mu.Unlock()
		failed := s.failed
		s.p.buf.failOne(int64(pr.size), pr.gen, func() { s.p.failUnbatched(pr.rec, pr.fn, failed, s.id) })
		return
	}
	var bad []*pbatch
	if len(s.open) > 0 && s.openBytes+pr.bound > s.topic.maxBatch {
		// Full: seal what we have and start a new batch with this record.
		bad = append(bad, s.sealLocked())
	}
	if len(s.open) == 0 {
		s.openSince = time.Now()
		s.openBytes = batch.BatchOverhead
	}
	s.open = append(s.open, pr)
	s.openBytes += pr.bound
	switch {
	case s.openBytes >= s.topic.maxBatch:
		bad = append(bad, s.sealLocked())
	case sync || s.p.cfg.linger == 0:
		s.due = true
		bad = append(bad, s.sealDueLocked())
	case len(s.open) == 1:
		if s.linger == nil {
			s.linger = time.AfterFunc(s.p.cfg.linger, s.lingerExpired)
		} else {
			s.linger.Reset(s.p.cfg.linger)
		}
	}
	s.mu.Unlock()
	s.failBad(bad)
}

func (s *partState) lingerExpired() {
	s.mu.Lock()
	var bad *pbatch
	if len(s.open) > 0 && time.Since(s.openSince) >= s.p.cfg.linger-time.Millisecond {
		s.due = true
		bad = s.sealDueLocked()
	}
	s.mu.Unlock()
	s.failBad([]*pbatch{bad})
}

// sealDueLocked seals the open batch if it is due and no sealed batch is
// waiting to be sent. The sender calls it after taking a batch, and so do
// the paths that remove batches without sending them.
func (s *partState) sealDueLocked() *pbatch {
	if !s.due || len(s.open) == 0 || s.seq.HasSendable() {
		return nil
	}
	return s.sealLocked()
}

// flush seals the open batch now. Rather than waking the sender, it
// returns the sink the partition's batches go to, if it sealed one and
// the partition can send now: the caller hands every flushed partition
// to its sink at once (addReady), so one request carries them all instead
// of the sender taking the first ones sealed alone.
func (s *partState) flush() *sink {
	s.mu.Lock()
	bad, sealed := s.sealHeldLocked()
	var to *sink
	if sealed {
		to = s.wakeTargetLocked()
	}
	s.mu.Unlock()
	if bad != nil {
		s.failBad([]*pbatch{bad})
	}
	return to
}

// failBad fails batches whose sealing failed, outside the lock (callbacks
// may produce again).
func (s *partState) failBad(bad []*pbatch) {
	for _, b := range bad {
		if b != nil {
			s.p.finish(b, s.topic.name, s.id, -1, b.sealErr)
		}
	}
}

// sealLocked encodes and compresses the open batch, queues it in the sequence state
// machine and wakes the sender of the partition's leader. It returns the
// batch if sealing failed (the caller fails it after unlocking).
func (s *partState) sealLocked() *pbatch {
	bad, sealed := s.sealHeldLocked()
	if sealed {
		s.wakeLocked()
	}
	return bad
}

// sealHeldLocked is sealLocked without waking the sender; sealed reports
// whether it queued a batch.
func (s *partState) sealHeldLocked() (bad *pbatch, sealed bool) {
	if len(s.open) == 0 {
		return nil, false
	}
	if s.linger != nil {
		s.linger.Stop()
	}
	s.due = false
	if s.bld == nil {
		s.bld = batch.NewBuilder(batch.BuilderOptions{MaxBytes: s.topic.maxBatch, Transactional: s.p.txn != nil})
	}
	recs := s.open
	k := 0
	for ; k < len(recs); k++ {
		br := toBatchRecord(recs[k].rec)
		if !s.bld.Add(&br) {
			break // cannot happen: the bounds kept the batch within its limit
		}
	}
	if k == 0 {
		// Not even one record fits (its size was checked at Produce,
		// so it cannot happen): fail it rather than loop.
		k = 1
	}
	// The next batch takes a finished batch's slice (see recycle), or
	// one sized for about as many records as this one, with room for
	// some more: batch sizes vary, and a slice that grows is copied.
	if s.spare != nil {
		s.open, s.spare = s.spare, nil
	} else {
		s.open = make([]pendingRecord, 0, len(recs)+len(recs)/4)
	}
	s.openBytes = 0
	if k < len(recs) {
		// What did not fit starts the next batch, due at once.
		s.open = append(s.open, recs[k:]...)
		s.openBytes = batch.BatchOverhead
		for _, pr := range recs[k:] {
			s.openBytes += pr.bound
		}
		s.due = true
	}
	recs = recs[:k] // its capacity goes back to the partition with it
	b := &pbatch{recs: recs, created: s.openSince, part: s}
	if s.bld.NumRecords() == 0 {
		b.sealErr = fmt.Errorf("%s[%d]: %w", s.topic.name, s.id, ErrRecordTooLarge)
		return b, false
	}
	enc, err := s.bld.Finish(batch.Codec(s.p.cfg.compression))
	s.bld.Reset()
	if err != nil {
		// Compression failed: nothing was sent, fail the records.
		b.sealErr = fmt.Errorf("%s[%d]: compressing batch: %w", s.topic.name, s.id, err)
		return b, false
	}
	b.enc = enc
	b.wireBytes = len(enc.Bytes())
	b.rawBytes = enc.UncompressedSize()
	s.seq.Add(&producer.Batch{Records: int32(len(recs)), Payload: b})
	return nil, true
}

// recycle keeps recs, the record slice of a batch whose callbacks ran,
// for a later batch of the partition: under steady load each batch takes
// the slice of one finished before it instead of allocating (and
// clearing) its own. It keeps the larger of recs and the spare it has;
// one spare per partition, dropped when the partition fails.
func (s *partState) recycle(recs []pendingRecord) {
	recs = recs[:0]
	clear(recs[:cap(recs)]) // the records and callbacks may be collected
	s.mu.Lock()
	if s.failed == nil && cap(recs) > cap(s.spare) {
		s.spare = recs
	}
	s.mu.Unlock()
}

// leader returns the partition's leader from the current metadata, or -1.
func (s *partState) leader() int32 {
	tm := s.p.cl.Snapshot().Topics[s.topic.name]
	if tm == nil {
		return -1
	}
	pm, ok := tm.Partition(s.id)
	if !ok || pm.Err != nil {
		return -1
	}
	return pm.Leader
}

// wakeLocked hands the partition to the sender of its leader if it has
// something to send; with no leader it asks for metadata and retries.
func (s *partState) wakeLocked() {
	if to := s.wakeTargetLocked(); to != nil {
		to.add(s)
	}
}

// wakeTargetLocked returns the sink of the partition's leader if the
// partition has something to send now (wakeLocked without the waking);
// with no leader, or backing off, it schedules a later wake and returns
// nil.
func (s *partState) wakeTargetLocked() *sink {
	if !s.seq.HasSendable() || s.p.ctx.Err() != nil {
		return nil
	}
	if wait := time.Until(s.backoff); wait > 0 {
		s.scheduleWakeLocked(wait)
		return nil
	}
	leader := s.leader()
	if leader < 0 {
		s.p.cl.TriggerMetadata()
		s.scheduleWakeLocked(s.p.c.cfg.retryBackoff.Base)
		return nil
	}
	return s.p.sinkFor(leader)
}

func (s *partState) scheduleWakeLocked(d time.Duration) {
	if s.wakeTimer == nil {
		s.wakeTimer = time.AfterFunc(d, func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			s.wakeLocked()
		})
		return
	}
	s.wakeTimer.Reset(d)
}

// backoffLocked delays the partition's next send after a failure (KIP-580).
func (s *partState) backoffLocked() {
	s.retries++
	s.backoff = time.Now().Add(s.p.c.cfg.retryBackoff.Delay(s.retries, rand.Float64()))
}

// failAll fails every buffered record of the partition (on Close).
func (s *partState) failAll(ctxErr error) {
	s.mu.Lock()
	if s.linger != nil {
		s.linger.Stop()
	}
	if s.wakeTimer != nil {
		s.wakeTimer.Stop()
	}
	cause := ErrProducerClosed
	if ctxErr != nil {
		cause = fmt.Errorf("%w (%w)", ErrProducerClosed, ctxErr)
	}
	s.failed = cause
	open := s.open
	s.open, s.spare = nil, nil
	batches := s.seq.TakeAll()
	s.mu.Unlock()
	if len(open) > 0 {
		s.p.finish(&pbatch{recs: open}, s.topic.name, s.id, -1, fmt.Errorf("%s[%d]: %w: never sent", s.topic.name, s.id, cause))
	}
	for _, b := range batches {
		err := fmt.Errorf("%s[%d]: %w: never sent", s.topic.name, s.id, cause)
		if b.MaybeWritten() {
			err = fmt.Errorf("%s[%d]: %w: outcome unknown, the records may have been written", s.topic.name, s.id, cause)
		}
		s.p.finish(b.Payload.(*pbatch), s.topic.name, s.id, -1, err)
	}
}

// failWaiting fails the records that wait for the producer's first id, or
// for an epoch bump, with cause (InitProducerId refused: authorization):
// the open batch and every sealed batch not numbered (before the first id
// none is; before a bump none is numbered with the new epoch). Batches
// carrying numbers, or on the wire, are left alone. why names what they
// waited for.
func (s *partState) failWaiting(why string, cause error) {
	s.mu.Lock()
	if s.linger != nil {
		s.linger.Stop()
	}
	open := s.open
	s.open, s.openBytes, s.due = nil, 0, false
	out, _ := s.seq.Expire(func(b *producer.Batch) bool { return !b.Pinned() })
	s.mu.Unlock()
	err := fmt.Errorf("%s[%d]: %s: %w", s.topic.name, s.id, why, cause)
	for _, b := range out {
		s.p.finish(b.Payload.(*pbatch), s.topic.name, s.id, -1, err)
	}
	if len(open) > 0 {
		s.p.finish(&pbatch{recs: open}, s.topic.name, s.id, -1, err)
	}
}

// expire fails batches past the delivery timeout where that is safe. The
// error wraps the last cause known: the batch's last retriable failure,
// or, for a batch that never got numbers, the last InitProducerId failure.
func (s *partState) expire(now time.Time) {
	s.mu.Lock()
	out, needBump := s.seq.Expire(func(b *producer.Batch) bool {
		return now.Sub(b.Payload.(*pbatch).created) > s.p.cfg.deliveryTimeout
	})
	bad := s.sealDueLocked() // the batch it waited for may be gone
	causes := make([]error, len(out))
	for i, b := range out {
		causes[i] = b.Payload.(*pbatch).lastErr
	}
	s.mu.Unlock()
	s.failBad([]*pbatch{bad})
	idErr := s.p.id.lastFailure()
	for i, b := range out {
		cause := causes[i]
		if cause == nil && !b.Pinned() {
			cause = idErr // it never had a producer id to be sent with
		}
		s.p.finish(b.Payload.(*pbatch), s.topic.name, s.id, -1, deliveryTimeoutErr(s.topic.name, s.id, s.p.cfg.deliveryTimeout, b.Attempts, cause))
	}
	if needBump {
		s.p.requestBump()
	}
}

// deliveryTimeoutErr is the error of a batch of topic[partition] that
// the delivery timeout failed after attempts sends. It wraps
// ErrDeliveryTimeout and the error of the batch's last attempt, if any
// (e.g. NOT_ENOUGH_REPLICAS while too few replicas are in sync): that is
// why it was not delivered.
func deliveryTimeoutErr(topic string, partition int32, timeout time.Duration, attempts int, last error) error {
	if last == nil {
		return fmt.Errorf("%s[%d]: %w (%v) after %d attempts", topic, partition, ErrDeliveryTimeout, timeout, attempts)
	}
	return fmt.Errorf("%s[%d]: %w (%v) after %d attempts; last error: %w", topic, partition, ErrDeliveryTimeout, timeout, attempts, last)
}

// expireLoop enforces the delivery timeout.
func (p *Producer) expireLoop() {
	every := min(p.cfg.deliveryTimeout/10, time.Second)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-p.ctx.Done():
			return
		case now := <-t.C:
			for _, ts := range *p.topics.Load() {
				for _, part := range ts.partitions() {
					part.expire(now)
				}
			}
		}
	}
}
