package batch

import "github.com/riffle-go/riffle/internal/bufpool"

// Batch buffers are recycled (internal/bufpool): an encoded batch lives
// until the broker acknowledges it, after which the producer can Release
// it, and the next Builder reuses the memory. Without this, every batch
// would allocate (and the GC would clear and scan) a fresh buffer of tens
// or hundreds of kilobytes.

// getBuf returns an empty slice with capacity of at least n.
func getBuf(n int) []byte { return bufpool.Get(n) }

// putBuf makes b's memory available to getBuf. b must not be used after.
func putBuf(b []byte) { bufpool.Put(b) }
