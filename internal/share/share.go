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
	m map[TP][]Range
	n int
}

// Add acknowledges offset with typ.
func (a *Acks) Add(tp TP, offset int64, typ int8) { a.AddRange(tp, offset, offset, typ) }

// AddRange acknowledges [first, last] with typ; an empty range is ignored.
func (a *Acks) AddRange(tp TP, first, last int64, typ int8) {
	if first > last {
		return
	}
	if a.m == nil {
		a.m = map[TP][]Range{}
	}
	a.m[tp] = append(a.m[tp], Range{first, last, typ})
	a.n++
}

// Len is how many acknowledgements (single offsets or ranges) are pending.
func (a *Acks) Len() int { return a.n }

// HasRenew says whether a pending acknowledgement is a RENEW (which needs
// a request with IsRenewAck).
func (a *Acks) HasRenew() bool {
	for _, rs := range a.m {
		for _, r := range rs {
			if r.Type == Renew {
				return true
			}
		}
	}
	return false
}

// Drain returns the pending acknowledgements batched: per partition (in a
// stable order), sorted by offset, adjacent offsets of one type merged into
// one batch. Where ranges overlap, the later acknowledgement of an offset
// wins, except that a RENEW never overrides an earlier final type. Drain
// empties a.
func (a *Acks) Drain() []PartAcks {
	if a.n == 0 {
		return nil
	}
	out := make([]PartAcks, 0, len(a.m))
	for tp, rs := range a.m {
		out = append(out, PartAcks{TP: tp, Batches: normalize(rs)})
	}
	slices.SortFunc(out, func(x, y PartAcks) int {
		if c := slices.Compare(x.TP.ID[:], y.TP.ID[:]); c != 0 {
			return c
		}
		return int(x.TP.Partition) - int(y.TP.Partition)
	})
	a.m, a.n = nil, 0
	return out
}

