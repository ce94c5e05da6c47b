// Package share is the pure core of the share consumer (KIP-932): share
// session bookkeeping (Session), acknowledgement batching (Acks), the
// acquired ranges a ShareFetch response names (Acquired) and the records a
// member holds under acquisition locks (Tracker). No goroutines, no I/O:
// the share fetcher of each broker calls these under its own lock.
package share

import (
	"slices"
	"time"

	"github.com/riffle-go/riffle/internal/kafkaerr"
)

// TP is a partition by topic id, as share requests name them.
type TP struct {
	ID        [16]byte
	Partition int32
}

// Acknowledgement types, as on the wire (KIP-932, KIP-1222).
const (
	Gap     int8 = 0 // no record at the offset (control record, compacted)
	Accept  int8 = 1
	Release int8 = 2
	Reject  int8 = 3
	Renew   int8 = 4
)

// Range is an inclusive offset range with one acknowledgement type.
type Range struct {
	First, Last int64
	Type        int8
}

// PartAcks are the acknowledgement batches of one partition, in offset
// order, not overlapping.
type PartAcks struct {
	TP      TP
	Batches []Range
}

// Acks accumulates acknowledgements until the next request carries them.
// The zero value is ready to use.
type Acks struct {
	idx    map[TP]int // index in parts
	parts  []pendAcks
	n      int
	renews int
}

type pendAcks struct {
	tp TP
	rs []Range
}

// Add acknowledges offset with typ.
func (a *Acks) Add(tp TP, offset int64, typ int8) { a.AddRange(tp, offset, offset, typ) }

// AddRange acknowledges [first, last] with typ; an empty range is ignored.
func (a *Acks) AddRange(tp TP, first, last int64, typ int8) {
	if first > last {
		return
	}
	var p *pendAcks
	if n := len(a.parts); n > 0 && a.parts[n-1].tp == tp {
		p = &a.parts[n-1] // acknowledgements come in runs of a partition
	} else {
		if a.idx == nil {
			a.idx = map[TP]int{}
		}
		i, ok := a.idx[tp]
		if !ok {
			i = len(a.parts)
			a.idx[tp] = i
			a.parts = append(a.parts, pendAcks{tp: tp})
		}
		p = &a.parts[i]
	}
	p.rs = append(p.rs, Range{first, last, typ})
	a.n++
	if typ == Renew {
		a.renews++
	}
}

// Len is how many acknowledgements (single offsets or ranges) are pending.
func (a *Acks) Len() int { return a.n }

// HasRenew says whether a pending acknowledgement is a RENEW (which needs
// a request with IsRenewAck).
func (a *Acks) HasRenew() bool { return a.renews > 0 }

// Drain returns the pending acknowledgements batched: per partition (in a
// stable order), sorted by offset, adjacent offsets of one type merged into
// one batch. Where ranges overlap, the later acknowledgement of an offset
// wins, except that a RENEW never overrides an earlier final type. Drain
// empties a. It costs O(n log n) in the pending acknowledgements.
func (a *Acks) Drain() []PartAcks {
	if a.n == 0 {
		return nil
	}
	out := make([]PartAcks, 0, len(a.parts))
	keep := a.parts[:0]
	for _, p := range a.parts {
		if len(p.rs) == 0 {
			continue // nothing since the last Drain: forgotten
		}
		out = append(out, PartAcks{TP: p.tp, Batches: normalize(p.rs)})
		// The buffer is kept for the partition's next acknowledgements.
		p.rs = p.rs[:0]
		keep = append(keep, p)
	}
	if len(keep) < len(a.parts) {
		clear(a.parts[len(keep):])
		a.parts = keep
		clear(a.idx)
		for i, p := range a.parts {
			a.idx[p.tp] = i
		}
	}
	slices.SortFunc(out, func(x, y PartAcks) int { return cmpTP(x.TP, y.TP) })
	a.n, a.renews = 0, 0
	return out
}

// seq is a range with the order it was added in.
type seq struct {
	Range
	i int32
}

