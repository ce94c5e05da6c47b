package track

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// FuzzTrackerNeverSkipsUnfinished runs random operations — deliveries with
// gaps, finishes in any order, invalid finishes and deliveries, advances,
// restarts through Metadata/Decode/Seed — against the map model, comparing
// every observable after every step (Committable equals the model's first
// unfinished offset, errors agree, Skip, InFlight, FinishedAbove, Oldest,
// the finished set, Metadata round trip, size ≤ bound, internal counters).
// With gating on (mode bit 1), deliveries and advances go through
// CanDeliver/CanAdvance and the metadata must stay within the limit (or the
// size it was seeded with, if larger).
func FuzzTrackerNeverSkipsUnfinished(f *testing.F) {
	f.Add(uint8(0), uint32(0), []byte{0, 0, 0, 1, 0, 2, 2, 1, 2, 0, 2, 0})
	f.Add(uint8(1), uint32(0b1011), []byte{0, 3, 0, 0, 1, 2, 4, 7, 5, 3, 2, 1, 7, 0, 0, 0, 2, 0})
	f.Add(uint8(2), uint32(0xf0f0), []byte{6, 1, 6, 2, 0, 1, 0, 3, 3, 1, 7, 4, 0, 0, 6, 255, 2, 0})
	f.Add(uint8(7), uint32(0xdeadbeef), []byte{0, 1, 1, 0, 0, 2, 0, 3, 2, 5, 3, 9, 5, 4, 7, 0, 2, 2})
	f.Fuzz(runOps)
}

// runOps is the body of FuzzTrackerNeverSkipsUnfinished, also run on
// random inputs by TestRandomOps.
func runOps(t *testing.T, mode uint8, seedBits uint32, ops []byte) {
	{
		if len(ops) > 600 {
			ops = ops[:600]
		}
		base := int64(1000)
		if mode&1 != 0 {
			base = math.MaxInt64 - 300 // exercise the top of the offset range
		}
		gate := mode&2 != 0
		limit := 9 + int(mode>>2)%48 // 9 is the shortest non-empty encoding

		var seeded []int64
		for i := range 32 {
			if seedBits>>i&1 != 0 {
				seeded = append(seeded, base+1+int64(i))
			}
		}
		var tr Tracker
		if err := tr.Seed(base, seeded); err != nil {
			t.Fatal(err)
		}
		m := newModel(base, seeded)
		ceiling := max(limit, tr.MetadataSize())

		for i := 0; i+1 < len(ops); i += 2 {
			op, arg := ops[i]%8, int64(ops[i+1])
			var errT, errM error
			what := ""
			switch op {
			case 0, 1: // deliver the next record, sometimes after a gap
				o := m.next + arg%4
				if o < m.next {
					continue
				}
				if m.skip(o) {
					o = m.next
					for m.skip(o) {
						o++
					}
				}
				can, busy := tr.CanDeliver(o, limit), tr.InFlight() > 0
				if gate && !can {
					continue
				}
				what = "Deliver"
				errT, errM = tr.Deliver(o), m.deliver(o)
				arg = o
				// The documented contract: CanDeliver says whether Deliver
				// keeps MetadataBound within the limit.
				if errT == nil && can && busy && tr.MetadataBound() > limit {
					t.Fatalf("op %d: CanDeliver(%d, %d) but the bound is now %d", i/2, o, limit, tr.MetadataBound())
				}
			case 2, 3: // finish an in-flight record, any of them
				var fl []int64
				for o, s := range m.st {
					if s == stFlight {
						fl = append(fl, o)
					}
				}
				if len(fl) == 0 {
					continue
				}
				slices.Sort(fl)
				o := fl[int(arg)%len(fl)]
				before := tr.MetadataBound()
				what = "Finish"
				errT, errM = tr.Finish(o), m.finish(o)
				arg = o
				if tr.MetadataBound() > before {
					t.Fatalf("op %d: Finish(%d) grew the bound %d → %d", i/2, o, before, tr.MetadataBound())
				}
			case 4: // finish anything near the window: mostly invalid
				o := m.committable() + arg%24 - 4
				what = "Finish"
				errT, errM = tr.Finish(o), m.finish(o)
				arg = o
			case 5: // advance
				n := m.next + arg%7 - 1
				can, busy, moves := tr.CanAdvance(n, limit), tr.InFlight() > 0, n > m.next
				if gate && !can {
					continue
				}
				what = "Advance"
				errT, errM = tr.Advance(n), m.advance(n)
				arg = n
				if errT == nil && can && busy && moves && tr.MetadataBound() > limit {
					t.Fatalf("op %d: CanAdvance(%d, %d) but the bound is now %d", i/2, n, limit, tr.MetadataBound())
				}
			case 6: // deliver anything: old, seeded, far away
				o := m.next + arg%6 - 3
				if arg == 255 {
					o = m.committable() + MaxSpan + 1
				}
				if gate && !tr.CanDeliver(o, limit) {
					continue
				}
				what = "Deliver"
				errT, errM = tr.Deliver(o), m.deliver(o)
				arg = o
			case 7: // crash and restart from the last commit
				if arg%3 != 0 {
					continue
				}
				c := tr.Committable()
				fin, err := Decode(c, tr.Metadata())
				if err != nil {
					t.Fatal(err)
				}
				tr = Tracker{}
				if err := tr.Seed(c, fin); err != nil {
					t.Fatal(err)
				}
				m = newModel(c, fin)
				what = "Restart"
				arg = c
			}
			if !sameErr(errT, errM) {
				t.Fatalf("op %d %s(%d): error %v, model %v", i/2, what, arg, errT, errM)
			}
			if err := compare(&tr, m); err != nil {
				t.Fatalf("op %d %s(%d): %v", i/2, what, arg, err)
			}
			if gate && tr.MetadataSize() > ceiling {
				t.Fatalf("op %d %s(%d): metadata %d bytes above %d with gating", i/2, what, arg, tr.MetadataSize(), ceiling)
			}
		}
		// Finishing everything reaches the end.
		for o, s := range m.st {
			if s == stFlight {
				tr.Finish(o)
				m.finish(o)
			}
		}
		if err := compare(&tr, m); err != nil {
			t.Fatalf("after finishing everything: %v", err)
		}
		if tr.Committable() != m.committable() || tr.InFlight() != 0 {
			t.Fatalf("end: committable %d, want %d", tr.Committable(), m.committable())
		}
	}
}

