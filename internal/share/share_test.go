package share

import (
	"slices"
	"testing"
	"time"
)

var tp0 = TP{ID: [16]byte{1}, Partition: 0}

func TestAcksDrain(t *testing.T) {
	for _, tc := range []struct {
		name string
		add  []Range
		want []Range
	}{
		{"single", []Range{{5, 5, Accept}}, []Range{{5, 5, Accept}}},
		{"adjacent same type merge", []Range{{3, 3, Accept}, {1, 1, Accept}, {2, 2, Accept}}, []Range{{1, 3, Accept}}},
		{"types split", []Range{{1, 1, Accept}, {2, 2, Release}, {3, 3, Accept}}, []Range{{1, 1, Accept}, {2, 2, Release}, {3, 3, Accept}}},
		{"gap not merged", []Range{{1, 1, Reject}, {3, 3, Reject}}, []Range{{1, 1, Reject}, {3, 3, Reject}}},
		{"later wins", []Range{{1, 4, Accept}, {2, 2, Release}}, []Range{{1, 1, Accept}, {2, 2, Release}, {3, 4, Accept}}},
		{"renew never overrides final", []Range{{1, 1, Accept}, {1, 1, Renew}}, []Range{{1, 1, Accept}}},
		{"final overrides renew", []Range{{1, 2, Renew}, {2, 2, Accept}}, []Range{{1, 1, Renew}, {2, 2, Accept}}},
		{"huge range costs nothing", []Range{{0, 1<<63 - 1, Gap}}, []Range{{0, 1<<63 - 1, Gap}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var a Acks
			for _, r := range tc.add {
				a.AddRange(tp0, r.First, r.Last, r.Type)
			}
			got := a.Drain()
			if len(got) != 1 || !slices.Equal(got[0].Batches, tc.want) {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
			if a.Len() != 0 || a.Drain() != nil {
				t.Fatal("not drained")
			}
		})
	}
}

func TestAcquiredLookupAndGaps(t *testing.T) {
	raw := [][3]int64{{10, 14, 1}, {20, 20, 2}, {12, 16, 3}, {9, 3, 1}, {-5, 2, 1}}
	a := NewAcquired(len(raw), func(i int) (int64, int64, int16) { return raw[i][0], raw[i][1], int16(raw[i][2]) })
	for _, tc := range []struct {
		off int64
		d   int16
		ok  bool
	}{{9, 0, false}, {10, 1, true}, {14, 1, true}, {15, 3, true}, {16, 3, true}, {17, 0, false}, {20, 2, true}, {0, 0, false}} {
		d, ok := a.Lookup(tc.off)
		if d != tc.d || ok != tc.ok {
			t.Errorf("Lookup(%d) = %d,%v want %d,%v", tc.off, d, ok, tc.d, tc.ok)
		}
	}
	got := a.Gaps(11, 20, []int64{11, 13, 14, 16})
	want := []Range{{12, 12, Gap}, {15, 15, Gap}, {20, 20, Gap}}
	if !slices.Equal(got, want) {
		t.Fatalf("gaps %v want %v", got, want)
	}
}

func TestSession(t *testing.T) {
	a, b, c := TP{Partition: 1}, TP{Partition: 2}, TP{Partition: 3}
	var s Session
	add, forget := s.Plan([]TP{a, b})
	if s.Epoch() != 0 || len(add) != 2 || len(forget) != 0 {
		t.Fatalf("open: epoch %d add %v forget %v", s.Epoch(), add, forget)
	}
	s.Applied()
	if s.Epoch() != 1 || !s.Has(a) || !s.Has(b) {
		t.Fatal("not applied")
	}
	add, forget = s.Plan([]TP{b, c})
	if !slices.Equal(add, []TP{c}) || !slices.Equal(forget, []TP{a}) {
		t.Fatalf("incremental: add %v forget %v", add, forget)
	}
	s.Applied()
	s.Acked()
	if s.Epoch() != 3 || s.Has(a) || !s.Has(c) || s.Len() != 2 {
		t.Fatalf("epoch %d, %d partitions", s.Epoch(), s.Len())
	}
	// Nothing wanted (the partitions moved to other leaders): forget all.
	add, forget = s.Plan(nil)
	if len(add) != 0 || !slices.Equal(forget, []TP{b, c}) {
		t.Fatalf("forget all: add %v forget %v", add, forget)
	}
	s.Applied()
	if s.Epoch() != 4 || s.Len() != 0 {
		t.Fatalf("after forgetting: epoch %d, %d partitions", s.Epoch(), s.Len())
	}
	s.epoch = 1<<31 - 1
	s.Acked()
	if s.Epoch() != 1 {
		t.Fatalf("wrap to %d", s.Epoch())
	}
	s.Reset()
	if s.Open() || s.Has(b) {
		t.Fatal("reset kept state")
	}
	if !IsSessionError(122) || !IsSessionError(123) || IsSessionError(0) || !IsSessionLimit(133) {
		t.Fatal("classification")
	}
}

func TestTracker(t *testing.T) {
	now := time.Unix(1000, 0)
	var tr Tracker
	k1 := tr.Acquire(tp0, 1, now.Add(time.Second))
	k2 := tr.Acquire(tp0, 2, now.Add(time.Second))
	k3 := tr.Acquire(tp0, 3, now.Add(time.Second))
	if tr.Count(Queued) != 3 {
		t.Fatal("count")
	}
	if !tr.Start(k1, now) || tr.Start(k1, now) {
		t.Fatal("start twice")
	}
	// Redelivery of 2 to us: the old key is stale.
	k2b := tr.Acquire(tp0, 2, now.Add(2*time.Second))
	if tr.Start(k2, now) || !tr.Start(k2b, now) {
		t.Fatal("stale key started")
	}
	if got := tr.Due(Running, now.Add(600*time.Millisecond), 500*time.Millisecond); len(got) != 1 || got[0] != k1 {
		t.Fatalf("due %v", got)
	}
	tr.Extend(k1, now.Add(3*time.Second))
	if got := tr.Due(Running, now.Add(600*time.Millisecond), 500*time.Millisecond); len(got) != 0 {
		t.Fatalf("due after extend %v", got)
	}
	// 3's lock expires before a handler takes it: never handed out.
	if tr.Start(k3, now.Add(time.Second)) {
		t.Fatal("expired record started")
	}
	if !tr.Hold(k1) || tr.Count(Held) != 1 {
		t.Fatal("hold")
	}
	if !tr.Finish(k1, now) || tr.Finish(k1, now) {
		t.Fatal("finish twice")
	}
	if tr.Finish(k2b, now.Add(3*time.Second)) {
		t.Fatal("finish after expiry reported alive")
	}
	if tr.Len() != 0 {
		t.Fatalf("left %d", tr.Len())
	}
	k4 := tr.Acquire(tp0, 4, now.Add(time.Second))
	tr.Acquire(tp0, 5, now)
	if got := tr.Take(now, Queued); len(got) != 1 || got[0] != k4 || tr.Len() != 0 {
		t.Fatalf("take %v len %d", got, tr.Len())
	}
	tr.Acquire(tp0, 6, now)
	if tr.Expire(now) != 1 || tr.Len() != 0 {
		t.Fatal("expire")
	}
}

// FuzzAcquired: the acquired ranges and the batch contents come from the
// network. Whatever they are, nothing panics, lookups agree with a naive
// model, and gaps are exactly the acquired offsets of the span without a
// record.
func FuzzAcquired(f *testing.F) {
	f.Add([]byte{0, 5, 1, 3, 9, 2}, int64(0), int64(10), []byte{1, 2, 7})
	f.Add([]byte{9, 3, 1}, int64(-3), int64(2), []byte{})
	f.Fuzz(func(t *testing.T, rb []byte, first, last int64, recb []byte) {
		type r3 struct{ f, l int64 }
		var raw []r3
		for i := 0; i+2 < len(rb); i += 3 {
			raw = append(raw, r3{int64(rb[i]) - 8, int64(rb[i]) - 8 + int64(rb[i+1]%16) - 2})
		}
		a := NewAcquired(len(raw), func(i int) (int64, int64, int16) { return raw[i].f, raw[i].l, int16(i + 1) })
		in := func(o int64) bool {
			for _, r := range raw {
				if r.f >= 0 && r.f <= o && o <= r.l {
					return true
				}
			}
			return false
		}
		cur := 0
		for o := int64(-10); o < 300; o++ {
			d, ok := a.Lookup(o)
			if ok != in(o) {
				t.Fatalf("Lookup(%d)=%v want %v (raw %v)", o, ok, in(o), raw)
			}
			if d2, ok2 := a.LookupFrom(o, &cur); d2 != d || ok2 != ok {
				t.Fatalf("LookupFrom(%d)=%d,%v want %d,%v (raw %v)", o, d2, ok2, d, ok, raw)
			}
		}
		// Out of order and repeated: still right.
		for j, b := range rb {
			o := int64(b) - 8
			if j%3 == 0 {
				o = int64(b) * 2
			}
			d, ok := a.Lookup(o)
			if d2, ok2 := a.LookupFrom(o, &cur); d2 != d || ok2 != ok {
				t.Fatalf("LookupFrom(%d) out of order = %d,%v want %d,%v (raw %v)", o, d2, ok2, d, ok, raw)
			}
		}
		first, last = first%300, last%300
		anyIn := false
		for o := first; o <= last; o++ {
			anyIn = anyIn || in(o)
		}
		if got := a.Overlaps(first, last); got != anyIn {
			t.Fatalf("Overlaps(%d, %d) = %v want %v (raw %v)", first, last, got, anyIn, raw)
		}
		var recs []int64
		for _, b := range recb {
			recs = append(recs, int64(b))
		}
		slices.Sort(recs)
		gaps := a.Gaps(first, last, recs)
		for o := first; o <= last; o++ {
			inGap := false
			for _, g := range gaps {
				if g.First <= o && o <= g.Last {
					inGap = true
				}
			}
			want := in(o) && !slices.Contains(recs, o)
			if inGap != want {
				t.Fatalf("offset %d in gap %v want %v", o, inGap, want)
			}
		}
	})
}

// FuzzAcksDrain: whatever acknowledgements are added, the batches are
// sorted, disjoint, and give every offset its last final type.
func FuzzAcksDrain(f *testing.F) {
	f.Add([]byte{1, 3, 1, 2, 2, 2, 0, 9, 4})
	f.Fuzz(func(t *testing.T, b []byte) {
		var a Acks
		want := map[int64]int8{}
		for i := 0; i+2 < len(b); i += 3 {
			first, last, typ := int64(b[i]%40), int64(b[i]%40)+int64(b[i+1]%5), int8(b[i+2]%5)
			a.AddRange(tp0, first, last, typ)
			for o := first; o <= last; o++ {
				if old, ok := want[o]; !ok || typ != Renew || old == Renew {
					want[o] = typ
				}
			}
		}
		got := map[int64]int8{}
		prev := int64(-1)
		for _, pa := range a.Drain() {
			for _, r := range pa.Batches {
				if r.First <= prev || r.First > r.Last {
					t.Fatalf("unsorted or empty %v", pa.Batches)
				}
				prev = r.Last
				for o := r.First; o <= r.Last; o++ {
					got[o] = r.Type
				}
			}
		}
		if len(got) != len(want) {
			t.Fatalf("got %v want %v", got, want)
		}
		for o, ty := range want {
			if got[o] != ty {
				t.Fatalf("offset %d: %d want %d", o, got[o], ty)
			}
		}
	})
}
