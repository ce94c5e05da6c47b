package batch

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"testing"
)

func TestRoundTrip(t *testing.T) {
	cases := map[string][]Record{
		"sample": sampleRecords(),
		"many":   manyRecords(2000, 1),
		"single": {{Key: []byte("k"), Value: []byte("v"), Timestamp: 5}},
	}
	for _, codec := range allCodecs {
		for name, recs := range cases {
			t.Run(codec.String()+"/"+name, func(t *testing.T) {
				e := encode(t, codec, recs)
				if e.NumRecords() != len(recs) || e.Codec() != codec {
					t.Fatalf("NumRecords %d Codec %v", e.NumRecords(), e.Codec())
				}
				b, got := decodeOne(t, e.Bytes())
				if err := equalRecords(got, recs, false); err != nil {
					t.Fatal(err)
				}
				for i := range got {
					if got[i].Offset != int64(i) {
						t.Fatalf("record %d offset %d", i, got[i].Offset)
					}
				}
				maxTS := recs[0].Timestamp
				for _, r := range recs {
					maxTS = max(maxTS, r.Timestamp)
				}
				want := Batch{
					BaseOffset: 0, LastOffset: int64(len(recs) - 1), PartitionLeaderEpoch: -1,
					Magic: 2, Attributes: int16(codec), Codec: codec, TimestampType: TimestampCreateTime,
					ControlType: ControlUnknown, BaseTimestamp: recs[0].Timestamp, MaxTimestamp: maxTS,
					ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, NumRecords: int32(len(recs)),
				}
				if err := equalHeader(b, want); err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(b.Bytes(), e.Bytes()) {
					t.Fatal("Batch.Bytes differs from the encoded bytes")
				}
			})
		}
	}
}

// equalHeader compares the exported fields of two batches.
func equalHeader(got, want Batch) error {
	got.raw, got.records, got.decompressed, got.maxSize, got.skipCRC, got.pos = nil, nil, false, 0, false, 0
	if !reflect.DeepEqual(got, want) {
		return &headerDiff{got, want}
	}
	return nil
}

type headerDiff struct{ got, want Batch }

func (d *headerDiff) Error() string {
	return "batch header mismatch:\n got  " + sprintBatch(d.got) + "\n want " + sprintBatch(d.want)
}

func sprintBatch(b Batch) string {
	b.raw, b.records = nil, nil
	return fmt.Sprintf("%+v", b)
}

func TestDecodedSlicesAreCapped(t *testing.T) {
	recs := []Record{{Key: []byte("a"), Value: []byte("b")}, {Key: []byte("c"), Value: []byte("d")}}
	_, got := decodeOne(t, encode(t, CodecNone, recs).Bytes())
	_ = append(got[0].Value, 'X', 'X', 'X', 'X')
	if string(got[1].Key) != "c" || string(got[1].Value) != "d" {
		t.Fatal("appending to a decoded value overwrote the next record")
	}
	if cap(got[0].Value) != len(got[0].Value) || cap(got[0].Key) != len(got[0].Key) {
		t.Fatal("decoded slices are not capped")
	}
}

func TestSetProducer(t *testing.T) {
	recs := manyRecords(200, 2)
	for _, codec := range allCodecs {
		t.Run(codec.String(), func(t *testing.T) {
			e := encode(t, codec, recs)
			before := bytes.Clone(e.Bytes())
			e.SetProducer(123456789, 7, 4242)
			after := e.Bytes()
			if !bytes.Equal(before[headerSize:], after[headerSize:]) {
				t.Fatal("SetProducer changed the records (recompressed?)")
			}
			if got, want := be.Uint32(after[offCRC:]), crc32c(after[offAttributes:]); got != want {
				t.Fatalf("CRC %08x, full recomputation %08x", got, want)
			}
			b, got := decodeOne(t, after) // CRC checked
			if b.ProducerID != 123456789 || b.ProducerEpoch != 7 || b.BaseSequence != 4242 || b.Transactional {
				t.Fatalf("producer fields %d/%d/%d transactional=%v", b.ProducerID, b.ProducerEpoch, b.BaseSequence, b.Transactional)
			}
			if err := equalRecords(got, recs, false); err != nil {
				t.Fatal(err)
			}

			e.SetTransactional(true)
			b, _ = decodeOne(t, e.Bytes())
			if !b.Transactional || b.Codec != codec || b.ProducerID != 123456789 {
				t.Fatalf("after SetTransactional(true): transactional=%v codec=%v", b.Transactional, b.Codec)
			}
			e.SetProducer(-1, -1, -1)
			e.SetTransactional(false)
			if !bytes.Equal(e.Bytes(), before) {
				t.Fatal("resetting the producer fields did not restore the original bytes")
			}
		})
	}
}

