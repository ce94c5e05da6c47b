package ranges

import (
	"reflect"
	"testing"

	"github.com/riffle-go/riffle"
)

var tp0 = riffle.TopicPartition{Topic: "t", Partition: 0}

func rg(lo, hi int64) Range { return Range{Topic: "t", Partition: 0, Low: lo, High: hi} }

func TestTrackerTable(t *testing.T) {
	for _, tc := range []struct {
		name  string
		base  int64 // -1: unknown at first
		done  []Range
		setAt int   // index of done before which setBase(lateBase) runs (-1: never)
		late  int64 // the late base
		want  int64 // -1: no offset
		spans int   // done spans left above the base
	}{
		{"in order", 0, []Range{rg(0, 10), rg(10, 20)}, -1, 0, 20, 0},
		{"reverse", 0, []Range{rg(10, 20), rg(0, 10)}, -1, 0, 20, 0},
		{"hole holds back", 0, []Range{rg(0, 10), rg(20, 30)}, -1, 0, 10, 1},
		{"hole filled", 0, []Range{rg(20, 30), rg(0, 10), rg(10, 20)}, -1, 0, 30, 0},
		{"first missing", 0, []Range{rg(10, 20), rg(20, 30)}, -1, 0, 0, 1},
		{"duplicate", 0, []Range{rg(0, 10), rg(0, 10), rg(5, 15)}, -1, 0, 15, 0},
		{"below base ignored", 100, []Range{rg(0, 10), rg(90, 100)}, -1, 0, 100, 0},
		{"straddles base", 100, []Range{rg(90, 110)}, -1, 0, 110, 0},
		{"empty range", 0, []Range{rg(5, 5)}, -1, 0, 0, 0},
		{"merge three", 0, []Range{rg(10, 20), rg(30, 40), rg(20, 30)}, -1, 0, 0, 1},
		{"unknown base: none", -1, []Range{rg(0, 10)}, -1, 0, -1, 1},
		{"late base at start", -1, []Range{rg(10, 20), rg(0, 10)}, 2, 0, 20, 0},
		{"late base inside", -1, []Range{rg(10, 20), rg(30, 40)}, 2, 15, 20, 1},
		{"late base above all", -1, []Range{rg(10, 20)}, 1, 50, 50, 0},
		{"late base on a hole", -1, []Range{rg(20, 30)}, 1, 10, 10, 1},
		{"known base kept", 5, []Range{rg(5, 10)}, 1, 0, 10, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := newTracker()
			if tc.base >= 0 {
				tr.setBase(tp0, tc.base)
			}
			for i, r := range tc.done {
				if i == tc.setAt {
					tr.setBase(tp0, tc.late)
				}
				tr.markDone(r)
			}
			if tc.setAt == len(tc.done) {
				tr.setBase(tp0, tc.late)
			}
			got, ok := tr.offsets()[tp0]
			if !ok {
				got = -1
			}
			if got != tc.want {
				t.Errorf("offset %d, want %d", got, tc.want)
			}
			if n := len(tr.parts[tp0].done); n != tc.spans {
				t.Errorf("%d spans left (%v), want %d", n, tr.parts[tp0].done, tc.spans)
			}
		})
	}
}

func TestTrackerUnknown(t *testing.T) {
	tr := newTracker()
	tr.markDone(Range{Topic: "b", Partition: 1, Low: 0, High: 1})
	tr.markDone(Range{Topic: "a", Partition: 2, Low: 0, High: 1})
	tr.setBase(riffle.TopicPartition{Topic: "c", Partition: 0}, 0)
	want := []riffle.TopicPartition{{Topic: "a", Partition: 2}, {Topic: "b", Partition: 1}}
	if got := tr.unknown(); !reflect.DeepEqual(got, want) {
		t.Fatalf("unknown %v, want %v", got, want)
	}
}

