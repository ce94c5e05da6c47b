package track

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// step is one operation of a table test and the state expected after it.
type step struct {
	op       byte // 'd' Deliver, 'f' Finish, 'a' Advance
	off      int64
	err      error
	commit   int64
	inFlight int
	finAbove int
}

func apply(tr *Tracker, op byte, off int64) error {
	switch op {
	case 'd':
		return tr.Deliver(off)
	case 'f':
		return tr.Finish(off)
	case 'a':
		return tr.Advance(off)
	}
	panic("bad op")
}

func TestTrackerTable(t *testing.T) {
	tests := []struct {
		name   string
		seed   int64
		seeded []int64
		steps  []step
	}{
		{"in order", 0, nil, []step{
			{'d', 0, nil, 0, 1, 0},
			{'d', 1, nil, 0, 2, 0},
			{'d', 2, nil, 0, 3, 0},
			{'f', 0, nil, 1, 2, 0},
			{'f', 1, nil, 2, 1, 0},
			{'f', 2, nil, 3, 0, 0},
		}},
		{"reverse order", 0, nil, []step{
			{'d', 0, nil, 0, 1, 0},
			{'d', 1, nil, 0, 2, 0},
			{'d', 2, nil, 0, 3, 0},
			{'f', 2, nil, 0, 2, 1},
			{'f', 1, nil, 0, 1, 2},
			{'f', 0, nil, 3, 0, 0},
		}},
		{"first delivery above the seed: the gap below is finished", 10, nil, []step{
			{'d', 14, nil, 14, 1, 0},
			{'f', 14, nil, 15, 0, 0},
		}},
		{"gaps between deliveries count as finished", 0, nil, []step{
			{'d', 5, nil, 5, 1, 0},
			{'d', 8, nil, 5, 2, 0}, // 6, 7 compacted away
			{'d', 9, nil, 5, 3, 0},
			{'f', 8, nil, 5, 2, 1},
			{'f', 5, nil, 9, 1, 0}, // past the gap and 8
			{'f', 9, nil, 10, 0, 0},
		}},
		{"a finished record between gaps", 0, nil, []step{
			{'d', 0, nil, 0, 1, 0},
			{'d', 3, nil, 0, 2, 0},
			{'d', 6, nil, 0, 3, 0},
			{'f', 3, nil, 0, 2, 1},
			{'f', 0, nil, 6, 1, 0},
		}},
		{"advance past a trailing gap", 0, nil, []step{
			{'d', 3, nil, 3, 1, 0},
			{'f', 3, nil, 4, 0, 0},
			{'a', 10, nil, 10, 0, 0}, // batch ended at 9, 4..9 compacted
			{'d', 12, nil, 12, 1, 0},
			{'a', 15, nil, 12, 1, 0}, // 13, 14 gaps, 12 still in flight
			{'a', 13, nil, 12, 1, 0}, // backwards: no-op
			{'f', 12, nil, 15, 0, 0},
		}},
		{"advance inside the in-flight window", 0, nil, []step{
			{'d', 0, nil, 0, 1, 0},
			{'d', 1, nil, 0, 2, 0},
			{'a', 5, nil, 0, 2, 0},
			{'f', 1, nil, 0, 1, 1},
			{'f', 0, nil, 5, 0, 0},
			{'d', 5, nil, 5, 1, 0},
		}},
		{"errors change nothing", 0, nil, []step{
			{'f', 0, ErrNotInFlight, 0, 0, 0}, // never delivered
			{'d', -1, ErrOrder, 0, 0, 0},
			{'d', 3, nil, 3, 1, 0},
			{'d', 3, ErrOrder, 3, 1, 0}, // not strictly increasing
			{'d', 2, ErrOrder, 3, 1, 0},
			{'d', 6, nil, 3, 2, 0},
			{'f', 4, ErrNotInFlight, 3, 2, 0}, // a gap
			{'f', 7, ErrNotInFlight, 3, 2, 0}, // not delivered yet
			{'f', 6, nil, 3, 1, 1},
			{'f', 6, ErrNotInFlight, 3, 1, 1}, // twice
			{'f', 2, ErrNotInFlight, 3, 1, 1}, // below the window
			{'d', math.MaxInt64, ErrOrder, 3, 1, 1},
			{'f', 3, nil, 7, 0, 0},
			{'f', 3, ErrNotInFlight, 7, 0, 0}, // committed already
		}},
		{"window limit while in flight", 0, nil, []step{
			{'d', 0, nil, 0, 1, 0},
			{'d', MaxSpan + 1, ErrWindowFull, 0, 1, 0},
			{'a', MaxSpan + 2, ErrWindowFull, 0, 1, 0},
			{'a', MaxSpan + 1, nil, 0, 1, 0},
			{'d', MaxSpan + 1, ErrWindowFull, 0, 1, 0},
			{'f', 0, nil, MaxSpan + 1, 0, 0},
			{'d', MaxSpan + 1, nil, MaxSpan + 1, 1, 0},
		}},
		{"top of the offset range", math.MaxInt64 - 70, nil, []step{
			{'d', math.MaxInt64 - 70, nil, math.MaxInt64 - 70, 1, 0},
			{'d', math.MaxInt64 - 3, nil, math.MaxInt64 - 70, 2, 0},
			{'a', math.MaxInt64 - 1, nil, math.MaxInt64 - 70, 2, 0},
			{'f', math.MaxInt64 - 3, nil, math.MaxInt64 - 70, 1, 1},
			{'a', math.MaxInt64, nil, math.MaxInt64 - 70, 1, 1},
			{'d', math.MaxInt64, ErrOrder, math.MaxInt64 - 70, 1, 1},
			{'f', math.MaxInt64 - 70, nil, math.MaxInt64, 0, 0},
		}},
		{"seeded: advance up to the seed lets Committable pass it", 10, []int64{12, 13, 15}, []step{
			{'a', 12, nil, 14, 0, 1}, // 10, 11 gaps; 12, 13 seeded; 15 above
			{'d', 14, nil, 14, 1, 1},
			{'d', 15, ErrSkipped, 14, 1, 1},
			{'f', 14, nil, 16, 0, 0},
		}},
		{"seeded: deliver around seeded offsets", 10, []int64{11, 13}, []step{
			{'d', 10, nil, 10, 1, 2},
			{'d', 11, ErrSkipped, 10, 1, 2},
			{'d', 12, nil, 10, 2, 2},
			{'f', 12, nil, 10, 1, 3},
			{'f', 10, nil, 14, 0, 0},
			{'d', 13, ErrSkipped, 14, 0, 0},
			{'d', 14, nil, 14, 1, 0},
		}},
		{"seeded up to the top of the offset range", math.MaxInt64 - 5, seq(math.MaxInt64-4, math.MaxInt64-1), []step{
			{'d', math.MaxInt64 - 5, nil, math.MaxInt64 - 5, 1, 4},
			{'f', math.MaxInt64 - 5, nil, math.MaxInt64, 0, 0},
			{'a', math.MaxInt64 - 2, nil, math.MaxInt64, 0, 0}, // Next behind Committable
			{'d', math.MaxInt64 - 1, ErrSkipped, math.MaxInt64, 0, 0},
			{'a', math.MaxInt64, nil, math.MaxInt64, 0, 0},
		}},
		{"idle jumps cost no memory", 0, nil, []step{
			{'d', 0, nil, 0, 1, 0},
			{'f', 0, nil, 1, 0, 0},
			{'d', 1 << 40, nil, 1 << 40, 1, 0},
			{'f', 1 << 40, nil, 1<<40 + 1, 0, 0},
			{'a', 1 << 50, nil, 1 << 50, 0, 0},
			{'d', math.MaxInt64 - 1, nil, math.MaxInt64 - 1, 1, 0},
			{'f', math.MaxInt64 - 1, nil, math.MaxInt64, 0, 0},
			{'a', math.MaxInt64, nil, math.MaxInt64, 0, 0},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var tr Tracker
			if err := tr.Seed(tt.seed, tt.seeded); err != nil {
				t.Fatal(err)
			}
			for i, s := range tt.steps {
				err := apply(&tr, s.op, s.off)
				if !sameErr(err, s.err) {
					t.Fatalf("step %d %c(%d): err %v, want %v", i, s.op, s.off, err, s.err)
				}
				if tr.Committable() != s.commit || tr.InFlight() != s.inFlight || tr.FinishedAbove() != s.finAbove {
					t.Fatalf("step %d %c(%d): committable %d in flight %d finished above %d, want %d %d %d",
						i, s.op, s.off, tr.Committable(), tr.InFlight(), tr.FinishedAbove(), s.commit, s.inFlight, s.finAbove)
				}
				if o, ok := tr.Oldest(); ok != (s.inFlight > 0) || (ok && o != s.commit) {
					t.Fatalf("step %d: Oldest = %d, %v", i, o, ok)
				}
				if err := tr.check(); err != nil {
					t.Fatalf("step %d: %v", i, err)
				}
				if _, err := tr.checkMetadata(); err != nil {
					t.Fatalf("step %d: %v", i, err)
				}
				if len(tr.ring) > 4*minWords && tr.Window() < 64 {
					t.Fatalf("step %d: %d ring words for a window of %d", i, len(tr.ring), tr.Window())
				}
			}
		})
	}
}

