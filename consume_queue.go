package riffle

// recQueue is one partition's buffered records, in offset order: a FIFO of
// segments, one per fetch (pointers into that fetch's record slab).
//
// Chunks handed to the handler are sub-slices of a segment, not copies, so
// dispatching costs nothing per record; and since a segment is only ever
// read after it is pushed, a chunk the handler keeps is never overwritten.
// A segment is referenced by the queue only while some of its records are
// queued: slots of taken segments are cleared at once, so handled records
// never pin later fetches' memory. It is a plain type: the partition's
// mutex guards it.
type recQueue struct {
	segs  [][]*Record // live segments are segs[head:]; slots before head are nil
	head  int
	n     int   // records queued
	bytes int64 // their sizes (Record.size)
}

// push appends one fetch's records, of total size bytes.
func (q *recQueue) push(seg []*Record, bytes int64) {
	if len(seg) == 0 {
		return
	}
	if len(q.segs) == cap(q.segs) && q.head > 0 {
		// Slide the live segments to the front rather than grow.
		live := copy(q.segs, q.segs[q.head:])
		clear(q.segs[live:])
		q.segs, q.head = q.segs[:live], 0
	}
	q.segs = append(q.segs, seg) // a new array leaves the old one unreferenced
	q.n += len(seg)
	q.bytes += bytes
}

// pushFront puts records back at the head (a handler stopped before
// them), of total size bytes.
func (q *recQueue) pushFront(recs []*Record, bytes int64) {
	if len(recs) == 0 {
		return
	}
	recs = recs[:len(recs):len(recs)]
	if q.head > 0 {
		q.head--
		q.segs[q.head] = recs
	} else {
		q.segs = append(q.segs, nil)
		copy(q.segs[1:], q.segs)
		q.segs[0] = recs
	}
	q.n += len(recs)
	q.bytes += bytes
}

// len returns the number of queued records.
func (q *recQueue) len() int { return q.n }

// take removes and returns up to max records from the head (nil when
// empty) and their size. Within the head segment it returns a sub-slice,
// capped so an append by the caller cannot reach the records after it;
// only a chunk spanning segments (the head one has fewer than max left,
// as when fetches bring few records each) is copied into a new slice.
func (q *recQueue) take(max int) ([]*Record, int64) {
	if q.n == 0 || max < 1 {
		return nil, 0
	}
	var chunk []*Record
	if head := q.segs[q.head]; len(head) >= max || q.head == len(q.segs)-1 {
		k := min(len(head), max)
		chunk = head[:k:k]
		q.advance(k)
	} else {
		chunk = make([]*Record, 0, min(max, q.n))
		for len(chunk) < max && q.n > 0 {
			head := q.segs[q.head]
			k := min(len(head), max-len(chunk))
			chunk = append(chunk, head[:k]...)
			q.advance(k)
		}
	}
	b := recordsSize(chunk)
	q.bytes -= b
	return chunk, b
}

// advance drops k records from the head segment, and the segment once
// empty.
func (q *recQueue) advance(k int) {
	q.n -= k
	if k < len(q.segs[q.head]) {
		q.segs[q.head] = q.segs[q.head][k:]
		return
	}
	q.segs[q.head] = nil
	q.head++
	if q.head == len(q.segs) {
		q.segs, q.head = q.segs[:0], 0
	}
}

// reset drops everything and returns the size dropped.
func (q *recQueue) reset() int64 {
	b := q.bytes
	clear(q.segs)
	q.segs, q.head, q.n, q.bytes = q.segs[:0], 0, 0, 0
	return b
}