// normalize resolves overlaps (later wins, RENEW never overrides a final
// type) and merges adjacent ranges of one type, in O(n log n): offsets are
// split at range boundaries only, so the work is bounded by the number of
// ranges, never by their width.
func normalize(rs []Range) []Range {
	if len(rs) == 1 {
		return []Range{rs[0]}
	}
	if out, ok := normalizeDense(rs); ok {
		return out
	}
	ss := make([]seq, len(rs))
	for i, r := range rs {
		ss[i] = seq{r, int32(i)}
	}
	slices.SortFunc(ss, func(x, y seq) int {
		if x.First != y.First {
			if x.First < y.First {
				return -1
			}
			return 1
		}
		return int(x.i - y.i)
	})
	overlap := false
	for i := 1; i < len(ss); i++ {
		if ss[i].First <= ss[i-1].Last {
			overlap = true
			break
		}
	}
	if overlap {
		return sweep(ss)
	}
	// The common case: disjoint ranges (one acknowledgement per record).
	var out []Range
	for _, s := range ss {
		if n := len(out); n > 0 && out[n-1].Type == s.Type && out[n-1].Last+1 == s.First {
			out[n-1].Last = s.Last
			continue
		}
		out = append(out, s.Range)
	}
	return out
}

// normalizeDense is the common case in O(n): one acknowledgement per
// record, each offset once, the offsets close together (those of a few
// fetches). It lays the types out by offset and reads them back in order;
// false when the ranges are not like that.
func normalizeDense(rs []Range) ([]Range, bool) {
	lo, hi := rs[0].First, rs[0].First
	for _, r := range rs {
		if r.First != r.Last || r.Type < 0 {
			return nil, false
		}
		lo, hi = min(lo, r.First), max(hi, r.First)
	}
	span := uint64(hi - lo) // hi >= lo: no overflow as unsigned
	if span >= uint64(4*len(rs)+64) {
		return nil, false
	}
	types := make([]int8, span+1)
	for i := range types {
		types[i] = -1
	}
	for _, r := range rs {
		o := r.First - lo
		if types[o] >= 0 {
			return nil, false // acknowledged twice: overlap rules apply
		}
		types[o] = r.Type
	}
	var out []Range
	for i, typ := range types {
		if typ < 0 {
			continue
		}
		o := lo + int64(i)
		if n := len(out); n > 0 && out[n-1].Type == typ && out[n-1].Last+1 == o {
			out[n-1].Last = o
			continue
		}
		out = append(out, Range{o, o, typ})
	}
	return out, true
}

// sweep normalises overlapping ranges ss (sorted by First, then order):
// over each elementary segment between two range boundaries, the type is
// that of the latest final (non-RENEW) range covering it, else RENEW if a
// RENEW covers it. The covering ranges are kept in two heaps by order,
// the ones that ended before the segment dropped lazily from the top.
func sweep(ss []seq) []Range {
	bounds := make([]int64, 0, 2*len(ss))
	for _, r := range ss {
		bounds = append(bounds, r.First)
		if r.Last < 1<<63-1 {
			bounds = append(bounds, r.Last+1)
		}
	}
	slices.Sort(bounds)
	bounds = slices.Compact(bounds)
	var final, renew seqHeap
	var out []Range
	j := 0
	for bi, lo := range bounds {
		hi := int64(1<<63 - 1)
		if bi+1 < len(bounds) {
			hi = bounds[bi+1] - 1
		}
		for ; j < len(ss) && ss[j].First <= lo; j++ {
			if ss[j].Type == Renew {
				renew.push(ss[j])
			} else {
				final.push(ss[j])
			}
		}
		final.dropBefore(lo)
		renew.dropBefore(lo)
		var typ int8
		switch {
		case len(final) > 0:
			typ = final[0].Type
		case len(renew) > 0:
			typ = Renew
		default:
			continue
		}
		if n := len(out); n > 0 && out[n-1].Type == typ && out[n-1].Last+1 == lo {
			out[n-1].Last = hi
			continue
		}
		out = append(out, Range{lo, hi, typ})
	}
	return out
}

// seqHeap is a max-heap of ranges by the order they were added in.
type seqHeap []seq

func (h *seqHeap) push(s seq) {
	*h = append(*h, s)
	q := *h
	for i := len(q) - 1; i > 0; {
		p := (i - 1) / 2
		if q[p].i >= q[i].i {
			break
		}
		q[p], q[i] = q[i], q[p]
		i = p
	}
}

