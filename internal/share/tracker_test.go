package share

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// modelTracker is the Tracker as it was: a map scanned whole by Due,
// Next, Expire and Take. The fuzz test holds the Tracker to it.
type modelTracker struct {
	m       map[tpOff]*modelEntry
	nextID  uint64
	expired int64 // acquisitions whose lock ended while held
}

type tpOff struct {
	tp     TP
	offset int64
}

type modelEntry struct {
	id       uint64
	deadline time.Time
	state    State
}

func (m *modelTracker) acquire(tp TP, off int64, d time.Time) uint64 {
	if m.m == nil {
		m.m = map[tpOff]*modelEntry{}
	}
	if m.m[tpOff{tp, off}] != nil {
		m.expired++ // handed out again: its lock ended at the broker
	}
	m.nextID++
	m.m[tpOff{tp, off}] = &modelEntry{id: m.nextID, deadline: d}
	return m.nextID
}

func (m *modelTracker) get(k Key) *modelEntry {
	e := m.m[tpOff{k.TP, k.Offset}]
	if e == nil || e.id != k.ID {
		return nil
	}
	return e
}

func (m *modelTracker) count(s State) int {
	n := 0
	for _, e := range m.m {
		if e.state == s {
			n++
		}
	}
	return n
}

func keyIDs(ks []Key) []uint64 {
	var ids []uint64
	for _, k := range ks {
		ids = append(ids, k.ID)
	}
	slices.Sort(ids)
	return ids
}

// checkHeaps verifies every heap orders its deadlines and every entry
// knows its place.
func checkHeaps(t *testing.T, tr *Tracker) {
	t.Helper()
	held := 0
	for s, h := range tr.heaps {
		for i, he := range h {
			e := tr.slab[he.slot]
			if e.id == 0 || int(e.state) != s || int(e.at) != i || he.tick != tr.tick(e.deadline) {
				t.Fatalf("heap %d[%d]: %+v is %+v", s, i, he, e)
			}
			if i > 0 && h[(i-1)/2].tick > he.tick {
				t.Fatalf("heap %d out of order at %d", s, i)
			}
		}
		held += len(h)
	}
	indexed, empty := 0, 0
	for tp, ix := range tr.byTP {
		indexed += len(ix.m)
		if len(ix.m) == 0 {
			empty++
		}
		for off, slot := range ix.m {
			if e := tr.slab[slot]; e.tp != tp || e.offset != off || e.idx != ix {
				t.Fatalf("index %v/%d names slot %d: %+v", tp, off, slot, e)
			}
		}
	}
	if held != indexed || held+len(tr.free) != len(tr.slab) || empty != tr.empty || empty > 65 {
		t.Fatalf("held %d, indexed %d, free %d, slab %d, empty %d (counted %d)", held, indexed, len(tr.free), len(tr.slab), empty, tr.empty)
	}
	if tr.last != nil && tr.byTP[tr.lastTP] != tr.last {
		t.Fatal("stale last index")
	}
}

