package riffle

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/riffle-go/riffle/internal/batch"
	"github.com/riffle-go/riffle/internal/cluster"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Consumer scenario tests. Every wait below has a generous deadline that
// only turns a hang into a failure; what the tests assert is behaviour
// (orderings, counts, offsets, byte bounds), never how long something took.

// produceRecords writes recs with a producer using the manual partitioner
// and waits for all of them.
func produceRecords(t testing.TB, cl *Client, recs []*Record, opts ...ProducerOption) {
	t.Helper()
	p, err := NewProducer(cl, append([]ProducerOption{WithPartitioner(ManualPartitioner())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := p.ProduceSync(ctx, recs...); err != nil {
		p.Close(ctx)
		t.Fatal(err)
	}
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
}

// waitUntil polls cond until it holds; after the deadline it fails the
// test with what describe says (the deadline only catches hangs).
func waitUntil(t testing.TB, deadline time.Duration, cond func() bool, describe func() string) {
	t.Helper()
	end := time.Now().Add(deadline)
	for !cond() {
		if time.Now().After(end) {
			t.Fatalf("timed out waiting: %s", describe())
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func statsString(cs *Consumer) string {
	st := cs.Stats()
	s := fmt.Sprintf("buffered %d reserved %d;", st.BufferedBytes, cs.reserved.Load())
	for _, ps := range st.Partitions {
		s += fmt.Sprintf(" %s pos %d processed %d hw %d bufrecs %d bufbytes %d leader %d paused %v err %v;",
			ps.TopicPartition, ps.Position, ps.Processed, ps.HighWatermark, ps.BufferedRecords, ps.BufferedBytes, ps.Leader, ps.Paused, ps.Err)
	}
	if e := cs.eos; e != nil {
		e.mu.Lock()
		s += fmt.Sprintf(" eos: seq %d open %v begun %v running %d ending %d handled %d since %v offsets %d failed %v fatal %v closed %v hold %v rewind %v token held %v; txn committed %d aborted %d; producer %v",
			e.seq, e.open, e.begun, e.running, e.ending, e.handled, time.Since(e.first).Round(time.Millisecond), len(e.offsets),
			e.failed, e.fatal, e.closed, time.Until(e.holdUntil).Round(time.Millisecond), e.rewindDue, len(e.token) > 0,
			st.TxnCommitted, st.TxnAborted, e.p.txnState())
		e.mu.Unlock()
	}
	return s
}

func assignAll(t testing.TB, cs *Consumer, topic string, partitions int32, start StartOffset) {
	t.Helper()
	var as []Assignment
	for p := int32(0); p < partitions; p++ {
		as = append(as, Assignment{TopicPartition{topic, p}, start})
	}
	if err := cs.Assign(as...); err != nil {
		t.Fatal(err)
	}
}

func closeConsumer(t testing.TB, cs *Consumer) map[TopicPartition]int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pos, err := cs.Close(ctx)
	if err != nil {
		t.Fatalf("close: %v", err)
	}
	return pos
}

// partLog records, per partition, the offsets handed to the handler in the
// order they were handed.
type partLog struct {
	mu   sync.Mutex
	offs map[int32][]int64
}

func newPartLog() *partLog { return &partLog{offs: map[int32][]int64{}} }

func (l *partLog) add(r *Record) {
	l.mu.Lock()
	l.offs[r.Partition] = append(l.offs[r.Partition], r.Offset)
	l.mu.Unlock()
}

func (l *partLog) count(p int32) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.offs[p])
}

func (l *partLog) get(p int32) []int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]int64(nil), l.offs[p]...)
}

// expectRange fails unless got is exactly from, from+1, ..., to-1.
func expectRange(t testing.TB, what string, got []int64, from, to int64) {
	t.Helper()
	if int64(len(got)) != to-from {
		t.Fatalf("%s: %d records, want %d (offsets %d..%d)", what, len(got), to-from, from, to-1)
	}
	for i, o := range got {
		if o != from+int64(i) {
			t.Fatalf("%s: record %d has offset %d, want %d", what, i, o, from+int64(i))
		}
	}
}

// seed 000 (kafkajs #683): one partition's handler is slow; the other
// partitions, even those fetched from the same broker, must not wait for
// it.
func TestConsumeSlowPartitionIsolated(t *testing.T) {
	for _, brokers := range []int{1, 3} {
		t.Run(fmt.Sprintf("brokers=%d", brokers), func(t *testing.T) {
			fake := newFake(t, kfake.NumBrokers(brokers), kfake.SeedTopics(3, "t"))
			cl := newTestClient(t, SeedBrokers(fake.ListenAddrs()...))
			const total = 500
			var recs []*Record
			want := map[int32]int{}
			for i := 0; i < total; i++ {
				p := int32(i % 3)
				want[p]++
				recs = append(recs, &Record{Topic: "t", Partition: p, Value: []byte(fmt.Sprintf("v%d", i))})
			}
			produceRecords(t, cl, recs)

			var (
				mu        sync.Mutex
				done      = map[int32]int{}
				lastOff   = map[int32]int64{0: -1, 1: -1, 2: -1}
				p0AtOther = -1
				others    = make(chan struct{})
			)
			cs, err := NewConsumer(cl, HandleRecord(func(ctx context.Context, r *Record) error {
				if r.Partition == 0 {
					select {
					case <-time.After(100 * time.Millisecond):
					case <-ctx.Done():
						return ctx.Err()
					}
				}
				mu.Lock()
				defer mu.Unlock()
				if r.Offset != lastOff[r.Partition]+1 {
					t.Errorf("partition %d: offset %d after %d", r.Partition, r.Offset, lastOff[r.Partition])
				}
				lastOff[r.Partition] = r.Offset
				done[r.Partition]++
				if r.Partition != 0 && p0AtOther < 0 && done[1] == want[1] && done[2] == want[2] {
					p0AtOther = done[0]
					close(others)
				}
				return nil
			}))
			if err != nil {
				t.Fatal(err)
			}
			assignAll(t, cs, "t", 3, AtEarliest())
			select {
			case <-others:
			case <-time.After(30 * time.Second):
				t.Fatalf("partitions 1 and 2 not consumed: %s", statsString(cs))
			}
			mu.Lock()
			got := p0AtOther
			mu.Unlock()
			t.Logf("partition 0 had %d of %d records done when partitions 1 and 2 were complete", got, want[0])
			if got >= 20 {
				t.Fatalf("partitions 1 and 2 finished only after partition 0 had done %d records: the slow partition held them back", got)
			}

			// Close while partition 0's handler is still busy: a short
			// ctx bounds the wait, then the handler's context is
			// cancelled and every goroutine stops.
			ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
			defer cancel()
			pos, err := cs.Close(ctx)
			if err != nil && !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("close: %v", err)
			}
			for p := int32(1); p < 3; p++ {
				if pos[TopicPartition{"t", p}] != int64(want[p]) {
					t.Fatalf("partition %d position %d, want %d (%v)", p, pos[TopicPartition{"t", p}], want[p], pos)
				}
			}
		})
	}
}

