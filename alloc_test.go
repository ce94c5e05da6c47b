package riffle

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/riffle-go/riffle/internal/batch"
	"github.com/riffle-go/riffle/internal/fetch"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Allocation ceilings on the hot paths. Allocation counts are
// deterministic, unlike timings, so these fail CI when a change adds
// per-record allocations. The figures they guard are in the comments.

// countHooks counts data-path events without allocating.
type countHooks struct{ produce, fetch, rebalance, commit, partition atomic.Int64 }

func (h *countHooks) OnProduceBatch(e ProduceBatchEvent) { h.produce.Add(int64(e.Records)) }
func (h *countHooks) OnFetchBatch(e FetchBatchEvent)     { h.fetch.Add(int64(e.Records)) }
func (h *countHooks) OnRebalance(RebalanceEvent)         { h.rebalance.Add(1) }
func (h *countHooks) OnCommit(CommitEvent)               { h.commit.Add(1) }
func (h *countHooks) OnPartition(PartitionEvent)         { h.partition.Add(1) }

// quietAllocsPerRun is testing.AllocsPerRun(runs, f) for code that runs
// with goroutines of its own: the lowest of rounds measurements. The
// runtime counts the allocations of every goroutine in the process, and
// in a full package run the goroutines of earlier tests (clusters and
// clients still closing) add theirs to some measurements; they only ever
// add, so the lowest is the code's own. f is called rounds*(runs+1)
// times.
func quietAllocsPerRun(rounds, runs int, f func()) float64 {
	low := testing.AllocsPerRun(runs, f)
	for range rounds - 1 {
		low = min(low, testing.AllocsPerRun(runs, f))
	}
	return low
}

// withAndWithoutHooks runs f without data-path hooks and with them.
func withAndWithoutHooks(t *testing.T, f func(t *testing.T, opts ...Option)) {
	t.Run("no hooks", func(t *testing.T) { f(t) })
	t.Run("hooks", func(t *testing.T) { f(t, WithHooks(&countHooks{})) })
}

// Producing a record that goes into an open batch allocates nothing: the
// batch's buffers grow geometrically and are pooled across batches, and
// the limiter and partitioner take no allocations. Data-path hooks are
// called per batch, so installing them changes nothing here.
func TestProduceAllocsPerRecord(t *testing.T) {
	if testing.Short() {
		t.Skip("needs a cluster")
	}
	withAndWithoutHooks(t, testProduceAllocsPerRecord)
}

func testProduceAllocsPerRecord(t *testing.T, opts ...Option) {
	c := newFake(t, kfake.SeedTopics(4, "t"))
	cl := newTestClient(t, append(opts, SeedBrokers(c.ListenAddrs()...))...)
	// A long linger and large batches: the measured calls only buffer,
	// so no goroutine sends (or allocates) meanwhile.
	p, err := NewProducer(cl, Linger(time.Hour), DeliveryTimeout(2*time.Hour), MaxBatchBytes(16<<20))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	value := make([]byte, 100)
	const runs = 20000
	recs := make([]Record, runs+2)
	for i := range recs {
		recs[i] = Record{Topic: "t", Value: value, Key: []byte{byte(i), byte(i >> 8)}}
	}
	cb := func(*Record, error) {}
	i := 0
	p.Produce(ctx, &recs[i], cb) // looks the topic up
	i++
	allocs := testing.AllocsPerRun(runs, func() {
		p.Produce(ctx, &recs[i], cb)
		i++
	})
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
	// Measured: 0 (the builder's and pending slices' growth, amortized
	// over 20,000 records, rounds down).
	if allocs > 0 {
		t.Fatalf("%v allocations per produced record, want 0", allocs)
	}
}

// Consuming: decoding a fetched partition into the slab, buffering it and
// handing every record to a record handler allocates per fetch, not per
// record: the slab and its pointer segment. (The fetch request and the
// response frame are per broker fetch, outside this test.) A
// FetchBatchHook adds nothing: its event is passed by value; nor does a
// PartitionHook, told nothing new per fetch.
func TestConsumeAllocsPerFetch(t *testing.T) {
	if testing.Short() {
		t.Skip("needs a cluster")
	}
	withAndWithoutHooks(t, testConsumeAllocsPerFetch)
}