// FuzzTracker runs random operations on a Tracker and on the naive model
// and compares every answer.
func FuzzTracker(f *testing.F) {
	f.Add(uint64(1), uint16(200))
	f.Add(uint64(7), uint16(2000))
	f.Fuzz(func(t *testing.T, seed uint64, nops uint16) {
		rng := rand.New(rand.NewPCG(seed, seed>>7))
		base := time.Unix(1000, 0)
		at := func(ms int) time.Time { return base.Add(time.Duration(ms) * time.Millisecond) }
		var tr Tracker
		var m modelTracker
		var keys []Key
		now := 0
		tps := []TP{tp0, {ID: [16]byte{2}, Partition: 3}}
		for p := range 150 {
			tps = append(tps, TP{ID: [16]byte{3}, Partition: int32(p)})
		}
		pick := func() Key {
			if len(keys) == 0 || rng.IntN(10) == 0 {
				return Key{TP: tp0, Offset: int64(rng.IntN(20)), ID: uint64(rng.IntN(5))}
			}
			return keys[rng.IntN(len(keys))]
		}
		for range int(nops) % 3000 {
			switch op := rng.IntN(12); op {
			case 0, 1, 2:
				tp := tps[rng.IntN(2)]
				if rng.IntN(4) == 0 {
					tp = tps[rng.IntN(len(tps))]
				}
				off, d := int64(rng.IntN(20)), at(now+rng.IntN(100))
				k := tr.Acquire(tp, off, d)
				if id := m.acquire(tp, off, d); k.ID != id || k.TP != tp || k.Offset != off {
					t.Fatalf("acquire: %+v want id %d", k, id)
				}
				keys = append(keys, k)
			case 3:
				k := pick()
				e := m.get(k)
				want := e != nil && e.state == Queued && at(now).Before(e.deadline)
				if e != nil && e.state == Queued && !want {
					delete(m.m, tpOff{k.TP, k.Offset})
					m.expired++
				}
				if want {
					e.state = Running
				}
				if got := tr.Start(k, at(now)); got != want {
					t.Fatalf("start %+v: %v want %v", k, got, want)
				}
			case 4:
				k := pick()
				e := m.get(k)
				if e != nil {
					e.state = Held
				}
				if got := tr.Hold(k); got != (e != nil) {
					t.Fatalf("hold %+v: %v", k, got)
				}
			case 5:
				k := pick()
				e := m.get(k)
				want := e != nil && at(now).Before(e.deadline)
				if e != nil {
					delete(m.m, tpOff{k.TP, k.Offset})
					if !want {
						m.expired++
					}
				}
				if got := tr.Finish(k, at(now)); got != want {
					t.Fatalf("finish %+v: %v want %v", k, got, want)
				}
			case 6:
				k := pick()
				e := m.get(k)
				if got, want := tr.Alive(k, at(now)), e != nil && at(now).Before(e.deadline); got != want {
					t.Fatalf("alive %+v: %v want %v", k, got, want)
				}
			case 7:
				k, d := pick(), at(now+rng.IntN(150))
				if rng.IntN(2) == 0 {
					tr.Extend(k, d)
					if e := m.get(k); e != nil && d.After(e.deadline) {
						e.deadline = d
					}
				} else {
					tr.ExtendOffset(k.TP, k.Offset, d)
					if e := m.m[tpOff{k.TP, k.Offset}]; e != nil && d.After(e.deadline) {
						e.deadline = d
					}
				}
			case 8:
				s, margin := State(rng.IntN(3)), time.Duration(rng.IntN(60))*time.Millisecond
				var want []uint64
				for _, e := range m.m {
					if e.state == s && at(now).Before(e.deadline) && e.deadline.Before(at(now).Add(margin)) {
						want = append(want, e.id)
					}
				}
				slices.Sort(want)
				got := tr.Due(s, at(now), margin)
				if !slices.Equal(keyIDs(got), want) {
					t.Fatalf("due: %v want %v", keyIDs(got), want)
				}
				for _, k := range got {
					if tr.get(k) < 0 {
						t.Fatalf("due returned a key that does not name its acquisition: %+v", k)
					}
				}
			case 9:
				s := State(rng.IntN(3))
				var want time.Time
				ok := false
				for _, e := range m.m {
					if e.state == s && (!ok || e.deadline.Before(want)) {
						want, ok = e.deadline, true
					}
				}
				if got, gok := tr.Next(s); gok != ok || !got.Equal(want) {
					t.Fatalf("next(%d): %v,%v want %v,%v", s, got, gok, want, ok)
				}
			case 10:
				want := 0
				for k, e := range m.m {
					if !at(now).Before(e.deadline) {
						delete(m.m, k)
						want++
					}
				}
				m.expired += int64(want)
				if got := tr.Expire(at(now)); got != want {
					t.Fatalf("expire: %d want %d", got, want)
				}
			case 11:
				if rng.IntN(8) == 0 {
					states := []State{State(rng.IntN(3)), State(rng.IntN(3))}
					var want []uint64
					for k, e := range m.m {
						if slices.Contains(states, e.state) {
							if at(now).Before(e.deadline) {
								want = append(want, e.id)
							} else {
								m.expired++
							}
							delete(m.m, k)
						}
					}
					slices.Sort(want)
					if got := keyIDs(tr.Take(at(now), states...)); !slices.Equal(got, want) {
						t.Fatalf("take: %v want %v", got, want)
					}
				} else {
					now += rng.IntN(20)
				}
			}
			for s := Queued; s <= Held; s++ {
				if tr.Count(s) != m.count(s) {
					t.Fatalf("count(%d) %d want %d", s, tr.Count(s), m.count(s))
				}
			}
			if tr.Len() != len(m.m) {
				t.Fatalf("len %d want %d", tr.Len(), len(m.m))
			}
			if tr.Expired() != m.expired {
				t.Fatalf("expired %d want %d", tr.Expired(), m.expired)
			}
			checkHeaps(t, &tr)
		}
	})
}

