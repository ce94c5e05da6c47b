package batch

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"testing"
)

// legacyMessage builds a magic 0 or 1 message set entry by hand.
func legacyMessage(offset int64, magic int8, attrs uint8, ts int64, key, value []byte) []byte {
	var msg []byte
	msg = append(msg, 0, 0, 0, 0) // CRC, filled below
	msg = append(msg, byte(magic), attrs)
	if magic == 1 {
		msg = binary.BigEndian.AppendUint64(msg, uint64(ts))
	}
	for _, f := range [][]byte{key, value} {
		if f == nil {
			msg = binary.BigEndian.AppendUint32(msg, 0xffffffff)
		} else {
			msg = binary.BigEndian.AppendUint32(msg, uint32(len(f)))
			msg = append(msg, f...)
		}
	}
	binary.BigEndian.PutUint32(msg, crc32.ChecksumIEEE(msg[4:]))
	entry := binary.BigEndian.AppendUint64(nil, uint64(offset))
	entry = binary.BigEndian.AppendUint32(entry, uint32(len(msg)))
	return append(entry, msg...)
}

func TestLegacyUncompressed(t *testing.T) {
	var data []byte
	data = append(data, legacyMessage(10, 0, 0, 0, []byte("k0"), []byte("v0"))...)
	data = append(data, legacyMessage(11, 0, 0, 0, nil, []byte{})...)
	data = append(data, legacyMessage(12, 1, 0, 1234, []byte{}, nil)...)
	data = append(data, legacyMessage(13, 1, attrLogAppendTime, 5678, []byte("k3"), []byte("v3"))...)

	ds := decodeAll(data, DecodeOptions{})
	if len(ds) != 4 {
		t.Fatalf("%d batches, want 4", len(ds))
	}
	want := []Record{
		{Key: []byte("k0"), Value: []byte("v0"), Timestamp: -1, Offset: 10},
		{Key: nil, Value: []byte{}, Timestamp: -1, Offset: 11},
		{Key: []byte{}, Value: nil, Timestamp: 1234, Offset: 12},
		{Key: []byte("k3"), Value: []byte("v3"), Timestamp: 5678, Offset: 13},
	}
	tsTypes := []TimestampType{TimestampNone, TimestampNone, TimestampCreateTime, TimestampLogAppendTime}
	for i, d := range ds {
		if d.err != nil {
			t.Fatalf("batch %d: %v", i, d.err)
		}
		b := d.batch
		if b.BaseOffset != 10+int64(i) || b.LastOffset != b.BaseOffset || b.NumRecords != 1 ||
			b.ProducerID != -1 || b.TimestampType != tsTypes[i] || b.Codec != CodecNone {
			t.Fatalf("batch %d header %+v", i, b)
		}
		if err := equalRecords(d.recs, want[i:i+1], true); err != nil {
			t.Fatalf("batch %d: %v", i, err)
		}
	}
}

func TestLegacyCompressed(t *testing.T) {
	inner := []struct {
		key, value []byte
		ts         int64
	}{
		{[]byte("a"), []byte("1"), 100},
		{nil, []byte("2"), 101},
		{[]byte("c"), nil, 99},
	}
	for _, codec := range []Codec{CodecGzip, CodecSnappy, CodecLZ4} {
		for _, magic := range []int8{0, 1} {
			for _, logAppend := range []bool{false, true} {
				if magic == 0 && logAppend {
					continue
				}
				name := codec.String() + map[int8]string{0: "/v0", 1: "/v1"}[magic]
				if logAppend {
					name += "/logappend"
				}
				t.Run(name, func(t *testing.T) {
					// Offsets as brokers write them: absolute for
					// v0, relative for v1 with the wrapper at the
					// last absolute offset.
					const first = 500
					var set []byte
					for i, m := range inner {
						off := int64(first + i)
						if magic == 1 {
							off = int64(i)
						}
						set = append(set, legacyMessage(off, magic, 0, m.ts, m.key, m.value)...)
					}
					attrs := uint8(codec)
					if logAppend {
						attrs |= attrLogAppendTime
					}
					wrapperOffset := int64(first + len(inner) - 1)
					data := legacyMessage(wrapperOffset, magic, attrs, 7777, nil, independentCompress(t, codec, set))
					// A partial message after it must be ignored.
					data = append(data, legacyMessage(600, magic, 0, 0, nil, []byte("cut"))[:20]...)

					b, got := decodeOne(t, data)
					if b.BaseOffset != first || b.LastOffset != wrapperOffset || b.NumRecords != 3 || b.Codec != codec || b.Magic != magic {
						t.Fatalf("header %+v", b)
					}
					for i, m := range inner {
						ts := m.ts
						switch {
						case magic == 0:
							ts = -1
						case logAppend:
							ts = 7777
						}
						w := []Record{{Key: m.key, Value: m.value, Timestamp: ts, Offset: int64(first + i)}}
						if err := equalRecords(got[i:i+1], w, true); err != nil {
							t.Fatal(err)
						}
					}
				})
			}
		}
	}
}

