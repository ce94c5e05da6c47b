package riffle

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

func newTestLimiter(maxB, maxR int64) *limiter {
	l := new(limiter)
	l.init(maxB, maxR, true)
	return l
}

func TestLimiterBounds(t *testing.T) {
	l := newTestLimiter(100, 3)
	ctx := context.Background()
	g, err := l.acquire(ctx, 60, true)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.acquire(ctx, 50, true); !errors.Is(err, ErrBufferFull) {
		t.Fatalf("over the byte limit: %v", err)
	}
	g2, _ := l.acquire(ctx, 20, true)
	g3, _ := l.acquire(ctx, 20, true)
	if _, err := l.acquire(ctx, 1, true); !errors.Is(err, ErrBufferFull) {
		t.Fatalf("over the record limit: %v", err)
	}
	if l.bytes.Load() != 100 || l.recs.Load() != 3 {
		t.Fatalf("bytes %d recs %d after a refused record", l.bytes.Load(), l.recs.Load())
	}
	l.failOne(60, g, func() {})
	l.failOne(20, g2, func() {})
	l.failOne(20, g3, func() {})
	// A record larger than the whole buffer goes in alone.
	big, err := l.acquire(ctx, 1000, true)
	if err != nil {
		t.Fatalf("oversized record refused on an empty buffer: %v", err)
	}
	if _, err := l.acquire(ctx, 1, true); !errors.Is(err, ErrBufferFull) {
		t.Fatalf("a record admitted next to an oversized one: %v", err)
	}
	l.failOne(1000, big, func() {})
	if l.bytes.Load() != 0 || l.recs.Load() != 0 {
		t.Fatalf("bytes %d recs %d at rest", l.bytes.Load(), l.recs.Load())
	}
}

// A producer blocked on a full buffer wakes when room is released, and
// gives up with its context.
func TestLimiterWaits(t *testing.T) {
	l := newTestLimiter(10, 100)
	g, _ := l.acquire(context.Background(), 10, false)
	got := make(chan error, 1)
	go func() {
		_, err := l.acquire(context.Background(), 5, false)
		got <- err
	}()
	select {
	case err := <-got:
		t.Fatalf("acquired on a full buffer: %v", err)
	case <-time.After(20 * time.Millisecond):
	}
	l.failOne(10, g, func() {})
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		_, err := l.acquire(ctx, 10, false)
		got <- err
	}()
	cancel()
	if err := <-got; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled wait: %v", err)
	}
	if l.waiters.Load() != 0 {
		t.Fatalf("%d waiters left registered", l.waiters.Load())
	}
}

// Flush waits for the generations before it only: records produced after
// the mark do not hold it, records before it do until their outcome.
func TestLimiterFlushGenerations(t *testing.T) {
	l := newTestLimiter(1<<20, 1<<20)
	ctx := context.Background()
	before, _ := l.acquire(ctx, 1, false)
	mark := l.flushMark()
	after, _ := l.acquire(ctx, 1, false)
	if before == after {
		t.Fatal("a record produced after the mark joined the flushed generation")
	}
	ch, pending := l.pendingBefore(mark, false)
	if !pending {
		t.Fatal("flush does not wait for the record before it")
	}
	l.failOne(1, before, func() {})
	select {
	case <-ch:
	case <-time.After(time.Second):
		t.Fatal("finishing the last record before the mark did not wake the flush")
	}
	if _, pending := l.pendingBefore(mark, false); pending {
		t.Fatal("still pending with only a later record outstanding")
	}
	l.failOne(1, after, func() {})
}

// Inside a record's callback its outcome is counted and it is not
// finished: an abort (outcomes) does not wait for it, a Flush does.
func TestLimiterOutcomeBeforeFinished(t *testing.T) {
	l := newTestLimiter(1<<20, 1<<20)
	g, _ := l.acquire(context.Background(), 1, false)
	mark := l.flushMark()
	l.failOne(1, g, func() {
		if _, pending := l.pendingBefore(mark, true); pending {
			t.Error("in the callback, the record still counts as without an outcome")
		}
		if _, pending := l.pendingBefore(mark, false); !pending {
			t.Error("in the callback, the record already counts as finished")
		}
	})
	if _, pending := l.pendingBefore(mark, false); pending {
		t.Fatal("after the callback, the record is not finished")
	}
}

// Many goroutines acquiring, holding, releasing and flushing: the counts
// always come back to zero, no flush waits for ever, and no flush returns
// while a record whose acquire returned before the flush began is still
// out.
func TestLimiterConcurrent(t *testing.T) {
	l := newTestLimiter(1000, 50)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	type rec struct {
		g        *flushGen
		size     int64
		released bool
	}
	var mu sync.Mutex
	live := map[*rec]bool{}
	var workers, flushers sync.WaitGroup
	for w := range 8 {
		workers.Go(func() {
			var held []*rec
			release := func(r *rec) {
				// Marked before the release: a flush that sees
				// the generation finished must see the mark.
				mu.Lock()
				r.released = true
				delete(live, r)
				mu.Unlock()
				l.failOne(r.size, r.g, func() {})
			}
			for i := range 3000 {
				size := int64(1 + (w+i)%40)
				// A worker holding records must not block on the
				// limits (all of them could, for ever): it tries,
				// and gives one back before trying again.
				var g *flushGen
				for {
					var err error
					if g, err = l.acquire(ctx, size, true); err == nil {
						break
					}
					if !errors.Is(err, ErrBufferFull) || ctx.Err() != nil {
						t.Error(err)
						return
					}
					if len(held) > 0 {
						release(held[0])
						held = held[1:]
					} else {
						// Nothing of its own to give back: wait for
						// the others' room, as a producer does.
						if g, err = l.acquire(ctx, size, false); err != nil {
							t.Error(err)
							return
						}
						break
					}
				}
				r := &rec{g: g, size: size}
				mu.Lock()
				live[r] = true
				mu.Unlock()
				held = append(held, r)
				if len(held) > 4 {
					release(held[0])
					held = held[1:]
				}
			}
			for _, r := range held {
				release(r)
			}
		})
	}
	for range 2 {
		flushers.Go(func() {
			for range 300 {
				mu.Lock()
				var before []*rec
				for r := range live {
					before = append(before, r)
				}
				mu.Unlock()
				mark := l.flushMark()
				for {
					ch, pending := l.pendingBefore(mark, false)
					if !pending {
						break
					}
					select {
					case <-ch:
					case <-ctx.Done():
						t.Error("flush never finished")
						return
					}
				}
				mu.Lock()
				for _, r := range before {
					if !r.released {
						t.Error("flush returned before a record acquired before it was released")
					}
				}
				mu.Unlock()
			}
		})
	}
	workers.Wait()
	flushers.Wait()
	if l.bytes.Load() != 0 || l.recs.Load() != 0 {
		t.Fatalf("bytes %d recs %d at rest", l.bytes.Load(), l.recs.Load())
	}
}
