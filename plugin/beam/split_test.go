package riffbeam

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/io/rtrackers/offsetrange"
	"github.com/riffle-go/riffle"
)

// The read DoFn split mid-range, as a runner splits it (TrySplit from
// another goroutine while ProcessElement emits), stops at the split point,
// and the residuals, read in turn and split again, cover every offset
// exactly once.
func TestReadDynamicSplit(t *testing.T) {
	ctx := testCtx(t)
	brokers, cl := cluster(t, "events", 1)
	const n = 2000
	produce(t, ctx, cl, "events", 0, n, time.Time{})

	fn := &readFn{Spec: readSpec{Brokers: brokers, Topics: []string{"events"}}}
	if err := fn.Setup(); err != nil {
		t.Fatal(err)
	}
	defer fn.Teardown()
	p := partition{Topic: "events", Partition: 0, Start: 0, End: n}
	queue := []offsetrange.Restriction{fn.CreateInitialRestriction(p)}
	seen := map[int64]int{}
	splits := 0
	for len(queue) > 0 {
		rest := queue[0]
		queue = queue[1:]
		rt := fn.CreateTracker(rest)
		we := fn.CreateWatermarkEstimator(0)
		emitted := 0
		var residual any
		var wg sync.WaitGroup
		emit := func(_ beam.EventTime, r Record) {
			seen[r.Offset]++
			emitted++
			if r.Offset < rest.Start || r.Offset >= rest.End {
				t.Errorf("offset %d emitted outside %v", r.Offset, rest)
			}
			if emitted == 25 { // mid-range: the runner splits off half of what is left
				wg.Add(1)
				go func() {
					defer wg.Done()
					var err error
					_, residual, err = rt.TrySplit(0.5)
					if err != nil {
						t.Error(err)
					}
				}()
				wg.Wait()
			}
		}
		pc, err := fn.process(ctx, we, nil, rt, p, emit)
		if err != nil {
			t.Fatal(err)
		}
		if pc.ShouldResume() {
			t.Fatalf("bounded restriction %v asked to resume", rest)
		}
		if !rt.IsDone() || rt.GetError() != nil {
			t.Fatalf("restriction %v not done: %v", rest, rt.GetError())
		}
		if residual != nil {
			splits++
			r := residual.(offsetrange.Restriction)
			if got := rt.rest(); got.End != r.Start {
				t.Fatalf("primary %v and residual %v do not meet", got, r)
			}
			queue = append(queue, r)
		}
	}
	if splits < 5 {
		t.Errorf("%d splits, want several", splits)
	}
	for o := int64(0); o < n; o++ {
		if seen[o] != 1 {
			t.Errorf("offset %d read %d times", o, seen[o])
		}
	}
	if len(seen) != n {
		t.Errorf("read %d offsets, want %d", len(seen), n)
	}
}

// Prism splits a restriction whose bundle stops making progress: the
// collector stalls on one record until the read's tracker reports a split
// with a residual, and the whole topic is still read exactly once.
func TestReadSplitByRunner(t *testing.T) {
	ctx := testCtx(t)
	brokers, cl := cluster(t, "events", 2)
	produce(t, ctx, cl, "events", 0, 4000, time.Time{})
	hw := ends(t, ctx, cl, "events")

	split := make(chan struct{})
	var once sync.Once
	hook := func(primary, residual offsetrange.Restriction) { once.Do(func() { close(split) }) }
	splitHook.Store(&hook)
	defer splitHook.Store(nil)

	name, c := newCollector(t)
	var stallOnce sync.Once
	c.stall = func(ctx context.Context, r Record) {
		if r.Offset != 500 {
			return
		}
		stallOnce.Do(func() {
			select { // no progress until the runner splits
			case <-split:
			case <-ctx.Done():
			}
		})
	}
	p, s := beam.NewPipelineWithRoot()
	beam.ParDo0(s, &collectFn{Name: name}, Read(s, brokers, []string{"events"}))
	if err := run(t, ctx, p); err != nil {
		t.Fatal(err)
	}
	select {
	case <-split:
	default:
		t.Error("the runner never split a restriction")
	}
	checkExactly(t, c, "events", nil, hw)
}

// A range that ends in a transaction marker (no record at High-1) is read
// to its end and the restriction completes.
func TestReadTransactionalGaps(t *testing.T) {
	ctx := testCtx(t)
	brokers, cl := cluster(t, "events", 1)
	p, err := riffle.NewProducer(cl, riffle.TransactionalID("tx"))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.InitTransactions(ctx); err != nil {
		t.Fatal(err)
	}
	for round := range 3 {
		if err := p.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for i := range 10 {
			v := []byte{byte('a' + round), byte('0' + i)}
			p.Produce(ctx, &riffle.Record{Topic: "events", Key: append([]byte("k"), v...), Value: v}, nil)
		}
		if err := p.CommitTransaction(ctx); err != nil {
			t.Fatal(err)
		}
	}
	p.Close(ctx)
	hw := ends(t, ctx, cl, "events")
	if hw[0] != 33 {
		t.Fatalf("high watermark %d, want 30 records and 3 markers", hw[0])
	}
	name, c := newCollector(t)
	pl, s := beam.NewPipelineWithRoot()
	beam.ParDo0(s, &collectFn{Name: name}, Read(s, brokers, []string{"events"}, SplitSize(11), ReadCommitted()))
	if err := run(t, ctx, pl); err != nil {
		t.Fatal(err)
	}
	_, counts, total := c.snapshot()
	if total != 30 || len(counts) != 30 {
		t.Fatalf("read %d records (%d distinct), want 30", total, len(counts))
	}
	for _, marker := range []int64{10, 21, 32} {
		if counts[recKey("events", 0, marker)] != 0 {
			t.Errorf("marker offset %d emitted", marker)
		}
	}
}