// Java 0.8-era producers framed legacy snappy with xerial framing.
func TestLegacyXerialSnappy(t *testing.T) {
	set := legacyMessage(0, 1, 0, 1, []byte("k"), []byte("v"))
	enc := s2EncodeSnappy(set)
	framed := append(append([]byte{}, xerialMagic...), 0, 0, 0, 1, 0, 0, 0, 1)
	framed = binary.BigEndian.AppendUint32(framed, uint32(len(enc)))
	framed = append(framed, enc...)
	_, got := decodeOne(t, legacyMessage(42, 1, uint8(CodecSnappy), 1, nil, framed))
	if err := equalRecords(got, []Record{{Key: []byte("k"), Value: []byte("v"), Timestamp: 1, Offset: 42}}, true); err != nil {
		t.Fatal(err)
	}
}

func TestLegacyCorrupt(t *testing.T) {
	good := legacyMessage(5, 1, 0, 1, []byte("k"), []byte("v"))
	bad := bytes.Clone(good)
	bad[len(bad)-1] ^= 1
	data := append(append(bytes.Clone(good), bad...), legacyMessage(7, 0, 0, 0, nil, []byte("x"))...)
	binary.BigEndian.PutUint64(data[len(good):], 6)
	ds := decodeAll(data, DecodeOptions{})
	if len(ds) != 3 || ds[0].err != nil || ds[2].err != nil {
		t.Fatalf("want the corruption confined to the middle message: %+v", ds)
	}
	wantBatchError(t, ds[1].err, ErrCorrupt, 6)

	// SkipCRC decodes it.
	ds = decodeAll(data, DecodeOptions{SkipCRC: true})
	if ds[1].err != nil || string(ds[1].recs[0].Value) != "w" {
		t.Fatalf("SkipCRC: %+v", ds[1])
	}

	// A corrupt inner message fails the wrapper.
	innerBad := legacyMessage(0, 1, 0, 1, nil, []byte("v"))
	innerBad[len(innerBad)-1] ^= 1
	wrapper := legacyMessage(0, 1, uint8(CodecGzip), 1, nil, independentCompress(t, CodecGzip, innerBad))
	ds = decodeAll(wrapper, DecodeOptions{})
	wantBatchError(t, ds[0].err, ErrCorrupt, 0)

	// Nested compression is refused.
	nested := legacyMessage(0, 1, uint8(CodecGzip), 1, nil, []byte("x"))
	wrapper = legacyMessage(0, 1, uint8(CodecGzip), 1, nil, independentCompress(t, CodecGzip, nested))
	ds = decodeAll(wrapper, DecodeOptions{})
	wantBatchError(t, ds[0].err, ErrCorrupt, 0)

	// zstd did not exist for legacy messages.
	ds = decodeAll(legacyMessage(3, 1, uint8(CodecZstd), 1, nil, []byte("x")), DecodeOptions{})
	wantBatchError(t, ds[0].err, ErrUnsupported, 3)
}

// A fetch can mix formats: old data followed by new batches.
func TestMixedLegacyAndV2(t *testing.T) {
	data := legacyMessage(0, 0, 0, 0, nil, []byte("old"))
	data = append(data, legacyMessage(1, 1, 0, 9, nil, []byte("older"))...)
	e := encode(t, CodecLZ4, []Record{{Value: []byte("new"), Timestamp: 10}})
	v2 := bytes.Clone(e.Bytes())
	binary.BigEndian.PutUint64(v2, 2) // base offset is not covered by the CRC
	data = append(data, v2...)
	ds := decodeAll(data, DecodeOptions{})
	var values []string
	for _, d := range ds {
		if d.err != nil {
			t.Fatal(d.err)
		}
		for _, r := range d.recs {
			values = append(values, string(r.Value))
			if r.Offset != int64(len(values)-1) {
				t.Fatalf("record %q at offset %d", r.Value, r.Offset)
			}
		}
	}
	if len(values) != 3 || values[2] != "new" {
		t.Fatalf("values %q", values)
	}
}