// FuzzTracker checks the tracker against a model: a set of done offsets
// and a list of planned ranges. The committable offset is the first
// offset from the base not done; a planned range is outstanding while one
// of its offsets is neither below the base nor done. Each pair of ops is
// a range (low, and its length modulo 32), marked done, or planned when
// the length byte's high bit is set.
func FuzzTracker(f *testing.F) {
	f.Add([]byte{0, 5, 5, 5, 0, 5}, uint8(0), uint8(255))
	f.Add([]byte{10, 3, 0, 10, 13, 2}, uint8(4), uint8(1))
	f.Add([]byte{1, 1, 3, 1, 2, 1, 0, 1}, uint8(2), uint8(2))
	f.Add([]byte{0, 0x85, 5, 0x85, 5, 5, 0, 5}, uint8(0), uint8(255))
	f.Add([]byte{10, 0x8a, 20, 0x8a, 15, 0x8a, 20, 10, 12, 3}, uint8(14), uint8(3))
	f.Fuzz(func(t *testing.T, ops []byte, base uint8, lateAt uint8) {
		// The model is checked after every op, at a cost that grows with
		// the ops before it: 128 ops cover the offsets [0, 287) plenty.
		if len(ops) > 256 {
			ops = ops[:256]
		}
		tr := newTracker()
		done := make([]bool, 512) // offsets up to 255+31
		var planned []Range
		known := false
		var b int64
		setBase := func() {
			if !known {
				known, b = true, int64(base)
			}
			tr.setBase(tp0, int64(base))
		}
		if lateAt == 255 {
			setBase()
		}
		for i := 0; i+1 < len(ops); i += 2 {
			if i/2 == int(lateAt) {
				setBase()
			}
			lo := int64(ops[i])
			hi := lo + int64(ops[i+1]%32)
			if ops[i+1]&0x80 != 0 {
				tr.plan(rg(lo, hi))
				planned = append(planned, rg(lo, hi))
			} else {
				tr.markDone(rg(lo, hi))
				for o := lo; o < hi; o++ {
					done[o] = true
				}
			}
			check(t, tr, known, b, done)
			checkOutstanding(t, tr, known, b, done, planned)
		}
		setBase()
		check(t, tr, known, b, done)
		checkOutstanding(t, tr, known, b, done, planned)
	})
}

func check(t *testing.T, tr tracker, known bool, base int64, done []bool) {
	t.Helper()
	got, ok := tr.offsets()[tp0]
	if ok != known {
		t.Fatalf("offset known %v, want %v", ok, known)
	}
	if !known {
		return
	}
	want := base
	for done[want] {
		want++
	}
	if got != want {
		t.Fatalf("offset %d, model %d (done %v)", got, want, tr.parts[tp0].done)
	}
	// The spans above the base are sorted, disjoint, not touching, above
	// the base, and exactly the done offsets there.
	p := tr.parts[tp0]
	prev := got
	for _, s := range p.done {
		if s.lo <= prev || s.hi <= s.lo {
			t.Fatalf("bad spans %v above %d", p.done, got)
		}
		for o := prev; o < s.lo; o++ {
			if done[o] {
				t.Fatalf("offset %d done but not in spans %v", o, p.done)
			}
		}
		for o := s.lo; o < s.hi; o++ {
			if !done[o] {
				t.Fatalf("span %v covers %d, not done", s, o)
			}
		}
		prev = s.hi
	}
	for o := prev; o < 512; o++ {
		if done[o] {
			t.Fatalf("offset %d done but not in spans %v", o, p.done)
		}
	}
}

// checkOutstanding compares the tracker's outstanding ranges and offsets
// with the model's.
func checkOutstanding(t *testing.T, tr tracker, known bool, base int64, done []bool, planned []Range) {
	t.Helper()
	isDone := func(o int64) bool { return (known && o < base) || done[o] }
	wantRanges, wantOffsets := 0, int64(0)
	var undone [512]bool
	for _, r := range planned {
		out := false
		for o := r.Low; o < r.High; o++ {
			if !isDone(o) {
				out = true
				if !undone[o] {
					undone[o] = true
					wantOffsets++
				}
			}
		}
		if out {
			wantRanges++
		}
	}
	n, offsets := tr.outstanding()
	if n != wantRanges || offsets != wantOffsets {
		t.Fatalf("outstanding %d ranges, %d offsets; model %d, %d (pending %v, done %v)", n, offsets, wantRanges, wantOffsets, tr.parts[tp0].pending, tr.parts[tp0].done)
	}
	if p := tr.parts[tp0]; p != nil {
		for i := 1; i < len(p.pending); i++ {
			if p.pending[i].lo < p.pending[i-1].lo {
				t.Fatalf("pending not sorted: %v", p.pending)
			}
		}
	}
}

