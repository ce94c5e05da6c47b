package ranges

import (
	"math"
	"sort"

	"github.com/riffle-go/riffle"
)

// This file is the pure core of incremental planning and checkpoints:
// plain types without goroutines or I/O, driven by Planner and
// Checkpoint, tested with tables, a model and fuzzing.

// span is the half-open offset interval [lo, hi).
type span struct{ lo, hi int64 }

// partTrack is the checkpoint of one partition.
type partTrack struct {
	// known says base is set: the partition's starting point is known
	// (the group's committed offset or the start spec).
	known bool
	// base is the committable offset: every offset from the start below
	// it is done (or was skipped, deleted before it was planned).
	base int64
	// done are the done spans above base: sorted, disjoint, not touching,
	// each starting above base once base is known. A gap below one of them
	// (a range not done yet, or never planned) holds the base back.
	done []span
	// pending are the planned ranges not entirely done yet, sorted by
	// lo: each has an offset that is neither below the base (once known)
	// nor in a done span. A range leaves once its last offset is done.
	pending []span
}

// tracker is the checkpoint tracker: ranges are marked done in any order,
// and a partition's committable offset advances only past offsets that
// are all done. It counts offsets, not ranges: a range marked done twice,
// or ranges that overlap (a task retried with other bounds), count once,
// and nothing is committed across a gap no range covered. It also keeps
// the planned ranges that are not done yet (outstanding), so a planner
// can tell how much of what it handed out is still to be done.
type tracker struct {
	parts map[riffle.TopicPartition]*partTrack
}

func newTracker() tracker { return tracker{parts: map[riffle.TopicPartition]*partTrack{}} }

func (t *tracker) part(tp riffle.TopicPartition) *partTrack {
	p, ok := t.parts[tp]
	if !ok {
		p = &partTrack{}
		t.parts[tp] = p
	}
	return p
}

// setBase sets where tp starts, if it is not known yet: done spans below
// it are dropped and the ones from it on advance the base. A known base
// is kept (it only moves through done offsets); setBase reports whether it
// set it.
func (t *tracker) setBase(tp riffle.TopicPartition, base int64) bool {
	p := t.part(tp)
	if p.known {
		return false
	}
	p.known, p.base = true, base
	kept := p.done[:0]
	for _, s := range p.done {
		if s.hi <= base {
			continue
		}
		s.lo = max(s.lo, base)
		kept = append(kept, s)
	}
	clear(p.done[len(kept):])
	p.done = kept
	p.advance()
	p.settle(math.MinInt64, p.base)
	return true
}

// markDone records r (valid: 0 <= Low <= High) as done.
func (t *tracker) markDone(r Range) {
	if r.Low == r.High {
		return
	}
	p := t.part(riffle.TopicPartition{Topic: r.Topic, Partition: r.Partition})
	lo, hi := r.Low, r.High
	if p.known {
		if hi <= p.base {
			return // committable already
		}
		lo = max(lo, p.base)
	}
	// The first span that ends at or after lo touches or follows [lo, hi).
	i := sort.Search(len(p.done), func(i int) bool { return p.done[i].hi >= lo })
	j := i
	for j < len(p.done) && p.done[j].lo <= hi {
		lo, hi = min(lo, p.done[j].lo), max(hi, p.done[j].hi)
		j++
	}
	switch {
	case i == j: // no overlap: insert
		p.done = append(p.done, span{})
		copy(p.done[i+1:], p.done[i:])
		p.done[i] = span{lo, hi}
	default: // spans i..j-1 merge into one
		p.done[i] = span{lo, hi}
		n := copy(p.done[i+1:], p.done[j:])
		clear(p.done[i+1+n:])
		p.done = p.done[:i+1+n]
	}
	// [lo, hi) is now a whole done span, or the base passed it: the
	// planned ranges that became done lie within it (or below the base).
	if p.advance() {
		p.settle(math.MinInt64, p.base)
	} else {
		p.settle(lo, hi)
	}
}

// advance moves the base past a done span that starts at it, and reports
// whether it did.
func (p *partTrack) advance() bool {
	if p.known && len(p.done) > 0 && p.done[0].lo <= p.base {
		p.base = max(p.base, p.done[0].hi)
		p.done[0] = span{}
		p.done = p.done[1:]
		return true
	}
	return false
}

// plan records r (valid: 0 <= Low <= High) as planned: outstanding until
// every offset of it is done. A range already done is not outstanding.
func (t *tracker) plan(r Range) {
	if r.Low == r.High {
		return
	}
	p := t.part(riffle.TopicPartition{Topic: r.Topic, Partition: r.Partition})
	if p.isDone(r.Low, r.High) {
		return
	}
	i := sort.Search(len(p.pending), func(i int) bool { return p.pending[i].lo > r.Low })
	p.pending = append(p.pending, span{})
	copy(p.pending[i+1:], p.pending[i:])
	p.pending[i] = span{r.Low, r.High}
}

