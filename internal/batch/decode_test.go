package batch

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"runtime"
	"testing"

	"github.com/klauspost/compress/zstd"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// threeBatches returns three encoded batches at offsets 0, 100 and 200.
func threeBatches(t *testing.T) (data []byte, starts []int) {
	for i, codec := range []Codec{CodecNone, CodecZstd, CodecGzip} {
		e := encode(t, codec, manyRecords(20, uint64(i)))
		b := bytes.Clone(e.Bytes())
		binary.BigEndian.PutUint64(b, uint64(100*i))
		starts = append(starts, len(data))
		data = append(data, b...)
	}
	return data, starts
}

func TestPartialTrailingBatchIgnored(t *testing.T) {
	data, starts := threeBatches(t)
	starts = append(starts, len(data))
	near := func(cut int) bool {
		for _, s := range starts {
			if cut >= s-2*headerSize && cut <= s+2*headerSize {
				return true
			}
		}
		return false
	}
	for cut := 0; cut <= len(data); cut++ {
		// Every cut around batch boundaries and headers, a sample
		// elsewhere.
		if !near(cut) && cut%17 != 0 {
			continue
		}
		complete := 0
		for complete < 3 && starts[complete+1] <= cut {
			complete++
		}
		it := NewIterator(data[:cut], DecodeOptions{})
		n := 0
		for {
			b, err := it.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("cut %d: %v", cut, err)
			}
			if _, err := b.AppendRecords(nil); err != nil {
				t.Fatalf("cut %d: %v", cut, err)
			}
			n++
		}
		if n != complete {
			t.Fatalf("cut %d: %d batches, want %d", cut, n, complete)
		}
		if it.Truncated() != (cut != starts[complete]) {
			t.Fatalf("cut %d: Truncated %v", cut, it.Truncated())
		}
	}
}

func TestCorruptCRC(t *testing.T) {
	data, starts := threeBatches(t)
	data[starts[1]+headerSize+5] ^= 0x40 // inside the second batch's records
	ds := decodeAll(data, DecodeOptions{})
	if len(ds) != 3 {
		t.Fatalf("%d batches", len(ds))
	}
	if ds[0].err != nil || ds[2].err != nil {
		t.Fatalf("corruption leaked into other batches: %v, %v", ds[0].err, ds[2].err)
	}
	wantBatchError(t, ds[1].err, ErrCorrupt, 100)
	var be *BatchError
	errors.As(ds[1].err, &be)
	if be.Pos != starts[1] {
		t.Fatalf("error position %d, want %d", be.Pos, starts[1])
	}

	// A corrupt header field is caught too.
	data, _ = threeBatches(t)
	data[offProducerID+3] ^= 1
	wantBatchError(t, decodeAll(data, DecodeOptions{})[0].err, ErrCorrupt, 0)
	if ds := decodeAll(data, DecodeOptions{SkipCRC: true}); ds[0].err != nil {
		t.Fatalf("SkipCRC: %v", ds[0].err)
	}
}

func TestAbsurdLengths(t *testing.T) {
	good := encode(t, CodecNone, []Record{{Value: []byte("v")}}).Bytes()
	mk := func(length int32) []byte {
		b := bytes.Clone(good)
		binary.BigEndian.PutUint32(b[offLength:], uint32(length))
		return append(b, good...)
	}
	// Larger than the rest: indistinguishable from truncation, silently
	// ends iteration without allocating.
	for _, l := range []int32{1 << 30, 0x7fffffff, int32(len(good)) * 2} {
		data := mk(l)
		if ds := decodeAll(data, DecodeOptions{}); len(ds) != 0 {
			t.Fatalf("length %d: %+v", l, ds)
		}
		if a := testing.AllocsPerRun(10, func() {
			it := Iterator{data: data}
			it.Next()
		}); a != 0 {
			t.Fatalf("length %d: %v allocations", l, a)
		}
	}
	// Negative or too small: corrupt, and iteration cannot go on.
	for _, l := range []int32{-1, -1 << 31, 0, 5} {
		ds := decodeAll(mk(l), DecodeOptions{})
		if len(ds) != 1 {
			t.Fatalf("length %d: %d batches", l, len(ds))
		}
		wantBatchError(t, ds[0].err, ErrCorrupt, 0)
	}
	// Big enough for a legacy message but not a v2 header.
	ds := decodeAll(mk(30), DecodeOptions{SkipCRC: true})
	wantBatchError(t, ds[0].err, ErrCorrupt, 0)

	// Record counts are checked against the data before allocating.
	b := bytes.Clone(good)
	binary.BigEndian.PutUint32(b[offNumRecords:], 1<<30)
	it := NewIterator(b, DecodeOptions{SkipCRC: true})
	batch, err := it.Next()
	if err != nil {
		t.Fatal(err)
	}
	if a := testing.AllocsPerRun(10, func() { batch.AppendRecords(nil) }); a > 1 {
		t.Fatalf("%v allocations for an absurd record count", a)
	}
	if _, err := batch.AppendRecords(nil); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("absurd record count: %v", err)
	}
}