func TestTrackerZeroValue(t *testing.T) {
	var tr Tracker
	if tr.Committable() != 0 || tr.InFlight() != 0 || tr.Metadata() != "" || tr.MetadataSize() != 0 {
		t.Fatal("zero Tracker is not empty")
	}
	if _, ok := tr.Oldest(); ok {
		t.Fatal("zero Tracker has an oldest record")
	}
	if err := tr.Finish(0); !errors.Is(err, ErrNotInFlight) {
		t.Fatalf("Finish on zero Tracker: %v", err)
	}
	if err := tr.Deliver(7); err != nil || tr.Committable() != 7 {
		t.Fatalf("Deliver(7): %v, committable %d", err, tr.Committable())
	}
}

// TestTrackerMemoryFollowsWindow: a window that grew large gives its memory
// back once Committable catches up.
func TestTrackerMemoryFollowsWindow(t *testing.T) {
	var tr Tracker
	const n = 200_000
	for o := int64(0); o < n; o++ {
		if err := tr.Deliver(o); err != nil {
			t.Fatal(err)
		}
	}
	for o := int64(1); o < n; o++ {
		tr.Finish(o)
	}
	big := len(tr.ring)
	if big < n/64 {
		t.Fatalf("ring %d words for %d offsets", big, n)
	}
	tr.Finish(0)
	if tr.Committable() != n || len(tr.ring) > minWords {
		t.Fatalf("committable %d, ring %d words after draining (was %d)", tr.Committable(), len(tr.ring), big)
	}
	// A steady sliding window of 100 keeps a small ring.
	for o := int64(n); o < 3*n; o++ {
		tr.Deliver(o)
		if o-100 >= n {
			tr.Finish(o - 100)
		}
	}
	if len(tr.ring) > 8 {
		t.Fatalf("sliding window of 100 uses %d words", len(tr.ring))
	}
	if err := tr.check(); err != nil {
		t.Fatal(err)
	}
}

