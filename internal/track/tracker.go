package track

import (
	"errors"
	"math"
	"math/bits"
)

// MaxSpan is the largest distance, offset − committed, that the metadata
// codec represents and that a Tracker's window covers. With something in
// flight, Deliver and Advance refuse (ErrWindowFull) to move the top of the
// window beyond Committable()+MaxSpan, which bounds a partition's memory to
// 512 KiB (two bitsets, rounded up to a power of two) and Decode's output
// to MaxSpan offsets.
const MaxSpan = 1 << 20

// Errors returned by Tracker. An operation that returns an error changes
// nothing.
var (
	// ErrOrder: Deliver of an offset below Next() (offsets must strictly
	// increase) or out of range (negative, math.MaxInt64).
	ErrOrder = errors.New("track: offset not above the last delivered or advanced offset")
	// ErrSkipped: Deliver of an offset that Skip reports finished per the
	// seed. The record must not be processed again; it is already counted as
	// finished, so just do not deliver it.
	ErrSkipped = errors.New("track: offset already finished per the seed")
	// ErrNotInFlight: Finish of an offset that was never delivered, is a
	// gap, or was already finished.
	ErrNotInFlight = errors.New("track: offset is not in flight")
	// ErrWindowFull: Deliver or Advance would move the top of the window
	// more than MaxSpan offsets above Committable while records are in flight.
	ErrWindowFull = errors.New("track: offset more than MaxSpan above the committable offset")
	// ErrInvalidSeed: Seed with a negative committed offset, or finished
	// offsets that are not strictly increasing, not above committed, more
	// than MaxSpan above it, or math.MaxInt64.
	ErrInvalidSeed = errors.New("track: invalid seed")
)

// minWords is the smallest ring (in 64-offset words) a Tracker keeps once it
// has allocated one.
const minWords = 4

// word holds the state of 64 consecutive offsets, bit i for offset 64k+i.
type word struct {
	// pend: 1 = not known finished. Below Next() that means delivered and
	// unfinished (in flight); from Next() up to the window top it means not
	// yet seen and not finished per the seed. Every bit outside
	// [Committable, window top) is 0.
	pend uint64
	// fin: a finished record (delivered and finished, or finished per the
	// seed), as opposed to a gap, above Committable. Only set where pend is
	// 0, and only inside the window.
	fin uint64
}

// Tracker follows the records of one partition in delivery order and tells
// which offset is safe to commit. See the package documentation for the
// rules. The zero Tracker is ready to use and behaves as after Seed(0, nil);
// a processor normally calls Seed on assignment. A Tracker is not safe for
// concurrent use.
//
// The window is the offset range [Committable(), top), where top is the
// highest offset delivered, advanced past or seeded, plus one. It is kept as
// two bitsets in a ring of 64-bit words indexed by absolute offset/64, so
// every operation is O(1) amortized (plus O(n/64) for an operation that
// passes n offsets at once) and memory is proportional to the window, never
// to the number of records processed.
type Tracker struct {
	commit   int64 // first offset not known finished (Committable)
	next     int64 // Deliver accepts offsets ≥ next
	hi       int64 // window top, exclusive; hi ≥ next, hi ≥ commit
	ring     []word
	inFlight int // delivered, unfinished
	finished int // fin bits in the window
	runs     int // maximal runs of finished offsets in (commit, hi)

	size    int // cached MetadataSize
	sizeSet bool
}

func (t *Tracker) word(o int64) *word {
	return &t.ring[(uint64(o)>>6)&uint64(len(t.ring)-1)]
}

func (t *Tracker) pendingAt(o int64) bool {
	return t.word(o).pend>>(uint64(o)&63)&1 != 0
}

// doneAt reports whether o is a known-finished offset of the run-counting
// domain (commit, hi).
func (t *Tracker) doneAt(o int64) bool {
	return o > t.commit && o < t.hi && !t.pendingAt(o)
}

// live returns the number of ring words the window [commit, hi) spans.
func (t *Tracker) live() int {
	if t.hi <= t.commit {
		return 0
	}
	return int((t.hi-1)>>6 - t.commit>>6 + 1)
}

// ensure makes room in the ring for the window [commit, hi).
func (t *Tracker) ensure(hi int64) {
	if hi <= t.commit {
		return
	}
	need := int((hi-1)>>6 - t.commit>>6 + 1)
	if need <= len(t.ring) {
		return
	}
	n := max(len(t.ring), minWords)
	for n < need {
		n *= 2
	}
	t.resize(n)
}

