package batch

import (
	"fmt"
	"io"
	"math/rand/v2"
	"testing"
)

const benchRecordsPerBatch = 1000

// benchRecords returns 1000 records with short keys and 100-byte JSON-like
// values: field names repeat across records and numbers vary, which is what
// the data of typical Kafka topics looks like to a compressor. No headers.
func benchRecords() []Record {
	r := rand.New(rand.NewPCG(42, 42))
	events := []string{"click", "view", "purchase", "signup", "logout"}
	recs := make([]Record, benchRecordsPerBatch)
	ts := int64(1_700_000_000_000)
	for i := range recs {
		v := fmt.Appendf(nil, `{"id":%d,"user":"u%05d","event":"%s","amount":%d.%02d,"ok":%t,"session":"%x"}`,
			r.Int64N(1e12), r.IntN(100000), events[r.IntN(len(events))], r.IntN(1000), r.IntN(100), r.IntN(2) == 0, r.Uint64())
		for len(v) < 100 {
			v = append(v, ' ')
		}
		ts += int64(r.IntN(3))
		recs[i] = Record{Key: fmt.Appendf(nil, "user-%d", r.IntN(100000)), Value: v[:100], Timestamp: ts}
	}
	return recs
}

func reportPerRecord(b *testing.B) {
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*benchRecordsPerBatch), "ns/record")
}

func BenchmarkEncode(b *testing.B) {
	recs := benchRecords()
	for _, codec := range allCodecs {
		b.Run(codec.String(), func(b *testing.B) {
			bld := NewBuilder(BuilderOptions{})
			var size int
			b.ReportAllocs()
			for b.Loop() {
				for i := range recs {
					bld.Add(&recs[i])
				}
				size = bld.Size()
				e, err := bld.Finish(codec)
				if err != nil {
					b.Fatal(err)
				}
				e.SetProducer(1, 0, 0)
				e.Release() // as the producer does once a batch is acknowledged
			}
			b.SetBytes(int64(size))
			reportPerRecord(b)
		})
	}
}

func BenchmarkDecode(b *testing.B) {
	recs := benchRecords()
	for _, codec := range allCodecs {
		b.Run(codec.String(), func(b *testing.B) {
			e := encode(b, codec, recs)
			data := e.Bytes()
			dst := make([]Record, 0, benchRecordsPerBatch)
			b.ReportAllocs()
			b.SetBytes(int64(e.UncompressedSize()))
			for b.Loop() {
				it := NewIterator(data, DecodeOptions{})
				for {
					bt, err := it.Next()
					if err == io.EOF {
						break
					}
					if err != nil {
						b.Fatal(err)
					}
					if dst, err = bt.AppendRecords(dst[:0]); err != nil {
						b.Fatal(err)
					}
				}
			}
			if len(dst) != benchRecordsPerBatch {
				b.Fatalf("decoded %d records", len(dst))
			}
			b.ReportMetric(float64(len(data))/float64(e.UncompressedSize()), "ratio")
			reportPerRecord(b)
		})
	}
}