// normalize resolves overlaps (later wins, RENEW never overrides a final
// type) and merges adjacent ranges of one type. Offsets are split at
// range boundaries only, so the work is bounded by the number of ranges,
// never by their width.
func normalize(rs []Range) []Range {
	if len(rs) == 1 {
		return []Range{rs[0]}
	}
	// Boundaries of every range; each elementary segment between two
	// boundaries takes the type of the winning range covering it.
	bounds := make([]int64, 0, 2*len(rs))
	for _, r := range rs {
		bounds = append(bounds, r.First)
		if r.Last < 1<<63-1 {
			bounds = append(bounds, r.Last+1)
		}
	}
	slices.Sort(bounds)
	bounds = slices.Compact(bounds)
	var out []Range
	for i, lo := range bounds {
		hi := int64(1<<63 - 1)
		if i+1 < len(bounds) {
			hi = bounds[i+1] - 1
		}
		typ, ok := int8(0), false
		for _, r := range rs {
			if r.First <= lo && lo <= r.Last {
				if !ok || r.Type != Renew || typ == Renew {
					typ, ok = r.Type, true
				}
			}
		}
		if !ok {
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
}

type entry struct {
	id       uint64
	deadline time.Time
	state    State
}

// Tracker holds the records a member acquired through one broker's
// session, each under an acquisition lock that ends at its deadline.
type Tracker struct {
	m      map[TP]map[int64]*entry
	nextID uint64
	counts [3]int
}

// Acquire records offset as acquired until deadline and returns its key.
// An offset already tracked (the broker handed it again) is replaced.
func (t *Tracker) Acquire(tp TP, offset int64, deadline time.Time) Key {
	if t.m == nil {
		t.m = map[TP]map[int64]*entry{}
	}
	ps := t.m[tp]
	if ps == nil {
		ps = map[int64]*entry{}
		t.m[tp] = ps
	}
	if old := ps[offset]; old != nil {
		t.counts[old.state]--
	}
	t.nextID++
	ps[offset] = &entry{id: t.nextID, deadline: deadline, state: Queued}
	t.counts[Queued]++
	return Key{tp, offset, t.nextID}
}

func (t *Tracker) get(k Key) *entry {
	e := t.m[k.TP][k.Offset]
	if e == nil || e.id != k.ID {
		return nil
	}
	return e
}

func (t *Tracker) set(e *entry, s State) {
	t.counts[e.state]--
	e.state = s
	t.counts[s]++
}

// Start moves a queued record to Running if its lock has not expired at
// now. False: the record is no longer ours (stale key, or its lock
// expired, in which case it is dropped: the broker redelivers it).
func (t *Tracker) Start(k Key, now time.Time) bool {
	e := t.get(k)
	if e == nil || e.state != Queued {
		return false
	}
	if !now.Before(e.deadline) {
		t.remove(k)
		return false
	}
	t.set(e, Running)
	return true
}

// Hold moves a running record to Held: its handler returned without
// acknowledging it.
func (t *Tracker) Hold(k Key) bool {
	e := t.get(k)
	if e == nil {
		return false
	}
	t.set(e, Held)
	return true
}

// Finish removes the record, which is being acknowledged, and says
// whether it was still ours (an acknowledgement for a stale key or an
// expired lock is not sent: the broker would refuse the whole batch).
func (t *Tracker) Finish(k Key, now time.Time) bool {
	e := t.get(k)
	if e == nil {
		return false
	}
	t.remove(k)
	return now.Before(e.deadline)
}

// Alive says whether k is held and its lock has not expired at now.
func (t *Tracker) Alive(k Key, now time.Time) bool {
	e := t.get(k)
	return e != nil && now.Before(e.deadline)
}

func (t *Tracker) remove(k Key) {
	ps := t.m[k.TP]
	e := ps[k.Offset]
	t.counts[e.state]--
	delete(ps, k.Offset)
	if len(ps) == 0 {
		delete(t.m, k.TP)
	}
}

// Due returns the records in state s whose lock ends before now+margin
// (and has not ended yet): those to renew.
func (t *Tracker) Due(s State, now time.Time, margin time.Duration) []Key {
	var out []Key
	for tp, ps := range t.m {
		for off, e := range ps {
			if e.state == s && now.Before(e.deadline) && e.deadline.Before(now.Add(margin)) {
				out = append(out, Key{tp, off, e.id})
			}
		}
	}
	return out
}

// Extend moves the lock deadline of k (renewed by a request sent at the
// time the new deadline counts from).
func (t *Tracker) Extend(k Key, deadline time.Time) {
	if e := t.get(k); e != nil && deadline.After(e.deadline) {
		e.deadline = deadline
	}
}

// ExtendOffset moves the lock deadline of whatever acquisition of offset
// is held (renewals name offsets, not acquisitions).
func (t *Tracker) ExtendOffset(tp TP, offset int64, deadline time.Time) {
	if e := t.m[tp][offset]; e != nil && deadline.After(e.deadline) {
		e.deadline = deadline
	}
}

// Next returns the earliest deadline among records in state s, and false
// if there are none.
func (t *Tracker) Next(s State) (time.Time, bool) {
	var at time.Time
	ok := false
	for _, ps := range t.m {
		for _, e := range ps {
			if e.state == s && (!ok || e.deadline.Before(at)) {
				at, ok = e.deadline, true
			}
		}
	}
	return at, ok
}

// Expire drops every record whose lock ended at now and returns how many.
func (t *Tracker) Expire(now time.Time) int {
	n := 0
	for tp, ps := range t.m {
		for off, e := range ps {
			if !now.Before(e.deadline) {
				t.counts[e.state]--
				delete(ps, off)
				n++
			}
		}
		if len(ps) == 0 {
			delete(t.m, tp)
		}
	}
	return n
}

// Take removes and returns every record in one of states whose lock is
// still alive at now (to release them), dropping the expired ones.
func (t *Tracker) Take(now time.Time, states ...State) []Key {
	var out []Key
	for tp, ps := range t.m {
		for off, e := range ps {
			if !slices.Contains(states, e.state) {
				continue
			}
			if now.Before(e.deadline) {
				out = append(out, Key{tp, off, e.id})
			}
			t.counts[e.state]--
			delete(ps, off)
		}
		if len(ps) == 0 {
			delete(t.m, tp)
		}
	}
	return out
}

// Count returns how many records are in state s.
func (t *Tracker) Count(s State) int { return t.counts[s] }

// Len is how many records are held in any state.
func (t *Tracker) Len() int { return t.counts[Queued] + t.counts[Running] + t.counts[Held] }

// IsSessionError says whether a top-level error code means the session is
// gone or out of step: the member resets it and opens a new one.
func IsSessionError(code int16) bool {
	return code == kafkaerr.ShareSessionNotFound || code == kafkaerr.InvalidShareSessionEpoch
}

// IsSessionLimit says whether the broker refused a new session because it
// has too many.
func IsSessionLimit(code int16) bool { return code == kafkaerr.ShareSessionLimitReached }
