package riffle

import (
	"context"
	"fmt"
	"sync"
)

// runQueue is the FIFO of partitions with records to handle. A partition
// is in it at most once (cpart.queued), so the runners serve ready
// partitions fairly, one batch each before yielding.
type runQueue struct {
	mu     sync.Mutex
	q      []*cpart // queued partitions are q[head:]; slots before head are nil
	head   int
	notify chan struct{}
}

func (r *runQueue) init() { r.notify = make(chan struct{}, 1) }

func (r *runQueue) push(p *cpart) {
	r.mu.Lock()
	if len(r.q) == cap(r.q) && r.head > 0 {
		live := copy(r.q, r.q[r.head:])
		clear(r.q[live:])
		r.q, r.head = r.q[:live], 0
	}
	r.q = append(r.q, p)
	r.mu.Unlock()
	select {
	case r.notify <- struct{}{}:
	default:
	}
}

func (r *runQueue) pop(ctx context.Context) *cpart {
	for {
		r.mu.Lock()
		if r.head < len(r.q) {
			p := r.q[r.head]
			r.q[r.head] = nil
			r.head++
			if r.head == len(r.q) {
				r.q, r.head = r.q[:0], 0
			}
			more := r.head < len(r.q)
			r.mu.Unlock()
			if more {
				select {
				case r.notify <- struct{}{}:
				default:
				}
			}
			return p
		}
		r.mu.Unlock()
		select {
		case <-r.notify:
		case <-ctx.Done():
			return nil
		}
	}
}

// runner takes ready partitions off the queue and runs their handler.
func (cs *Consumer) runner() {
	for {
		p := cs.runq.pop(cs.ctx)
		if p == nil {
			return
		}
		if cs.eos != nil {
			cs.runTxn(p)
			continue
		}
		cs.run(p, nil)
	}
}

// runTxn runs p's next batch inside the open transaction (ExactlyOnce),
// waiting while a commit holds the transaction's gate.
func (cs *Consumer) runTxn(p *cpart) {
	seq, err := cs.eos.enter(cs.ctx)
	if err != nil {
		if cs.ctx.Err() == nil {
			cs.eos.stop(p, err) // the producer failed for good
		}
		return
	}
	ck := &eosChunk{e: cs.eos, seq: seq, base: -1}
	n, failErr := cs.run(p, ck)
	cs.eos.leave(seq, p, n, ck.moved, failErr)
}

// run hands one batch of p's records to the handler. It returns how many
// records the handler finished and its error, if any. ck (ExactlyOnce
// only) cuts a HandleRecord chunk short at a commit point.
func (cs *Consumer) run(p *cpart, ck *eosChunk) (int, error) {
	p.mu.Lock()
	p.queued = false
	if p.state != stateFetching || p.paused || p.running {
		p.mu.Unlock()
		return 0, nil
	}
	if p.buf.len() == 0 {
		if fe := p.fetchErr; fe != nil {
			p.fetchErr = nil
			p.state = stateFailed
			p.err = fe
			p.mu.Unlock()
			p.syncHooks()
			cs.reportError(fe)
			return 0, nil
		}
		if !p.tailLocked() {
			p.mu.Unlock()
			return 0, nil
		}
		if cs.cfg.sink == nil {
			// ExactlyOnce, the one handler mode that queues a gap
			// (scheduleLocked): the markers past the last record
			// count as handled inside the open transaction, which
			// then commits the offset past them, so an idle
			// pipeline's committed lag reaches 0.
			p.position, p.processed = p.fetchOffset, p.fetchOffset
			p.processedEpoch = p.fetchedEpoch
			p.mu.Unlock()
			if ck != nil {
				ck.moved = true
			}
			return 0, nil
		}
		// Nothing buffered but a gap past the last record offered
		// (markers): an empty offer tells the sink (tailLocked).
	}
	// The chunk leaves the partition's buffer but stays in the global
	// budget until handled.
	chunk, chunkBytes := p.buf.take(cs.cfg.maxBatchRecords)
	p.inHand, p.inHandBytes = len(chunk), chunkBytes
	p.running = true
	gen := p.gen
	ctx := p.ctx
	p.mu.Unlock()

	handled, failErr := cs.handle(ctx, p, gen, chunk, ck)

	p.mu.Lock()
	p.inHand, p.inHandBytes = 0, 0 // pushed back to buf below, or dropped
	left := chunkBytes
	if handled < len(chunk) {
		left = recordsSize(chunk[handled:])
	}
	cs.buffered.Add(-(chunkBytes - left))
	if handled < len(chunk) && p.gen == gen {
		// Failed or paused mid-batch: keep the failed record (and what
		// follows) at the head, so a resume hands it over next.
		p.buf.pushFront(chunk[handled:], left)
		p.position = chunk[handled].Offset
		if failErr != nil {
			p.state = stateFailed
			p.handlerErr = true
			p.err = &PartitionError{Topic: p.tp.Topic, Partition: p.tp.Partition, Offset: chunk[handled].Offset, Err: failErr}
		}
	} else {
		// Revoked or reset mid-batch: the rest is dropped.
		cs.buffered.Add(-left)
	}
	if ck != nil && failErr == nil && p.gen == gen && p.state == stateFetching && p.buf.len() == 0 &&
		p.position >= 0 && p.fetchOffset > p.position && p.processed == p.position {
		// ExactlyOnce: markers right after the chunk's records count
		// as handled in the transaction of those records (leave reads
		// the processed offset), rather than in one of their own.
		p.position, p.processed = p.fetchOffset, p.fetchOffset
		p.processedEpoch = p.fetchedEpoch
	}
	p.running = false
	if p.idleCh != nil && p.state == stateRevoked {
		select {
		case <-p.idleCh:
		default:
			close(p.idleCh)
		}
	}
	pe := p.err
	p.scheduleLocked()
	fetcher := p.fetcher
	p.mu.Unlock()
	if failErr != nil && pe != nil {
		p.syncHooks()
		cs.reportError(pe)
	}
	// Room was freed: the fetcher may include the partition again, and a
	// fetcher that found no room may have some now.
	if fetcher >= 0 {
		cs.pokeFetcher(fetcher)
	}
	cs.pokeStarved()
	return handled, failErr
}