func TestCRCCombine(t *testing.T) {
	data := make([]byte, 70000)
	for i := range data {
		data[i] = byte(i*7 + i>>8)
	}
	for _, split := range []int{0, 1, 2, 3, 40, 61, 1000, 65536, 69999, 70000} {
		a, b := data[:split], data[split:]
		if got, want := crc32cCombine(crc32c(a), crc32c(b), len(b)), crc32c(data); got != want {
			t.Errorf("split %d: combine %08x, want %08x", split, got, want)
		}
	}
}

func TestBuilderLimits(t *testing.T) {
	rec := Record{Key: []byte("key"), Value: bytes.Repeat([]byte("v"), 100), Timestamp: 1000}
	one := EncodedSize(&rec)
	perRecord := one - headerSize

	// Room for exactly three records (later records have 1-byte deltas, as
	// the first does, because deltas stay small).
	limit := headerSize + 3*perRecord
	b := NewBuilder(BuilderOptions{MaxBytes: limit})
	for i := range 3 {
		if !b.Add(&rec) {
			t.Fatalf("record %d refused below the limit", i)
		}
		if b.Size() != headerSize+(i+1)*perRecord {
			t.Fatalf("Size %d after %d records", b.Size(), i+1)
		}
	}
	if b.Add(&rec) {
		t.Fatal("record accepted past the limit")
	}
	if b.NumRecords() != 3 || b.Size() != limit {
		t.Fatalf("refused Add changed the batch: %d records, size %d", b.NumRecords(), b.Size())
	}
	e, err := b.Finish(CodecNone)
	if err != nil {
		t.Fatal(err)
	}
	if len(e.Bytes()) != limit || e.UncompressedSize() != limit {
		t.Fatalf("encoded %d bytes (uncompressed %d), predicted %d", len(e.Bytes()), e.UncompressedSize(), limit)
	}

	// After Finish, the builder is empty and the first record fits again.
	if b.NumRecords() != 0 || !b.Add(&rec) {
		t.Fatal("builder not reset by Finish")
	}

	// A record that can never fit.
	big := Record{Value: make([]byte, limit)}
	b = NewBuilder(BuilderOptions{MaxBytes: limit})
	if b.Add(&big) {
		t.Fatal("oversized first record accepted")
	}
	if err := CheckSize(&big, limit); !errors.Is(err, ErrRecordTooLarge) {
		t.Fatalf("CheckSize: %v", err)
	}
	if err := CheckSize(&rec, limit); err != nil {
		t.Fatalf("CheckSize of a fitting record: %v", err)
	}
	if err := CheckSize(&big, 0); err != nil {
		t.Fatalf("CheckSize without limit: %v", err)
	}
	// A first record exactly at the limit fits.
	exact := NewBuilder(BuilderOptions{MaxBytes: one})
	if !exact.Add(&rec) {
		t.Fatal("record of exactly MaxBytes refused")
	}

	if _, err := NewBuilder(BuilderOptions{}).Finish(CodecNone); !errors.Is(err, ErrEmpty) {
		t.Fatalf("Finish on empty builder: %v", err)
	}
	b = NewBuilder(BuilderOptions{})
	b.Add(&rec)
	if _, err := b.Finish(Codec(5)); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("Finish with codec 5: %v", err)
	}
	b.Reset()
	if b.NumRecords() != 0 || b.Size() != headerSize {
		t.Fatal("Reset did not empty the builder")
	}
}

// The size the Builder predicts must match what it writes for every kind of
// field, including multi-byte varints and large timestamp deltas.
func TestBuilderSizeExact(t *testing.T) {
	recs := append(sampleRecords(), Record{Timestamp: math.MinInt64 / 2}, Record{Timestamp: math.MaxInt64 / 2})
	b := NewBuilder(BuilderOptions{})
	for i := range recs {
		before := b.Size()
		b.Add(&recs[i])
		var d int64
		if i > 0 {
			d = recs[i].Timestamp - recs[0].Timestamp
		}
		body, _ := recordBodySize(&recs[i], d, int32(i))
		if got := b.Size() - before; got != varintSize(int32(body))+body {
			t.Fatalf("record %d grew the batch by %d, predicted %d", i, got, varintSize(int32(body))+body)
		}
	}
	size := b.Size()
	e, _ := b.Finish(CodecNone)
	if len(e.Bytes()) != size {
		t.Fatalf("Finish wrote %d bytes, Size said %d", len(e.Bytes()), size)
	}
	_, got := decodeOne(t, e.Bytes())
	if err := equalRecords(got, recs, false); err != nil {
		t.Fatal(err)
	}
}

