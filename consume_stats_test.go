package riffle

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	rsink "github.com/riffle-go/riffle/internal/sink"
	"github.com/twmb/franz-go/pkg/kfake"
)

// A runner takes a chunk of records off a partition's buffer, unlocks,
// and only then hands the records over (the handler's first critical
// section, or the sink's Offer). Until the fix, Stats counted the chunk
// nowhere in between: BufferedRecords 0, Position == Processed, while the
// fetch position was already past the chunk. A reader that stops once it
// fetched to the end with nothing buffered and nothing running (readAll in
// produce_txn_test.go) then stopped with a whole chunk unhandled: under
// load TestTxnConcurrentProducers read 757 of 1000 records, and
// TestTxnCommitVisible 29 of 40, though the log held every record and
// its commit marker.
//
// The window is a goroutine being descheduled between two critical
// sections, so these tests widen it where the engine calls out: a sink
// whose Offer blocks holds the runner right after the take, exactly where
// preemption held it.

// blockingSink accepts every record, but its first Offer waits for
// release.
type blockingSink struct {
	offered chan struct{}
	release chan struct{}
	once    sync.Once

	mu   sync.Mutex
	next map[rsink.Part]int64
}

func (s *blockingSink) Offer(p rsink.Part, b rsink.Batch[*Record]) int {
	first := false
	s.once.Do(func() { first = true })
	if first {
		close(s.offered)
		<-s.release
	}
	if len(b.Recs) > 0 {
		s.mu.Lock()
		s.next[p] = b.Recs[len(b.Recs)-1].Offset + 1
		s.mu.Unlock()
	}
	return len(b.Recs)
}

func (s *blockingSink) Positions(ps []rsink.Part) map[rsink.Part]rsink.Pos {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[rsink.Part]rsink.Pos{}
	for _, p := range ps {
		if o, ok := s.next[p]; ok {
			out[p] = rsink.Pos{Offset: o}
		}
	}
	return out
}

func (s *blockingSink) Offsets(ps []rsink.Part) map[rsink.Part]int64 {
	out := map[rsink.Part]int64{}
	for p, pos := range s.Positions(ps) {
		out[p] = pos.Offset
	}
	return out
}

func (s *blockingSink) Stop(_ context.Context, ps []rsink.Part, lost bool) (map[rsink.Part]rsink.Pos, error) {
	if lost {
		return nil, nil
	}
	return s.Positions(ps), nil
}

// caughtUp is readAll's stop condition for one partition: fetched to end,
// nothing buffered, nothing handed over and unfinished.
func caughtUp(cs *Consumer, tp TopicPartition, end int64) bool {
	if fetchedTo(cs, tp.Topic, tp.Partition) < end {
		return false
	}
	for _, ps := range cs.Stats().Partitions {
		if ps.TopicPartition == tp && (ps.BufferedRecords > 0 || ps.Position != ps.Processed) {
			return false
		}
	}
	return true
}

func seedOne(t *testing.T, n int) *Client {
	fake := newFake(t, kfake.NumBrokers(1), kfake.SeedTopics(1, "t"))
	cl := newTestClient(t, SeedBrokers(fake.ListenAddrs()...))
	var rs []*Record
	for i := 0; i < n; i++ {
		rs = append(rs, &Record{Topic: "t", Partition: 0, Value: []byte(fmt.Sprint(i))})
	}
	produceRecords(t, cl, rs)
	return cl
}

// Records a runner took off the buffer and has not handed over yet are
// still buffered for Stats.
func TestStatsCountTakenChunk(t *testing.T) {
	const n = 10
	cl := seedOne(t, n)
	s := &blockingSink{offered: make(chan struct{}), release: make(chan struct{}), next: map[rsink.Part]int64{}}
	cs, err := NewConsumer(cl, ConsumerOption(func(c *consumerConfig) { c.sink = s }))
	if err != nil {
		t.Fatal(err)
	}
	released := false
	defer func() {
		if !released {
			close(s.release)
		}
		closeConsumer(t, cs)
	}()
	tp := TopicPartition{"t", 0}
	assignAll(t, cs, "t", 1, AtEarliest())
	select {
	case <-s.offered:
	case <-time.After(30 * time.Second):
		t.Fatal("no records offered")
	}
	// The runner holds the chunk it took: fetched to the end, and none
	// of it accepted.
	if got := fetchedTo(cs, "t", 0); got != n {
		t.Fatalf("fetched to %d, want %d (one fetch brings every record)", got, n)
	}
	ps := cs.Stats().Partitions[0]
	if ps.BufferedRecords != n || ps.BufferedBytes == 0 {
		t.Errorf("while the chunk is being offered: %v; want BufferedRecords %d and its bytes", ps, n)
	}
	if caughtUp(cs, tp, n) {
		t.Errorf("looks caught up with %d records not handed over: %v", n, ps)
	}
	close(s.release)
	released = true
	waitUntil(t, 30*time.Second, func() bool { return caughtUp(cs, tp, n) },
		func() string { return statsString(cs) })
	if ps := cs.Stats().Partitions[0]; ps.BufferedRecords != 0 || ps.BufferedBytes != 0 || ps.Position != n {
		t.Errorf("after the offer: %v; want nothing buffered, Position %d", ps, n)
	}
}

// With a handler, the records of the running chunk after the one being
// handled are still buffered; a reader waiting for caughtUp gets every
// record.
func TestStatsCountChunkNotYetHandled(t *testing.T) {
	const n, blockAt = 10, 3
	cl := seedOne(t, n)
	in := make(chan struct{})
	release := make(chan struct{})
	var mu sync.Mutex
	var got []int64
	cs, err := NewConsumer(cl, HandleRecord(func(_ context.Context, r *Record) error {
		if r.Offset == blockAt {
			close(in)
			<-release
		}
		mu.Lock()
		got = append(got, r.Offset)
		mu.Unlock()
		return nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	released := false
	defer func() {
		if !released {
			close(release)
		}
		closeConsumer(t, cs)
	}()
	tp := TopicPartition{"t", 0}
	assignAll(t, cs, "t", 1, AtEarliest())
	select {
	case <-in:
	case <-time.After(30 * time.Second):
		t.Fatal("record not handled")
	}
	if got := fetchedTo(cs, "t", 0); got != n {
		t.Fatalf("fetched to %d, want %d (one fetch brings every record)", got, n)
	}
	ps := cs.Stats().Partitions[0]
	if ps.Position != blockAt+1 || ps.Processed != blockAt || ps.BufferedRecords != n-blockAt-1 {
		t.Errorf("while handling offset %d: %v; want Position %d, Processed %d, BufferedRecords %d",
			blockAt, ps, blockAt+1, blockAt, n-blockAt-1)
	}
	close(release)
	released = true
	waitUntil(t, 30*time.Second, func() bool { return caughtUp(cs, tp, n) },
		func() string { return statsString(cs) })
	mu.Lock()
	defer mu.Unlock()
	if len(got) != n {
		t.Errorf("caught up after %d records handled, want %d", len(got), n)
	}
}