// isDone reports whether every offset of [lo, hi) is done: below the
// base, or in one done span (spans are maximal, so one holds it all).
func (p *partTrack) isDone(lo, hi int64) bool {
	if p.known {
		if hi <= p.base {
			return true
		}
		lo = max(lo, p.base)
	}
	i := sort.Search(len(p.done), func(i int) bool { return p.done[i].hi >= hi })
	return i < len(p.done) && p.done[i].lo <= lo
}

// settle drops the pending ranges that lie within [lo, hi), an interval
// that is all done.
func (p *partTrack) settle(lo, hi int64) {
	i := sort.Search(len(p.pending), func(i int) bool { return p.pending[i].lo >= lo })
	w, j := i, i
	for ; j < len(p.pending) && p.pending[j].lo < hi; j++ {
		if p.pending[j].hi > hi { // partly above: still outstanding
			p.pending[w] = p.pending[j]
			w++
		}
	}
	if w == j {
		return
	}
	n := copy(p.pending[w:], p.pending[j:])
	p.pending = p.pending[:w+n]
}

// undone returns the number of offsets of the pending ranges (their
// union, should they overlap) that are not done.
func (p *partTrack) undone() int64 {
	cur := int64(math.MinInt64) // offsets below cur are counted or done
	if p.known {
		cur = p.base
	}
	var total int64
	k := 0
	for _, r := range p.pending {
		lo, hi := max(r.lo, cur), r.hi
		if lo >= hi {
			continue
		}
		cur = hi
		n := hi - lo
		for k < len(p.done) && p.done[k].hi <= lo {
			k++
		}
		for j := k; j < len(p.done) && p.done[j].lo < hi; j++ {
			n -= min(hi, p.done[j].hi) - max(lo, p.done[j].lo)
		}
		total += n
	}
	return total
}

// outstanding returns how many planned ranges are not entirely done, and
// how many of their offsets are not done.
func (t *tracker) outstanding() (ranges int, offsets int64) {
	for _, p := range t.parts {
		ranges += len(p.pending)
		offsets += p.undone()
	}
	return ranges, offsets
}

// offsets returns the committable offset of every partition whose base is
// known.
func (t *tracker) offsets() map[riffle.TopicPartition]int64 {
	out := make(map[riffle.TopicPartition]int64, len(t.parts))
	for tp, p := range t.parts {
		if p.known {
			out[tp] = p.base
		}
	}
	return out
}

// unknown returns the partitions with done ranges whose base is not known.
func (t *tracker) unknown() []riffle.TopicPartition {
	var out []riffle.TopicPartition
	for tp, p := range t.parts {
		if !p.known {
			out = append(out, tp)
		}
	}
	sortTPs(out)
	return out
}

// observed is what one planning round learned about a partition.
type observed struct {
	tp riffle.TopicPartition
	// start is where the partition starts if the frontier does not know
	// it yet: the group's committed offset, else the start spec.
	start int64
	// logStart is the log start offset: offsets below it are gone.
	logStart int64
	// end is where planning stops: the high watermark, or the last stable
	// offset when reading committed.
	end int64
}

// step is the outcome of one planning round.
type step struct {
	// ranges are the new ranges, by topic, partition and offset.
	ranges []Range
	// bases are the partitions the frontier saw first, with their start.
	bases map[riffle.TopicPartition]int64
	// skips are offsets never planned because the log no longer has them
	// (the log start passed them): the checkpoint counts them as done.
	skips []Range
}

// frontier is the planner's "what is new" logic: per partition, the end of
// what it emitted. Every round emits from there to the partition's end,
// split into ranges of at most max offsets, so ranges never overlap and
// never leave a gap across rounds.
type frontier struct {
	next map[riffle.TopicPartition]int64
}

func newFrontier() frontier { return frontier{next: map[riffle.TopicPartition]int64{}} }

// plan runs one round over obs; maxRecords 0 means no limit.
func (f *frontier) plan(obs []observed, maxRecords int64) step {
	obs = append([]observed(nil), obs...)
	sort.Slice(obs, func(i, j int) bool { return tpLess(obs[i].tp, obs[j].tp) })
	var st step
	for _, o := range obs {
		next, ok := f.next[o.tp]
		if !ok {
			next = max(o.start, 0)
			if st.bases == nil {
				st.bases = map[riffle.TopicPartition]int64{}
			}
			st.bases[o.tp] = next
		}
		if o.logStart > next {
			st.skips = append(st.skips, Range{Topic: o.tp.Topic, Partition: o.tp.Partition, Low: next, High: o.logStart})
			next = o.logStart
		}
		for next < o.end {
			high := o.end
			if maxRecords > 0 && o.end-next > maxRecords {
				high = next + maxRecords
			}
			st.ranges = append(st.ranges, Range{Topic: o.tp.Topic, Partition: o.tp.Partition, Low: next, High: high})
			next = high
		}
		f.next[o.tp] = next
	}
	return st
}

func tpLess(a, b riffle.TopicPartition) bool {
	if a.Topic != b.Topic {
		return a.Topic < b.Topic
	}
	return a.Partition < b.Partition
}

func sortTPs(tps []riffle.TopicPartition) {
	sort.Slice(tps, func(i, j int) bool { return tpLess(tps[i], tps[j]) })
}
