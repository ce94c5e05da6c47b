package bufpool

import (
	"fmt"
	"runtime"
	"sync"
	"testing"
)

// drain empties every class, so tests start from nothing retained.
func drain() {
	for i := range classes {
		c := &classes[i]
		c.mu.Lock()
		if i+minShift > smallShift {
			retained.Add(-c.held)
		}
		clear(c.free)
		c.free, c.held = c.free[:0], 0
		c.mu.Unlock()
	}
}

func TestClasses(t *testing.T) {
	drain()
	for _, tc := range []struct{ n, cap int }{
		{-1, 4096}, {0, 4096}, {1, 4096}, {4096, 4096}, {4097, 8192},
		{100_000, 131072}, {1 << 20, 1 << 20}, {1<<20 + 1, 2 << 20},
		{16 << 20, 16 << 20},
		{16<<20 + 1, 16<<20 + 1}, // above the largest class: exact, never kept
	} {
		b := Get(tc.n)
		if len(b) != 0 || cap(b) != tc.cap {
			t.Errorf("Get(%d): len %d cap %d, want 0 and %d", tc.n, len(b), cap(b), tc.cap)
		}
	}
}

// A buffer handed back is the next one of its class, also after garbage
// collections (a sync.Pool would have dropped it), and a Get then
// allocates nothing.
func TestReuseSurvivesGC(t *testing.T) {
	drain()
	b := Get(100_000)
	b = append(b, 1, 2, 3)
	first := &b[:1][0]
	Put(b)
	if got := retained.Load(); got != 131072 {
		t.Fatalf("retained %d after one Put, want 131072", got)
	}
	runtime.GC()
	runtime.GC()
	c := Get(70_000)
	if &c[:1][0] != first || cap(c) != 131072 {
		t.Fatal("the buffer put back was not reused after two collections")
	}
	if retained.Load() != 0 {
		t.Fatalf("retained %d after the Get", retained.Load())
	}
	Put(c)
	if n := testing.AllocsPerRun(100, func() { Put(Get(200_000)) }); n != 0 {
		t.Errorf("Get after Put: %.0f allocations, want 0", n)
	}
}

// Only class-sized buffers are kept (a grown or foreign slice could not
// serve its whole class); one class keeps at most half the budget, so
// another still finds room, and never more than Budget in all; the small
// classes keep their own SmallBudget.
func TestPutRules(t *testing.T) {
	drain()
	defer drain()
	Put(make([]byte, 0, 5000))     // not a class size
	Put(make([]byte, 0, 1024))     // below the smallest class
	Put(make([]byte, 0, 32<<20))   // above the largest
	Put(make([]byte, 10, 256<<10)) // a class size, in use up to len: kept
	if got := retained.Load(); got != 256<<10 {
		t.Fatalf("retained %d, want only the 256 KiB buffer", got)
	}
	drain()
	held := func(shift int) int {
		c := &classes[shift-minShift]
		c.mu.Lock()
		defer c.mu.Unlock()
		return len(c.free)
	}
	for range Budget / (1 << 20) { // a whole budget of 1 MiB buffers
		Put(make([]byte, 0, 1<<20))
	}
	if n := held(20); n != Budget/2/(1<<20) {
		t.Fatalf("%d 1 MiB buffers kept, want %d (half the budget)", n, Budget/2/(1<<20))
	}
	for range Budget / (2 << 20) { // then as many 2 MiB ones
		Put(make([]byte, 0, 2<<20))
		if retained.Load() > Budget {
			t.Fatalf("retained %d above the budget %d", retained.Load(), Budget)
		}
	}
	if n := held(21); n != Budget/2/(2<<20) {
		t.Fatalf("%d 2 MiB buffers kept after a 1 MiB burst, want %d", n, Budget/2/(2<<20))
	}
	Put(make([]byte, 0, 4<<20)) // the budget is full
	if n := held(22); n != 0 {
		t.Fatal("a buffer kept beyond the budget")
	}
	for range 1000 { // small frames have room of their own
		Put(make([]byte, 0, 4096))
	}
	if n := held(12); n != SmallBudget/4096 {
		t.Fatalf("%d 4 KiB buffers kept with the budget full, want %d", n, SmallBudget/4096)
	}
}

// Any number of goroutines get and put at once; every buffer they get is
// theirs alone while they hold it (run with -race).
func TestConcurrent(t *testing.T) {
	drain()
	defer drain()
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < 300; i++ {
				b := Get(4096 << (i % 6))
				b = b[:cap(b)]
				tag := byte(g*31 + i)
				for j := range b {
					b[j] = tag
				}
				runtime.Gosched()
				for _, j := range []int{0, len(b) / 2, len(b) - 1} {
					if b[j] != tag {
						t.Errorf("buffer shared between goroutines")
						return
					}
				}
				Put(b)
			}
		}(g)
	}
	wg.Wait()
	if r := retained.Load(); r < 0 || r > Budget {
		t.Fatalf("retained %d", r)
	}
}

// BenchmarkGetPut: a Get and a Put per operation from every goroutine at
// once, the free lists against a sync.Pool holding the same buffers (the
// contention of one mutex per class; run with -cpu 1,2,8).
func BenchmarkGetPut(b *testing.B) {
	for _, size := range []int{4 << 10, 256 << 10} {
		b.Run(fmt.Sprintf("bufpool/%dKiB", size>>10), func(b *testing.B) {
			drain()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					Put(Get(size))
				}
			})
		})
		b.Run(fmt.Sprintf("sync.Pool/%dKiB", size>>10), func(b *testing.B) {
			var p sync.Pool
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					bp, _ := p.Get().(*[]byte)
					if bp == nil {
						s := make([]byte, 0, size)
						bp = &s
					}
					p.Put(bp)
				}
			})
		})
	}
}
