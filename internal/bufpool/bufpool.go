// Package bufpool recycles the large byte buffers of the data path (record
// batches, produce request frames) through power-of-two size classes.
//
// Unlike a sync.Pool it is not emptied by garbage collections. A producer
// that keeps its buffer full holds tens of megabytes of batches; with a
// sync.Pool every collection dropped the idle ones, and each batch sealed
// after it took a fresh buffer: memory the runtime had to clear and the
// kernel had to fault in, which made the copies into it several times
// slower (in the bench module's produce benchmark, slow runs spent a third
// of their CPU in memmove and memclr, fast runs a twelfth). Here a buffer handed back stays for the next one,
// up to a retained budget (see Budget); beyond it, buffers are left to the
// garbage collector.
package bufpool

import (
	"math/bits"
	"sync"
	"sync/atomic"
	"unsafe"
)

const (
	minShift   = 12 // 4 KiB: smaller buffers are cheap to allocate
	maxShift   = 24 // 16 MiB: larger ones are too rare to keep around
	smallShift = 16 // classes up to 64 KiB (request frames) have room of their own
)

// Budget is the most bytes the free lists of the classes above 64 KiB
// retain in all, for the life of the process: twice a producer's default
// MaxBufferedBytes, since buffers are rounded up to their class (Java's
// producer holds its buffer.memory for its life too). One class keeps at
// most half of it, so a burst of one size never locks the others out; the
// small classes keep up to SmallBudget each, outside Budget, so small
// requests always find their buffers.
const (
	Budget      = 64 << 20
	SmallBudget = 1 << 20
)

type class struct {
	mu   sync.Mutex
	free []*byte // first bytes of buffers of capacity exactly 1<<k
	held int64   // bytes in free
}

var (
	classes  [maxShift - minShift + 1]class
	retained atomic.Int64
)

// classOf returns the class whose buffers hold n bytes.
func classOf(n int) int {
	if n <= 1<<minShift {
		return minShift
	}
	return bits.Len(uint(n - 1))
}

// Get returns an empty slice with capacity of at least n.
func Get(n int) []byte {
	k := classOf(n)
	if k > maxShift {
		return make([]byte, 0, n)
	}
	c := &classes[k-minShift]
	c.mu.Lock()
	if i := len(c.free) - 1; i >= 0 {
		p := c.free[i]
		c.free[i] = nil
		c.free = c.free[:i]
		c.held -= 1 << k
		c.mu.Unlock()
		if k > smallShift {
			retained.Add(-(1 << k))
		}
		return unsafe.Slice(p, 1<<k)[:0]
	}
	c.mu.Unlock()
	return make([]byte, 0, 1<<k)
}

// Put makes b's memory available to Get. b must not be used after, and
// must start at its allocation (as Get's slices do, and their appends that
// reallocated): a subslice would keep the rest of its allocation alive
// unaccounted. Only buffers whose capacity is a class size are kept, so a
// kept buffer always serves its whole class.
func Put(b []byte) {
	c := cap(b)
	if c < 1<<minShift || c&(c-1) != 0 {
		return
	}
	k := bits.Len(uint(c)) - 1
	if k > maxShift {
		return
	}
	classCap := int64(SmallBudget)
	if k > smallShift {
		classCap = Budget / 2
		if retained.Add(int64(c)) > Budget {
			retained.Add(-int64(c))
			return
		}
	}
	cl := &classes[k-minShift]
	cl.mu.Lock()
	if cl.held+int64(c) > classCap {
		cl.mu.Unlock()
		if k > smallShift {
			retained.Add(-int64(c))
		}
		return
	}
	cl.held += int64(c)
	cl.free = append(cl.free, unsafe.SliceData(b[:1]))
	cl.mu.Unlock()
}
