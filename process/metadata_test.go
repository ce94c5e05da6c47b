package process_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/riffle-go/riffle"
	"github.com/riffle-go/riffle/process"
	"github.com/riffle-go/riffle/rifftest"
)

// Metadata near the limit: one record stuck forever while 100,000 later
// ones finish. The commit metadata never exceeds the limit, dispatch
// narrows below the concurrency, and after a restart only the stuck record
// runs again.
func TestMetadataNearLimit(t *testing.T) {
	const n = 100_001
	const limit = 256 // small, so the narrowing shows at concurrency 64
	const conc = 64
	c, cl := setup(t, rifftest.Topic("m", 1))
	produce(t, cl, "m", 1, n, nil)

	var running, maxLate atomic.Int64
	var done atomic.Int64
	var metaMax atomic.Int64
	var pr *process.Processor
	var prMu sync.Mutex
	stuckStarted := make(chan struct{})
	h := func(ctx context.Context, r *riffle.Record) error {
		if r.Offset == 0 {
			close(stuckStarted)
			<-ctx.Done() // stuck until Close cancels it
			return ctx.Err()
		}
		cur := running.Add(1)
		defer running.Add(-1)
		if r.Offset > 1000 {
			for m := maxLate.Load(); cur > m && !maxLate.CompareAndSwap(m, cur); m = maxLate.Load() {
			}
		}
		if r.Offset%997 == 0 {
			prMu.Lock()
			p := pr
			prMu.Unlock()
			if p != nil {
				for _, ps := range p.Stats().Partitions {
					if int64(ps.MetadataBytes) > metaMax.Load() {
						metaMax.Store(int64(ps.MetadataBytes))
					}
				}
			}
		}
		time.Sleep(50 * time.Microsecond)
		done.Add(1)
		return nil
	}
	opts := append(groupOpts("g-meta", "m"), riffle.AutoCommitInterval(50*time.Millisecond))
	p1, err := process.New(client(t, c), h, process.Ordering(process.Unordered), process.Concurrency(conc),
		process.MetadataLimit(limit), process.ConsumerOptions(opts...))
	if err != nil {
		t.Fatal(err)
	}
	prMu.Lock()
	pr = p1
	prMu.Unlock()
	<-stuckStarted
	waitFor(t, 120*time.Second, "the later records", func() bool { return done.Load() == n-1 })
	// A handler counts its record before returning, and the processor
	// marks it finished after: wait for the stats to show every one (the
	// test read them right after the counter and failed under load).
	var st process.PartitionStats
	waitFor(t, 30*time.Second, "the later records finished in the stats", func() bool {
		if ps := p1.Stats().Partitions; len(ps) > 0 {
			st = ps[0]
		}
		return st.FinishedAbove == n-1
	})
	if st.Committable != 0 || st.MetadataBytes > limit {
		t.Fatalf("stats %+v", st)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	err = p1.Close(ctx) // the stuck record is still running at the deadline
	if err == nil || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("close: %v, want the stuck record reported", err)
	}
	if m := metaMax.Load(); m > limit {
		t.Fatalf("metadata reached %d bytes, limit %d", m, limit)
	}
	// With one record stuck, each further record in flight can add a run
	// to the encoding, so dispatch must narrow below the concurrency.
	if m := maxLate.Load(); m >= conc || m < 1 {
		t.Fatalf("at most %d records ran at once with the stuck one; want 1..%d", m, conc-1)
	}
	t.Logf("dispatch narrowed to %d concurrent records; metadata peak %d bytes", maxLate.Load(), metaMax.Load())
	offs, err := cl.Admin().FetchOffsets(context.Background(), "g-meta")
	if err != nil {
		t.Fatal(err)
	}
	om := offs[riffle.TopicPartition{Topic: "m", Partition: 0}]
	if om.Offset != 0 || om.Metadata == "" || len(om.Metadata) > limit {
		t.Fatalf("committed %d with metadata %q", om.Offset, om.Metadata)
	}

	// Restart: only the stuck record runs again.
	var again sync.Map
	var count atomic.Int64
	p2, err := process.New(client(t, c), func(ctx context.Context, r *riffle.Record) error {
		again.Store(r.Offset, true)
		count.Add(1)
		return nil
	}, process.Ordering(process.Unordered), process.Concurrency(conc), process.MetadataLimit(limit),
		process.ConsumerOptions(opts...))
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 60*time.Second, "the restart to pass everything", func() bool {
		ps := p2.Stats().Partitions
		return len(ps) == 1 && ps[0].Committable == n
	})
	ctx2, cancel2 := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel2()
	if err := p2.Close(ctx2); err != nil {
		t.Fatal(err)
	}
	if _, ok := again.Load(int64(0)); !ok || count.Load() != 1 {
		t.Fatalf("after restart %d records ran (stuck one ran: %v); want only the stuck one", count.Load(), ok)
	}
}
