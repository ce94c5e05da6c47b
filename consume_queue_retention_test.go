package riffle

import (
	"runtime"
	"testing"
	"weak"
)

// Taken segments are not kept reachable by the queue, whatever pushes and
// takes reallocated its list: a review found an earlier version keeping
// the old array (and, through its segments, the fetch slabs) alive for the
// life of the partition.
func TestRecQueueReleasesTakenSegments(t *testing.T) {
	var q recQueue
	segs := make([][]*Record, 5)
	for i := range segs {
		segs[i] = queueRecs(i*10, 1)
	}
	for i := 0; i < 4; i++ { // spine grows to cap 4: [s0 s1 s2 s3]
		q.push(segs[i], 10)
	}
	q.take(1)
	q.take(1)           // segs = spine[2:4], cap 2
	q.push(segs[4], 10) // append reallocates; spine stays the old array
	w2 := weak.Make(segs[2][0])
	w3 := weak.Make(segs[3][0])
	segs = nil
	for q.len() > 0 { // handler takes everything
		q.take(1)
	}
	runtime.GC()
	runtime.GC()
	defer runtime.KeepAlive(&q) // the partition (and its queue) lives on
	if w2.Value() != nil || w3.Value() != nil {
		t.Fatalf("handled records still reachable through recQueue.spine (s2 %v, s3 %v)", w2.Value() != nil, w3.Value() != nil)
	}
}