func TestMalformedRecords(t *testing.T) {
	recs := []Record{{Key: []byte("k"), Value: []byte("value")}, {Value: []byte("v2")}}
	good := encode(t, CodecNone, recs).Bytes()
	patch := func(f func(b []byte)) []byte {
		b := bytes.Clone(good)
		f(b)
		binary.BigEndian.PutUint32(b[offCRC:], crc32c(b[offAttributes:]))
		return b
	}
	for name, data := range map[string][]byte{
		"count too high": patch(func(b []byte) { binary.BigEndian.PutUint32(b[offNumRecords:], 3) }),
		"count too low":  patch(func(b []byte) { binary.BigEndian.PutUint32(b[offNumRecords:], 1) }),
		"record length":  patch(func(b []byte) { b[headerSize] = 0x7e }),
		"key length":     patch(func(b []byte) { b[headerSize+4] = 0x7e }),
		"negative key":   patch(func(b []byte) { b[headerSize+4] = 0x03 }), // -2
	} {
		t.Run(name, func(t *testing.T) {
			it := NewIterator(data, DecodeOptions{})
			b, err := it.Next()
			if err != nil {
				t.Fatal(err)
			}
			dst := []Record{{Value: []byte("keep")}}
			out, err := b.AppendRecords(dst)
			wantBatchError(t, err, ErrCorrupt, 0)
			if len(out) != 1 || string(out[0].Value) != "keep" {
				t.Fatal("failed AppendRecords changed dst")
			}
		})
	}
	t.Run("unknown codec", func(t *testing.T) {
		data := patch(func(b []byte) { b[offAttributes+1] |= 6 })
		wantBatchError(t, decodeAll(data, DecodeOptions{})[0].err, ErrUnsupported, 0)
	})
	t.Run("unknown magic", func(t *testing.T) {
		data := append(patch(func(b []byte) { b[offMagic] = 3 }), good...)
		ds := decodeAll(data, DecodeOptions{})
		wantBatchError(t, ds[0].err, ErrUnsupported, 0)
		if len(ds) != 2 || ds[1].err != nil {
			t.Fatal("a batch with an unknown magic stopped iteration")
		}
	})
}

// bomb returns a batch whose single record is size zero bytes, compressed.
func bomb(t *testing.T, codec Codec, size int) []byte {
	return encode(t, codec, []Record{{Value: make([]byte, size)}}).Bytes()
}