// Leaders move under a running consumer, one partition at a time: every
// record is still handled exactly once, in order, and never by two
// handler calls of the same partition at once.
func TestConsumeLeaderMovesExactlyOnce(t *testing.T) {
	const (
		brokers    = 3
		partitions = 6
		perPart    = 16667 // 100,002 records in all
	)
	fake := newFake(t, kfake.NumBrokers(brokers), kfake.SeedTopics(partitions, "t"))
	cl := newTestClient(t, SeedBrokers(fake.ListenAddrs()...))
	start := time.Now()
	produceN(t, cl, "t", partitions, perPart)
	t.Logf("produced %d records in %v", partitions*perPart, time.Since(start))

	type pstate struct {
		inflight atomic.Int32
		mu       sync.Mutex
		last     int64
		seen     []uint8 // handler calls per offset
		dups     int
		reorders int
	}
	var (
		ps       [partitions]*pstate
		overlaps atomic.Int32
		handled  atomic.Int64
	)
	for i := range ps {
		ps[i] = &pstate{last: -1, seen: make([]uint8, perPart)}
	}
	cs, err := NewConsumer(cl,
		FetchPartitionMaxBytes(64<<10), // many fetches, so moves land mid-stream
		MaxBatchRecords(200),
		HandleRecord(func(ctx context.Context, r *Record) error {
			s := ps[r.Partition]
			if s.inflight.Add(1) > 1 {
				overlaps.Add(1)
			}
			if r.Offset%97 == 0 {
				// Widen the window in which an overlapping call
				// would be seen.
				time.Sleep(100 * time.Microsecond)
			}
			s.mu.Lock()
			if r.Offset <= s.last {
				s.reorders++
			}
			s.last = r.Offset
			if r.Offset >= 0 && r.Offset < perPart {
				if s.seen[r.Offset]++; s.seen[r.Offset] > 1 {
					s.dups++
				}
			}
			s.mu.Unlock()
			if want := fmt.Sprintf("%d-%d", r.Partition, r.Offset); string(r.Value) != want {
				t.Errorf("value %q at %d@%d", r.Value, r.Partition, r.Offset)
			}
			s.inflight.Add(-1)
			handled.Add(1)
			return nil
		}))
	if err != nil {
		t.Fatal(err)
	}
	assignAll(t, cs, "t", partitions, AtEarliest())

	stop := make(chan struct{})
	var moves atomic.Int32
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		rng := rand.New(rand.NewPCG(1, 2))
		for {
			select {
			case <-stop:
				return
			case <-time.After(time.Duration(20+rng.IntN(31)) * time.Millisecond):
			}
			p := int32(rng.IntN(partitions))
			cur := fake.LeaderFor("t", p)
			to := (cur + 1 + int32(rng.IntN(brokers-1))) % brokers
			if err := fake.MoveTopicPartition("t", p, to); err != nil {
				t.Errorf("move: %v", err)
				return
			}
			moves.Add(1)
		}
	}()
	const total = partitions * perPart
	waitUntil(t, 120*time.Second, func() bool { return handled.Load() >= total }, func() string {
		return fmt.Sprintf("handled %d of %d after %d moves: %s", handled.Load(), total, moves.Load(), statsString(cs))
	})
	close(stop)
	wg.Wait()
	pos := closeConsumer(t, cs)
	t.Logf("consumed %d records with %d leader moves in %v", total, moves.Load(), time.Since(start))

	if moves.Load() < 10 {
		t.Fatalf("only %d leader moves happened while consuming: the test proved nothing", moves.Load())
	}
	if n := overlaps.Load(); n > 0 {
		t.Fatalf("%d handler calls overlapped another call of the same partition", n)
	}
	for p, s := range ps {
		s.mu.Lock()
		if s.dups > 0 || s.reorders > 0 {
			t.Errorf("partition %d: %d duplicates, %d out-of-order records", p, s.dups, s.reorders)
		}
		for o, n := range s.seen {
			if n != 1 {
				t.Errorf("partition %d offset %d handled %d times", p, o, n)
				break
			}
		}
		s.mu.Unlock()
		if got := pos[TopicPartition{"t", int32(p)}]; got != perPart {
			t.Errorf("partition %d: position %d, want %d", p, got, perPart)
		}
	}
	if got := handled.Load(); got != total {
		t.Fatalf("handled %d records, want %d", got, total)
	}
}

// statSampler samples cs.Stats() until stopped and keeps the maxima.
type statSampler struct {
	stop    chan struct{}
	done    chan struct{}
	mu      sync.Mutex
	samples int
	maxAll  int64
	maxPart map[int32]int64
}

func sampleStats(cs *Consumer) *statSampler {
	s := &statSampler{stop: make(chan struct{}), done: make(chan struct{}), maxPart: map[int32]int64{}}
	go func() {
		defer close(s.done)
		for {
			select {
			case <-s.stop:
				return
			default:
			}
			st := cs.Stats()
			s.mu.Lock()
			s.samples++
			s.maxAll = max(s.maxAll, st.BufferedBytes)
			for _, ps := range st.Partitions {
				s.maxPart[ps.Partition] = max(s.maxPart[ps.Partition], ps.BufferedBytes)
			}
			s.mu.Unlock()
			time.Sleep(50 * time.Microsecond)
		}
	}()
	return s
}