// TestRandomOps runs the fuzz body on deterministic random inputs, so plain
// go test covers gating (with small limits, Advance and gaps), seeds and
// restarts, not only the fuzz seed corpus.
func TestRandomOps(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	for range 1500 {
		ops := make([]byte, 2*(20+rng.IntN(150)))
		for i := range ops {
			ops[i] = byte(rng.UintN(256))
		}
		runOps(t, uint8(rng.UintN(256)), rng.Uint32(), ops)
		if t.Failed() {
			return
		}
	}
}

// TestExhaustiveOpsWithSeeds explores, for every seed subset of the five
// offsets above the committed one, every sequence of 4 operations among
// delivering with gaps of 0–2, finishing any in-flight record, and
// advancing by 1 or 3, comparing with the model after each.
func TestExhaustiveOpsWithSeeds(t *testing.T) {
	const c0 = 59 // the window crosses the 64-offset word boundary
	states := 0
	for mask := range 32 {
		var seeded []int64
		for i := range 5 {
			if mask>>i&1 != 0 {
				seeded = append(seeded, c0+1+int64(i))
			}
		}
		var walk func(tr Tracker, m *model, depth int)
		walk = func(tr Tracker, m *model, depth int) {
			states++
			if err := compare(&tr, m); err != nil {
				t.Fatalf("seed %v: %v", seeded, err)
			}
			if depth == 0 {
				return
			}
			type op struct {
				kind byte
				off  int64
			}
			var next []op
			for g := range int64(3) {
				next = append(next, op{'d', m.next + g})
			}
			for o, s := range m.st {
				if s == stFlight {
					next = append(next, op{'f', o})
				}
			}
			next = append(next, op{'a', m.next + 1}, op{'a', m.next + 3})
			for _, o := range next {
				nt, nm := tr.clone(), m.clone()
				var errT, errM error
				switch o.kind {
				case 'd':
					errT, errM = nt.Deliver(o.off), nm.deliver(o.off)
				case 'f':
					errT, errM = nt.Finish(o.off), nm.finish(o.off)
				case 'a':
					errT, errM = nt.Advance(o.off), nm.advance(o.off)
				}
				if !sameErr(errT, errM) {
					t.Fatalf("seed %v: %c(%d): %v, model %v", seeded, o.kind, o.off, errT, errM)
				}
				walk(nt, nm, depth-1)
			}
		}
		var tr Tracker
		tr.Seed(c0, seeded)
		walk(tr, newModel(c0, seeded), 4)
	}
	t.Logf("%d states", states)
}
