package riffle

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
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