func (s *statSampler) finish() {
	close(s.stop)
	<-s.done
}

// A partition whose handler never returns keeps at most its buffer cap
// (plus one fetch) and never more than the consumer's budget; the other
// partitions are still consumed to the end.
func TestConsumeBackpressure(t *testing.T) {
	const (
		partitions = 4
		perPart    = 3000
		valueSize  = 200
		keySize    = 8
		recSize    = keySize + valueSize // what the consumer accounts per record
		batchBytes = 4 << 10             // producer batches: the slack of one batch
		budget     = 256 << 10
		partCap    = 64 << 10
		partMax    = 16 << 10
	)
	fake := newFake(t, kfake.NumBrokers(1), kfake.SeedTopics(partitions, "t"))
	cl := newTestClient(t, SeedBrokers(fake.ListenAddrs()...))
	var recs []*Record
	for i := 0; i < perPart; i++ {
		for p := int32(0); p < partitions; p++ {
			v := make([]byte, valueSize)
			for j := range v {
				v[j] = byte('a' + (i+j)%26)
			}
			recs = append(recs, &Record{Topic: "t", Partition: p, Key: fmt.Appendf(nil, "%08d", i), Value: v})
		}
	}
	produceRecords(t, cl, recs, MaxBatchBytes(batchBytes))

	var (
		release0 = make(chan struct{}) // partition 0's handler blocks until the end
		gate     = make(chan struct{}) // the others block until the budget has filled
		blocked0 atomic.Bool
		log      = newPartLog()
	)
	cs, err := NewConsumer(cl,
		FetchBufferBytes(budget), PartitionBufferBytes(partCap), FetchPartitionMaxBytes(partMax),
		HandleRecord(func(ctx context.Context, r *Record) error {
			if r.Partition == 0 {
				blocked0.Store(true)
				select {
				case <-release0:
				case <-ctx.Done():
					return ctx.Err()
				}
			} else {
				select {
				case <-gate:
				case <-ctx.Done():
					return ctx.Err()
				}
			}
			log.add(r)
			return nil
		}))
	if err != nil {
		t.Fatal(err)
	}
	smp := sampleStats(cs)
	assignAll(t, cs, "t", partitions, AtEarliest())

	// Every handler is blocked: fetching fills the budget and stops there.
	waitUntil(t, 30*time.Second, func() bool {
		return blocked0.Load() && cs.Stats().BufferedBytes >= budget-2*partMax
	}, func() string { return "budget never filled: " + statsString(cs) })
	close(gate)

	// Partition 0 stays blocked; the others run to the end.
	waitUntil(t, 60*time.Second, func() bool {
		for p := int32(1); p < partitions; p++ {
			if log.count(p) < perPart {
				return false
			}
		}
		return true
	}, func() string { return "partitions 1..3 not consumed: " + statsString(cs) })
	// Partition 0's cap must have been reached, or the bound below
	// proves nothing.
	waitUntil(t, 30*time.Second, func() bool {
		smp.mu.Lock()
		defer smp.mu.Unlock()
		return smp.maxPart[0] >= partCap
	}, func() string { return "partition 0 never filled its buffer: " + statsString(cs) })
	smp.finish()
	st := cs.Stats()
	t.Logf("%d samples: max buffered %d (budget %d), max per partition %v; at the end: %s", smp.samples, smp.maxAll, budget, smp.maxPart, statsString(cs))

	if limit := int64(budget + batchBytes); smp.maxAll > limit {
		t.Errorf("buffered %d bytes, budget %d + one batch %d", smp.maxAll, budget, batchBytes)
	}
	if limit := int64(partCap + partMax + batchBytes); smp.maxPart[0] > limit {
		t.Errorf("partition 0 buffered %d bytes, cap %d + one fetch %d + one batch %d", smp.maxPart[0], partCap, partMax, batchBytes)
	}
	if st.Partitions[0].Processed != 0 || log.count(0) != 0 {
		t.Errorf("partition 0 progressed while its handler was blocked: %+v", st.Partitions[0])
	}
	for p := int32(1); p < partitions; p++ {
		expectRange(t, fmt.Sprintf("partition %d", p), log.get(p), 0, perPart)
	}

	// Unblock partition 0: it drains too, and everything closes.
	close(release0)
	waitUntil(t, 60*time.Second, func() bool { return log.count(0) >= perPart }, func() string {
		return "partition 0 not consumed after release: " + statsString(cs)
	})
	pos := closeConsumer(t, cs)
	expectRange(t, "partition 0", log.get(0), 0, perPart)
	for p := int32(0); p < partitions; p++ {
		if pos[TopicPartition{"t", p}] != perPart {
			t.Fatalf("positions %v", pos)
		}
	}
}

// With several brokers, each broker's fetcher takes from the same byte
// budget concurrently: together they must still stay within it. Handlers
// are slow, so the budget stays full and the fetchers keep competing for
// what each handled record frees.
func TestConsumeBudgetAcrossBrokers(t *testing.T) {
	const (
		brokers    = 3
		partitions = 12
		perPart    = 800
		valueSize  = 200
		batchBytes = 4 << 10
		budget     = 128 << 10
		partMax    = 16 << 10
	)
	fake := newFake(t, kfake.NumBrokers(brokers), kfake.SeedTopics(partitions, "t"))
	cl := newTestClient(t, SeedBrokers(fake.ListenAddrs()...))
	var recs []*Record
	for i := 0; i < perPart; i++ {
		for p := int32(0); p < partitions; p++ {
			recs = append(recs, &Record{Topic: "t", Partition: p, Value: make([]byte, valueSize)})
		}
	}
	produceRecords(t, cl, recs, MaxBatchBytes(batchBytes))

	log := newPartLog()
	cs, err := NewConsumer(cl,
		FetchBufferBytes(budget), PartitionBufferBytes(budget), FetchPartitionMaxBytes(partMax),
		FetchMaxWait(20*time.Millisecond),
		HandleRecord(func(ctx context.Context, r *Record) error {
			time.Sleep(200 * time.Microsecond)
			log.add(r)
			return nil
		}))
	if err != nil {
		t.Fatal(err)
	}
	smp := sampleStats(cs)
	assignAll(t, cs, "t", partitions, AtEarliest())
	waitUntil(t, 60*time.Second, func() bool {
		for p := int32(0); p < partitions; p++ {
			if log.count(p) < perPart {
				return false
			}
		}
		return true
	}, func() string { return "not consumed: " + statsString(cs) })
	smp.finish()
	closeConsumer(t, cs)
	t.Logf("%d samples: max buffered %d (budget %d)", smp.samples, smp.maxAll, budget)
	// Each fetcher's response may carry one batch beyond what it asked.
	if limit := int64(budget + brokers*batchBytes); smp.maxAll > limit {
		t.Errorf("buffered %d bytes, budget %d + %d batches of %d", smp.maxAll, budget, brokers, batchBytes)
	}
	for p := int32(0); p < partitions; p++ {
		expectRange(t, fmt.Sprintf("partition %d", p), log.get(p), 0, perPart)
	}
}

