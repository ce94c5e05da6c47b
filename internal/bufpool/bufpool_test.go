package bufpool

import (
	"runtime"
	"sync"
	"testing"
)

// drain empties every class, so tests start from nothing retained.
func drain() {
	for i := range classes {
		c := &classes[i]
		c.mu.Lock()
		for _, p := range c.free {
			_ = p
			retained.Add(-(1 << (i + minShift)))
		}
		clear(c.free)
		c.free = c.free[:0]
		c.mu.Unlock()
	}
}

func TestClasses(t *testing.T) {
	drain()
	for _, tc := range []struct{ n, cap int }{
		{-1, 4096}, {0, 4096}, {1, 4096}, {4096, 4096}, {4097, 8192},
		{100_000, 131072}, {1 << 20, 1 << 20}, {1<<20 + 1, 2 << 20},
		{1<<26 + 1, 1<<26 + 1}, // above the largest class: exact, never kept
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
	if got := Retained(); got != 131072 {
		t.Fatalf("retained %d after one Put, want 131072", got)
	}
	runtime.GC()
	runtime.GC()
	c := Get(70_000)
	if &c[:1][0] != first || cap(c) != 131072 {
		t.Fatal("the buffer put back was not reused after two collections")
	}
	if Retained() != 0 {
		t.Fatalf("retained %d after the Get", Retained())
	}
	Put(c)
	if n := testing.AllocsPerRun(100, func() { Put(Get(200_000)) }); n != 0 {
		t.Errorf("Get after Put: %.0f allocations, want 0", n)
	}
}

// Only class-sized buffers are kept (a grown or foreign slice could not
// serve its whole class), and never more than Budget bytes in all.
func TestPutRules(t *testing.T) {
	drain()
	Put(make([]byte, 0, 5000))    // not a class size
	Put(make([]byte, 0, 1024))    // below the smallest class
	Put(make([]byte, 0, 1<<27))   // above the largest
	Put(make([]byte, 10, 16<<10)) // a class size, in use up to len: kept
	if got := Retained(); got != 16<<10 {
		t.Fatalf("retained %d, want only the 16 KiB buffer", got)
	}
	drain()
	for i := 0; i < Budget/(1<<20)+10; i++ {
		Put(make([]byte, 0, 1<<20))
		if Retained() > Budget {
			t.Fatalf("retained %d above the budget %d", Retained(), Budget)
		}
	}
	classes[20-minShift].mu.Lock()
	kept := len(classes[20-minShift].free)
	classes[20-minShift].mu.Unlock()
	if kept != Budget/(1<<20) {
		t.Fatalf("%d 1 MiB buffers kept, want %d", kept, Budget/(1<<20))
	}
	drain()
}

// Any number of goroutines get and put at once; every buffer they get is
// theirs alone (run with -race).
func TestConcurrent(t *testing.T) {
	drain()
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < 500; i++ {
				b := Get(4096 << (i % 4))
				b = append(b, byte(g), byte(i))
				if b[0] != byte(g) || b[1] != byte(i) {
					t.Errorf("buffer shared between goroutines")
					return
				}
				Put(b)
			}
		}(g)
	}
	wg.Wait()
	if r := Retained(); r < 0 || r > Budget {
		t.Fatalf("retained %d", r)
	}
	drain()
}