// dropBefore pops the top while it ends before lo: the top is then the
// latest range covering lo, if any (ranges below it that ended are
// dropped when they surface).
func (h *seqHeap) dropBefore(lo int64) {
	for len(*h) > 0 && (*h)[0].Last < lo {
		q := *h
		n := len(q) - 1
		q[0] = q[n]
		q = q[:n]
		for i := 0; ; {
			c := 2*i + 1
			if c >= n {
				break
			}
			if c+1 < n && q[c+1].i > q[c].i {
				c++
			}
			if q[i].i >= q[c].i {
				break
			}
			q[i], q[c] = q[c], q[i]
			i = c
		}
		*h = q
	}
}

// Acquired is the set of acquired offset ranges of one partition of a
// ShareFetch response, normalised: sorted, without empty or overlapping
// ranges, whatever the broker sent.
type Acquired struct {
	rs []acq
}

type acq struct {
	first, last int64
	delivery    int16
}

// NewAcquired normalises the ranges [first[i], last[i]] with their
// delivery counts. Empty ranges are dropped; an offset in two ranges
// belongs to the first by offset order.
func NewAcquired(n int, at func(i int) (first, last int64, delivery int16)) Acquired {
	rs := make([]acq, 0, n)
	for i := 0; i < n; i++ {
		f, l, d := at(i)
		if f > l || f < 0 {
			continue
		}
		rs = append(rs, acq{f, l, d})
	}
	slices.SortFunc(rs, func(x, y acq) int {
		switch {
		case x.first < y.first:
			return -1
		case x.first > y.first:
			return 1
		}
		return 0
	})
	out := rs[:0]
	for _, r := range rs {
		if n := len(out); n > 0 && r.first <= out[n-1].last {
			if r.last <= out[n-1].last {
				continue
			}
			r.first = out[n-1].last + 1
		}
		out = append(out, r)
	}
	return Acquired{rs: out}
}

// Empty says whether nothing was acquired.
func (a Acquired) Empty() bool { return len(a.rs) == 0 }

// Lookup returns the delivery count of offset, and whether it was acquired.
func (a Acquired) Lookup(offset int64) (int16, bool) {
	i, _ := slices.BinarySearchFunc(a.rs, offset, func(r acq, o int64) int {
		switch {
		case r.last < o:
			return -1
		case r.first > o:
			return 1
		}
		return 0
	})
	if i < len(a.rs) && a.rs[i].first <= offset && offset <= a.rs[i].last {
		return a.rs[i].delivery, true
	}
	return 0, false
}

// LookupFrom is Lookup for offsets in ascending order: *cur, a cursor
// starting at 0, remembers the range the last offset fell in, so a batch's
// records cost a comparison each rather than a search. Any order is
// answered right; out of order it searches.
func (a Acquired) LookupFrom(offset int64, cur *int) (int16, bool) {
	i := *cur
	if i < 0 || i >= len(a.rs) || offset < a.rs[i].first {
		d, ok := a.Lookup(offset)
		i, _ = slices.BinarySearchFunc(a.rs, offset, func(r acq, o int64) int {
			if r.last < o {
				return -1
			}
			return 1
		})
		*cur = i
		return d, ok
	}
	for i < len(a.rs) && a.rs[i].last < offset {
		i++
	}
	*cur = i
	if i < len(a.rs) && a.rs[i].first <= offset {
		return a.rs[i].delivery, true
	}
	return 0, false
}

// Overlaps says whether any offset of [first, last] was acquired: a batch
// that holds none need not be decoded (brokers return whole batches, and
// more of them than they acquired records in).
func (a Acquired) Overlaps(first, last int64) bool {
	if first > last {
		return false
	}
	i, _ := slices.BinarySearchFunc(a.rs, first, func(r acq, o int64) int {
		if r.last < o {
			return -1
		}
		return 1
	})
	return i < len(a.rs) && a.rs[i].first <= last
}

