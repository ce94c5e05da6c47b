package batch

import (
	"bytes"
	"io"
	"runtime/metrics"
	"testing"
)

func fuzzSeeds(f *testing.F) {
	recs := append(sampleRecords()[:7], manyRecords(2, 9)...)
	for _, codec := range allCodecs {
		b := NewBuilder(BuilderOptions{})
		for i := range recs {
			b.Add(&recs[i])
		}
		e, _ := b.Finish(codec)
		f.Add(e.Bytes())
		f.Add(append(bytes.Clone(e.Bytes()), e.Bytes()[:30]...))
	}
	f.Add(legacyMessage(3, 0, 0, 0, []byte("k"), []byte("v")))
	f.Add(legacyMessage(3, 1, attrLogAppendTime, 9, nil, []byte("v")))
	set := append(legacyMessage(0, 1, 0, 1, nil, []byte("a")), legacyMessage(1, 1, 0, 2, []byte("b"), nil)...)
	for _, codec := range []Codec{CodecGzip, CodecSnappy, CodecLZ4} {
		f.Add(legacyMessage(10, 1, uint8(codec), 5, nil, compressForSeed(codec, set)))
	}
	f.Add([]byte{})
	f.Add(make([]byte, 61))
}

func compressForSeed(codec Codec, src []byte) []byte {
	out, _ := compress(nil, src, codec)
	return out
}

// FuzzDecode feeds arbitrary bytes to the decoder: it must not panic, and the
// memory it allocates for one batch must stay bounded by the decompression
// limit and the input size, never by sizes the input claims.
func FuzzDecode(f *testing.F) {
	fuzzSeeds(f)
	// A small limit keeps each execution cheap (the fuzzer re-runs inputs
	// thousands of times while minimizing them), and lowering zstd's
	// window floor lets the limit bind zstd too.
	const limit = 64 << 10
	defer func(m int) { zstdMinMemory = m }(zstdMinMemory)
	zstdMinMemory = 0
	// Create the shared zstd decoder up front so its one-time setup is
	// not counted against the first input.
	unzstd(nil, limit)
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, opts := range []DecodeOptions{
			{MaxDecompressedSize: limit},
			{MaxDecompressedSize: limit, SkipCRC: true},
		} {
			it := NewIterator(data, opts)
			var recs []Record
			for {
				before := heapAllocated()
				b, err := it.Next()
				if err == io.EOF {
					break
				}
				if err == nil {
					recs, err = b.AppendRecords(recs[:0])
				} else {
					// Misuse, but it must not panic either.
					b.AppendRecords(nil)
				}
				// Decompression may use about twice its limit,
				// lz4 frames may declare 4 MiB blocks, and decoded
				// record slices are bounded by the input (at most
				// one 88-byte Record per 7 input bytes, plus
				// headers).
				bound := 4*limit + 2*(4<<20) + 64*len(data)
				if alloc := heapAllocated() - before; alloc > uint64(bound) {
					t.Fatalf("batch allocated %d bytes (bound %d) for %d input bytes", alloc, bound, len(data))
				}
				if err == nil && b.Magic == 2 && len(recs) != int(b.NumRecords) {
					t.Fatalf("decoded %d records, header says %d", len(recs), b.NumRecords)
				}
			}
		}
	})
}

// heapAllocated returns the bytes allocated on the heap so far. Unlike
// runtime.ReadMemStats it does not stop the world, which matters when the
// fuzzer runs the target a hundred thousand times; it is exact for the large
// allocations the bound is about.
func heapAllocated() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// FuzzRoundTrip encodes arbitrary records with every codec and checks that
// decoding returns them exactly, including after SetProducer.
func FuzzRoundTrip(f *testing.F) {
	f.Add([]byte("\x00\x03key\x05value\x01\x00\x02\x01a"), uint8(0), int64(1_700_000_000_000), int64(1), int16(3))
	f.Add([]byte("\x0f\x02ab\x02cd\x04\x01h\x00"), uint8(4), int64(-5), int64(-1000), int16(-1))
	f.Add(bytes.Repeat([]byte("\x10\x1fhello world hello world hello"), 40), uint8(2), int64(0), int64(1<<40), int16(0))
	f.Fuzz(func(t *testing.T, data []byte, codecSel uint8, baseTS, tsStep int64, epoch int16) {
		recs := recordsFromBytes(data, baseTS, tsStep)
		if len(recs) == 0 {
			return
		}
		codec := allCodecs[int(codecSel)%len(allCodecs)]
		b := NewBuilder(BuilderOptions{})
		for i := range recs {
			if !b.Add(&recs[i]) {
				t.Fatalf("Add refused record %d", i)
			}
		}
		e, err := b.Finish(codec)
		if err != nil {
			t.Fatal(err)
		}
		pid := baseTS ^ tsStep
		e.SetProducer(pid, epoch, int32(tsStep))
		it := NewIterator(e.Bytes(), DecodeOptions{})
		batch, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := it.Next(); err != io.EOF {
			t.Fatalf("second Next: %v", err)
		}
		got, err := batch.AppendRecords(nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := equalRecords(got, recs, false); err != nil {
			t.Fatal(err)
		}
		for i := range got {
			if got[i].Offset != int64(i) {
				t.Fatalf("record %d has offset %d", i, got[i].Offset)
			}
		}
		if batch.ProducerID != pid || batch.ProducerEpoch != epoch || batch.BaseSequence != int32(tsStep) ||
			batch.Codec != codec || batch.LastOffset != int64(len(recs)-1) || batch.BaseTimestamp != recs[0].Timestamp {
			t.Fatalf("header %+v", batch)
		}
	})
}

// recordsFromBytes derives records from fuzz input. Each record starts with a
// flags byte: bit 0 null key, bit 1 null value, bits 2-3 header count, bit 4
// null header values; each field is a length byte (mod 64) and that many
// bytes.
func recordsFromBytes(data []byte, baseTS, tsStep int64) []Record {
	var recs []Record
	take := func() []byte {
		if len(data) == 0 {
			return []byte{}
		}
		n := min(int(data[0])%64, len(data)-1)
		field := data[1 : 1+n : 1+n]
		data = data[1+n:]
		return field
	}
	for i := 0; len(data) > 0 && i < 200; i++ {
		flags := data[0]
		data = data[1:]
		r := Record{Timestamp: baseTS + int64(i)*tsStep*int64(int8(flags))}
		r.Key = take()
		if flags&1 != 0 {
			r.Key = nil
		}
		r.Value = take()
		if flags&2 != 0 {
			r.Value = nil
		}
		for range (flags >> 2) & 3 {
			h := Header{Key: string(take()), Value: take()}
			if flags&16 != 0 {
				h.Value = nil
			}
			r.Headers = append(r.Headers, h)
		}
		recs = append(recs, r)
	}
	return recs
}
