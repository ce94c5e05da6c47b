package track

import (
	"math/rand/v2"
	"testing"
)

// simResult summarises a simulate run.
type simResult struct {
	maxSize, blocked, steps int
}

// simulate is a processor over offsets [0, total) that keeps up to conc
// records in flight, takes records only when CanDeliver allows, and
// finishes a random in-flight record per step; every gapEvery-th offset is
// a gap; the record at o with stuck[o] = d finishes no sooner than d steps
// after its delivery, or when it is the last one left. Without gate it
// never consults CanDeliver (to show what the gate prevents).
func simulate(t *testing.T, rng *rand.Rand, total, conc, limit int, gapEvery int, stuck map[int64]int, gate bool) simResult {
	t.Helper()
	var tr Tracker
	tr.Seed(0, nil)
	var res simResult
	var flight []int64
	started := map[int64]int{}
	next := int64(0)
	for step := 0; next < int64(total) || len(flight) > 0; step++ {
		if step > 100*total {
			t.Fatalf("no progress: next %d of %d, in flight %v, committable %d", next, total, flight, tr.Committable())
		}
		for len(flight) < conc && next < int64(total) {
			o := next
			if gapEvery > 0 && next%int64(gapEvery) == 0 {
				o = next + 1 // this delivery follows a gap
			}
			if gate && !tr.CanDeliver(o, limit) {
				res.blocked++
				break
			}
			if err := tr.Deliver(o); err != nil {
				t.Fatal(err)
			}
			started[o] = step
			flight = append(flight, o)
			next = o + 1
		}
		if len(flight) == 0 {
			continue
		}
		i := rng.IntN(len(flight))
		o := flight[i]
		last := next >= int64(total) && len(flight) == 1
		if d, ok := stuck[o]; ok && step-started[o] < d && !last {
			continue // stuck: finishes after d steps, or when nothing else is left
		}
		if err := tr.Finish(o); err != nil {
			t.Fatal(err)
		}
		flight[i] = flight[len(flight)-1]
		flight = flight[:len(flight)-1]
		res.steps = step
		if !gate && step%16 != 0 {
			continue // ungated runs only report a (sampled) maximum
		}
		s := tr.MetadataSize()
		res.maxSize = max(res.maxSize, s)
		if gate && s > limit {
			t.Fatalf("step %d: metadata %d bytes over the limit %d (bound %d, window %d, in flight %d)",
				step, s, limit, tr.MetadataBound(), tr.Window(), tr.InFlight())
		}
	}
	if tr.InFlight() != 0 || tr.Committable() < int64(total) {
		t.Fatalf("end: in flight %d committable %d", tr.InFlight(), tr.Committable())
	}
	if err := tr.check(); err != nil {
		t.Fatal(err)
	}
	return res
}

// TestGatingKeepsMetadataUnderLimit: with CanDeliver gating, the metadata
// never exceeds the limit whatever the finishing order, and every record
// gets processed (no stall), including with records stuck for a long time
// and tiny limits that force one-at-a-time processing.
func TestGatingKeepsMetadataUnderLimit(t *testing.T) {
	tests := []struct {
		name                string
		total, conc, limit  int
		gapEvery, stuckFrac int
		stuckFor            int
		exceedsUngated      bool // the scenario needs the gate
	}{
		{"random order, default limit", 50_000, 256, DefaultMetadataLimit, 0, 0, 0, false},
		{"stuck records, default limit", 50_000, 256, DefaultMetadataLimit, 7, 500, 20_000, false},
		{"many holes, default limit", 30_000, 4096, DefaultMetadataLimit, 0, 20, 25_000, true},
		{"stuck records, 200-byte limit", 20_000, 256, 200, 5, 50, 2_000, true},
		{"tiny limit: one at a time", 2_000, 16, 12, 3, 50, 100, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(5, uint64(tt.total)))
			stuck := map[int64]int{}
			if tt.stuckFrac > 0 {
				for o := int64(0); o < int64(tt.total)+int64(tt.total/max(tt.gapEvery, 1)); o += int64(tt.stuckFrac) {
					stuck[o] = tt.stuckFor
				}
			}
			res := simulate(t, rng, tt.total, tt.conc, tt.limit, tt.gapEvery, stuck, true)
			ungated := simulate(t, rand.New(rand.NewPCG(5, uint64(tt.total))), tt.total, tt.conc, tt.limit, tt.gapEvery, stuck, false)
			t.Logf("max metadata %d bytes (limit %d), blocked %d times, %d steps; without the gate %d bytes",
				res.maxSize, tt.limit, res.blocked, res.steps, ungated.maxSize)
			if tt.exceedsUngated && ungated.maxSize <= tt.limit {
				t.Fatalf("scenario too easy: %d bytes without the gate", ungated.maxSize)
			}
		})
	}
}

// TestStuckRecordGated: the brief's scenario through the gate. One record
// stays stuck at the committed offset while 100,000 later ones are processed
// 64 at a time in random order: the gate never has to block and the metadata
// stays small (its holes are the records in flight).
func TestStuckRecordGated(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 9))
	const n = 100_001
	res := simulate(t, rng, n, 64, DefaultMetadataLimit, 0, map[int64]int{0: 1 << 40}, true)
	t.Logf("max metadata %d bytes, blocked %d times", res.maxSize, res.blocked)
	if res.maxSize > 256 { // the holes are the ≤ 64 records in flight
		t.Fatalf("stuck scenario metadata grew to %d bytes", res.maxSize)
	}
}