func TestDecompressionBomb(t *testing.T) {
	const limit = 128 << 10
	const size = 2 << 20
	opts := DecodeOptions{MaxDecompressedSize: limit}
	inputs := map[string][]byte{}
	for _, codec := range allCodecs[1:] {
		inputs[codec.String()] = bomb(t, codec, size)
	}
	// zstd frames written by a streaming encoder do not declare their
	// size, so the limit must hold while decoding, not just up front.
	defer func(m int) { zstdMinMemory = m }(zstdMinMemory)
	zstdMinMemory = 0
	var buf bytes.Buffer
	zw, _ := zstd.NewWriter(&buf, zstd.WithWindowSize(64<<10))
	zw.Write(kmsgRecords([]Record{{Value: make([]byte, size)}}, 0, nil))
	zw.Close()
	inputs["zstd-stream"] = kmsgBatch(kmsg.RecordBatch{
		Attributes: int16(CodecZstd), NumRecords: 1, ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1, Records: buf.Bytes(),
	})
	for name, data := range inputs {
		t.Run(name, func(t *testing.T) {
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			before := ms.TotalAlloc
			ds := decodeAll(data, opts)
			runtime.ReadMemStats(&ms)
			if len(ds) != 1 {
				t.Fatalf("%d batches", len(ds))
			}
			wantBatchError(t, ds[0].err, ErrTooLarge, 0)
			if alloc := ms.TotalAlloc - before; alloc > 3<<19 {
				t.Fatalf("allocated %d KiB decoding a bomb with a %d KiB limit", alloc>>10, limit>>10)
			}
			// Within the limit, the same batch decodes.
			ds = decodeAll(data, DecodeOptions{MaxDecompressedSize: size + 100})
			if ds[0].err != nil || len(ds[0].recs[0].Value) != size {
				t.Fatalf("decoding within the limit: %v", ds[0].err)
			}
		})
	}
}

// Streaming zstd encoders declare large windows whatever the content size;
// such frames must decode even under a small limit.
func TestZstdLargeWindowSmallLimit(t *testing.T) {
	recs := []Record{{Value: []byte("small")}}
	var buf bytes.Buffer
	zw, _ := zstd.NewWriter(&buf, zstd.WithWindowSize(8<<20))
	zw.Write(kmsgRecords(recs, 0, nil))
	zw.Close()
	data := kmsgBatch(kmsg.RecordBatch{
		Attributes: int16(CodecZstd), NumRecords: 1, ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1, Records: buf.Bytes(),
	})
	ds := decodeAll(data, DecodeOptions{MaxDecompressedSize: 1000})
	if ds[0].err != nil {
		t.Fatal(ds[0].err)
	}
	if err := equalRecords(ds[0].recs, recs, false); err != nil {
		t.Fatal(err)
	}
}

// A gzip trailer claiming a huge size must not make the decoder allocate it.
func TestGzipLyingTrailer(t *testing.T) {
	data := bomb(t, CodecGzip, 100)
	binary.LittleEndian.PutUint32(data[len(data)-4:], 0xffffffff)
	binary.BigEndian.PutUint32(data[offCRC:], crc32c(data[offAttributes:]))
	it := NewIterator(data, DecodeOptions{})
	b, err := it.Next()
	if err != nil {
		t.Fatal(err)
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	before := ms.TotalAlloc
	_, err = b.AppendRecords(nil)
	runtime.ReadMemStats(&ms)
	if err == nil {
		t.Fatal("gzip with a wrong size in its trailer decoded without error")
	}
	if alloc := ms.TotalAlloc - before; alloc > 1<<20 {
		t.Fatalf("allocated %d bytes", alloc)
	}
}

func TestControlBatches(t *testing.T) {
	mk := func(typ ControlType, codec Codec) []byte {
		key := binary.BigEndian.AppendUint16(nil, 0)
		key = binary.BigEndian.AppendUint16(key, uint16(typ))
		value := binary.BigEndian.AppendUint16(nil, 0)
		value = binary.BigEndian.AppendUint32(value, 42)
		return kmsgBatch(kmsg.RecordBatch{
			FirstOffset: 50, Attributes: int16(codec) | attrControl | attrTransactional, ProducerID: 9, ProducerEpoch: 1,
			FirstSequence: -1, NumRecords: 1, FirstTimestamp: 1, MaxTimestamp: 1,
			Records: independentCompress(t, codec, kmsgRecords([]Record{{Key: key, Value: value, Timestamp: 1}}, 1, nil)),
		})
	}
	for _, codec := range []Codec{CodecNone, CodecZstd} {
		for _, typ := range []ControlType{ControlAbort, ControlCommit} {
			b, recs := decodeOne(t, mk(typ, codec))
			if !b.Control || !b.Transactional || b.ControlType != typ || b.ProducerID != 9 {
				t.Fatalf("%v %v: %+v", codec, typ, b)
			}
			v, ct, err := ParseControlKey(recs[0].Key)
			if err != nil || v != 0 || ct != typ {
				t.Fatalf("ParseControlKey: %d %v %v", v, ct, err)
			}
			v, epoch, err := ParseEndTxnMarker(recs[0].Value)
			if err != nil || v != 0 || epoch != 42 {
				t.Fatalf("ParseEndTxnMarker: %d %d %v", v, epoch, err)
			}
		}
	}
	if _, _, err := ParseControlKey([]byte{0, 0, 0}); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("short control key: %v", err)
	}
	if _, _, err := ParseEndTxnMarker([]byte{0}); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("short marker: %v", err)
	}
	// A control batch whose key is not a control key is corrupt.
	bad := kmsgBatch(kmsg.RecordBatch{
		Attributes: attrControl, NumRecords: 1, ProducerID: 1,
		Records: kmsgRecords([]Record{{Key: []byte{1}}}, 0, nil),
	})
	wantBatchError(t, decodeAll(bad, DecodeOptions{})[0].err, ErrCorrupt, 0)
	if ControlCommit.String() != "commit" || ControlType(9).String() != "ControlType(9)" {
		t.Fatal("ControlType.String")
	}
}

