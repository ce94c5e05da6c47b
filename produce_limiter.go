package riffle

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
)

// limiter bounds the producer's buffered bytes and records, and tracks
// which flush generation each buffered record belongs to, so Flush waits
// only for the records produced before it, however fast others keep
// producing.
//
// Its fast path is lock-free: any number of goroutines produce at once,
// and a mutex per record here was one of three each record took. Room is
// reserved with atomics; a record joins the current generation with one
// atomic add. The mutex guards only the channel that waiters block on
// (replaced on every wake-up, so waiters can also watch a context) and the
// list of retired generations.
type limiter struct {
	bytes, recs atomic.Int64
	maxB, maxR  int64
	// outcomes: count records without an outcome apart (flushGen.out),
	// for a transactional producer's abort; others skip that atomic per
	// record.
	outcomes bool
	cur      atomic.Pointer[flushGen]
	waiters  atomic.Int32 // goroutines that may be waiting on changed

	mu      sync.Mutex
	changed chan struct{}
	retired []*flushGen // generations a Flush may wait for, oldest first
}

// flushGen counts the unfinished records of one flush generation: the
// records produced between two Flush calls. out counts those without an
// outcome yet (only when the limiter counts outcomes: a transactional
// producer); n those whose callbacks have not returned yet (n >= out).
// Flush and a transaction's commit wait for n, so they return after the
// callbacks; an abort fails the unsent records and waits only for out, so
// a callback may abort its transaction.
type flushGen struct{ n, out atomic.Int64 }

func (l *limiter) init(maxB, maxR int64, outcomes bool) {
	l.maxB, l.maxR, l.outcomes = maxB, maxR, outcomes
	l.changed = make(chan struct{})
	l.cur.Store(new(flushGen))
}

// acquire reserves room for one record of n bytes and returns the flush
// generation that counts it until its callback returned (see outcome and
// finished).
func (l *limiter) acquire(ctx context.Context, n int64, failFast bool) (*flushGen, error) {
	for {
		if l.reserve(n) {
			return l.join(), nil
		}
		if failFast {
			return nil, ErrBufferFull
		}
		ch := l.wait()
		// Check again after registering: a free that came before
		// could not know about this waiter (see free).
		if l.reserve(n) {
			l.waiters.Add(-1)
			return l.join(), nil
		}
		select {
		case <-ch:
			l.waiters.Add(-1)
		case <-ctx.Done():
			l.waiters.Add(-1)
			return nil, fmt.Errorf("waiting for producer buffer space: %w", ctx.Err())
		}
	}
}

// join counts one record in the current generation. A Flush that retires
// the generation between the load and the add may miss this record: it
// was produced concurrently with that Flush, which is allowed to.
func (l *limiter) join() *flushGen {
	g := l.cur.Load()
	g.n.Add(1)
	if l.outcomes {
		g.out.Add(1)
	}
	return g
}

// reserve takes room for one record of n bytes if there is some. A record
// larger than the whole buffer is admitted alone (when nothing else is
// buffered), so it can never wait forever.
func (l *limiter) reserve(n int64) bool {
	for {
		b := l.bytes.Load()
		if b+n > l.maxB && b != 0 {
			return false
		}
		if l.bytes.CompareAndSwap(b, b+n) {
			break
		}
	}
	if l.recs.Add(1) > l.maxR {
		l.recs.Add(-1)
		l.bytes.Add(-n)
		l.wake() // the bytes briefly held may have turned someone away
		return false
	}
	return true
}

// wait registers a waiter and returns the channel the next wake-up closes.
// The caller must decrement waiters when it stops waiting.
func (l *limiter) wait() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.waiters.Add(1)
	return l.changed
}

// wake closes the current channel if anyone may be waiting on it.
func (l *limiter) wake() {
	if l.waiters.Load() == 0 {
		return
	}
	l.signal()
}

func (l *limiter) signal() {
	l.mu.Lock()
	close(l.changed)
	l.changed = make(chan struct{})
	l.mu.Unlock()
}

// free returns the room of recs records of n bytes in all. It is called
// before the records' callbacks (a callback that produces again must find
// the room); their flush generations count them off as having an outcome
// then too (outcome), and as finished only after the callbacks returned
// (finished), so that a Flush never returns before the callbacks of the
// records it waited for.
//
// Lost wake-ups cannot happen: a waiter registers (waiters+1) and then
// checks for room, while free frees the room and then checks for
// waiters; atomics are sequentially consistent, so at least one of them
// sees the other's write.
func (l *limiter) free(n, recs int64) {
	l.bytes.Add(-n)
	l.recs.Add(-recs)
	l.wake()
}

// outcome counts off k records of g that have their outcome (their
// callbacks are about to run), waking any abort if none is left.
func (l *limiter) outcome(g *flushGen, k int64) {
	if !l.outcomes {
		return
	}
	if g.out.Add(-k) == 0 {
		l.signal()
	}
}

// finished counts off k records of g whose callbacks have returned, waking
// any Flush if that finished the generation.
func (l *limiter) finished(g *flushGen, k int64) {
	if g.n.Add(-k) == 0 {
		l.signal()
	}
}

// failOne gives a single record that never entered a batch its outcome:
// its room is freed and its generation counts its outcome, its callback
// runs, then its generation counts it finished.
func (l *limiter) failOne(n int64, g *flushGen, fn func()) {
	l.free(n, 1)
	l.outcome(g, 1)
	fn()
	l.finished(g, 1)
}

// flushMark retires the current generation and returns the generations a
// Flush started now waits for: every one not yet finished.
func (l *limiter) flushMark() []*flushGen {
	l.mu.Lock()
	defer l.mu.Unlock()
	old := l.cur.Swap(new(flushGen))
	live := l.retired[:0]
	for _, g := range l.retired {
		if g.n.Load() > 0 {
			live = append(live, g)
		}
	}
	clear(l.retired[len(live):])
	l.retired = append(live, old)
	return append([]*flushGen(nil), l.retired...)
}

// pendingBefore reports whether any of the generations of mark still has
// records whose callbacks have not returned (with outcomes, records
// without an outcome); if so it returns a channel that closes when that
// may have changed (the caller then calls pendingBefore again).
func (l *limiter) pendingBefore(mark []*flushGen, outcomes bool) (<-chan struct{}, bool) {
	l.mu.Lock()
	ch := l.changed
	l.mu.Unlock()
	// Checked after taking the channel: a generation whose count drops
	// to 0 later signals it (outcome, finished).
	for _, g := range mark {
		c := &g.n
		if outcomes && l.outcomes {
			c = &g.out
		}
		if c.Load() > 0 {
			return ch, true
		}
	}
	return nil, false
}