// layout returns n record offsets starting at start; bit i of gaps puts a
// gap of 2 before record i, and bit n a trailing gap (advance) of 3.
func layout(start int64, n int, gaps uint) (offs []int64, end int64) {
	o := start
	for i := range n {
		if gaps>>i&1 != 0 {
			o += 2
		}
		offs = append(offs, o)
		o++
	}
	if gaps>>n&1 != 0 {
		o += 3
	}
	return offs, o
}

// permute calls fn with every permutation of p (Heap's algorithm).
func permute(p []int, fn func([]int)) {
	var gen func(k int)
	gen = func(k int) {
		if k == 1 {
			fn(p)
			return
		}
		gen(k - 1)
		for i := 0; i < k-1; i++ {
			if k%2 == 0 {
				p[i], p[k-1] = p[k-1], p[i]
			} else {
				p[0], p[k-1] = p[k-1], p[0]
			}
			gen(k - 1)
		}
	}
	gen(len(p))
}

// TestExhaustiveFinishOrders delivers up to 7 records (with every gap
// layout up to 5 records, a few beyond) and finishes them in every order:
// Committable never passes an unfinished record, matches the model at every
// step, reaches the end when all finish, and the metadata stays below the
// bound taken when the last record was delivered.
func TestExhaustiveFinishOrders(t *testing.T) {
	runs := 0
	for n := 1; n <= 7; n++ {
		var layouts []uint
		if n <= 5 {
			for g := uint(0); g < 1<<(n+1); g++ {
				layouts = append(layouts, g)
			}
		} else {
			all := uint(1)<<(n+1) - 1
			layouts = []uint{0, all, 0b0101010, 0b1010101 & all, 1 << n}
		}
		for _, g := range layouts {
			offs, end := layout(61, n, g) // start near a word boundary
			perm := make([]int, n)
			for i := range perm {
				perm[i] = i
			}
			permute(perm, func(p []int) {
				runs++
				var tr Tracker
				tr.Seed(61, nil)
				m := newModel(61, nil)
				for _, o := range offs {
					tr.Deliver(o)
					m.deliver(o)
				}
				tr.Advance(end)
				m.advance(end)
				bound := tr.MetadataBound()
				for i, idx := range p {
					o := offs[idx]
					if err := tr.Finish(o); err != nil {
						t.Fatalf("n=%d gaps=%b order=%v: Finish(%d): %v", n, g, p, o, err)
					}
					m.finish(o)
					// Full comparison is costly; do it for n ≤ 5 and at the last steps.
					if n <= 5 || i >= n-2 {
						if err := compare(&tr, m); err != nil {
							t.Fatalf("n=%d gaps=%b order=%v after %d finishes: %v", n, g, p, i+1, err)
						}
					} else if tr.Committable() != m.committable() {
						t.Fatalf("n=%d gaps=%b order=%v: committable %d, model %d", n, g, p, tr.Committable(), m.committable())
					}
					if s := tr.MetadataSize(); s > bound {
						t.Fatalf("n=%d gaps=%b order=%v: size %d above the bound %d", n, g, p, s, bound)
					}
				}
				if tr.Committable() != end || tr.InFlight() != 0 || tr.Window() != 0 {
					t.Fatalf("n=%d gaps=%b order=%v: end committable %d, want %d", n, g, p, tr.Committable(), end)
				}
			})
		}
	}
	t.Logf("%d finishing orders", runs)
}