// Partitions that are caught up long-poll their broker; what their fetches
// reserve of the budget must not starve another broker's partitions that
// have data. Here the partitions of every broker but one are empty, and
// each broker leads enough of them for its fetches to ask for the whole
// budget.
func TestConsumeIdleBrokersDoNotStarveBusyOne(t *testing.T) {
	const (
		brokers    = 3
		partitions = 12
		partMax    = 16 << 10
		budget     = 4 * partMax
		records    = 2000
	)
	fake := newFake(t, kfake.NumBrokers(brokers), kfake.SeedTopics(partitions, "t"))
	cl := newTestClient(t, SeedBrokers(fake.ListenAddrs()...))
	// Partitions 0-3 on broker 0 (the busy one), 4-7 on 1, 8-11 on 2.
	led := map[int32][]int32{}
	for p := int32(0); p < partitions; p++ {
		b := p / (partitions / brokers)
		if err := fake.MoveTopicPartition("t", p, b); err != nil {
			t.Fatal(err)
		}
		led[b] = append(led[b], p)
	}
	const busy = 0
	var recs []*Record
	for i := 0; i < records; i++ {
		p := led[busy][i%len(led[busy])]
		recs = append(recs, &Record{Topic: "t", Partition: p, Value: make([]byte, 200)})
	}
	produceRecords(t, cl, recs, MaxBatchBytes(4<<10))

	var handled atomic.Int64
	cs, err := NewConsumer(cl,
		FetchBufferBytes(budget), FetchPartitionMaxBytes(partMax),
		HandleRecord(func(ctx context.Context, r *Record) error {
			handled.Add(1)
			return nil
		}))
	if err != nil {
		t.Fatal(err)
	}
	assignAll(t, cs, "t", partitions, AtEarliest())
	waitUntil(t, 30*time.Second, func() bool { return handled.Load() >= records }, func() string {
		return fmt.Sprintf("handled %d of %d records of broker %d's partitions %v: %s", handled.Load(), records, busy, led[busy], statsString(cs))
	})
	closeConsumer(t, cs)
	if handled.Load() != records {
		t.Fatalf("handled %d records, want %d", handled.Load(), records)
	}
}

var errHandler = errors.New("handler failed on purpose")

// A handler error (or panic) stops only its partition, at the failed
// record; Resume redelivers that record and goes on to the end.
func TestConsumeHandlerErrorStopsPartition(t *testing.T) {
	for _, mode := range []string{"error", "panic"} {
		t.Run(mode, func(t *testing.T) {
			const (
				partitions = 3
				perPart    = 100
				failAt     = 37
			)
			fake := newFake(t, kfake.NumBrokers(1), kfake.SeedTopics(partitions, "t"))
			cl := newTestClient(t, SeedBrokers(fake.ListenAddrs()...))
			produceN(t, cl, "t", partitions, perPart)

			var (
				attempts = newPartLog() // every handler call
				done     = newPartLog() // calls that succeeded
				failed   atomic.Bool
				perrMu   sync.Mutex
				perrs    []*PartitionError
				atReport int = -1
			)
			cs, err := NewConsumer(cl,
				HandleRecord(func(ctx context.Context, r *Record) error {
					attempts.add(r)
					if r.Partition == 0 && r.Offset == failAt && failed.CompareAndSwap(false, true) {
						if mode == "panic" {
							panic("boom")
						}
						return fmt.Errorf("record %d: %w", r.Offset, errHandler)
					}
					done.add(r)
					return nil
				}),
				OnPartitionError(func(pe *PartitionError) {
					perrMu.Lock()
					perrs = append(perrs, pe)
					atReport = done.count(0)
					perrMu.Unlock()
				}))
			if err != nil {
				t.Fatal(err)
			}
			assignAll(t, cs, "t", partitions, AtEarliest())
			waitUntil(t, 30*time.Second, func() bool {
				perrMu.Lock()
				defer perrMu.Unlock()
				return len(perrs) > 0 && done.count(1) == perPart && done.count(2) == perPart
			}, func() string { return "no error or partitions 1, 2 not consumed: " + statsString(cs) })

			perrMu.Lock()
			if len(perrs) != 1 {
				t.Fatalf("%d partition errors: %v", len(perrs), perrs)
			}
			pe := perrs[0]
			perrMu.Unlock()
			if pe.Topic != "t" || pe.Partition != 0 || pe.Offset != failAt {
				t.Fatalf("partition error %+v, want t[0] at offset %d", pe, failAt)
			}
			if mode == "error" && !errors.Is(pe, errHandler) {
				t.Fatalf("partition error does not wrap the handler's error: %v", pe)
			}
			if atReport != failAt {
				t.Fatalf("error reported after %d records of partition 0, want %d", atReport, failAt)
			}
			st := cs.Stats().Partitions[0]
			if st.Err == nil || st.Processed != failAt || st.Position != failAt || st.BufferedRecords == 0 {
				t.Fatalf("stopped partition stats %+v", st)
			}
			expectRange(t, "partition 0 before resume", done.get(0), 0, failAt)

			cs.Resume(TopicPartition{"t", 0})
			waitUntil(t, 30*time.Second, func() bool { return done.count(0) >= perPart }, func() string {
				return "partition 0 not consumed after resume: " + statsString(cs)
			})
			pos := closeConsumer(t, cs)
			expectRange(t, "partition 0", done.get(0), 0, perPart)
			// The failed record was handed over twice, everything else once.
			a := attempts.get(0)
			want := append(seq(0, failAt+1), seq(failAt, perPart)...)
			if fmt.Sprint(a) != fmt.Sprint(want) {
				t.Fatalf("partition 0 handler calls: %v", a)
			}
			for p := int32(1); p < partitions; p++ {
				expectRange(t, fmt.Sprintf("partition %d", p), attempts.get(p), 0, perPart)
			}
			for p := int32(0); p < partitions; p++ {
				if pos[TopicPartition{"t", p}] != perPart {
					t.Fatalf("positions %v", pos)
				}
			}
		})
	}
}