// resize moves the live words into a ring of n words (a power of two).
func (t *Tracker) resize(n int) {
	nr := make([]word, n)
	if live := t.live(); live > 0 {
		om, nm := uint64(len(t.ring)-1), uint64(n-1)
		for k := t.commit >> 6; k <= (t.hi-1)>>6; k++ {
			nr[uint64(k)&nm] = t.ring[uint64(k)&om]
		}
	}
	t.ring = nr
}

// maybeShrink halves memory when the window uses at most a quarter of the
// ring, keeping len(ring) ≤ max(minWords, 4·live): amortized O(1).
func (t *Tracker) maybeShrink() {
	if len(t.ring) <= minWords {
		return
	}
	live := t.live()
	if live*4 > len(t.ring) {
		return
	}
	n := minWords
	for n < 2*live {
		n *= 2
	}
	if live == 0 {
		t.ring = nil // nothing to keep; allocate again on demand
		return
	}
	t.resize(n)
}

// clearWindow zeroes every live word and forgets the finished counts.
func (t *Tracker) clearWindow() {
	if live := t.live(); live > 0 {
		m := uint64(len(t.ring) - 1)
		for k := t.commit >> 6; k <= (t.hi-1)>>6; k++ {
			t.ring[uint64(k)&m] = word{}
		}
	}
	t.finished, t.runs = 0, 0
}

// mask returns n (1..64) one bits starting at bit s.
func mask(s uint, n int64) uint64 {
	if n >= 64 {
		return ^uint64(0)
	}
	return (1<<uint(n) - 1) << s
}

// setPend sets the pending bits of [a, b).
func (t *Tracker) setPend(a, b int64) {
	for a < b {
		s := uint(a & 63)
		n := min(b-a, 64-int64(s))
		t.word(a).pend |= mask(s, n)
		a += n
	}
}

// clearPend clears the pending bits of [a, b).
func (t *Tracker) clearPend(a, b int64) {
	for a < b {
		s := uint(a & 63)
		n := min(b-a, 64-int64(s))
		t.word(a).pend &^= mask(s, n)
		a += n
	}
}

// takeFin clears the fin bits of [a, b) and returns how many were set.
func (t *Tracker) takeFin(a, b int64) int {
	c := 0
	for a < b {
		s := uint(a & 63)
		n := min(b-a, 64-int64(s))
		w := t.word(a)
		m := mask(s, n)
		c += bits.OnesCount64(w.fin & m)
		w.fin &^= m
		a += n
	}
	return c
}

// nextPending returns the first pending offset in [a, limit), or limit.
func (t *Tracker) nextPending(a, limit int64) int64 {
	for a < limit {
		if w := t.word(a).pend >> (uint64(a) & 63); w != 0 {
			return min(a+int64(bits.TrailingZeros64(w)), limit)
		}
		if a|63 >= limit-1 {
			break // no further word below limit (and (a|63)+1 could overflow)
		}
		a = (a | 63) + 1
	}
	return limit
}

// nextDone returns the first not-pending offset in [a, limit), or limit.
func (t *Tracker) nextDone(a, limit int64) int64 {
	for a < limit {
		if w := ^t.word(a).pend >> (uint64(a) & 63); w != 0 {
			return min(a+int64(bits.TrailingZeros64(w)), limit)
		}
		if a|63 >= limit-1 {
			break // no further word below limit (and (a|63)+1 could overflow)
		}
		a = (a | 63) + 1
	}
	return limit
}

// runsIn counts the finished runs that intersect [x, y), x > commit, y ≤ hi.
func (t *Tracker) runsIn(x, y int64) int {
	n := 0
	for x < y {
		s := t.nextDone(x, y)
		if s >= y {
			break
		}
		n++
		x = t.nextPending(s, y)
	}
	return n
}

// slide moves Committable past finished offsets after a change.
func (t *Tracker) slide() {
	t.sizeSet = false
	if t.commit >= t.hi || t.pendingAt(t.commit) {
		return
	}
	n := t.nextPending(t.commit+1, t.hi)
	if n-t.commit >= 2 {
		t.runs-- // the run (commit, n) leaves the window
	}
	if t.finished > 0 {
		t.finished -= t.takeFin(t.commit, n)
	}
	t.commit = n
	t.maybeShrink()
}

// restart empties the window and anchors it at o (commit = next = hi = o).
// Used when nothing is in flight and o is at or above the window top, so
// that gaps never cost memory unless something below them is in flight.
func (t *Tracker) restart(o int64) {
	t.clearWindow()
	t.commit, t.next, t.hi = o, o, o
	t.maybeShrink()
	t.sizeSet = false
}