// Gaps returns the acquired offsets in [first, last] that are not in recs
// (sorted offsets of the records the batch held): control records and
// compacted offsets, which the member acknowledges as GAP. The result is
// ranges, so a hostile batch span costs nothing per offset.
func (a Acquired) Gaps(first, last int64, recs []int64) []Range {
	var out []Range
	add := func(f, l int64) {
		if f > l {
			return
		}
		if n := len(out); n > 0 && out[n-1].Last+1 == f {
			out[n-1].Last = l
			return
		}
		out = append(out, Range{f, l, Gap})
	}
	ri := 0
	for _, r := range a.rs {
		lo, hi := max(r.first, first), min(r.last, last)
		if lo > hi {
			continue
		}
		cur := lo
		for ri < len(recs) && recs[ri] < lo {
			ri++
		}
		for ; ri < len(recs) && recs[ri] <= hi; ri++ {
			if recs[ri] < cur {
				continue // a duplicate offset
			}
			add(cur, recs[ri]-1)
			cur = recs[ri] + 1
		}
		if cur <= hi {
			add(cur, hi)
		}
	}
	return out
}

// Session is a share session with one broker (KIP-932): its epoch and the
// partitions the broker has in it. A request is planned (Plan), and the
// plan applied once its response came back without a session error
// (Applied); a session error resets it (Reset), and the next request
// opens a new one at epoch 0.
type Session struct {
	epoch   int32
	in      map[TP]bool
	pending map[TP]bool // the set the last plan asked for
}

// Epoch is the epoch the next request carries: 0 opens a session.
func (s *Session) Epoch() int32 { return s.epoch }

// Open says whether the broker has a session for us (epoch > 0), which a
// ShareAcknowledge needs.
func (s *Session) Open() bool { return s.epoch > 0 }

// Plan returns what the next ShareFetch must say to move the session to
// want: the partitions to add (all of want when opening) and those to
// forget.
func (s *Session) Plan(want []TP) (add, forget []TP) {
	s.pending = make(map[TP]bool, len(want))
	for _, tp := range want {
		s.pending[tp] = true
		if s.epoch == 0 || !s.in[tp] {
			add = append(add, tp)
		}
	}
	if s.epoch > 0 {
		for tp := range s.in {
			if !s.pending[tp] {
				forget = append(forget, tp)
			}
		}
	}
	slices.SortFunc(forget, cmpTP)
	return add, forget
}

func cmpTP(x, y TP) int {
	if c := slices.Compare(x.ID[:], y.ID[:]); c != 0 {
		return c
	}
	return int(x.Partition) - int(y.Partition)
}

// Applied records a successful ShareFetch for the last plan: the session
// holds the planned partitions and the epoch moves on.
func (s *Session) Applied() {
	if s.pending != nil {
		s.in, s.pending = s.pending, nil
	}
	s.bump()
}

// Acked records a successful ShareAcknowledge: the epoch moves on, the
// partitions do not change.
func (s *Session) Acked() { s.bump() }

func (s *Session) bump() {
	s.epoch++
	if s.epoch < 1 {
		s.epoch = 1 // wraps to 1, never to 0 or -1
	}
}

// Reset forgets the session (after a session error, a connection loss or
// a close): the next request opens a new one.
func (s *Session) Reset() { s.epoch, s.in, s.pending = 0, nil, nil }

// Has says whether the session holds tp.
func (s *Session) Has(tp TP) bool { return s.in[tp] }

// Len is how many partitions the session holds.
func (s *Session) Len() int { return len(s.in) }

// State of a record held by a member.
type State int8

// Record states in a Tracker.
const (
	Queued  State = iota // acquired, waiting for a handler
	Running              // a handler runs it
	Held                 // the handler returned without acknowledging (explicit mode)
)

// Key names one acquisition of one record: the same offset acquired again
// (redelivered to this member) gets a new ID, so an acknowledgement meant
// for the earlier acquisition is dropped.
type Key struct {
	TP     TP
	Offset int64
	ID     uint64
	slot   int32 // where the Tracker keeps the acquisition (checked against ID)
}

type entry struct {
	tp       TP
	idx      *offIndex // tp's
	offset   int64
	id       uint64 // 0: a free slot
	deadline time.Time
	state    State
	at       int32 // index in the heap of its state
}

// offIndex is one partition's held offsets, by offset: int64 keys take
// the map's fast path.
type offIndex struct{ m map[int64]int32 }