func seq(from, to int64) []int64 {
	var s []int64
	for i := from; i < to; i++ {
		s = append(s, i)
	}
	return s
}

// Pause lets the handler call in progress finish and hands over nothing
// more of the partition (even of records already taken for dispatch) until
// Resume; nothing is lost or repeated across the pause.
func TestConsumePauseResume(t *testing.T) {
	const (
		perPart = 200
		pauseAt = 20
	)
	fake := newFake(t, kfake.NumBrokers(1), kfake.SeedTopics(2, "t"))
	cl := newTestClient(t, SeedBrokers(fake.ListenAddrs()...))
	produceN(t, cl, "t", 1, perPart) // partition 0 only

	var (
		log      = newPartLog()
		reached  = make(chan struct{})
		release  = make(chan struct{})
		paused   atomic.Bool
		violated atomic.Int32
	)
	tp0 := TopicPartition{"t", 0}
	// One runner: once it has handled partition 1's record, it is done
	// with partition 0's batch, whatever it decided.
	cs, err := NewConsumer(cl, Runners(1), HandleRecord(func(ctx context.Context, r *Record) error {
		if r.Partition == 0 {
			if paused.Load() {
				violated.Add(1)
			}
			if r.Offset == pauseAt {
				close(reached)
				<-release
			}
		}
		log.add(r)
		return nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	assignAll(t, cs, "t", 2, AtEarliest())
	select {
	case <-reached:
	case <-time.After(30 * time.Second):
		t.Fatalf("record %d never handled: %s", pauseAt, statsString(cs))
	}
	cs.Pause(tp0)
	paused.Store(true)
	close(release)

	// A record on partition 1, handled only once the single runner is
	// free again.
	produceRecords(t, cl, []*Record{{Topic: "t", Partition: 1, Value: []byte("barrier")}})
	waitUntil(t, 30*time.Second, func() bool { return log.count(1) == 1 }, func() string {
		return "barrier record not handled: " + statsString(cs)
	})
	if n := violated.Load(); n > 0 {
		t.Fatalf("%d records of partition 0 were handed to the handler after Pause returned", n)
	}
	expectRange(t, "partition 0 while paused", log.get(0), 0, pauseAt+1)
	st := cs.Stats().Partitions[0]
	if !st.Paused || st.Processed != pauseAt+1 || st.Position != pauseAt+1 {
		t.Fatalf("paused partition stats %+v", st)
	}

	paused.Store(false)
	cs.Resume(tp0)
	waitUntil(t, 30*time.Second, func() bool { return log.count(0) >= perPart }, func() string {
		return "partition 0 not consumed after resume: " + statsString(cs)
	})
	pos := closeConsumer(t, cs)
	expectRange(t, "partition 0", log.get(0), 0, perPart)
	if pos[tp0] != perPart || pos[TopicPartition{"t", 1}] != 1 {
		t.Fatalf("positions %v", pos)
	}
}

// Unassign waits for the handler call in progress and returns the offset
// after the last finished record; nothing more of the partition is handed
// over. With a ctx that ends first, it returns the ctx error and cancels
// the handler's context.
func TestConsumeUnassignWaitsForHandler(t *testing.T) {
	const (
		perPart = 100
		blockAt = 10
	)
	for _, mode := range []string{"waits", "ctx ends"} {
		t.Run(mode, func(t *testing.T) {
			fake := newFake(t, kfake.NumBrokers(1), kfake.SeedTopics(2, "t"))
			cl := newTestClient(t, SeedBrokers(fake.ListenAddrs()...))
			produceN(t, cl, "t", 2, perPart)

			var (
				log         = newPartLog()
				reached     = make(chan struct{})
				release     = make(chan struct{})
				returned    atomic.Bool
				handlerCtxE atomic.Value
			)
			tp0 := TopicPartition{"t", 0}
			cs, err := NewConsumer(cl, HandleRecord(func(ctx context.Context, r *Record) error {
				if r.Partition == 0 && r.Offset == blockAt {
					close(reached)
					select {
					case <-release:
					case <-ctx.Done():
						handlerCtxE.Store(ctx.Err())
						returned.Store(true)
						return ctx.Err()
					}
					log.add(r)
					returned.Store(true)
					return nil
				}
				log.add(r)
				return nil
			}))
			if err != nil {
				t.Fatal(err)
			}
			assignAll(t, cs, "t", 2, AtEarliest())
			select {
			case <-reached:
			case <-time.After(30 * time.Second):
				t.Fatalf("record %d never handled: %s", blockAt, statsString(cs))
			}

			type result struct {
				pos         map[TopicPartition]int64
				err         error
				sawReturned bool
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			res := make(chan result, 1)
			go func() {
				pos, err := cs.Unassign(ctx, tp0)
				res <- result{pos, err, returned.Load()}
			}()
			// Give an Unassign that does not wait every chance to
			// return early (no assertion on time).
			time.Sleep(100 * time.Millisecond)
			select {
			case r := <-res:
				t.Fatalf("Unassign returned (%v, %v) while the handler was still running", r.pos, r.err)
			default:
			}
			if mode == "waits" {
				close(release)
			} else {
				cancel()
			}
			var r result
			select {
			case r = <-res:
			case <-time.After(30 * time.Second):
				t.Fatal("Unassign never returned")
			}
			if mode == "waits" {
				if r.err != nil || !r.sawReturned || r.pos[tp0] != blockAt+1 {
					t.Fatalf("Unassign = %v, %v (handler returned first: %v); want position %d", r.pos, r.err, r.sawReturned, blockAt+1)
				}
			} else {
				if !errors.Is(r.err, context.Canceled) {
					t.Fatalf("Unassign error %v, want context.Canceled", r.err)
				}
				if _, ok := r.pos[tp0]; ok {
					t.Fatalf("position reported for a partition whose handler did not finish: %v", r.pos)
				}
				waitUntil(t, 30*time.Second, returned.Load, func() string { return "handler context never cancelled" })
				if e, _ := handlerCtxE.Load().(error); !errors.Is(e, context.Canceled) {
					t.Fatalf("handler ctx error %v", e)
				}
			}
			for _, ps := range cs.Stats().Partitions {
				if ps.TopicPartition == tp0 {
					t.Fatalf("unassigned partition still in stats: %+v", ps)
				}
			}
			waitUntil(t, 30*time.Second, func() bool { return log.count(1) >= perPart }, func() string {
				return "partition 1 not consumed: " + statsString(cs)
			})
			pos := closeConsumer(t, cs)
			want := int64(blockAt + 1)
			if mode != "waits" {
				want = blockAt
			}
			expectRange(t, "partition 0", log.get(0), 0, want)
			expectRange(t, "partition 1", log.get(1), 0, perPart)
			if _, ok := pos[tp0]; ok || pos[TopicPartition{"t", 1}] != perPart {
				t.Fatalf("close positions %v", pos)
			}
		})
	}
}

// Start offsets: an exact offset, the latest (only records produced after
// it was resolved), a timestamp, a timestamp past every record (the
// latest), and an out-of-range offset reset to the latest.
func TestConsumeStartOffsets(t *testing.T) {
	const (
		partitions = 5
		initial    = 100
		more       = 10
	)
	fake := newFake(t, kfake.NumBrokers(1), kfake.SeedTopics(partitions, "t"))
	cl := newTestClient(t, SeedBrokers(fake.ListenAddrs()...))
	base := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	mk := func(from, to int) []*Record {
		var recs []*Record
		for i := from; i < to; i++ {
			for p := int32(0); p < partitions; p++ {
				recs = append(recs, &Record{Topic: "t", Partition: p, Value: []byte(fmt.Sprintf("%d-%d", p, i)),
					Timestamp: base.Add(time.Duration(i) * time.Second)})
			}
		}
		return recs
	}
	produceRecords(t, cl, mk(0, initial))

	log := newPartLog()
	cs, err := NewConsumer(cl, HandleRecord(func(ctx context.Context, r *Record) error {
		if want := fmt.Sprintf("%d-%d", r.Partition, r.Offset); string(r.Value) != want {
			t.Errorf("value %q at %d@%d", r.Value, r.Partition, r.Offset)
		}
		if want := base.Add(time.Duration(r.Offset) * time.Second); !r.Timestamp.Equal(want) {
			t.Errorf("timestamp %v at %d@%d, want %v", r.Timestamp, r.Partition, r.Offset, want)
		}
		log.add(r)
		return nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	if err := cs.Assign(
		Assignment{TopicPartition{"t", 0}, AtOffset(40)},
		Assignment{TopicPartition{"t", 1}, AtLatest()},
		Assignment{TopicPartition{"t", 2}, AtTime(base.Add(30*time.Second - time.Millisecond))},
		Assignment{TopicPartition{"t", 3}, AtTime(base.Add(1000 * time.Hour))},
		Assignment{TopicPartition{"t", 4}, AtOffset(1000)},
	); err != nil {
		t.Fatal(err)
	}
	// Partitions 1, 3 and 4 must have resolved their start (4 after its
	// out-of-range reset) before more records come.
	waitUntil(t, 30*time.Second, func() bool {
		for _, ps := range cs.Stats().Partitions {
			if ps.Partition != 0 && ps.Partition != 2 && ps.Position != initial {
				return false
			}
		}
		return true
	}, func() string { return "start offsets not resolved: " + statsString(cs) })
	produceRecords(t, cl, mk(initial, initial+more))
	from := map[int32]int64{0: 40, 1: initial, 2: 30, 3: initial, 4: initial}
	waitUntil(t, 30*time.Second, func() bool {
		for p, f := range from {
			if int64(log.count(p)) < initial+more-f {
				return false
			}
		}
		return true
	}, func() string { return "not consumed: " + statsString(cs) })
	closeConsumer(t, cs)
	for p, f := range from {
		expectRange(t, fmt.Sprintf("partition %d", p), log.get(p), f, initial+more)
	}
}

// produceAsync produces recs without waiting for each, so the producer
// builds multi-record batches, and waits for all of them.
func produceAsync(t testing.TB, cl *Client, recs []*Record, opts ...ProducerOption) {
	t.Helper()
	p, err := NewProducer(cl, append([]ProducerOption{WithPartitioner(ManualPartitioner())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var failed atomic.Value
	for _, r := range recs {
		p.Produce(ctx, r, func(r *Record, err error) {
			if err != nil {
				failed.Store(err)
			}
		})
	}
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err, _ := failed.Load().(error); err != nil {
		t.Fatal(err)
	}
}

func sameBytes(a, b []byte) bool { return (a == nil) == (b == nil) && bytes.Equal(a, b) }

// Every codec round-trips byte for byte: keys, values and headers
// (null and empty kept apart), timestamps and offsets.
func TestConsumeEveryCodec(t *testing.T) {
	codecs := []Compression{CompressionNone, CompressionGzip, CompressionSnappy, CompressionLZ4, CompressionZstd}
	var topics []string
	for _, c := range codecs {
		topics = append(topics, "codec-"+c.String())
	}
	fake := newFake(t, kfake.NumBrokers(1), kfake.SeedTopics(1, topics...))
	cl := newTestClient(t, SeedBrokers(fake.ListenAddrs()...))
	const n = 400
	base := time.Now().Add(-time.Minute).Truncate(time.Millisecond)
	mk := func(topic string) []*Record {
		rng := rand.New(rand.NewPCG(7, 7))
		var recs []*Record
		for i := 0; i < n; i++ {
			r := &Record{Topic: topic, Timestamp: base.Add(time.Duration(i) * time.Millisecond)}
			switch {
			case i%7 == 0: // null key
			case i%11 == 0:
				r.Key = []byte{}
			default:
				r.Key = []byte(fmt.Sprintf("key-%d", i))
			}
			switch {
			case i%13 == 0: // null value
			case i%17 == 0:
				r.Value = []byte{}
			case i%5 == 0: // random: incompressible
				r.Value = make([]byte, rng.IntN(3000))
				for j := range r.Value {
					r.Value[j] = byte(rng.Uint32())
				}
			default:
				r.Value = []byte(strings.Repeat(fmt.Sprintf("value %d, ", i), 1+rng.IntN(200)))
			}
			for h := 0; h < i%4; h++ {
				hv := []byte(fmt.Sprintf("h%d", h))
				if h == 2 {
					hv = nil
				}
				r.Headers = append(r.Headers, Header{Key: fmt.Sprintf("hk%d", h), Value: hv})
			}
			recs = append(recs, r)
		}
		return recs
	}
	want := map[string][]*Record{}
	for i, c := range codecs {
		want[topics[i]] = mk(topics[i])
		produceAsync(t, cl, want[topics[i]], WithCompression(c), MaxBatchBytes(32<<10))
	}
	// The batches really are compressed with the codec, several records
	// each.
	for i, c := range codecs {
		it := batch.NewIterator(rawRecordBatches(t, cl, topics[i], 0, 0), batch.DecodeOptions{})
		batches := 0
		for {
			b, err := it.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			if b.Codec != batch.Codec(c) {
				t.Fatalf("%s: batch at %d has codec %v", topics[i], b.BaseOffset, b.Codec)
			}
			batches++
		}
		if batches == 0 || batches > n/4 {
			t.Fatalf("%s: %d batches for %d records", topics[i], batches, n)
		}
	}

	var mu sync.Mutex
	got := map[string][]*Record{}
	cs, err := NewConsumer(cl, HandleRecord(func(ctx context.Context, r *Record) error {
		mu.Lock()
		got[r.Topic] = append(got[r.Topic], r)
		mu.Unlock()
		return nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	for _, topic := range topics {
		assignAll(t, cs, topic, 1, AtEarliest())
	}
	waitUntil(t, 30*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		for _, topic := range topics {
			if len(got[topic]) < n {
				return false
			}
		}
		return true
	}, func() string { return "not consumed: " + statsString(cs) })
	closeConsumer(t, cs)
	for _, topic := range topics {
		if len(got[topic]) != n {
			t.Fatalf("%s: %d records, want %d", topic, len(got[topic]), n)
		}
		for i, r := range got[topic] {
			w := want[topic][i]
			ok := r.Offset == int64(i) && r.Partition == 0 && r.Timestamp.Equal(w.Timestamp) &&
				sameBytes(r.Key, w.Key) && sameBytes(r.Value, w.Value) && len(r.Headers) == len(w.Headers)
			for h := 0; ok && h < len(w.Headers); h++ {
				ok = r.Headers[h].Key == w.Headers[h].Key && sameBytes(r.Headers[h].Value, w.Headers[h].Value)
			}
			if !ok {
				t.Fatalf("%s record %d: got offset %d key %q (nil %v) value %d bytes (nil %v) headers %v ts %v; want key %q (nil %v) value %d bytes (nil %v) headers %v ts %v",
					topic, i, r.Offset, r.Key, r.Key == nil, len(r.Value), r.Value == nil, r.Headers, r.Timestamp,
					w.Key, w.Key == nil, len(w.Value), w.Value == nil, w.Headers, w.Timestamp)
			}
		}
	}
}

// txnProducer drives kfake's transactions with raw requests, as a
// transactional producer would.
type txnProducer struct {
	t     testing.TB
	cl    *Client
	id    string
	coord int32
	pid   int64
	epoch int16
	seq   map[int32]int32
}

func (tp *txnProducer) request(node int32, cls cluster.Class, req kmsg.Request) kmsg.Response {
	tp.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := tp.cl.cl.Request(ctx, node, cls, req)
	if err != nil {
		tp.t.Fatalf("%s: %v", kmsg.NameForKey(req.Key()), err)
	}
	return resp
}

func newTxnProducer(t testing.TB, cl *Client, id string) *txnProducer {
	tp := &txnProducer{t: t, cl: cl, id: id, seq: map[int32]int32{}}
	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.CoordinatorKey = id
	fc.CoordinatorType = 1 // transaction
	fc.CoordinatorKeys = []string{id}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r, err := cl.Request(ctx, fc)
	if err != nil {
		t.Fatal(err)
	}
	fr := r.(*kmsg.FindCoordinatorResponse)
	tp.coord = fr.NodeID
	if len(fr.Coordinators) > 0 {
		if c := fr.Coordinators[0]; c.ErrorCode != 0 {
			t.Fatalf("find coordinator: %v", KafkaErrorForCode(c.ErrorCode))
		} else {
			tp.coord = c.NodeID
		}
	} else if fr.ErrorCode != 0 {
		t.Fatalf("find coordinator: %v", KafkaErrorForCode(fr.ErrorCode))
	}
	ip := kmsg.NewPtrInitProducerIDRequest()
	ip.TransactionalID = &id
	ip.TransactionTimeoutMillis = 60000
	ip.ProducerID, ip.ProducerEpoch = -1, -1
	ir := tp.request(tp.coord, cluster.ClassOther, ip).(*kmsg.InitProducerIDResponse)
	if ir.ErrorCode != 0 {
		t.Fatalf("init producer id: %v", KafkaErrorForCode(ir.ErrorCode))
	}
	tp.pid, tp.epoch = ir.ProducerID, ir.ProducerEpoch
	return tp
}

// txn writes values to topic/partition in one transaction and commits or
// aborts it.
func (tp *txnProducer) txn(topic string, partition int32, commit bool, values ...string) {
	t := tp.t
	t.Helper()
	ap := kmsg.NewPtrAddPartitionsToTxnRequest()
	ap.TransactionalID = tp.id
	ap.ProducerID, ap.ProducerEpoch = tp.pid, tp.epoch
	at := kmsg.NewAddPartitionsToTxnRequestTopic()
	at.Topic = topic
	at.Partitions = []int32{partition}
	ap.Topics = append(ap.Topics, at)
	ar := tp.request(tp.coord, cluster.ClassOther, ap).(*kmsg.AddPartitionsToTxnResponse)
	for _, rt := range ar.Topics {
		for _, rp := range rt.Partitions {
			if rp.ErrorCode != 0 {
				t.Fatalf("add partitions to txn: %v", KafkaErrorForCode(rp.ErrorCode))
			}
		}
	}

	b := batch.NewBuilder(batch.BuilderOptions{})
	now := time.Now().UnixMilli()
	for _, v := range values {
		if !b.Add(&batch.Record{Value: []byte(v), Timestamp: now}) {
			t.Fatal("batch full")
		}
	}
	enc, err := b.Finish(batch.CodecNone)
	if err != nil {
		t.Fatal(err)
	}
	enc.SetProducer(tp.pid, tp.epoch, tp.seq[partition])
	enc.SetTransactional(true)
	tp.seq[partition] += int32(len(values))
	pr := kmsg.NewPtrProduceRequest()
	pr.TransactionID = &tp.id
	pr.Acks = -1
	pr.TimeoutMillis = 10000
	pt := kmsg.NewProduceRequestTopic()
	pt.Topic = topic
	pp := kmsg.NewProduceRequestTopicPartition()
	pp.Partition = partition
	pp.Records = enc.Bytes()
	pt.Partitions = append(pt.Partitions, pp)
	pr.Topics = append(pr.Topics, pt)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pm, err := tp.cl.cl.Leader(ctx, topic, partition)
	if err != nil {
		t.Fatal(err)
	}
	resp := tp.request(pm.Leader, cluster.ClassProduce, pr).(*kmsg.ProduceResponse)
	if c := resp.Topics[0].Partitions[0].ErrorCode; c != 0 {
		t.Fatalf("transactional produce: %v", KafkaErrorForCode(c))
	}

	et := kmsg.NewPtrEndTxnRequest()
	et.TransactionalID = tp.id
	et.ProducerID, et.ProducerEpoch = tp.pid, tp.epoch
	et.Commit = commit
	er := tp.request(tp.coord, cluster.ClassOther, et).(*kmsg.EndTxnResponse)
	if er.ErrorCode != 0 {
		t.Fatalf("end txn: %v", KafkaErrorForCode(er.ErrorCode))
	}
	if er.Version >= 5 && er.ProducerEpoch != tp.epoch {
		// KIP-890: every transaction ends with an epoch bump, and
		// sequences start over with the new epoch.
		tp.pid, tp.epoch = er.ProducerID, er.ProducerEpoch
		clear(tp.seq)
	}
}

// ReadCommitted delivers committed transactions and plain records only;
// ReadUncommitted delivers the aborted ones too. Neither ever hands over a
// control record (the commit and abort markers).
func TestConsumeReadCommitted(t *testing.T) {
	fake := newFake(t, kfake.NumBrokers(3), kfake.SeedTopics(1, "t"))
	// AddPartitionsToTxn v4+ is the brokers' batched form: speak v3.
	cl := newTestClient(t, SeedBrokers(fake.ListenAddrs()...), MaxVersions(int16(kmsg.AddPartitionsToTxn), 3))
	tp := newTxnProducer(t, cl, "txn-1")
	vals := func(prefix string, n int) []string {
		var vs []string
		for i := 0; i < n; i++ {
			vs = append(vs, fmt.Sprintf("%s-%d", prefix, i))
		}
		return vs
	}
	tp.txn("t", 0, true, vals("commit1", 5)...)
	tp.txn("t", 0, false, vals("abort1", 7)...)
	produceRecords(t, cl, []*Record{{Topic: "t", Value: []byte("plain-0")}, {Topic: "t", Value: []byte("plain-1")}})
	tp.txn("t", 0, false, vals("abort2", 3)...)
	tp.txn("t", 0, true, vals("commit2", 4)...)

	// 21 data records, 4 markers (one offset each): the log ends at 25.
	const hw = 5 + 7 + 2 + 3 + 4 + 4
	var all []string
	committed := vals("commit1", 5)
	all = append(append(all, committed...), vals("abort1", 7)...)
	committed = append(committed, "plain-0", "plain-1")
	all = append(all, "plain-0", "plain-1")
	all = append(all, vals("abort2", 3)...)
	committed = append(committed, vals("commit2", 4)...)
	all = append(all, vals("commit2", 4)...)

	for _, tc := range []struct {
		name string
		iso  IsolationLevel
		want []string
	}{
		{"read_committed", ReadCommitted, committed},
		{"read_uncommitted", ReadUncommitted, all},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			var got []string
			var offs []int64
			cs, err := NewConsumer(cl, Isolation(tc.iso), HandleRecord(func(ctx context.Context, r *Record) error {
				mu.Lock()
				got = append(got, string(r.Value))
				offs = append(offs, r.Offset)
				mu.Unlock()
				return nil
			}))
			if err != nil {
				t.Fatal(err)
			}
			assignAll(t, cs, "t", 1, AtEarliest())
			// As many records as expected were handled and fetching
			// passed the end of the log (the last marker); what came
			// is compared once Close has stopped everything.
			waitUntil(t, 30*time.Second, func() bool {
				mu.Lock()
				n := len(got)
				mu.Unlock()
				return n >= len(tc.want) && fetchedTo(cs, "t", 0) >= hw
			}, func() string { return "not consumed: " + statsString(cs) })
			closeConsumer(t, cs)
			mu.Lock()
			defer mu.Unlock()
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Fatalf("got %v (offsets %v), want %v", got, offs, tc.want)
			}
			for i := 1; i < len(offs); i++ {
				if offs[i] <= offs[i-1] {
					t.Fatalf("offsets not increasing: %v", offs)
				}
			}
		})
	}
}

// fetchedTo is the partition's next fetch offset.
func fetchedTo(cs *Consumer, topic string, partition int32) int64 {
	p := cs.partition(TopicPartition{topic, partition})
	if p == nil {
		return -1
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.fetchOffset
}
