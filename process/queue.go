package process

import (
	"container/heap"
	"time"

	"github.com/riffle-go/riffle"
	"github.com/riffle-go/riffle/internal/track"
)

// item is one record inside the processor.
type item struct {
	rec       *riffle.Record
	size      int64
	delivered time.Time // when it entered the tracker
	kq        *keyQueue // its key's queue (key mode)
}

// keyQueue holds the delivered, not yet started records of one key, in
// offset order. busy: a record of the key is running.
type keyQueue struct {
	key   string
	items []*item
	busy  bool
	idx   int // position in the ready heap, -1 when not in it
}

// readyKeys is a min-heap of idle keys with queued records, by the offset
// of their first record: the oldest startable record is always picked
// first, so the record holding back the commit is never starved.
type readyKeys []*keyQueue

func (h readyKeys) Len() int { return len(h) }
func (h readyKeys) Less(i, j int) bool {
	return h[i].items[0].rec.Offset < h[j].items[0].rec.Offset
}
func (h readyKeys) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].idx, h[j].idx = i, j
}
func (h *readyKeys) Push(x any) {
	k := x.(*keyQueue)
	k.idx = len(*h)
	*h = append(*h, k)
}
func (h *readyKeys) Pop() any {
	old := *h
	k := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	k.idx = -1
	return k
}

// fifo is a queue of items.
type fifo struct {
	items []*item
	head  int
}

func (q *fifo) len() int      { return len(q.items) - q.head }
func (q *fifo) push(it *item) { q.items = append(q.items, it) }
func (q *fifo) peek() *item   { return q.items[q.head] }
func (q *fifo) pop() *item {
	it := q.items[q.head]
	q.items[q.head] = nil
	q.head++
	if q.head > 1024 && q.head*2 > len(q.items) {
		n := copy(q.items, q.items[q.head:])
		clear(q.items[n:])
		q.items = q.items[:n]
		q.head = 0
	}
	return it
}
func (q *fifo) drain(fn func(*item)) {
	for q.len() > 0 {
		fn(q.pop())
	}
}

// queue is the functional core of one assigned partition: the records
// taken from the consumer (incoming, not yet delivered), the offset
// tracker, and the delivered records waiting to start, arranged by the
// ordering mode. It has no goroutines, locks or clock; the processor owns
// one per partition and calls it under its lock.
//
// A record moves incoming → delivered (tracker.Deliver, only when
// CanDeliver keeps the commit metadata within the limit) → started →
// finished (tracker.Finish) or, when it fails for good, stays unfinished so
// the commit never passes it.
type queue struct {
	mode       Mode
	limit      int // metadata limit
	partLimit  int // concurrent records of this partition, 0 = no limit
	incoming   fifo
	advanceTo  int64 // pending trailing-gap Advance, -1 none
	tr         track.Tracker
	running    int
	ready      fifo // partition and unordered modes
	keys       map[string]*keyQueue
	nullKey    *keyQueue // key mode: records without a key, one queue
	readyHeap  readyKeys
	delivered  map[int64]*item // delivered, not finished, by offset
	skipped    int64
	incomingSz int64
}

func newQueue(mode Mode, limit, partLimit int, committed int64, finished []int64) (*queue, error) {
	q := &queue{mode: mode, limit: limit, partLimit: partLimit, advanceTo: -1,
		delivered: map[int64]*item{}}
	if mode == ByKey {
		q.keys = map[string]*keyQueue{}
	}
	return q, q.tr.Seed(committed, finished)
}

// accept appends a record taken from the consumer.
func (q *queue) accept(it *item) {
	q.incoming.push(it)
	q.incomingSz += it.size
}

// pending returns how many records the partition holds that did not
// finish: incoming and delivered.
func (q *queue) pending() int { return q.incoming.len() + q.tr.InFlight() }

// pump delivers incoming records to the tracker while the metadata limit
// allows, dropping those the seed says finished; skipped records are
// passed to drop (so their bytes can be released).
func (q *queue) pump(now time.Time, drop func(*item)) {
	for q.incoming.len() > 0 {
		it := q.incoming.peek()
		off := it.rec.Offset
		if q.tr.Skip(off) || off < q.tr.Next() {
			q.incoming.pop()
			q.incomingSz -= it.size
			q.skipped++
			drop(it)
			continue
		}
		if !q.tr.CanDeliver(off, q.limit) {
			return
		}
		if err := q.tr.Deliver(off); err != nil {
			return // ErrWindowFull: wait for a finish
		}
		q.incoming.pop()
		q.incomingSz -= it.size
		it.delivered = now
		q.delivered[off] = it
		q.enqueue(it)
	}
	if q.advanceTo > q.tr.Next() && q.tr.CanAdvance(q.advanceTo, q.limit) {
		if q.tr.Advance(q.advanceTo) == nil {
			q.advanceTo = -1
		}
	}
}