// Compaction can remove records, including the last ones, while the batch
// keeps its original last offset delta.
func TestCompactedBatch(t *testing.T) {
	recs := []Record{{Value: []byte("a"), Timestamp: 10}, {Value: []byte("b"), Timestamp: 12}}
	data := kmsgBatch(kmsg.RecordBatch{
		FirstOffset: 1000, LastOffsetDelta: 9, FirstTimestamp: 10, MaxTimestamp: 20,
		ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1, NumRecords: 2,
		Records: kmsgRecords(recs, 10, []int32{0, 3}),
	})
	b, got := decodeOne(t, data)
	if b.LastOffset != 1009 || got[0].Offset != 1000 || got[1].Offset != 1003 {
		t.Fatalf("LastOffset %d, offsets %d %d", b.LastOffset, got[0].Offset, got[1].Offset)
	}
}

func TestLogAppendTime(t *testing.T) {
	recs := []Record{{Value: []byte("a"), Timestamp: 10}, {Value: []byte("b"), Timestamp: 12}}
	data := kmsgBatch(kmsg.RecordBatch{
		Attributes: attrLogAppendTime | int16(CodecSnappy), LastOffsetDelta: 1, FirstTimestamp: 10, MaxTimestamp: 99999,
		ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1, NumRecords: 2,
		Records: independentCompress(t, CodecSnappy, kmsgRecords(recs, 10, nil)),
	})
	b, got := decodeOne(t, data)
	if b.TimestampType != TimestampLogAppendTime || got[0].Timestamp != 99999 || got[1].Timestamp != 99999 {
		t.Fatalf("timestamp type %v, timestamps %d %d", b.TimestampType, got[0].Timestamp, got[1].Timestamp)
	}
}

func TestEmptyInput(t *testing.T) {
	it := NewIterator(nil, DecodeOptions{})
	if _, err := it.Next(); err != io.EOF {
		t.Fatalf("empty input: %v", err)
	}
	if it.Truncated() {
		t.Fatal("empty input reported as truncated")
	}
	it.Reset([]byte{1, 2, 3}, DecodeOptions{})
	if _, err := it.Next(); err != io.EOF || !it.Truncated() {
		t.Fatalf("3 bytes: %v, truncated %v", err, it.Truncated())
	}
}

// Uncompressed batches decode without allocating, apart from the headers
// shared by all records of a call.
func TestDecodeAllocations(t *testing.T) {
	recs := manyRecords(1000, 8)
	for i := range recs {
		recs[i].Headers = nil
	}
	data := encode(t, CodecNone, recs).Bytes()
	dst := make([]Record, 0, 1000)
	a := testing.AllocsPerRun(20, func() {
		it := NewIterator(data, DecodeOptions{})
		for {
			b, err := it.Next()
			if err != nil {
				break
			}
			dst, _ = b.AppendRecords(dst[:0])
		}
	})
	if a != 0 {
		t.Fatalf("%v allocations per uncompressed batch", a)
	}
}
