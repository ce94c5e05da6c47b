package batch

import (
	"math/bits"
	"sync"
	"unsafe"
)

// Batch buffers are recycled through power-of-two size classes: an encoded
// batch lives until the broker acknowledges it, after which the producer can
// Release it, and the next Builder reuses the memory. Without this, every
// batch would allocate (and the GC would clear and scan) a fresh buffer of
// tens or hundreds of kilobytes.
//
// Class k holds buffers with capacity of at least 1<<k, so a buffer taken for
// n bytes wastes less than half of itself. The pools store the address of the
// first byte, which is pointer-shaped and so does not allocate when put in a
// sync.Pool (a *[]byte would); the class gives back the capacity.

const (
	minBufShift = 12 // 4 KiB: smaller buffers are cheap to allocate
	maxBufShift = 26 // 64 MiB: larger ones are too rare to keep around
)

var bufPools [maxBufShift - minBufShift + 1]sync.Pool

// getBuf returns an empty slice with capacity of at least n.
func getBuf(n int) []byte {
	k := max(bits.Len(uint(n-1)), minBufShift)
	if n <= 0 {
		k = minBufShift
	}
	if k > maxBufShift {
		return make([]byte, 0, n)
	}
	if p, ok := bufPools[k-minBufShift].Get().(*byte); ok {
		return unsafe.Slice(p, 1<<k)[:0]
	}
	return make([]byte, 0, 1<<k)
}

// putBuf makes b's memory available to getBuf. b must not be used after.
func putBuf(b []byte) {
	c := cap(b)
	if c < 1<<minBufShift {
		return
	}
	k := bits.Len(uint(c)) - 1 // floor: every buffer in class k has cap >= 1<<k
	if k > maxBufShift {
		return
	}
	bufPools[k-minBufShift].Put(unsafe.SliceData(b[:1]))
}