// Tracker holds the records a member acquired through one broker's
// session, each under an acquisition lock that ends at its deadline.
//
// Every operation costs what it changes, never what is held: records
// live in a slab (a key names its slot, so Start, Hold and Finish take no
// lookup), an index by offset serves redeliveries and renewals, and the
// records of each state sit in a min-heap by deadline, so Next is O(1),
// Expire O(expired · log n) and Due O(due).
type Tracker struct {
	slab   []entry
	free   []int32
	byTP   map[TP]*offIndex
	empty  int       // indexes in byTP without offsets
	last   *offIndex // the last partition acquired in (records come in runs of one)
	lastTP TP
	heaps  [3][]hent // per State, a min-heap by deadline
	nextID uint64
	base   time.Time // ticks count from it
	based  bool
	// expired counts the acquisitions whose lock ended while held
	// (Expired).
	expired int64
}

// Expired is how many acquisitions lost their lock while held: dropped by
// Expire, found expired by Start, Finish or Take, or replaced by the same
// offset acquired again (the broker gave it out after its lock ended).
// Each acquisition counts at most once; an acknowledgement of a record
// already acknowledged (a stale key) is not an expiry.
func (t *Tracker) Expired() int64 { return t.expired }

// hent is a heap entry: the deadline as a tick, so sifting compares
// integers in the heap's own array rather than times in the slab.
type hent struct {
	tick int64
	slot int32
}

// tick is t as nanoseconds since the Tracker's base. Sub reads the
// monotonic clock when both times have it, as Before does, so ticks order
// as the times do.
func (t *Tracker) tick(at time.Time) int64 {
	if !t.based {
		t.base, t.based = at, true
	}
	return int64(at.Sub(t.base))
}

// Acquire records offset as acquired until deadline and returns its key.
// An offset already tracked (the broker handed it again) is replaced.
func (t *Tracker) Acquire(tp TP, offset int64, deadline time.Time) Key {
	ix := t.last
	if ix == nil || t.lastTP != tp {
		if ix = t.byTP[tp]; ix == nil {
			if t.byTP == nil {
				t.byTP = map[TP]*offIndex{}
			}
			ix = &offIndex{m: map[int64]int32{}}
			t.byTP[tp] = ix
			t.empty++
		}
		t.last, t.lastTP = ix, tp
	}
	if old, ok := ix.m[offset]; ok {
		// Held still, yet the broker handed it out again: its lock
		// ended there.
		t.expired++
		t.drop(old, false) // no sweep: ix is about to get offset again
	}
	if len(ix.m) == 0 {
		t.empty--
	}
	var slot int32
	if n := len(t.free); n > 0 {
		slot = t.free[n-1]
		t.free = t.free[:n-1]
	} else {
		slot = int32(len(t.slab))
		t.slab = append(t.slab, entry{})
	}
	t.nextID++
	t.slab[slot] = entry{tp: tp, idx: ix, offset: offset, id: t.nextID, deadline: deadline, state: Queued}
	ix.m[offset] = slot
	t.push(Queued, slot, t.tick(deadline))
	return Key{tp, offset, t.nextID, slot}
}

// get returns the slot of k, or -1 if k is not (or no longer) held. A
// key from Acquire names its slot; any other finds it by offset.
func (t *Tracker) get(k Key) int32 {
	if k.ID == 0 {
		return -1
	}
	if k.slot >= 0 && int(k.slot) < len(t.slab) {
		if e := &t.slab[k.slot]; e.id == k.ID && e.offset == k.Offset && e.tp == k.TP {
			return k.slot
		}
	}
	if slot, ok := t.lookup(k.TP, k.Offset); ok && t.slab[slot].id == k.ID {
		return slot
	}
	return -1
}

// lookup finds the slot of offset of tp.
func (t *Tracker) lookup(tp TP, offset int64) (int32, bool) {
	if ix := t.byTP[tp]; ix != nil {
		slot, ok := ix.m[offset]
		return slot, ok
	}
	return 0, false
}

func (t *Tracker) key(slot int32) Key {
	e := &t.slab[slot]
	return Key{e.tp, e.offset, e.id, slot}
}

