package riffle

import (
	"context"
	"encoding/binary"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/riffle-go/riffle/internal/batch"
	"github.com/riffle-go/riffle/internal/lifecycle"
	"github.com/riffle-go/riffle/internal/share"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestShareQueueWakes: pushes of every size against runners that come
// and go; every record is popped exactly once and no runner sleeps while
// records wait (the test would hang).
func TestShareQueueWakes(t *testing.T) {
	var q shareQueue
	q.init()
	const runners, total = 40, 60000
	recs := make([]Record, total)
	var popped [total]atomic.Int32
	var count atomic.Int64
	done := make(chan struct{})
	var wg sync.WaitGroup
	for i := range runners {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(i), 1))
			for {
				r := q.pop()
				if r == nil {
					return
				}
				popped[r.Offset].Add(1)
				if count.Add(1) == total {
					close(done)
				}
				if rng.IntN(4) == 0 {
					runtime.Gosched()
				}
			}
		})
	}
	rng := rand.New(rand.NewPCG(9, 9))
	for i := 0; i < total; {
		n := min(1+rng.IntN(80), total-i)
		ps := make([]*Record, n)
		for j := range ps {
			recs[i+j].Offset = int64(i + j)
			ps[j] = &recs[i+j]
		}
		if !q.push(ps) {
			t.Fatal("push refused")
		}
		i += n
		if rng.IntN(3) == 0 {
			time.Sleep(time.Duration(rng.IntN(50)) * time.Microsecond)
		}
	}
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatalf("%d of %d records popped: a runner slept while records waited", count.Load(), total)
	}
	if left := q.close(); len(left) != 0 {
		t.Fatalf("%d left after all were popped", len(left))
	}
	wg.Wait()
	for i := range popped {
		if n := popped[i].Load(); n != 1 {
			t.Fatalf("record %d popped %d times", i, n)
		}
	}
	if q.push([]*Record{{}}) {
		t.Fatal("push after close")
	}
}

// Share consuming: taking a fetch of 1,000 acquired records, running
// them on the runners and batching their acknowledgements allocates per
// fetch, not per record. The test plays the fetch loop: no broker
// request, the response built once and its offsets moved on each time.
// FetchBatchHooks add nothing.
func TestShareAllocsPerFetch(t *testing.T) {
	if testing.Short() {
		t.Skip("needs a cluster")
	}
	t.Run("no hooks", func(t *testing.T) { shareAllocsPerFetch(t, nil) })
	t.Run("hooks", func(t *testing.T) { shareAllocsPerFetch(t, &countHooks{}) })
}

func shareAllocsPerFetch(t *testing.T, hooks *countHooks) {
	fake := newFake(t)
	opts := []Option{SeedBrokers(fake.ListenAddrs()...)}
	if hooks != nil {
		opts = append(opts, WithHooks(hooks))
	}
	cl := newTestClient(t, opts...)
	const perBatch, batches = 100, 10
	const perFetch = perBatch * batches
	var n atomic.Int64
	handled := make(chan struct{}, 1)
	cfg := defaultConsumerConfig()
	for _, o := range []ConsumerOption{ShareGroup("g"), SubscribeTopics("t"), HandleRecord(func(context.Context, *Record) error {
		if n.Add(1)%perFetch == 0 {
			handled <- struct{}{}
		}
		return nil
	})} {
		o(&cfg)
	}
	life := lifecycle.New()
	hctx, hcancel := context.WithCancel(life.Context())
	sc := &ShareConsumer{
		c: cl, cl: cl.cl, cfg: cfg, life: life, hctx: hctx, hcancel: hcancel,
		noFetch: make(chan struct{}), final: make(chan struct{}), memberID: "m", coordinator: -1,
		fetchers: map[int32]*shareFetcher{}, wake: make(chan struct{}, 1),
	}
	sc.q.init()
	const runners = 64
	sc.runners = runners
	sc.runWG.Add(runners)
	for range runners {
		life.Go(sc.runner)
	}
	f := newShareFetcher(sc, 0)
	sc.fetchers[0] = f
	defer func() {
		sc.q.close()
		sc.runWG.Wait()
		hcancel()
		life.Stop()
		life.Wait()
	}()

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
	id := [16]byte{7}
	names := map[[16]byte]string{id: "t"}
	resp := kmsg.NewPtrShareFetchResponse()
	rt := kmsg.NewShareFetchResponseTopic()
	rt.TopicID = id
	rp := kmsg.NewShareFetchResponseTopicPartition()
	rp.Records = data
	ar := kmsg.NewShareFetchResponseTopicPartitionAcquiredRecord()
	ar.DeliveryCount = 1
	rp.AcquiredRecords = []kmsg.ShareFetchResponseTopicPartitionAcquiredRecord{ar}
	rt.Partitions = append(rt.Partitions, rp)
	resp.Topics = append(resp.Topics, rt)
	tp := share.TP{ID: id}
	var off int64
	fetchOnce := func() {
		for i, pos := 0, 0; i < batches; i++ {
			binary.BigEndian.PutUint64(data[pos:], uint64(off+int64(i*perBatch)))
			pos += int(binary.BigEndian.Uint32(data[pos+8:])) + 12
		}
		a := &resp.Topics[0].Partitions[0].AcquiredRecords[0]
		a.FirstOffset, a.LastOffset = off, off+perFetch-1
		now := time.Now()
		f.take(resp, names, now)
		<-handled
		// The last acknowledgements may still be on their way in.
		for {
			f.mu.Lock()
			held := f.tr.Len()
			f.mu.Unlock()
			if held == 0 {
				break
			}
			runtime.Gosched()
		}
		// What the loop does per iteration, then the next request's
		// acknowledgements.
		f.mu.Lock()
		f.tr.Expire(now)
		f.tr.Due(share.Running, now, time.Second)
		f.tr.Next(share.Running)
		f.mu.Unlock()
		pas, _ := f.drainAcks()
		if len(pas) != 1 || pas[0].TP != tp || len(pas[0].Batches) != 1 ||
			pas[0].Batches[0] != (share.Range{First: off, Last: off + perFetch - 1, Type: share.Accept}) {
			t.Fatalf("acknowledgements %+v", pas)
		}
		off += perFetch
	}
	fetchOnce() // warms the tracker's slab, index and the buffers up
	allocs := quietAllocsPerRun(3, 30, fetchOnce)
	t.Logf("%v allocations per fetch of %d records", allocs, perFetch)
	// Measured: 8 per fetch of 1,000 records with -race, 7 without (the
	// Record slab, its pointer slice, the acquired ranges, the batched
	// acknowledgements); none per record. Before the slab: 1,123. A
	// full package run in CI once measured 12 with a single
	// AllocsPerRun, and the lowest of 3 rounds measured 11 with the
	// machine's load average near 25: AllocsPerRun counts the whole
	// process's mallocs, and under load the 64 runners' hand-offs take
	// sudogs the runtime's per-P caches do not hold, and the test's other
	// goroutines (the client, kfake) get more of the measured time. The
	// ceiling is what the test guards: nothing per record (a regression
	// there shows as 1,000 or more), a handful per fetch.
	const ceiling = 20
	if allocs > ceiling {
		t.Fatalf("%v allocations per fetch of %d records, want at most %d", allocs, perFetch, ceiling)
	}
	if hooks != nil {
		if got, want := hooks.fetch.Load(), n.Load(); got != want {
			t.Fatalf("the hooks saw %d records, the handler %d", got, want)
		}
	}
}