// refNormalize is the original quadratic normalisation, the reference
// for the sweep.
func refNormalize(rs []Range) []Range {
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

// TestNormalizeMatchesReference: random sets of ranges, disjoint or
// overlapping, wide or single, near the top of the offset space.
func TestNormalizeMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for iter := range 20000 {
		n := 1 + rng.IntN(30)
		span := int64(1 + rng.IntN(60))
		var base int64
		if iter%10 == 0 {
			base = 1<<63 - 1 - span - 10
		}
		var rs []Range
		for range n {
			f := base + rng.Int64N(span)
			l := f
			if rng.IntN(3) == 0 {
				l += rng.Int64N(8)
			}
			if base > 0 && rng.IntN(5) == 0 {
				l = 1<<63 - 1
			}
			rs = append(rs, Range{f, l, int8(rng.IntN(5))})
		}
		got, want := normalize(slices.Clone(rs)), refNormalize(rs)
		if !slices.Equal(got, want) {
			t.Fatalf("normalize(%v)\n got %v\nwant %v", rs, got, want)
		}
	}
}

func TestAcksPartitionsAndRenews(t *testing.T) {
	tp1 := TP{ID: [16]byte{1}, Partition: 1}
	tp2 := TP{ID: [16]byte{0, 9}, Partition: 0}
	var a Acks
	a.Add(tp1, 5, Accept)
	a.Add(tp0, 3, Accept)
	a.Add(tp1, 4, Accept)
	if a.HasRenew() {
		t.Fatal("renew without one")
	}
	a.Add(tp2, 7, Renew)
	a.Add(tp0, 2, Accept)
	if !a.HasRenew() || a.Len() != 5 {
		t.Fatalf("renew %v len %d", a.HasRenew(), a.Len())
	}
	got := a.Drain()
	want := []PartAcks{
		{tp2, []Range{{7, 7, Renew}}},
		{tp0, []Range{{2, 3, Accept}}},
		{tp1, []Range{{4, 5, Accept}}},
	}
	if len(got) != len(want) {
		t.Fatalf("got %v", got)
	}
	for i := range want {
		if got[i].TP != want[i].TP || !slices.Equal(got[i].Batches, want[i].Batches) {
			t.Fatalf("got %v want %v", got, want)
		}
	}
	if a.HasRenew() || a.Len() != 0 {
		t.Fatal("not reset")
	}
}