// TestExhaustiveInterleavings explores every interleaving of delivering 5
// records (with gaps) and finishing them, restarting (Metadata → Decode →
// Seed) from every reachable state: the restarted tracker skips exactly the
// finished records above Committable, and finishing the rest reaches the end.
func TestExhaustiveInterleavings(t *testing.T) {
	const n = 5
	states := 0
	for _, g := range []uint{0, 0b000101, 0b101010, 0b111111} {
		offs, end := layout(1000, n, g)
		var tr Tracker
		tr.Seed(1000, nil)
		m := newModel(1000, nil)
		var walk func(delivered int, finished uint, bound int)
		walk = func(delivered int, finished uint, bound int) {
			states++
			if err := compare(&tr, m); err != nil {
				t.Fatalf("gaps=%b delivered=%d finished=%b: %v", g, delivered, finished, err)
			}
			if s := tr.MetadataSize(); s > bound {
				t.Fatalf("size %d above the bound %d taken at the last delivery", s, bound)
			}
			checkRestart(t, &tr, m, offs, end)
			if delivered < n {
				saved, savedM := tr.clone(), m.clone()
				tr.Deliver(offs[delivered])
				m.deliver(offs[delivered])
				if delivered == n-1 {
					tr.Advance(end)
					m.advance(end)
				}
				walk(delivered+1, finished, tr.MetadataBound())
				tr, m = saved, savedM
			}
			for i := range delivered {
				if finished>>i&1 != 0 {
					continue
				}
				saved, savedM := tr.clone(), m.clone()
				tr.Finish(offs[i])
				m.finish(offs[i])
				if tr.MetadataBound() > bound {
					t.Fatalf("Finish(%d) raised the bound %d → %d", offs[i], bound, tr.MetadataBound())
				}
				walk(delivered, finished|1<<i, tr.MetadataBound())
				tr, m = saved, savedM
			}
		}
		walk(0, 0, 0)
	}
	t.Logf("%d states", states)
}

func (t *Tracker) clone() Tracker {
	c := *t
	c.ring = slices.Clone(t.ring)
	return c
}