// Seed resets the tracker for a partition whose committed offset is
// committed and whose commit metadata said the offsets finishedAbove
// (strictly increasing, all in (committed, committed+MaxSpan]) were already
// finished, as returned by Decode. Skip then reports those offsets, and they
// count as finished: Committable moves past them once everything below is
// finished, and Metadata keeps encoding them until then. Seed(c, nil) starts
// at offset c with nothing finished. On error the tracker is unchanged.
func (t *Tracker) Seed(committed int64, finishedAbove []int64) error {
	if committed < 0 {
		return ErrInvalidSeed
	}
	prev := committed
	for _, o := range finishedAbove {
		if o <= prev || o-committed > MaxSpan || o == math.MaxInt64 {
			return ErrInvalidSeed
		}
		prev = o
	}
	t.clearWindow()
	t.inFlight = 0
	t.commit, t.next, t.hi = committed, committed, committed
	t.sizeSet = false
	if len(finishedAbove) == 0 {
		t.maybeShrink()
		return nil
	}
	hi := prev + 1
	t.ensure(hi)
	t.hi = hi
	t.setPend(committed, hi)
	runs := 0
	for i, o := range finishedAbove {
		w := t.word(o)
		b := uint64(1) << (uint64(o) & 63)
		w.pend &^= b
		w.fin |= b
		if i == 0 || finishedAbove[i-1] != o-1 {
			runs++
		}
	}
	t.finished, t.runs = len(finishedAbove), runs
	t.maybeShrink()
	return nil
}

// Skip reports whether a record at offset was already finished per the seed
// and has not been passed yet: the processor must not run it (nor Deliver
// it; Deliver returns ErrSkipped). Skipped offsets count as gaps, that is as
// finished. Skip is false for offsets below Next(), which Deliver rejects
// anyway.
func (t *Tracker) Skip(offset int64) bool {
	if offset < t.next {
		return false
	}
	if offset < t.commit {
		return true // passed by Committable, so finished per the seed
	}
	return offset < t.hi && !t.pendingAt(offset)
}

// Deliver records that the record at offset was handed out for processing.
// Offsets must strictly increase (offset ≥ Next()); offsets skipped between
// deliveries are gaps (compaction, control records, records Skip reported)
// and count as finished. It fails with ErrOrder, ErrSkipped or ErrWindowFull
// and then changes nothing. Call CanDeliver first to stay within a metadata
// byte limit.
func (t *Tracker) Deliver(offset int64) error {
	if offset < t.next || offset == math.MaxInt64 {
		return ErrOrder
	}
	if offset < t.commit || (offset < t.hi && !t.pendingAt(offset)) {
		return ErrSkipped
	}
	if t.inFlight == 0 && offset >= t.hi {
		// Everything below offset is finished: start afresh at offset.
		t.restart(offset)
		t.ensure(offset + 1)
		t.word(offset).pend |= 1 << (uint64(offset) & 63)
		t.hi, t.next, t.inFlight = offset+1, offset+1, 1
		return nil
	}
	if t.inFlight > 0 && offset-t.commit > MaxSpan {
		return ErrWindowFull
	}
	if t.next == t.hi && t.inFlight > 0 {
		// Common case: no seeded region, Committable is in flight.
		t.ensure(offset + 1)
		if offset > t.hi && !t.doneAt(t.hi-1) {
			t.runs++ // the gap [hi, offset) is a new finished run
		}
		t.word(offset).pend |= 1 << (uint64(offset) & 63)
		t.hi, t.next = offset+1, offset+1
		t.inFlight++
		t.sizeSet = false
		return nil
	}
	// General case: inside or across the seeded region.
	a := max(t.next, t.commit)
	newHi := max(t.hi, offset+1)
	t.ensure(newHi)
	// Bits change in [a, offset) (gaps) and the window gains [hi, offset];
	// count runs over those and their left neighbour. offset stays pending,
	// so no run merges across it.
	x, y := max(a-1, t.commit+1), offset+1
	before := t.runsIn(x, min(y, t.hi))
	t.clearPend(a, min(offset, t.hi))
	t.word(offset).pend |= 1 << (uint64(offset) & 63)
	t.hi = newHi
	t.runs += t.runsIn(x, y) - before
	t.next = offset + 1
	t.inFlight++
	t.slide()
	return nil
}