// Builders are reused across batches, compressed and not: a batch must not
// see the previous one's bytes.
func TestBuilderReuse(t *testing.T) {
	b := NewBuilder(BuilderOptions{InitialCapacity: 64})
	var encoded []*Encoded
	var want [][]Record
	for i, codec := range []Codec{CodecZstd, CodecNone, CodecGzip, CodecNone, CodecSnappy, CodecLZ4} {
		recs := manyRecords(10+i*7, uint64(i))
		for j := range recs {
			b.Add(&recs[j])
		}
		e, err := b.Finish(codec)
		if err != nil {
			t.Fatal(err)
		}
		encoded = append(encoded, e)
		want = append(want, recs)
	}
	for i, e := range encoded {
		_, got := decodeOne(t, e.Bytes())
		if err := equalRecords(got, want[i], false); err != nil {
			t.Fatalf("batch %d: %v", i, err)
		}
	}
}

// Released buffers are reused with stale contents: every byte of a batch
// must still be written.
func TestReleaseReuse(t *testing.T) {
	b := NewBuilder(BuilderOptions{InitialCapacity: 8 << 10})
	for round := range 10 {
		recs := manyRecords(50+round*13, uint64(round))
		codec := allCodecs[round%len(allCodecs)]
		for i := range recs {
			b.Add(&recs[i])
		}
		e, err := b.Finish(codec)
		if err != nil {
			t.Fatal(err)
		}
		// Fill the memory with garbage before releasing it.
		buf := e.Bytes()
		for i := range buf[:cap(buf)] {
			buf[:cap(buf)][i] = 0xa5
		}
		if codec == CodecNone {
			fresh := encode(t, CodecNone, recs)
			e2 := encode(t, CodecNone, recs)
			if !bytes.Equal(fresh.Bytes(), e2.Bytes()) {
				t.Fatal("uncompressed encoding is not deterministic")
			}
		}
		e.Release()
		e.Release() // idempotent

		e3 := encode(t, codec, recs)
		hdr, got := decodeOne(t, e3.Bytes())
		if err := equalRecords(got, recs, false); err != nil {
			t.Fatalf("round %d (%v): %v", round, codec, err)
		}
		maxTS := recs[0].Timestamp
		for _, r := range recs {
			maxTS = max(maxTS, r.Timestamp)
		}
		if err := equalHeader(hdr, Batch{
			LastOffset: int64(len(recs) - 1), PartitionLeaderEpoch: -1, Magic: 2, Attributes: int16(codec),
			Codec: codec, ControlType: ControlUnknown, BaseTimestamp: recs[0].Timestamp, MaxTimestamp: maxTS,
			ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, NumRecords: int32(len(recs)),
		}); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		e3.Release()
	}
}

// RecordSizeBound is never below what a record takes in a batch, whatever
// its position and timestamp: a producer sizing batches by it never
// overflows them.
func TestRecordSizeBound(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	for range 2000 {
		rec := Record{Key: make([]byte, r.IntN(40)), Value: make([]byte, r.IntN(3000)), Timestamp: r.Int64N(1 << 45)}
		if r.IntN(3) == 0 {
			rec.Key = nil
		}
		for range r.IntN(4) {
			rec.Headers = append(rec.Headers, Header{Key: "h", Value: make([]byte, r.IntN(50))})
		}
		b := NewBuilder(BuilderOptions{})
		first := Record{Timestamp: r.Int64N(1 << 45)}
		for range r.IntN(300) {
			b.Add(&first)
		}
		before := b.Size()
		if !b.Add(&rec) {
			t.Fatal("unbounded builder refused a record")
		}
		if got, bound := b.Size()-before, RecordSizeBound(&rec); got > bound {
			t.Fatalf("record took %d bytes, bound %d", got, bound)
		}
		if enc, bound := Sizes(&rec); enc != EncodedSize(&rec) || bound != RecordSizeBound(&rec) {
			t.Fatalf("Sizes = %d, %d; EncodedSize %d, RecordSizeBound %d", enc, bound, EncodedSize(&rec), RecordSizeBound(&rec))
		}
	}
}

// Sizes agrees with EncodedSize and RecordSizeBound where the varints'
// lengths change.
func TestSizesEdges(t *testing.T) {
	big := make([]byte, 1<<21)
	for _, n := range []int{0, 1, 50, 51, 52, 63, 64, 65, 100, 8176, 8177, 8178, 8179, 8191, 8192, 1<<20 - 8, 1 << 20, 1 << 21} {
		for _, rec := range []Record{{Value: big[:n]}, {Key: big[:n]}, {Value: big[:n], Headers: []Header{{Key: "k", Value: big[:n/2]}}}} {
			if enc, bound := Sizes(&rec); enc != EncodedSize(&rec) || bound != RecordSizeBound(&rec) {
				t.Fatalf("%d bytes: Sizes = %d, %d; EncodedSize %d, RecordSizeBound %d", n, enc, bound, EncodedSize(&rec), RecordSizeBound(&rec))
			}
		}
	}
}