func (m *model) clone() *model {
	c := *m
	c.st = map[int64]byte{}
	for k, v := range m.st {
		c.st[k] = v
	}
	return &c
}

// checkRestart simulates a crash after committing Committable with
// Metadata: a new tracker seeded from them must skip exactly the records
// finished above Committable and reach end once the others finish.
func checkRestart(t *testing.T, tr *Tracker, m *model, offs []int64, end int64) {
	t.Helper()
	c := tr.Committable()
	fin, err := Decode(c, tr.Metadata())
	if err != nil {
		t.Fatal(err)
	}
	var nt Tracker
	if err := nt.Seed(c, fin); err != nil {
		t.Fatal(err)
	}
	var run []int64
	for _, o := range offs {
		if o < c {
			continue
		}
		wantSkip := m.st[o] == stDone
		if nt.Skip(o) != wantSkip {
			t.Fatalf("restart at %d: Skip(%d) = %v, want %v", c, o, nt.Skip(o), wantSkip)
		}
		if wantSkip {
			if err := nt.Deliver(o); !errors.Is(err, ErrSkipped) {
				t.Fatalf("Deliver of skipped %d: %v", o, err)
			}
			continue
		}
		if err := nt.Deliver(o); err != nil {
			t.Fatalf("restart at %d: Deliver(%d): %v", c, o, err)
		}
		run = append(run, o)
	}
	nt.Advance(end) // the fetcher reads everything again from c
	for i := len(run) - 1; i >= 0; i-- {
		nt.Finish(run[i])
	}
	if err := nt.check(); err != nil {
		t.Fatal(err)
	}
	if nt.Committable() != end {
		t.Fatalf("restart at %d: committable %d after finishing everything, want %d", c, nt.Committable(), end)
	}
	if nt.InFlight() != 0 {
		t.Fatalf("restart: %d still in flight", nt.InFlight())
	}
}

// TestSeedSkipRoundTrip: a random finished set encoded, decoded and seeded
// into a new tracker makes Skip true exactly for its offsets; the records
// not skipped can then be processed and Committable passes everything.
func TestSeedSkipRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for iter := range 300 {
		c := rng.Int64N(1 << 40)
		span := 1 + rng.IntN(3000)
		density := rng.Float64()
		var fin []int64
		for i := 1; i <= span; i++ {
			if rng.Float64() < density {
				fin = append(fin, c+int64(i))
			}
		}
		md := Encode(c, fin)
		dec, err := Decode(c, md)
		if err != nil || !slices.Equal(dec, fin) && len(fin) > 0 {
			t.Fatalf("iter %d: round trip: %v", iter, err)
		}
		var tr Tracker
		if err := tr.Seed(c, dec); err != nil {
			t.Fatal(err)
		}
		if tr.Metadata() != md || tr.FinishedAbove() != len(fin) {
			t.Fatalf("iter %d: seeded tracker re-encodes differently", iter)
		}
		set := map[int64]bool{}
		for _, o := range fin {
			set[o] = true
		}
		top := c + int64(span) + 5
		for o := c - 2; o < top; o++ {
			if tr.Skip(o) != set[o] {
				t.Fatalf("iter %d: Skip(%d) = %v, want %v", iter, o, tr.Skip(o), set[o])
			}
		}
		// Process the rest, in random finishing order.
		var todo []int64
		for o := c; o < top; o++ {
			if tr.Skip(o) {
				continue
			}
			if err := tr.Deliver(o); err != nil {
				t.Fatalf("iter %d: Deliver(%d): %v", iter, o, err)
			}
			todo = append(todo, o)
		}
		rng.Shuffle(len(todo), func(i, j int) { todo[i], todo[j] = todo[j], todo[i] })
		for _, o := range todo {
			if err := tr.Finish(o); err != nil {
				t.Fatal(err)
			}
		}
		if tr.Committable() != top || tr.FinishedAbove() != 0 || tr.Window() != 0 {
			t.Fatalf("iter %d: committable %d, want %d", iter, tr.Committable(), top)
		}
		if err := tr.check(); err != nil {
			t.Fatal(err)
		}
	}
}