func (t *Tracker) set(slot int32, s State) {
	e := &t.slab[slot]
	if e.state == s {
		return
	}
	tick := t.heaps[e.state][e.at].tick
	t.remove(e.state, e.at)
	e.state = s
	t.push(s, slot, tick)
}

// release forgets the record in slot.
func (t *Tracker) release(slot int32) { t.drop(slot, true) }

// drop forgets the record in slot and, with sweep, drops the empty
// partition indexes if there are many.
func (t *Tracker) drop(slot int32, sweep bool) {
	e := &t.slab[slot]
	t.remove(e.state, e.at)
	ix := e.idx
	delete(ix.m, e.offset)
	*e = entry{}
	t.free = append(t.free, slot)
	if len(ix.m) == 0 {
		// Partitions come and go: drop the empty indexes now and then.
		if t.empty++; sweep && t.empty > 64 {
			for tp, ix := range t.byTP {
				if len(ix.m) == 0 {
					delete(t.byTP, tp)
				}
			}
			t.empty, t.last = 0, nil
		}
	}
}

// Start moves a queued record to Running if its lock has not expired at
// now. False: the record is no longer ours (stale key, or its lock
// expired, in which case it is dropped: the broker redelivers it).
func (t *Tracker) Start(k Key, now time.Time) bool {
	slot := t.get(k)
	if slot < 0 || t.slab[slot].state != Queued {
		return false
	}
	if !now.Before(t.slab[slot].deadline) {
		t.expired++
		t.release(slot)
		return false
	}
	t.set(slot, Running)
	return true
}

// Hold moves a running record to Held: its handler returned without
// acknowledging it.
func (t *Tracker) Hold(k Key) bool {
	slot := t.get(k)
	if slot < 0 {
		return false
	}
	t.set(slot, Held)
	return true
}

// Finish removes the record, which is being acknowledged, and says
// whether it was still ours (an acknowledgement for a stale key or an
// expired lock is not sent: the broker would refuse the whole batch).
func (t *Tracker) Finish(k Key, now time.Time) bool {
	slot := t.get(k)
	if slot < 0 {
		return false
	}
	alive := now.Before(t.slab[slot].deadline)
	if !alive {
		t.expired++
	}
	t.release(slot)
	return alive
}

// Alive says whether k is held and its lock has not expired at now.
func (t *Tracker) Alive(k Key, now time.Time) bool {
	slot := t.get(k)
	return slot >= 0 && now.Before(t.slab[slot].deadline)
}

// Due returns the records in state s whose lock ends before now+margin
// (and has not ended yet): those to renew. It visits only the part of the
// heap that ends before now+margin.
func (t *Tracker) Due(s State, now time.Time, margin time.Duration) []Key {
	h := t.heaps[s]
	if len(h) == 0 {
		return nil
	}
	from, until := t.tick(now), t.tick(now.Add(margin))
	if h[0].tick >= until {
		return nil
	}
	var out []Key
	stack := []int32{0}
	for len(stack) > 0 {
		i := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if h[i].tick >= until {
			continue // nor any of its subtree
		}
		if from < h[i].tick {
			out = append(out, t.key(h[i].slot))
		}
		for c := 2*i + 1; c <= 2*i+2 && int(c) < len(h); c++ {
			stack = append(stack, c)
		}
	}
	return out
}

// Extend moves the lock deadline of k (renewed by a request sent at the
// time the new deadline counts from).
func (t *Tracker) Extend(k Key, deadline time.Time) {
	if slot := t.get(k); slot >= 0 {
		t.extend(slot, deadline)
	}
}

// ExtendOffset moves the lock deadline of whatever acquisition of offset
// is held (renewals name offsets, not acquisitions).
func (t *Tracker) ExtendOffset(tp TP, offset int64, deadline time.Time) {
	if slot, ok := t.lookup(tp, offset); ok {
		t.extend(slot, deadline)
	}
}

func (t *Tracker) extend(slot int32, deadline time.Time) {
	e := &t.slab[slot]
	if deadline.After(e.deadline) {
		e.deadline = deadline
		t.heaps[e.state][e.at].tick = t.tick(deadline)
		t.down(e.state, e.at)
	}
}

// Next returns the earliest deadline among records in state s, and false
// if there are none.
func (t *Tracker) Next(s State) (time.Time, bool) {
	if h := t.heaps[s]; len(h) > 0 {
		return t.slab[h[0].slot].deadline, true
	}
	return time.Time{}, false
}