func TestTrackerOutstanding(t *testing.T) {
	type op struct {
		kind   byte // 'p' plan, 'd' mark done, 'b' set the base (lo)
		lo, hi int64
	}
	p := func(lo, hi int64) op { return op{'p', lo, hi} }
	d := func(lo, hi int64) op { return op{'d', lo, hi} }
	b := func(at int64) op { return op{'b', at, 0} }
	for _, tc := range []struct {
		name    string
		ops     []op
		ranges  int
		offsets int64
	}{
		{"nothing planned", []op{b(0), d(0, 10)}, 0, 0},
		{"planned, none done", []op{b(0), p(0, 10), p(10, 20)}, 2, 20},
		{"first done", []op{b(0), p(0, 10), p(10, 20), d(0, 10)}, 1, 10},
		{"done above a gap", []op{b(0), p(0, 10), p(10, 20), d(10, 20)}, 1, 10},
		{"all done, any order", []op{b(0), p(0, 10), p(10, 20), d(10, 20), d(0, 10)}, 0, 0},
		{"partly done by another range", []op{b(0), p(0, 10), d(5, 8)}, 1, 7},
		{"done in pieces", []op{b(0), p(0, 10), d(0, 4), d(6, 10)}, 1, 2},
		{"last piece", []op{b(0), p(0, 10), d(0, 4), d(6, 10), d(4, 6)}, 0, 0},
		{"a wider range done", []op{b(0), p(10, 20), p(20, 30), d(5, 40)}, 0, 0},
		{"done before planned", []op{b(0), d(0, 10), p(0, 10)}, 0, 0},
		{"done before planned, above a gap", []op{b(0), d(10, 20), p(10, 20)}, 0, 0},
		{"below the base", []op{b(100), p(50, 60)}, 0, 0},
		{"straddles the base", []op{b(100), p(90, 110)}, 1, 10},
		{"skipped offsets then a range", []op{b(0), d(0, 12), p(12, 20)}, 1, 8},
		{"base unknown", []op{p(10, 20), d(12, 14)}, 1, 8},
		{"late base inside", []op{p(10, 20), d(12, 14), b(13)}, 1, 6},
		{"late base above", []op{p(10, 20), p(30, 40), b(20)}, 1, 10},
		{"done before the base was known", []op{p(10, 20), d(10, 20), b(0)}, 0, 0},
		{"overlapping ranges count offsets once", []op{b(0), p(0, 10), p(5, 15)}, 2, 15},
		{"overlapping, one done", []op{b(0), p(0, 10), p(5, 15), d(0, 10)}, 1, 5},
		{"same range twice", []op{b(0), p(0, 10), p(0, 10), d(0, 3)}, 2, 7},
		{"empty range", []op{b(0), p(5, 5)}, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := newTracker()
			for _, o := range tc.ops {
				switch o.kind {
				case 'p':
					tr.plan(rg(o.lo, o.hi))
				case 'd':
					tr.markDone(rg(o.lo, o.hi))
				case 'b':
					tr.setBase(tp0, o.lo)
				}
			}
			n, offsets := tr.outstanding()
			if n != tc.ranges || offsets != tc.offsets {
				t.Errorf("outstanding %d ranges, %d offsets; want %d, %d", n, offsets, tc.ranges, tc.offsets)
			}
		})
	}
	// Partitions add up, and are apart.
	tr := newTracker()
	other := Range{Topic: "u", Partition: 3, Low: 0, High: 4}
	tr.setBase(tp0, 0)
	tr.plan(rg(0, 10))
	tr.plan(other)
	tr.markDone(Range{Topic: "u", Partition: 3, Low: 0, High: 10}) // base unknown: done, not committable
	tr.markDone(Range{Topic: "t", Partition: 1, Low: 0, High: 10})
	if n, offsets := tr.outstanding(); n != 1 || offsets != 10 {
		t.Fatalf("outstanding %d ranges, %d offsets; want 1, 10", n, offsets)
	}
}