func TestSeedInvalid(t *testing.T) {
	for _, tt := range []struct {
		c   int64
		fin []int64
	}{
		{-1, nil},
		{10, []int64{10}},
		{10, []int64{12, 11}},
		{10, []int64{12, 12}},
		{10, []int64{10 + MaxSpan + 1}},
		{math.MaxInt64 - 5, []int64{math.MaxInt64}},
	} {
		var tr Tracker
		tr.Seed(3, []int64{5})
		if err := tr.Seed(tt.c, tt.fin); !errors.Is(err, ErrInvalidSeed) {
			t.Errorf("Seed(%d, %v) = %v", tt.c, tt.fin, err)
		}
		if tr.Committable() != 3 || !tr.Skip(5) {
			t.Errorf("failed Seed changed the tracker")
		}
	}
	var tr Tracker
	if err := tr.Seed(10, []int64{10 + MaxSpan}); err != nil {
		t.Fatalf("seed at MaxSpan: %v", err)
	}
	if err := tr.check(); err != nil {
		t.Fatal(err)
	}
}

// TestSkipFarBelowCommittable: seeded offsets that Committable passed long
// ago live in ring words that now hold other offsets; Skip and Deliver must
// not read those words.
func TestSkipFarBelowCommittable(t *testing.T) {
	fin := seq(1, 10_000)
	fin = append(fin, 10_002)
	var tr Tracker
	if err := tr.Seed(0, fin); err != nil {
		t.Fatal(err)
	}
	tr.Deliver(0)
	tr.Finish(0) // Committable jumps to 10,001, the ring shrinks to a few words
	if tr.Committable() != 10_001 || tr.Next() != 1 || len(tr.ring) > minWords {
		t.Fatalf("committable %d next %d ring %d", tr.Committable(), tr.Next(), len(tr.ring))
	}
	// An offset whose ring word aliases Committable's word, at the same bit.
	o := int64(10_001 - 64*minWords*4)
	if !tr.Skip(o) {
		t.Fatalf("Skip(%d) = false for a seeded offset", o)
	}
	if err := tr.Deliver(o); !errors.Is(err, ErrSkipped) {
		t.Fatalf("Deliver(%d) = %v, want ErrSkipped", o, err)
	}
	if err := tr.check(); err != nil {
		t.Fatal(err)
	}
}

// TestSeedThenSkipAndGaps: seeded offsets act as gaps whether the fetcher
// delivers around them, advances past them, or Committable reaches them.
func TestSeedThenSkipAndGaps(t *testing.T) {
	var tr Tracker
	tr.Seed(10, []int64{11, 12, 15})
	m := newModel(10, []int64{11, 12, 15})
	ops := []struct {
		op  byte
		off int64
	}{{'d', 10}, {'d', 11}, {'d', 13}, {'f', 10}, {'d', 12}, {'d', 14}, {'f', 14}, {'d', 15}, {'a', 16}, {'f', 13}, {'d', 16}}
	for i, s := range ops {
		var errT, errM error
		errT = apply(&tr, s.op, s.off)
		switch s.op {
		case 'd':
			errM = m.deliver(s.off)
		case 'f':
			errM = m.finish(s.off)
		case 'a':
			errM = m.advance(s.off)
		}
		if !sameErr(errT, errM) {
			t.Fatalf("step %d %c(%d): %v, model %v", i, s.op, s.off, errT, errM)
		}
		if err := compare(&tr, m); err != nil {
			t.Fatalf("step %d %c(%d): %v", i, s.op, s.off, err)
		}
	}
	if tr.Committable() != 16 {
		t.Fatalf("committable %d", tr.Committable())
	}
}

func ExampleTracker() {
	var tr Tracker
	tr.Seed(100, nil)
	for _, o := range []int64{100, 101, 103} { // 102 was compacted away
		tr.Deliver(o)
	}
	tr.Finish(103)
	tr.Finish(101)
	fmt.Println(tr.Committable(), tr.InFlight(), tr.FinishedAbove())
	fin, _ := Decode(tr.Committable(), tr.Metadata())
	fmt.Println(fin)
	tr.Finish(100)
	fmt.Println(tr.Committable(), tr.Metadata() == "")
	// Output:
	// 100 1 2
	// [101 102 103]
	// 104 true
}
