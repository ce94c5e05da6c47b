package process

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/riffle-go/riffle"
	"github.com/riffle-go/riffle/internal/track"
)

func rec(off int64, key string) *item {
	r := &riffle.Record{Offset: off}
	if key != "-" {
		r.Key = []byte(key)
	}
	return &item{rec: r, size: 10}
}

func TestQueueModes(t *testing.T) {
	keys := []string{"a", "b", "a", "-", "c", "-", "b"}
	for _, tc := range []struct {
		mode  Mode
		limit int
		// want: offsets started by repeatedly calling next() until nil,
		// then finishing everything running, until all are done.
		want [][]int64
	}{
		{ByPartition, 0, [][]int64{{0}, {1}, {2}, {3}, {4}, {5}, {6}}},
		{Unordered, 0, [][]int64{{0, 1, 2, 3, 4, 5, 6}}},
		{Unordered, 3, [][]int64{{0, 1, 2}, {3, 4, 5}, {6}}},
		// a,b,a,-,c,-,b: first wave one per key in offset order (a0 b1
		// -3 c4), then the second of each key (a2 -5 b6).
		{ByKey, 0, [][]int64{{0, 1, 3, 4}, {2, 5, 6}}},
		{ByKey, 2, [][]int64{{0, 1}, {2, 3}, {4, 5}, {6}}},
	} {
		t.Run(fmt.Sprintf("%v/%d", tc.mode, tc.limit), func(t *testing.T) {
			q, err := newQueue(tc.mode, track.DefaultMetadataLimit, tc.limit, 0, nil)
			if err != nil {
				t.Fatal(err)
			}
			for i, k := range keys {
				q.accept(rec(int64(i), k))
			}
			q.pump(time.Now(), func(*item) { t.Fatal("nothing to skip") })
			var got [][]int64
			for q.tr.Committable() < int64(len(keys)) {
				var wave []int64
				var its []*item
				for it := q.next(); it != nil; it = q.next() {
					wave = append(wave, it.rec.Offset)
					its = append(its, it)
				}
				if len(wave) == 0 {
					t.Fatalf("stalled at %d", q.tr.Committable())
				}
				got = append(got, wave)
				for _, it := range its {
					q.done(it, true)
				}
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Fatalf("waves %v, want %v", got, tc.want)
			}
		})
	}
}

// Seeded finished offsets are skipped; a failed record stays unfinished
// and holds the commit; dropWaiting leaves delivered records unfinished.
func TestQueueSeedFailDrop(t *testing.T) {
	q, err := newQueue(Unordered, track.DefaultMetadataLimit, 0, 10, []int64{11, 13})
	if err != nil {
		t.Fatal(err)
	}
	for o := int64(10); o < 16; o++ {
		q.accept(rec(o, "-"))
	}
	var skipped []int64
	q.pump(time.Now(), func(it *item) { skipped = append(skipped, it.rec.Offset) })
	if fmt.Sprint(skipped) != "[11 13]" {
		t.Fatalf("skipped %v", skipped)
	}
	a, b := q.next(), q.next() // 10, 12
	q.done(a, false)           // failed for good
	q.done(b, true)
	if q.tr.Committable() != 10 {
		t.Fatalf("committable %d after a failure at 10", q.tr.Committable())
	}
	c := q.next() // 14
	var dropped []int64
	q.dropWaiting(func(it *item) { dropped = append(dropped, it.rec.Offset) })
	if fmt.Sprint(dropped) != "[15]" || q.pending() != 3 { // 10, 14, 15 delivered, unfinished
		t.Fatalf("dropped %v, pending %d", dropped, q.pending())
	}
	q.done(c, true)
	fin, err := track.Decode(q.tr.Committable(), q.tr.Metadata())
	if err != nil || fmt.Sprint(fin) != "[11 12 13 14]" {
		t.Fatalf("metadata lists %v (%v)", fin, err)
	}
}

