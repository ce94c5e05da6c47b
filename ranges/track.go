package ranges

import (
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
}

// tracker is the checkpoint tracker: ranges are marked done in any order,
// and a partition's committable offset advances only past offsets that
// are all done. It counts offsets, not ranges: a range marked done twice,
// or ranges that overlap (a task retried with other bounds), count once,
// and nothing is committed across a gap no range covered.
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
	p.advance()
}

// advance moves the base past a done span that starts at it.
func (p *partTrack) advance() {
	if p.known && len(p.done) > 0 && p.done[0].lo <= p.base {
		p.base = max(p.base, p.done[0].hi)
		p.done[0] = span{}
		p.done = p.done[1:]
	}
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
