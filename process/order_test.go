package process_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/riffle-go/riffle"
	"github.com/riffle-go/riffle/process"
	"github.com/riffle-go/riffle/rifftest"
)

// Key order: with 1,000 keys and random latencies, per-key processing
// order equals offset order and same-key records never overlap, while
// different keys do run concurrently.
func TestKeyOrder(t *testing.T) {
	const parts, perPart, keys = 4, 5000, 1000
	c, cl := setup(t, rifftest.Topic("k", parts))
	produce(t, cl, "k", parts, perPart, func(p int32, i int) []byte {
		return []byte(fmt.Sprintf("key-%d", rand.IntN(keys)))
	})

	var mu sync.Mutex
	running := map[string]bool{}
	last := map[string]int64{} // key -> last offset started (per partition key space)
	var maxConc, conc atomic.Int64
	var total atomic.Int64
	var violation atomic.Value
	h := func(ctx context.Context, r *riffle.Record) error {
		k := fmt.Sprintf("%d/%s", r.Partition, r.Key)
		mu.Lock()
		if running[k] {
			violation.CompareAndSwap(nil, fmt.Sprintf("key %s: offset %d started while another record of the key runs", k, r.Offset))
		}
		if o, ok := last[k]; ok && o >= r.Offset {
			violation.CompareAndSwap(nil, fmt.Sprintf("key %s: offset %d after %d", k, r.Offset, o))
		}
		running[k] = true
		last[k] = r.Offset
		mu.Unlock()
		n := conc.Add(1)
		for {
			m := maxConc.Load()
			if n <= m || maxConc.CompareAndSwap(m, n) {
				break
			}
		}
		time.Sleep(time.Duration(rand.IntN(300)) * time.Microsecond)
		conc.Add(-1)
		mu.Lock()
		running[k] = false
		mu.Unlock()
		total.Add(1)
		return nil
	}
	pr, err := process.New(client(t, c), h, process.Ordering(process.ByKey), process.Concurrency(64),
		process.ConsumerOptions(groupOpts("g-key", "k")...))
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 60*time.Second, "all records", func() bool { return total.Load() >= parts*perPart })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := pr.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if v := violation.Load(); v != nil {
		t.Fatal(v)
	}
	if total.Load() != parts*perPart {
		t.Fatalf("processed %d records, want %d", total.Load(), parts*perPart)
	}
	if maxConc.Load() < 8 {
		t.Fatalf("at most %d records ran at once; keys should run in parallel", maxConc.Load())
	}
	t.Logf("max concurrency %d", maxConc.Load())
}