// Advance records that the fetcher moved past every offset below next
// without delivering the ones not yet delivered (for example next =
// LastOffset+1 of a batch whose tail was compacted away): they are gaps, so
// Committable can move past them. Advance to at most Next() does nothing.
// It fails only with ErrWindowFull, changing nothing. Advance is an
// optimisation: skipping it (for example when CanAdvance is false) only
// delays Committable until the next Deliver.
func (t *Tracker) Advance(next int64) error {
	if next <= t.next {
		return nil
	}
	if t.inFlight == 0 && next >= t.hi {
		t.restart(next)
		return nil
	}
	if next <= t.commit {
		t.next = next // only passes offsets finished per the seed
		return nil
	}
	if t.inFlight > 0 && next-1-t.commit > MaxSpan {
		return ErrWindowFull
	}
	a := max(t.next, t.commit)
	newHi := max(t.hi, next)
	t.ensure(newHi)
	// Bits change in [a, min(next, hi)) and the window gains [hi, next);
	// count runs over those and both neighbours (next may be finished per
	// the seed, merging with the new gap).
	x, y := max(a-1, t.commit+1), newHi
	if next < newHi {
		y = next + 1
	}
	before := t.runsIn(x, min(y, t.hi))
	t.clearPend(a, min(next, t.hi))
	t.hi = newHi
	t.runs += t.runsIn(x, y) - before
	t.next = next
	t.slide()
	return nil
}

// Finish records that the delivered record at offset finished, in any order.
// Finishing an offset that is not in flight (never delivered, a gap, or
// finished already) returns ErrNotInFlight and changes nothing.
func (t *Tracker) Finish(offset int64) error {
	if offset < t.commit || offset >= t.next || !t.pendingAt(offset) {
		return ErrNotInFlight
	}
	if offset > t.commit {
		t.runs++
		if t.doneAt(offset - 1) {
			t.runs--
		}
		if t.doneAt(offset + 1) {
			t.runs--
		}
	}
	w := t.word(offset)
	b := uint64(1) << (uint64(offset) & 63)
	w.pend &^= b
	t.inFlight--
	if offset > t.commit { // the oldest is passed at once: no fin bit
		w.fin |= b
		t.finished++
	}
	t.slide()
	return nil
}

// Committable returns the offset to commit: the first delivered record that
// has not finished, or, when every delivered record has finished, the offset
// after the last one delivered or advanced past (or past the seeded finished
// offsets that follow it). Everything below it is finished or a gap. It
// never decreases.
func (t *Tracker) Committable() int64 { return t.commit }

// Next returns the lowest offset Deliver accepts: one past the last offset
// delivered or advanced past (the seed's committed offset after Seed).
func (t *Tracker) Next() int64 { return t.next }

// InFlight returns the number of delivered records not finished yet.
func (t *Tracker) InFlight() int { return t.inFlight }

// FinishedAbove returns the number of finished records above Committable:
// records finished out of order plus offsets the seed marked finished that
// Committable has not passed yet. Gaps are not counted.
func (t *Tracker) FinishedAbove() int { return t.finished }

// Oldest returns the first unfinished delivered offset (which is then
// Committable), or ok false when nothing is in flight.
func (t *Tracker) Oldest() (offset int64, ok bool) {
	if t.inFlight == 0 {
		return 0, false
	}
	return t.commit, true
}

// Window returns the number of offsets the tracker holds state for, from
// Committable up to the highest offset delivered, advanced past or seeded.
// Memory is proportional to it; it is at most MaxSpan+1.
func (t *Tracker) Window() int64 { return t.hi - t.commit }

// AppendFinished appends to dst, in increasing order, every offset above
// Committable known to be finished — finished records, gaps, and offsets
// finished per the seed — which is the set Metadata encodes.
func (t *Tracker) AppendFinished(dst []int64) []int64 {
	r := trackerRuns(t)
	for {
		s, e, ok := r.next()
		if !ok {
			return dst
		}
		for o := s; o < e; o++ {
			dst = append(dst, r.committed+1+o)
		}
	}
}

// Metadata returns the commit metadata to send with Committable(): the
// encoding (see Encode) of AppendFinished, computed from the window in
// O(window/64 + runs) without building the offset list. It is "" when
// nothing above Committable is finished.
func (t *Tracker) Metadata() string {
	return encode(trackerRuns(t))
}

// MetadataSize returns len(Metadata()) without encoding: O(window/64 + runs)
// and cached until the next change. For a per-record check use the O(1)
// CanDeliver / MetadataBound instead.
func (t *Tracker) MetadataSize() int {
	if !t.sizeSet {
		t.size = encodedSize(trackerRuns(t))
		t.sizeSet = true
	}
	return t.size
}
