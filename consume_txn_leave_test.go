package riffle

import (
	"testing"
	"time"
)

// Two chunks of one partition leave the transaction at once on two
// runners: the position recorded last must be the later one. The
// partition's position is read under the transaction's lock; when it
// was read before (then recorded under the lock), a chunk that had read
// 240 and waited for the lock overwrote the 250 the next chunk recorded
// meanwhile, and the transaction committed below records it had handled
// (TestExactlyOnceClean timed out at 990 of 1,000 inputs committed).
//
// The test holds the transaction's lock while the first chunk leaves,
// plays the second chunk (its handler moves the position to 250 and it
// records that), then lets the first go on.
func TestExactlyOnceLeaveKeepsLaterPosition(t *testing.T) {
	e := &eos{
		token: make(chan struct{}, 1), wake: make(chan struct{}, 1), opened: make(chan struct{}),
		offsets: map[TopicPartition]eosPos{}, begun: true, open: true, seq: 3,
	}
	p := &cpart{tp: TopicPartition{"in", 3}, processed: 240, processedEpoch: 1}

	e.mu.Lock()
	e.running = 2 // both chunks entered
	left := make(chan struct{})
	go func() {
		defer close(left)
		e.leave(3, p, 20, false, nil) // the chunk that ended at 240
	}()
	// Let it reach the transaction's lock (and, with the old order,
	// read 240 before it).
	time.Sleep(20 * time.Millisecond)
	// The next chunk ran meanwhile: its handler moved the position on,
	// and it recorded it.
	p.mu.Lock()
	p.processed = 250
	p.mu.Unlock()
	e.offsets[p.tp] = eosPos{p: p, offset: 250, epoch: 1}
	e.handled += 10
	e.running--
	e.mu.Unlock()
	<-left

	e.mu.Lock()
	defer e.mu.Unlock()
	if got := e.offsets[p.tp].offset; got != 250 {
		t.Fatalf("the transaction records %s at %d, want 250: an earlier chunk's position overwrote a later one", p.tp, got)
	}
	if e.handled != 30 || e.running != 0 {
		t.Fatalf("handled %d running %d, want 30 and 0", e.handled, e.running)
	}
}