// TestCanDeliverWhenIdle: with nothing in flight delivering is always
// allowed, even when the seeded metadata is already above the limit, and it
// never grows the encoding.
func TestCanDeliverWhenIdle(t *testing.T) {
	var fin []int64
	for o := int64(2); o < 2000; o += 2 {
		fin = append(fin, o) // alternating: ~125-byte bitset
	}
	var tr Tracker
	if err := tr.Seed(0, fin); err != nil {
		t.Fatal(err)
	}
	seeded := tr.MetadataSize()
	const limit = 40
	if seeded <= limit || tr.CanDeliver(0, limit) != true {
		t.Fatalf("seeded %d bytes; CanDeliver when idle must be true", seeded)
	}
	if tr.Deliver(0); tr.CanDeliver(1, limit) {
		t.Fatal("CanDeliver must refuse a second record above the limit")
	}
	prev := seeded
	for o := int64(0); o < 2000; o++ {
		if tr.Skip(o) {
			continue
		}
		if tr.InFlight() == 0 {
			if !tr.CanDeliver(o, limit) {
				t.Fatal("idle tracker refused")
			}
			tr.Deliver(o)
		}
		tr.Finish(o)
		if s := tr.MetadataSize(); s > prev {
			t.Fatalf("finishing the oldest grew the metadata %d → %d", prev, s)
		} else {
			prev = s
		}
	}
	if tr.Committable() != 2000 || tr.Metadata() != "" {
		t.Fatalf("committable %d", tr.Committable())
	}
}

// TestBoundMonotone: the bound never decreases when runs or span grow, so
// it never grows on Finish and CanDeliver's check covers the state after
// Deliver.
func TestBoundMonotone(t *testing.T) {
	spans := []int64{1, 2, 7, 8, 9, 127, 128, 129, 1000, 16383, 16384, 16385, 24_000, 100_000, MaxSpan - 1, MaxSpan}
	for _, s := range spans {
		prev := 0
		for r := 0; r < 3000; r++ {
			b := bound(s, r)
			if b < prev {
				t.Fatalf("bound(%d, %d) = %d < bound(%d, %d) = %d", s, r, b, s, r-1, prev)
			}
			prev = b
		}
	}
	for r := 1; r < 3000; r += 37 {
		prev := 0
		for s := int64(1); s < 200_000; s += 97 {
			b := bound(s, r)
			if b < prev {
				t.Fatalf("bound(%d, %d) = %d < bound(%d, %d) = %d", s, r, b, s-97, r, prev)
			}
			prev = b
		}
	}
}

// TestBoundExamples shows the bound against exact sizes.
func TestBoundExamples(t *testing.T) {
	for _, tt := range []struct {
		span int64
		runs int
		max  int
	}{
		{0, 5, 0},
		{10, 0, 0},
		{1, 1, encodedLen(1)},
		{100_000, 1, encodedLen(6)},  // exact: 4 (u0=0, f0-1=99,999)
		{100_000, 2, encodedLen(12)}, // exact worst: 3+3+1+1... ≤ 12
		{100_000, 1000, encodedLen(2000 + 781 + 6)},
		{24_000, 1 << 20, encodedLen(3000)}, // the bitset caps everything
	} {
		if got := bound(tt.span, tt.runs); got != tt.max {
			t.Errorf("bound(%d, %d) = %d, want %d", tt.span, tt.runs, got, tt.max)
		}
	}
	if encodedLen(3000) > DefaultMetadataLimit {
		t.Fatal("a window of 24,000 offsets must always fit 4096 bytes")
	}
}

// TestCanDeliverCountsTheGap: a delivery after a gap may add a finished run
// (the gap) besides the record itself, and CanDeliver must count it: here
// the limit is exactly the bound after a delivery without a gap.
func TestCanDeliverCountsTheGap(t *testing.T) {
	var tr Tracker
	tr.Deliver(0) // stuck
	for o := int64(1); o < 10_000; o++ {
		tr.Deliver(o)
		if o < 9_999 {
			tr.Finish(o)
		}
	}
	// One finished run (1..9998), 0 and 9999 in flight: a gap above 9999
	// would be a separate run.
	limit := bound(10_000, tr.runs+tr.inFlight+1)
	if !tr.CanDeliver(10_000, limit) {
		t.Fatal("CanDeliver refused the next offset")
	}
	if tr.CanDeliver(10_005, limit) {
		t.Fatal("CanDeliver ignored the gap below the offset")
	}
	gapped := tr.clone()
	gapped.Deliver(10_005)
	if gapped.MetadataBound() <= limit {
		t.Fatalf("scenario does not need the gap term: bound %d, limit %d", gapped.MetadataBound(), limit)
	}
	tr.Deliver(10_000)
	if tr.MetadataBound() > limit {
		t.Fatalf("bound %d above %d after an allowed delivery", tr.MetadataBound(), limit)
	}
}