func testConsumeAllocsPerFetch(t *testing.T, opts ...Option) {
	c := newFake(t)
	cl := newTestClient(t, append(opts, SeedBrokers(c.ListenAddrs()...))...)
	const perBatch, batches = 100, 10
	const perFetch = perBatch * batches
	handled := make(chan struct{}, 1)
	n := 0
	cs, err := NewConsumer(cl, HandleRecord(func(_ context.Context, r *Record) error {
		if n++; n%perFetch == 0 {
			handled <- struct{}{}
		}
		return nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close(context.Background())

	var data []byte
	for range batches {
		b := batch.NewBuilder(batch.BuilderOptions{})
		for range perBatch {
			b.Add(&batch.Record{Value: make([]byte, 100), Timestamp: 1})
		}
		e, err := b.Finish(batch.CodecNone)
		if err != nil {
			t.Fatal(err)
		}
		data = append(data, e.Bytes()...)
	}
	rp := &kmsg.FetchResponseTopicPartition{HighWatermark: 1 << 40, LastStableOffset: 1 << 40, RecordBatches: data, PreferredReadReplica: -1}
	// A partition the engine dispatches but no fetcher or coordinator
	// touches: the test plays the fetcher.
	p := newCPart(cs, Assignment{TopicPartition: TopicPartition{Topic: "t", Partition: 0}})
	p.mu.Lock()
	p.state, p.fetchOffset, p.position, p.processed = stateFetching, 0, 0, 0
	epoch := p.epoch
	p.mu.Unlock()
	var off int64
	fetchOnce := func() {
		// Each fetch carries the next offsets (the base offset is
		// outside the CRC).
		for i, pos := 0, 0; i < batches; i++ {
			binary.BigEndian.PutUint64(data[pos:], uint64(off+int64(i*perBatch)))
			pos += int(binary.BigEndian.Uint32(data[pos+8:])) + 12
		}
		sink := slabSink{topic: "t", part: 0}
		res := fetch.DecodePartitionTo(rp, off, fetch.DecodeOptions{}, &sink)
		if res.Err != nil || len(sink.recs) != perFetch {
			t.Fatalf("decoded %d records: %v", len(sink.recs), res.Err)
		}
		p.applyFetch(0, epoch, off, -1, res, sink.recs)
		off += perFetch
		<-handled
	}
	const rounds, runs = 3, 50
	allocs := quietAllocsPerRun(rounds, runs, fetchOnce)
	// Measured: 3 per fetch of 1,000 records: the slab, its pointer
	// segment, and this test's sink (the fetcher's is a field of its
	// own and does not escape).
	if allocs > 3 {
		t.Fatalf("%v allocations per fetch of %d records, want at most 3", allocs, perFetch)
	}
	if len(opts) > 0 {
		if got := cl.hooks.fetch[0].(*countHooks).fetch.Load(); got != rounds*(runs+1)*perFetch {
			t.Fatalf("hook counted %d fetched records, want %d", got, rounds*(runs+1)*perFetch)
		}
	}
}

// Finishing a produced batch (its outcome, the buffer release, the
// callbacks) allocates nothing, with or without a ProduceBatchHook, on
// success and on failure.
func TestProduceBatchFinishAllocs(t *testing.T) {
	withAndWithoutHooks(t, func(t *testing.T, opts ...Option) {
		cl := newTestClient(t, append(opts, SeedBrokers("127.0.0.1:1"))...)
		p, err := NewProducer(cl)
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close(context.Background())
		const runs, perBatch = 200, 10
		recs := make([]Record, perBatch)
		cb := func(*Record, error) {}
		batches := make([]pbatch, runs+1)
		for i := range batches {
			b := &batches[i]
			b.created, b.wireBytes, b.rawBytes = time.Now(), 500, 1000
			for j := range recs {
				b.recs = append(b.recs, pendingRecord{rec: &recs[j], fn: cb, size: 100})
			}
		}
		failure := fmt.Errorf("t[0]: %w", ErrNotLeaderForPartition)
		i := 0
		allocs := testing.AllocsPerRun(runs, func() {
			err := error(nil)
			if i%2 == 1 {
				err = failure
			}
			p.finish(&batches[i], "t", 0, 100, err)
			i++
		})
		if allocs > 0 {
			t.Fatalf("%v allocations per finished batch, want 0", allocs)
		}
		if len(opts) > 0 {
			// AllocsPerRun calls f once more than runs (a warm-up).
			if got := cl.hooks.produce[0].(*countHooks).produce.Load(); got != (runs+1)*perBatch {
				t.Fatalf("hook counted %d records, want %d", got, (runs+1)*perBatch)
			}
		}
	})
}

// A Record is allocated per produced record by most applications and per
// fetched record in the consumer's slabs: it stays in the 144-byte size
// class (share-group state hangs off a pointer; embedding it made every
// Record 200 bytes, a 208-byte allocation).
func TestRecordSize(t *testing.T) {
	if unsafe.Sizeof(uintptr(0)) != 8 {
		t.Skip("sizes are checked on 64-bit platforms")
	}
	if n := unsafe.Sizeof(Record{}); n > 144 {
		t.Errorf("Record is %d bytes, want at most 144", n)
	}
}