func TestFrontierTable(t *testing.T) {
	o := func(p int32, start, logStart, end int64) observed {
		return observed{tp: riffle.TopicPartition{Topic: "t", Partition: p}, start: start, logStart: logStart, end: end}
	}
	r := func(p int32, lo, hi int64) Range { return Range{Topic: "t", Partition: p, Low: lo, High: hi} }
	f := newFrontier()
	steps := []struct {
		obs    []observed
		max    int64
		ranges []Range
		bases  map[riffle.TopicPartition]int64
		skips  []Range
	}{
		{[]observed{o(1, 0, 0, 5), o(0, 3, 0, 10)}, 4, []Range{r(0, 3, 7), r(0, 7, 10), r(1, 0, 4), r(1, 4, 5)},
			map[riffle.TopicPartition]int64{{Topic: "t", Partition: 0}: 3, {Topic: "t", Partition: 1}: 0}, nil},
		{[]observed{o(0, 99, 0, 10), o(1, 99, 0, 5)}, 4, nil, nil, nil}, // nothing new; start ignored once known
		{[]observed{o(0, 0, 0, 12), o(1, 0, 0, 5), o(2, 0, 0, 1)}, 4, []Range{r(0, 10, 12), r(2, 0, 1)},
			map[riffle.TopicPartition]int64{{Topic: "t", Partition: 2}: 0}, nil}, // a new partition
		{[]observed{o(0, 0, 20, 25), o(1, 0, 0, 5)}, 0, []Range{r(0, 20, 25)}, nil, []Range{r(0, 12, 20)}}, // retention passed 12
		{[]observed{o(3, 2, 5, 6)}, 0, []Range{r(3, 5, 6)}, map[riffle.TopicPartition]int64{{Topic: "t", Partition: 3}: 2}, []Range{r(3, 2, 5)}},
		{[]observed{o(0, 0, 0, 20)}, 0, nil, nil, nil}, // the end went back (truncation, LSO): nothing
	}
	for i, s := range steps {
		got := f.plan(s.obs, s.max)
		if !reflect.DeepEqual(got.ranges, s.ranges) || !reflect.DeepEqual(got.bases, s.bases) || !reflect.DeepEqual(got.skips, s.skips) {
			t.Fatalf("step %d: got %+v, want ranges %v bases %v skips %v", i, got, s.ranges, s.bases, s.skips)
		}
	}
}

// FuzzFrontier: over rounds whose ends grow (or stall, or step back), the
// ranges and skips of one partition tile [start, the highest end) exactly,
// in order, each range at most max offsets.
func FuzzFrontier(f *testing.F) {
	f.Add(uint8(3), uint8(0), []byte{1, 10, 0, 0, 255, 7})
	f.Add(uint8(0), uint8(5), []byte{0, 4, 9, 1})
	f.Fuzz(func(t *testing.T, max, start uint8, rounds []byte) {
		fr := newFrontier()
		next := int64(start)
		var logStart, end int64
		for i := 0; i+1 < len(rounds); i += 2 {
			end = int64(rounds[i]) * 4
			if rounds[i+1]%4 == 0 {
				logStart += int64(rounds[i+1] / 4)
			}
			st := fr.plan([]observed{{tp: tp0, start: int64(start), logStart: logStart, end: end}}, int64(max))
			if i == 0 && st.bases[tp0] != int64(start) {
				t.Fatalf("base %v, want %d", st.bases, start)
			}
			for _, s := range st.skips {
				if s.Low != next || s.High <= s.Low {
					t.Fatalf("skip %s after %d", s, next)
				}
				next = s.High
			}
			for _, r := range st.ranges {
				if r.Low != next || r.High <= r.Low || (max > 0 && r.Len() > int64(max)) {
					t.Fatalf("range %s after %d (max %d)", r, next, max)
				}
				next = r.High
			}
			if end > next {
				t.Fatalf("round %d stopped at %d below the end %d", i/2, next, end)
			}
		}
	})
}
