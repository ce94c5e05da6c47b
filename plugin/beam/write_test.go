package riffbeam

import (
	"bytes"
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/riffle-go/riffle/rifftest"
)

// Records written by Write come back from Read with their keys, values,
// headers and timestamps.
func TestWriteReadRoundTrip(t *testing.T) {
	ctx := testCtx(t)
	brokers, _ := cluster(t, "out", 3)
	ts := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	var in []Record
	for i := range 300 {
		r := Record{Key: []byte(fmt.Sprintf("k%d", i)), Value: []byte(fmt.Sprint(i)), Timestamp: ts.Add(time.Duration(i) * time.Millisecond)}
		if i%3 == 0 {
			r.Headers = []Header{{Key: "n", Value: []byte(fmt.Sprint(i))}, {Key: "empty", Value: []byte{}}}
		}
		if i == 7 {
			r.Value = nil // a tombstone
		}
		in = append(in, r)
	}
	p, s := beam.NewPipelineWithRoot()
	Write(s, brokers, "out", beam.CreateList(s, in))
	if err := run(t, ctx, p); err != nil {
		t.Fatal(err)
	}

	name, c := newCollector(t)
	p, s = beam.NewPipelineWithRoot()
	beam.ParDo0(s, &collectFn{Name: name}, Read(s, brokers, []string{"out"}))
	if err := run(t, ctx, p); err != nil {
		t.Fatal(err)
	}
	recs, counts, total := c.snapshot()
	if total != len(in) || len(counts) != len(in) {
		t.Fatalf("read %d records (%d distinct), want %d", total, len(counts), len(in))
	}
	byKey := map[string]Record{}
	for _, r := range recs {
		byKey[string(r.Key)] = r
	}
	for _, w := range in {
		g, ok := byKey[string(w.Key)]
		if !ok {
			t.Errorf("%s: missing", w.Key)
			continue
		}
		if g.Topic != "out" || !bytes.Equal(g.Value, w.Value) || (g.Value == nil) != (w.Value == nil) ||
			!g.Timestamp.Equal(w.Timestamp) || !reflect.DeepEqual(normHeaders(g.Headers), normHeaders(w.Headers)) {
			t.Errorf("%s: read %+v, wrote %+v", w.Key, g, w)
		}
	}
}

func normHeaders(hs []Header) []Header {
	if len(hs) == 0 {
		return nil
	}
	out := make([]Header, len(hs))
	for i, h := range hs {
		out[i] = Header{Key: h.Key, Value: append([]byte{}, h.Value...)}
	}
	return out
}

// A record that cannot be written (its topic does not exist and the
// cluster does not create topics) fails its bundle, and so the pipeline.
func TestWriteFailsBundle(t *testing.T) {
	ctx := testCtx(t)
	c := rifftest.New(t)
	p, s := beam.NewPipelineWithRoot()
	Write(s, c.Addrs(), "missing", beam.CreateList(s, []Record{{Value: []byte("x")}}))
	err := run(t, ctx, p)
	if err == nil || !strings.Contains(err.Error(), "riffbeam: writing to missing") {
		t.Fatalf("pipeline error %v, want the write's", err)
	}
}

func TestTryWriteInvalid(t *testing.T) {
	_, s := beam.NewPipelineWithRoot()
	if err := TryWrite(s, nil, "t", beam.CreateList(s, []Record{{}})); err == nil {
		t.Error("no brokers: no error")
	}
	if err := TryWrite(s, []string{"b:9092"}, "t", beam.CreateList(s, []string{"x"})); err == nil {
		t.Error("a PCollection of strings: no error")
	}
}

func TestRecordCoder(t *testing.T) {
	for _, r := range []Record{
		{},
		{Topic: "t", Partition: 3, Offset: 1 << 40, Key: []byte{}, Value: []byte("v"), Timestamp: time.UnixMilli(1700000000123)},
		{Topic: "t", Partition: -1, Offset: -1, Headers: []Header{{Key: "a"}, {Key: "", Value: []byte{}}, {Key: "c", Value: []byte("d")}}},
	} {
		got, err := decodeRecord(encodeRecord(r))
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, r) && !(r.Timestamp.Equal(got.Timestamp) && reflect.DeepEqual(withTS(got, r.Timestamp), r)) {
			t.Errorf("round trip of %+v: %+v", r, got)
		}
		b := encodeRecord(r)
		for i := range b { // every truncation is an error, never a panic
			if _, err := decodeRecord(b[:i]); err == nil {
				t.Errorf("%+v truncated to %d bytes decoded", r, i)
			}
		}
	}
}

func withTS(r Record, ts time.Time) Record { r.Timestamp = ts; return r }

func FuzzRecordCoder(f *testing.F) {
	f.Add(encodeRecord(Record{Topic: "t", Key: []byte("k"), Headers: []Header{{Key: "h"}}}))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := decodeRecord(b)
		if err != nil {
			return
		}
		r2, err := decodeRecord(encodeRecord(r))
		if err != nil || !reflect.DeepEqual(r, withTS(r2, r.Timestamp)) || !r.Timestamp.Equal(r2.Timestamp) {
			t.Fatalf("%+v re-encoded as %+v (%v)", r, r2, err)
		}
	})
}

// FuzzRecordRoundTrip encodes records built from the fuzzer's values:
// every one decodes to itself, its timestamp truncated to milliseconds
// (the zero time stays zero), nil and empty byte slices apart.
func FuzzRecordRoundTrip(f *testing.F) {
	f.Add("t", int32(3), int64(1)<<40, []byte("k"), false, []byte("v"), false, "h", []byte{}, int64(1700000000123), uint32(456789), false)
	f.Add("", int32(-1), int64(-1), []byte(nil), true, []byte(nil), true, "", []byte(nil), int64(0), uint32(0), true)
	f.Add("x", int32(0), int64(0), []byte{}, false, []byte{}, false, "a", []byte("b"), int64(-62135596800000), uint32(1), false) // the zero time's millisecond
	f.Add("y", int32(1), int64(2), []byte{0}, false, []byte{1}, false, "", []byte(nil), int64(math.MinInt64), uint32(999999), false)
	f.Fuzz(func(t *testing.T, topic string, partition int32, offset int64, key []byte, nilKey bool, value []byte, nilValue bool, hkey string, hvalue []byte, ms int64, subms uint32, zero bool) {
		ts := time.UnixMilli(ms).Add(time.Duration(subms % 1e6)) // below a millisecond: dropped
		r := Record{Topic: topic, Partition: partition, Offset: offset, Key: key, Value: value, Timestamp: ts}
		if nilKey {
			r.Key = nil
		} else if r.Key == nil {
			r.Key = []byte{}
		}
		if nilValue {
			r.Value = nil
		} else if r.Value == nil {
			r.Value = []byte{}
		}
		if hkey != "" || hvalue != nil {
			r.Headers = []Header{{Key: hkey, Value: hvalue}, {Key: hkey}}
		}
		if zero {
			r.Timestamp = time.Time{}
		}
		got, err := decodeRecord(encodeRecord(r))
		if err != nil {
			t.Fatalf("%+v: %v", r, err)
		}
		want := r.Timestamp
		if !want.IsZero() {
			want = time.UnixMilli(ms)
		}
		if !got.Timestamp.Equal(want) || got.Timestamp.IsZero() != want.IsZero() {
			t.Fatalf("timestamp %v came back as %v, want %v", r.Timestamp, got.Timestamp, want)
		}
		if !reflect.DeepEqual(withTS(got, r.Timestamp), r) {
			t.Fatalf("%#v came back as %#v", r, got)
		}
	})
}