// A random walk over every mode: same-key records never run together and
// start in offset order, the partition mode runs one at a time, the
// commit never passes an unfinished record, and everything finishes.
func FuzzQueue(f *testing.F) {
	f.Add(uint64(1), uint8(0), uint8(3))
	f.Add(uint64(2), uint8(1), uint8(1))
	f.Add(uint64(3), uint8(2), uint8(0))
	f.Fuzz(func(t *testing.T, seed uint64, modeB, limitB uint8) {
		rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
		mode := Mode(modeB % 3)
		q, err := newQueue(mode, 128, int(limitB%5), 0, nil)
		if err != nil {
			t.Fatal(err)
		}
		const n = 300
		next := int64(0)
		var running []*item
		runningKey := map[string]bool{}
		lastStart := map[string]int64{}
		unfinished := map[int64]bool{}
		for steps := 0; steps < 20*n && (next < n || q.pending() > 0); steps++ {
			switch op := rng.IntN(3); {
			case op == 0 && next < n:
				off := next
				next += 1 + int64(rng.IntN(2)) // gaps
				k := fmt.Sprint(rng.IntN(6))
				if k == "0" {
					k = "-"
				}
				q.accept(rec(off, k))
				unfinished[off] = true
				q.pump(time.Now(), func(*item) {})
			case op == 1:
				it := q.next()
				if it == nil {
					continue
				}
				k := string(it.rec.Key)
				if it.rec.Key == nil {
					k = "-"
				}
				if mode == ByKey {
					if runningKey[k] {
						t.Fatalf("key %s started twice", k)
					}
					if lo, ok := lastStart[k]; ok && lo >= it.rec.Offset {
						t.Fatalf("key %s: %d started after %d", k, it.rec.Offset, lo)
					}
					runningKey[k] = true
					lastStart[k] = it.rec.Offset
				}
				if mode == ByPartition && len(running) > 0 {
					t.Fatal("two records of the partition run at once")
				}
				running = append(running, it)
			case op == 2 && len(running) > 0:
				i := rng.IntN(len(running))
				it := running[i]
				running = append(running[:i], running[i+1:]...)
				k := string(it.rec.Key)
				if it.rec.Key == nil {
					k = "-"
				}
				delete(runningKey, k)
				q.done(it, true)
				delete(unfinished, it.rec.Offset)
				q.pump(time.Now(), func(*item) {})
			}
			for o := range unfinished {
				if o < q.tr.Committable() {
					t.Fatalf("commit %d passes unfinished %d", q.tr.Committable(), o)
				}
			}
			if q.tr.MetadataSize() > 128 {
				t.Fatalf("metadata %d bytes over the limit", q.tr.MetadataSize())
			}
		}
		// Drain.
		for len(running) > 0 || q.pending() > 0 {
			for it := q.next(); it != nil; it = q.next() {
				running = append(running, it)
			}
			if len(running) == 0 {
				t.Fatalf("stalled with %d pending", q.pending())
			}
			it := running[0]
			running = running[1:]
			q.done(it, true)
			delete(unfinished, it.rec.Offset)
			q.pump(time.Now(), func(*item) {})
		}
		if len(unfinished) != 0 {
			t.Fatalf("%d records never finished", len(unfinished))
		}
	})
}

// The per-record cost of the functional core (accept, deliver, start,
// finish) with 64 records running, per mode.
func BenchmarkQueue(b *testing.B) {
	keys := make([][]byte, 1000)
	for i := range keys {
		keys[i] = []byte(fmt.Sprint("key-", i))
	}
	for _, mode := range []Mode{ByKey, Unordered} {
		b.Run(mode.String(), func(b *testing.B) {
			q, _ := newQueue(mode, track.DefaultMetadataLimit, 0, 0, nil)
			its := make([]item, b.N)
			recs := make([]riffle.Record, b.N)
			var running []*item
			now := time.Now()
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				recs[i] = riffle.Record{Offset: int64(i), Key: keys[i%len(keys)]}
				its[i] = item{rec: &recs[i], size: 10}
				q.accept(&its[i])
				q.pump(now, func(*item) {})
				for len(running) < 64 {
					it := q.next()
					if it == nil {
						break
					}
					running = append(running, it)
				}
				if len(running) >= 64 {
					q.done(running[0], true)
					running = running[1:]
				}
			}
		})
	}
}

// A record failing for good drops the waiting records above it; older
// waiting ones still start, in their order, so the commit reaches it.
func TestQueueDropAbove(t *testing.T) {
	for _, mode := range []Mode{ByKey, Unordered, ByPartition} {
		t.Run(mode.String(), func(t *testing.T) {
			q, _ := newQueue(mode, track.DefaultMetadataLimit, 0, 0, nil)
			keys := []string{"a", "b", "a", "c", "b", "-", "a", "c"}
			for i, k := range keys {
				q.accept(rec(int64(i), k))
			}
			q.pump(time.Now(), func(*item) {})
			// Start two records, then let offset 4's neighbourhood fail:
			// the record at 4 is taken and fails.
			var started []*item
			for it := q.next(); it != nil && len(started) < 5; it = q.next() {
				started = append(started, it)
			}
			var failed *item
			for _, it := range started {
				if it.rec.Offset == 3 {
					failed = it
				}
			}
			if failed == nil {
				// partition mode: only offset 0 starts; fail it.
				failed = started[0]
			}
			var dropped []int64
			q.done(failed, false)
			q.dropAbove(failed.rec.Offset, func(it *item) { dropped = append(dropped, it.rec.Offset) })
			for _, d := range dropped {
				if d <= failed.rec.Offset {
					t.Fatalf("dropped %d at or below the failed %d", d, failed.rec.Offset)
				}
			}
			for _, it := range started {
				if it != failed {
					q.done(it, true)
				}
			}
			for it := q.next(); it != nil; it = q.next() {
				if it.rec.Offset >= failed.rec.Offset {
					t.Fatalf("%d started after the failure at %d", it.rec.Offset, failed.rec.Offset)
				}
				q.done(it, true)
			}
			if q.tr.Committable() != failed.rec.Offset {
				t.Fatalf("committable %d, want the failed %d (dropped %v)", q.tr.Committable(), failed.rec.Offset, dropped)
			}
		})
	}
}