func (q *queue) enqueue(it *item) {
	if q.mode != ByKey {
		q.ready.push(it)
		return
	}
	var kq *keyQueue
	if it.rec.Key == nil {
		if q.nullKey == nil {
			q.nullKey = &keyQueue{idx: -1}
		}
		kq = q.nullKey
	} else {
		kq = q.keys[string(it.rec.Key)]
		if kq == nil {
			kq = &keyQueue{key: string(it.rec.Key), idx: -1}
			q.keys[kq.key] = kq
		}
	}
	it.kq = kq
	kq.items = append(kq.items, it)
	if len(kq.items) == 1 && !kq.busy {
		heap.Push(&q.readyHeap, kq)
	}
}

// startable reports whether next would return a record.
func (q *queue) startable() bool {
	if q.partLimit > 0 && q.running >= q.partLimit {
		return false
	}
	switch q.mode {
	case ByPartition:
		return q.running == 0 && q.ready.len() > 0
	case Unordered:
		return q.ready.len() > 0
	default:
		return len(q.readyHeap) > 0
	}
}

// next returns the record to start now, or nil.
func (q *queue) next() *item {
	if !q.startable() {
		return nil
	}
	var it *item
	if q.mode == ByKey {
		kq := heap.Pop(&q.readyHeap).(*keyQueue)
		it = kq.items[0]
		kq.items[0] = nil
		kq.items = kq.items[1:]
		kq.busy = true
	} else {
		it = q.ready.pop()
	}
	q.running++
	return it
}

// done ends a started record: finished (ok) or failed for good, in which
// case it stays unfinished in the tracker and the commit never passes it.
func (q *queue) done(it *item, ok bool) {
	q.running--
	if kq := it.kq; kq != nil {
		kq.busy = false
		if len(kq.items) > 0 {
			heap.Push(&q.readyHeap, kq)
		} else if kq != q.nullKey {
			delete(q.keys, kq.key)
		} else {
			q.nullKey = nil
		}
	}
	if ok {
		delete(q.delivered, it.rec.Offset)
		_ = q.tr.Finish(it.rec.Offset) // cannot fail: it was delivered
	}
}

// dropWaiting removes every record not started (incoming and delivered
// but queued), passing each to drop; delivered ones stay unfinished.
func (q *queue) dropWaiting(drop func(*item)) {
	q.incoming.drain(drop)
	q.incomingSz = 0
	q.ready.drain(drop)
	for _, kq := range q.readyHeap {
		for _, it := range kq.items {
			drop(it)
		}
		kq.items = nil
	}
	q.readyHeap = nil
	for _, kq := range q.keys {
		for _, it := range kq.items {
			drop(it)
		}
		kq.items = nil
	}
	if q.nullKey != nil {
		for _, it := range q.nullKey.items {
			drop(it)
		}
		q.nullKey.items = nil
	}
}

// dropAbove removes the records not started above offset (all incoming
// ones, and queued ones past it), passing each to drop; they stay
// unfinished. Queued records below offset stay: they are older than a
// record that failed for good and still run, so the commit can reach it.
func (q *queue) dropAbove(offset int64, drop func(*item)) {
	q.incoming.drain(drop)
	q.incomingSz = 0
	q.advanceTo = -1
	keep := func(items []*item) []*item {
		n := 0
		for _, it := range items {
			if it.rec.Offset < offset {
				items[n] = it
				n++
			} else {
				drop(it)
			}
		}
		clear(items[n:])
		return items[:n]
	}
	if q.mode != ByKey {
		q.ready.items = keep(q.ready.items[q.ready.head:])
		q.ready.head = 0
		return
	}
	q.readyHeap = q.readyHeap[:0]
	for k, kq := range q.keys {
		kq.items = keep(kq.items)
		if len(kq.items) == 0 && !kq.busy {
			delete(q.keys, k)
		}
	}
	if nk := q.nullKey; nk != nil {
		nk.items = keep(nk.items)
		if len(nk.items) == 0 && !nk.busy {
			q.nullKey = nil
		}
	}
	for _, kq := range q.keys {
		kq.idx = -1
		if len(kq.items) > 0 && !kq.busy {
			q.readyHeap = append(q.readyHeap, kq)
		}
	}
	if nk := q.nullKey; nk != nil {
		nk.idx = -1
		if len(nk.items) > 0 && !nk.busy {
			q.readyHeap = append(q.readyHeap, nk)
		}
	}
	for i, kq := range q.readyHeap {
		kq.idx = i
	}
	heap.Init(&q.readyHeap)
}

// oldestAge returns how long the oldest unfinished delivered record has
// waited.
func (q *queue) oldestAge(now time.Time) time.Duration {
	off, ok := q.tr.Oldest()
	if !ok {
		return 0
	}
	if it := q.delivered[off]; it != nil {
		return now.Sub(it.delivered)
	}
	return 0
}