// The loop's per-iteration calls cost what changed, not what is held:
// with 10,000 records held and nothing due, Due, Next and Expire
// allocate nothing and finish in well under what a scan would take.
func TestTrackerLoopCallsIgnoreHeld(t *testing.T) {
	var tr Tracker
	now := time.Unix(1000, 0)
	for i := range 10000 {
		k := tr.Acquire(tp0, int64(i), now.Add(time.Minute+time.Duration(i)*time.Millisecond))
		tr.Start(k, now)
	}
	allocs := testing.AllocsPerRun(100, func() {
		tr.Expire(now)
		if len(tr.Due(Running, now, time.Second)) != 0 {
			t.Fatal("due")
		}
		tr.Next(Running)
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per loop iteration", allocs)
	}
}

// BenchmarkTrackerCycle: the per-record path (acquire, start, finish)
// plus the loop's calls, with 1,000 records held.
func BenchmarkTrackerCycle(b *testing.B) {
	var tr Tracker
	now := time.Unix(1000, 0)
	var ks []Key
	for i := range 1000 {
		ks = append(ks, tr.Acquire(tp0, int64(i), now.Add(time.Minute)))
		tr.Start(ks[i], now)
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		j := i % 1000
		tr.Finish(ks[j], now)
		ks[j] = tr.Acquire(tp0, int64(1000+i), now.Add(time.Minute))
		tr.Start(ks[j], now)
		tr.Expire(now)
		tr.Due(Running, now, time.Second)
		tr.Next(Running)
	}
}

// BenchmarkAcksDrain: 1,000 single-offset acknowledgements in random
// order, batched.
func BenchmarkAcksDrain(b *testing.B) {
	offs := rand.New(rand.NewPCG(3, 4)).Perm(1000)
	b.ReportAllocs()
	for b.Loop() {
		var a Acks
		for _, o := range offs {
			a.Add(tp0, int64(o), Accept)
		}
		if pa := a.Drain(); len(pa[0].Batches) != 1 {
			b.Fatal(pa)
		}
	}
}

func BenchmarkNormalizeRef(b *testing.B) {
	offs := rand.New(rand.NewPCG(3, 4)).Perm(1000)
	var rs []Range
	for _, o := range offs {
		rs = append(rs, Range{int64(o), int64(o), Accept})
	}
	for b.Loop() {
		refNormalize(rs)
	}
}

func BenchmarkNormalize(b *testing.B) {
	offs := rand.New(rand.NewPCG(3, 4)).Perm(1000)
	var rs []Range
	for _, o := range offs {
		rs = append(rs, Range{int64(o), int64(o), Accept})
	}
	for b.Loop() {
		normalize(rs)
	}
}

// TestAcksRounds: Acks keeps its buffers across Drains; rounds of random
// acknowledgements over changing partitions drain like fresh ones.
func TestAcksRounds(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	tps := []TP{tp0, {ID: [16]byte{1}, Partition: 1}, {ID: [16]byte{3}}, {ID: [16]byte{0, 1}, Partition: 2}}
	var a Acks
	for range 2000 {
		var fresh Acks
		for range rng.IntN(40) {
			tp := tps[rng.IntN(1+rng.IntN(len(tps)))]
			f := int64(rng.IntN(50))
			l, typ := f+int64(rng.IntN(3)), int8(rng.IntN(5))
			a.AddRange(tp, f, l, typ)
			fresh.AddRange(tp, f, l, typ)
		}
		if a.Len() != fresh.Len() || a.HasRenew() != fresh.HasRenew() {
			t.Fatalf("len %d/%d renew %v/%v", a.Len(), fresh.Len(), a.HasRenew(), fresh.HasRenew())
		}
		got, want := a.Drain(), fresh.Drain()
		if len(got) != len(want) {
			t.Fatalf("got %v want %v", got, want)
		}
		for i := range want {
			if got[i].TP != want[i].TP || !slices.Equal(got[i].Batches, want[i].Batches) {
				t.Fatalf("got %v want %v", got, want)
			}
		}
	}
}

// BenchmarkTrackerChurn: 1,000 records running with spread deadlines,
// finished in random order and replaced by later ones (long handlers).
func BenchmarkTrackerChurn(b *testing.B) {
	var tr Tracker
	base := time.Now()
	rng := rand.New(rand.NewPCG(1, 1))
	ks := make([]Key, 1000)
	off := int64(0)
	for i := range ks {
		ks[i] = tr.Acquire(tp0, off, base.Add(time.Minute+time.Duration(off)*time.Microsecond))
		tr.Start(ks[i], base)
		off++
	}
	b.ReportAllocs()
	for b.Loop() {
		j := rng.IntN(len(ks))
		tr.Finish(ks[j], base)
		ks[j] = tr.Acquire(tp0, off, base.Add(time.Minute+time.Duration(off)*time.Microsecond))
		tr.Start(ks[j], base)
		off++
	}
}

// TestTrackerExpired: Expired counts locks that ended while held, once
// each, and never an acknowledgement of a record already acknowledged
// (a handler's Acknowledge followed by the one its return makes).
func TestTrackerExpired(t *testing.T) {
	var tr Tracker
	now := time.Unix(1000, 0)
	lock := now.Add(time.Second)
	a := tr.Acquire(tp0, 1, lock)
	if !tr.Start(a, now) || !tr.Finish(a, now) {
		t.Fatal("a live record was not started and finished")
	}
	if tr.Finish(a, now) || tr.Finish(a, now.Add(time.Hour)) {
		t.Fatal("a finished record finished again")
	}
	if n := tr.Expired(); n != 0 {
		t.Fatalf("acknowledging an acknowledged record counted %d expiries", n)
	}
	b := tr.Acquire(tp0, 2, lock)
	tr.Start(b, now)
	if tr.Finish(b, lock) {
		t.Fatal("an expired record finished")
	}
	if tr.Finish(b, lock) {
		t.Fatal("an expired record finished twice")
	}
	c := tr.Acquire(tp0, 3, lock)
	if tr.Expire(lock) != 1 || tr.Start(c, lock) {
		t.Fatal("an expired queued record was not dropped")
	}
	d := tr.Acquire(tp0, 4, lock)
	if tr.Start(d, lock) {
		t.Fatal("an expired record started")
	}
	tr.Acquire(tp0, 5, lock)
	tr.Acquire(tp0, 5, lock.Add(time.Second)) // redelivered while held
	if n := tr.Expired(); n != 4 {
		t.Fatalf("Expired %d, want 4 (b, c, d, the first 5)", n)
	}
}
