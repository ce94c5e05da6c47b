package batch

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"

	"github.com/klauspost/compress/s2"
	"testing"
)

var allCodecs = []Codec{CodecNone, CodecGzip, CodecSnappy, CodecLZ4, CodecZstd}

// encode builds one batch of recs with codec.
func encode(t testing.TB, codec Codec, recs []Record) *Encoded {
	t.Helper()
	b := NewBuilder(BuilderOptions{})
	for i := range recs {
		if !b.Add(&recs[i]) {
			t.Fatalf("Add(%d) refused without a limit", i)
		}
	}
	e, err := b.Finish(codec)
	if err != nil {
		t.Fatalf("Finish(%v): %v", codec, err)
	}
	return e
}

type decoded struct {
	batch Batch
	recs  []Record
	err   error
}

// decodeAll iterates data to the end, decoding every batch's records. Errors
// are recorded per batch rather than failing the test.
func decodeAll(data []byte, opts DecodeOptions) []decoded {
	var out []decoded
	it := NewIterator(data, opts)
	for {
		b, err := it.Next()
		if err == io.EOF {
			return out
		}
		d := decoded{batch: b, err: err}
		if err == nil {
			d.recs, d.err = b.AppendRecords(nil)
		}
		out = append(out, d)
	}
}

// decodeOne decodes data that must hold exactly one valid batch.
func decodeOne(t testing.TB, data []byte) (Batch, []Record) {
	t.Helper()
	ds := decodeAll(data, DecodeOptions{})
	if len(ds) != 1 {
		t.Fatalf("decoded %d batches, want 1", len(ds))
	}
	if ds[0].err != nil {
		t.Fatalf("decode: %v", ds[0].err)
	}
	return ds[0].batch, ds[0].recs
}

// equalRecords compares records field by field, distinguishing nil from empty
// keys, values and header values. Headers nil and empty are equal (the wire
// cannot tell them apart). Offsets are compared only if checkOffsets.
func equalRecords(got, want []Record, checkOffsets bool) error {
	if len(got) != len(want) {
		return fmt.Errorf("got %d records, want %d", len(got), len(want))
	}
	for i := range got {
		g, w := &got[i], &want[i]
		if err := equalBytes("key", g.Key, w.Key); err != nil {
			return fmt.Errorf("record %d: %w", i, err)
		}
		if err := equalBytes("value", g.Value, w.Value); err != nil {
			return fmt.Errorf("record %d: %w", i, err)
		}
		if g.Timestamp != w.Timestamp {
			return fmt.Errorf("record %d: timestamp %d, want %d", i, g.Timestamp, w.Timestamp)
		}
		if checkOffsets && g.Offset != w.Offset {
			return fmt.Errorf("record %d: offset %d, want %d", i, g.Offset, w.Offset)
		}
		if len(g.Headers) != len(w.Headers) {
			return fmt.Errorf("record %d: %d headers, want %d", i, len(g.Headers), len(w.Headers))
		}
		for j := range g.Headers {
			if g.Headers[j].Key != w.Headers[j].Key {
				return fmt.Errorf("record %d header %d: key %q, want %q", i, j, g.Headers[j].Key, w.Headers[j].Key)
			}
			if err := equalBytes("header value", g.Headers[j].Value, w.Headers[j].Value); err != nil {
				return fmt.Errorf("record %d header %d: %w", i, j, err)
			}
		}
	}
	return nil
}

func equalBytes(what string, got, want []byte) error {
	if (got == nil) != (want == nil) {
		return fmt.Errorf("%s nil=%v, want nil=%v", what, got == nil, want == nil)
	}
	if !bytes.Equal(got, want) {
		return fmt.Errorf("%s %q, want %q", what, trunc(got), trunc(want))
	}
	return nil
}

func trunc(b []byte) []byte {
	if len(b) > 40 {
		return b[:40]
	}
	return b
}

// sampleRecords covers the edge cases every codec must round-trip.
func sampleRecords() []Record {
	return []Record{
		{Key: []byte("k1"), Value: []byte("v1"), Timestamp: 1_700_000_000_000},
		{Key: nil, Value: []byte("null key"), Timestamp: 1_700_000_000_005},
		{Key: []byte{}, Value: []byte("empty key"), Timestamp: 1_699_999_999_000}, // before the first: negative delta
		{Key: []byte("tombstone"), Value: nil, Timestamp: 1_700_000_000_010},
		{Key: []byte("empty value"), Value: []byte{}, Timestamp: 1_700_000_000_010},
		{Key: nil, Value: nil, Timestamp: 1_700_000_000_020},
		{
			Key: []byte("headers"), Value: []byte("h"), Timestamp: 1_700_000_000_030,
			Headers: []Header{
				{Key: "a", Value: []byte("1")},
				{Key: "", Value: []byte("empty key")},
				{Key: "null", Value: nil},
				{Key: "empty", Value: []byte{}},
				{Key: "a", Value: []byte("duplicate")},
			},
		},
		{Key: bytes.Repeat([]byte("K"), 300), Value: bytes.Repeat([]byte("long value "), 2000), Timestamp: 1_700_000_000_040},
	}
}

// manyRecords returns n records with 100-byte, moderately compressible values.
func manyRecords(n int, seed uint64) []Record {
	r := rand.New(rand.NewPCG(seed, seed))
	recs := make([]Record, n)
	const alphabet = `{"id":0123456789,"name":"abcdefghij","ok":true}`
	ts := int64(1_700_000_000_000)
	for i := range recs {
		v := make([]byte, 100)
		for j := range v {
			v[j] = alphabet[r.IntN(len(alphabet))]
		}
		k := fmt.Appendf(nil, "key-%d", r.IntN(1000))
		ts += int64(r.IntN(3))
		recs[i] = Record{Key: k, Value: v, Timestamp: ts}
		if i%10 == 0 {
			recs[i].Headers = []Header{{Key: "trace", Value: fmt.Appendf(nil, "%d", i)}}
		}
	}
	return recs
}

func wantBatchError(t *testing.T, err error, target error, offset int64) {
	t.Helper()
	var be *BatchError
	if !errors.As(err, &be) {
		t.Fatalf("error %v (%T), want *BatchError", err, err)
	}
	if !errors.Is(err, target) {
		t.Fatalf("error %v does not match %v", err, target)
	}
	if be.Offset != offset {
		t.Fatalf("error offset %d, want %d", be.Offset, offset)
	}
}

func s2EncodeSnappy(b []byte) []byte { return s2.EncodeSnappy(nil, b) }