// handle runs the handler on chunk and returns how many records finished
// and the handler's error, if any.
func (cs *Consumer) handle(ctx context.Context, p *cpart, gen uint64, chunk []*Record, ck *eosChunk) (int, error) {
	if cs.cfg.sink != nil {
		return cs.offer(p, gen, chunk), nil
	}
	if cs.cfg.onBatch != nil {
		p.mu.Lock()
		if p.gen != gen {
			p.mu.Unlock()
			return 0, nil
		}
		p.position = chunk[len(chunk)-1].Offset + 1
		p.inHand, p.inHandBytes = 0, 0
		hw := p.hw
		p.mu.Unlock()
		err := safeCall(func() error {
			return cs.cfg.onBatch(ctx, &FetchBatch{Topic: p.tp.Topic, Partition: p.tp.Partition, Records: chunk, HighWatermark: hw})
		})
		if err != nil {
			return 0, err
		}
		p.mu.Lock()
		if p.gen == gen || p.state == stateRevoked {
			p.processed = chunk[len(chunk)-1].Offset + 1
			p.processedEpoch = chunk[len(chunk)-1].LeaderEpoch
		}
		p.mu.Unlock()
		return len(chunk), nil
	}
	// One critical section per record: it records the previous record
	// as processed and checks, before the next handler call, that the
	// partition is still ours and not paused. One safeCall for the whole
	// chunk: a panic is attributed to the record that was running.
	// Under ExactlyOnce, a commit point that is due ends the chunk
	// there too (ck.cut, asked before p.mu: it may take eos.mu).
	done := 0
	stopped := false
	err := safeCall(func() error {
		for i, r := range chunk {
			cut := i > 0 && ck != nil && ck.cut(i)
			p.mu.Lock()
			if i > 0 && (p.gen == gen || p.state == stateRevoked) {
				p.processed = chunk[i-1].Offset + 1
				p.processedEpoch = chunk[i-1].LeaderEpoch
			}
			if p.gen != gen || p.paused || cut {
				// Revoked or reset (the rest is dropped), or paused
				// or cut at a commit point (the rest goes back to
				// the buffer): no further handler call.
				p.mu.Unlock()
				stopped = true
				return nil
			}
			p.position = r.Offset + 1
			p.inHand--
			p.inHandBytes -= int64(r.size())
			p.mu.Unlock()
			if err := cs.cfg.onRecord(ctx, r); err != nil {
				return err
			}
			done = i + 1
		}
		return nil
	})
	if err == nil && !stopped && done > 0 {
		p.mu.Lock()
		if p.gen == gen || p.state == stateRevoked {
			p.processed = chunk[done-1].Offset + 1
			p.processedEpoch = chunk[done-1].LeaderEpoch
		}
		p.mu.Unlock()
	}
	return done, err
}

// safeCall runs a handler, turning a panic into an error for that record:
// a panicking handler must never count as a success.
func safeCall(fn func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("riffle: handler panicked: %v", r)
		}
	}()
	return fn()
}

func recordsSize(rs []*Record) int64 {
	var n int64
	for _, r := range rs {
		n += int64(r.size())
	}
	return n
}
