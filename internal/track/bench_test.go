package track

import (
	"math/rand/v2"
	"testing"
)

// BenchmarkDeliverFinish: one Deliver and one Finish per record.
func BenchmarkDeliverFinish(b *testing.B) {
	b.Run("in order", func(b *testing.B) {
		var tr Tracker
		b.ReportAllocs()
		for i := range b.N {
			o := int64(i)
			tr.Deliver(o)
			tr.Finish(o)
		}
	})
	// 256 in flight, finished in a shuffled order within the window.
	b.Run("out of order, 256 in flight", func(b *testing.B) {
		var tr Tracker
		perm := rand.New(rand.NewPCG(1, 1)).Perm(256)
		b.ReportAllocs()
		for i := range b.N {
			o := int64(i)
			tr.Deliver(o)
			if i >= 256 {
				blk := int64(i/256*256 - 256)
				tr.Finish(blk + int64(perm[i%256]))
			}
		}
	})
	// A record stuck at Committable while the rest flows: the window grows
	// to 100,000 and stays (Committable never moves).
	b.Run("stuck oldest, window 100k", func(b *testing.B) {
		var tr Tracker
		tr.Deliver(0)
		b.ReportAllocs()
		for i := range b.N {
			o := int64(1 + i%100_000)
			if o == 1 && i > 0 {
				b.StopTimer()
				tr = Tracker{}
				tr.Deliver(0)
				b.StartTimer()
			}
			tr.Deliver(o)
			tr.Finish(o)
		}
	})
}

// BenchmarkCanDeliver: the per-record budget check.
func BenchmarkCanDeliver(b *testing.B) {
	var tr Tracker
	for o := int64(0); o < 10_000; o++ {
		tr.Deliver(o)
		if o%3 != 0 {
			tr.Finish(o)
		}
	}
	b.ReportAllocs()
	ok := 0
	for range b.N {
		if tr.CanDeliver(10_000, DefaultMetadataLimit) {
			ok++
		}
	}
}

// window10k returns 10,000 offsets above committed 0: dense (random half
// finished: bitset) or sparse runs (runs-length).
func window10k(dense bool) []int64 {
	rng := rand.New(rand.NewPCG(2, 2))
	var fin []int64
	for o := int64(1); o <= 10_000; o++ {
		if dense && rng.IntN(2) == 0 || !dense && (o/500)%2 == 0 {
			fin = append(fin, o)
		}
	}
	return fin
}

func BenchmarkEncode10k(b *testing.B) {
	for _, dense := range []bool{true, false} {
		name := map[bool]string{true: "bitset", false: "runs"}[dense]
		fin := window10k(dense)
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			var s string
			for range b.N {
				s = Encode(0, fin)
			}
			b.ReportMetric(float64(len(s)), "bytes")
		})
	}
}

func BenchmarkDecode10k(b *testing.B) {
	for _, dense := range []bool{true, false} {
		name := map[bool]string{true: "bitset", false: "runs"}[dense]
		s := Encode(0, window10k(dense))
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for range b.N {
				if _, err := Decode(0, s); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkTrackerMetadata: Metadata and MetadataSize straight from a
// 10,000-offset window (half finished at random), without an offset list.
func BenchmarkTrackerMetadata(b *testing.B) {
	var tr Tracker
	rng := rand.New(rand.NewPCG(3, 3))
	for o := int64(0); o <= 10_000; o++ {
		tr.Deliver(o)
	}
	for o := int64(1); o <= 10_000; o++ {
		if rng.IntN(2) == 0 {
			tr.Finish(o)
		}
	}
	b.Run("Metadata", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			_ = tr.Metadata()
		}
	})
	b.Run("MetadataSize uncached", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			tr.sizeSet = false
			_ = tr.MetadataSize()
		}
	})
}