// Expire drops every record whose lock ended at now and returns how many.
func (t *Tracker) Expire(now time.Time) int {
	if t.Len() == 0 {
		return 0
	}
	n, at := 0, t.tick(now)
	for s := range t.heaps {
		for len(t.heaps[s]) > 0 && t.heaps[s][0].tick <= at {
			t.release(t.heaps[s][0].slot)
			n++
		}
	}
	t.expired += int64(n)
	return n
}

// Take removes and returns every record in one of states whose lock is
// still alive at now (to release them), dropping the expired ones.
func (t *Tracker) Take(now time.Time, states ...State) []Key {
	var out []Key
	for _, s := range states {
		for len(t.heaps[s]) > 0 {
			slot := t.heaps[s][len(t.heaps[s])-1].slot
			if now.Before(t.slab[slot].deadline) {
				out = append(out, t.key(slot))
			} else {
				t.expired++
			}
			t.release(slot)
		}
	}
	return out
}

// Count returns how many records are in state s.
func (t *Tracker) Count(s State) int { return len(t.heaps[s]) }

// Len is how many records are held in any state.
func (t *Tracker) Len() int { return len(t.heaps[Queued]) + len(t.heaps[Running]) + len(t.heaps[Held]) }

// The heaps: a binary min-heap by deadline per state, of slab slots; each
// entry knows its index (at) so it can be removed or moved in O(log n).

func (t *Tracker) swap(h []hent, i, j int32) {
	h[i], h[j] = h[j], h[i]
	t.slab[h[i].slot].at, t.slab[h[j].slot].at = i, j
}

func (t *Tracker) push(s State, slot int32, tick int64) {
	t.heaps[s] = append(t.heaps[s], hent{tick, slot})
	i := int32(len(t.heaps[s]) - 1)
	t.slab[slot].at = i
	t.up(s, i)
}

func (t *Tracker) remove(s State, i int32) {
	h := t.heaps[s]
	last := int32(len(h) - 1)
	if i != last {
		t.swap(h, i, last)
	}
	t.heaps[s] = h[:last]
	if i != last {
		if !t.down(s, i) {
			t.up(s, i)
		}
	}
}

func (t *Tracker) up(s State, i int32) {
	h := t.heaps[s]
	for i > 0 {
		p := (i - 1) / 2
		if h[i].tick >= h[p].tick {
			break
		}
		t.swap(h, i, p)
		i = p
	}
}

// down sifts i down and says whether it moved.
func (t *Tracker) down(s State, i int32) bool {
	h := t.heaps[s]
	n := int32(len(h))
	i0 := i
	for {
		c := 2*i + 1
		if c >= n || c < 0 {
			break
		}
		if r := c + 1; r < n && h[r].tick < h[c].tick {
			c = r
		}
		if h[c].tick >= h[i].tick {
			break
		}
		t.swap(h, i, c)
		i = c
	}
	return i > i0
}

// IsSessionError says whether a top-level error code means the session is
// gone or out of step: the member resets it and opens a new one.
func IsSessionError(code int16) bool {
	return code == kafkaerr.ShareSessionNotFound || code == kafkaerr.InvalidShareSessionEpoch
}

// IsSessionLimit says whether the broker refused a new session because it
// has too many.
func IsSessionLimit(code int16) bool { return code == kafkaerr.ShareSessionLimitReached }

// SplitRenew splits acknowledgement batches into the final ones and the
// RENEW ones (which need a ShareAcknowledge with IsRenewAck, and a broker
// that supports KIP-1222). Partitions left without batches are dropped.
func SplitRenew(pas []PartAcks) (final, renew []PartAcks) {
	for _, pa := range pas {
		var f, r []Range
		for _, b := range pa.Batches {
			if b.Type == Renew {
				r = append(r, b)
			} else {
				f = append(f, b)
			}
		}
		if len(f) > 0 {
			final = append(final, PartAcks{TP: pa.TP, Batches: f})
		}
		if len(r) > 0 {
			renew = append(renew, PartAcks{TP: pa.TP, Batches: r})
		}
	}
	return final, renew
}
