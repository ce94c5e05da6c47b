package batch

// These tests check the wire format against github.com/twmb/franz-go/pkg/kmsg,
// an independent implementation of Kafka's protocol structs: our decoder must
// read what kmsg's RecordBatch and Record encoders write, and our encoder must
// write exactly what they write for the same fields.

import (
	"bytes"
	stdgzip "compress/gzip"
	"encoding/binary"
	"math"
	"testing"

	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// kmsgRecords encodes recs with kmsg.Record.AppendTo; offsetDeltas overrides
// the default (index) deltas when non-nil.
func kmsgRecords(recs []Record, baseTS int64, offsetDeltas []int32) []byte {
	var out []byte
	for i, r := range recs {
		kr := kmsg.Record{
			TimestampDelta64: r.Timestamp - baseTS,
			OffsetDelta:      int32(i),
			Key:              r.Key,
			Value:            r.Value,
		}
		if offsetDeltas != nil {
			kr.OffsetDelta = offsetDeltas[i]
		}
		for _, h := range r.Headers {
			kr.Headers = append(kr.Headers, kmsg.Header{Key: h.Key, Value: h.Value})
		}
		// Length counts what follows it; measure with a zero length
		// (one varint byte) first.
		kr.Length = int32(len(kr.AppendTo(nil)) - 1)
		out = kr.AppendTo(out)
	}
	return out
}

// kmsgBatch encodes rb with kmsg.RecordBatch.AppendTo, filling in Length and
// the CRC, which kmsg leaves to its caller.
func kmsgBatch(rb kmsg.RecordBatch) []byte {
	rb.Magic = 2
	out := rb.AppendTo(nil)
	binary.BigEndian.PutUint32(out[8:], uint32(len(out)-12))
	binary.BigEndian.PutUint32(out[17:], crc32c(out[21:]))
	return out
}

// independentCompress compresses with library defaults different from ours
// (stdlib gzip, lz4 with 4 MiB blocks and content checksum, zstd streaming
// with its checksum), so the decoder is not only tested against itself.
func independentCompress(t *testing.T, codec Codec, src []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	switch codec {
	case CodecNone:
		return src
	case CodecGzip:
		w := stdgzip.NewWriter(&buf)
		w.Write(src)
		w.Close()
	case CodecSnappy:
		return s2.EncodeSnappyBest(nil, src)
	case CodecLZ4:
		w := lz4.NewWriter(&buf)
		w.Write(src)
		w.Close()
	case CodecZstd:
		w, err := zstd.NewWriter(&buf)
		if err != nil {
			t.Fatal(err)
		}
		w.Write(src)
		w.Close()
	}
	return buf.Bytes()
}

func TestDecodeKmsgBatches(t *testing.T) {
	recs := append(sampleRecords(), manyRecords(300, 3)...)
	baseTS := recs[0].Timestamp
	maxTS := baseTS
	for _, r := range recs {
		maxTS = max(maxTS, r.Timestamp)
	}
	for _, codec := range allCodecs {
		t.Run(codec.String(), func(t *testing.T) {
			rb := kmsg.RecordBatch{
				FirstOffset:          1_000_000,
				PartitionLeaderEpoch: 17,
				Attributes:           int16(codec) | attrTransactional,
				LastOffsetDelta:      int32(len(recs) - 1),
				FirstTimestamp:       baseTS,
				MaxTimestamp:         maxTS,
				ProducerID:           99,
				ProducerEpoch:        3,
				FirstSequence:        500,
				NumRecords:           int32(len(recs)),
				Records:              independentCompress(t, codec, kmsgRecords(recs, baseTS, nil)),
			}
			b, got := decodeOne(t, kmsgBatch(rb))
			want := Batch{
				BaseOffset: 1_000_000, LastOffset: 1_000_000 + int64(len(recs)-1), PartitionLeaderEpoch: 17,
				Magic: 2, Attributes: rb.Attributes, Codec: codec, TimestampType: TimestampCreateTime,
				Transactional: true, ControlType: ControlUnknown, BaseTimestamp: baseTS, MaxTimestamp: maxTS,
				ProducerID: 99, ProducerEpoch: 3, BaseSequence: 500, NumRecords: int32(len(recs)),
			}
			if err := equalHeader(b, want); err != nil {
				t.Fatal(err)
			}
			if err := equalRecords(got, recs, false); err != nil {
				t.Fatal(err)
			}
			for i := range got {
				if got[i].Offset != 1_000_000+int64(i) {
					t.Fatalf("record %d offset %d", i, got[i].Offset)
				}
			}
		})
	}
}

// Java's snappy-java frames snappy data ("xerial" framing); the decoder must
// accept it as well as raw blocks.
func TestDecodeXerialSnappy(t *testing.T) {
	recs := manyRecords(2000, 4) // > 32 KiB, so several chunks
	raw := kmsgRecords(recs, recs[0].Timestamp, nil)
	framed := append([]byte{}, xerialMagic...)
	framed = binary.BigEndian.AppendUint32(framed, 1) // version
	framed = binary.BigEndian.AppendUint32(framed, 1) // compatible version
	for rest := raw; len(rest) > 0; {
		chunk := rest[:min(len(rest), 32<<10)]
		rest = rest[len(chunk):]
		enc := s2.EncodeSnappy(nil, chunk)
		framed = binary.BigEndian.AppendUint32(framed, uint32(len(enc)))
		framed = append(framed, enc...)
	}
	data := kmsgBatch(kmsg.RecordBatch{
		Attributes: int16(CodecSnappy), LastOffsetDelta: int32(len(recs) - 1),
		FirstTimestamp: recs[0].Timestamp, MaxTimestamp: recs[len(recs)-1].Timestamp,
		ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1, NumRecords: int32(len(recs)), Records: framed,
	})
	_, got := decodeOne(t, data)
	if err := equalRecords(got, recs, false); err != nil {
		t.Fatal(err)
	}
}

// For uncompressed batches the bytes are fully determined by the fields, so
// our encoder must produce exactly kmsg's bytes.
func TestEncodeMatchesKmsg(t *testing.T) {
	for name, recs := range map[string][]Record{
		"sample": sampleRecords(),
		"many":   manyRecords(1000, 5),
		"extreme timestamps": {
			{Value: []byte("a"), Timestamp: 0},
			{Value: []byte("b"), Timestamp: math.MaxInt64 / 4},
			{Value: []byte("c"), Timestamp: -5},
		},
	} {
		t.Run(name, func(t *testing.T) {
			e := encode(t, CodecNone, recs)
			baseTS, maxTS := recs[0].Timestamp, recs[0].Timestamp
			for _, r := range recs {
				maxTS = max(maxTS, r.Timestamp)
			}
			rb := kmsg.RecordBatch{
				FirstOffset: 0, PartitionLeaderEpoch: -1, Attributes: 0,
				LastOffsetDelta: int32(len(recs) - 1), FirstTimestamp: baseTS, MaxTimestamp: maxTS,
				ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1, NumRecords: int32(len(recs)),
				Records: kmsgRecords(recs, baseTS, nil),
			}
			if want := kmsgBatch(rb); !bytes.Equal(e.Bytes(), want) {
				t.Fatalf("encoded batch differs from kmsg's\n got  %x\n want %x", trunc(e.Bytes()), trunc(want))
			}

			e.SetProducer(1<<40, 12, 77)
			e.SetTransactional(true)
			rb.ProducerID, rb.ProducerEpoch, rb.FirstSequence = 1<<40, 12, 77
			rb.Attributes = attrTransactional
			if want := kmsgBatch(rb); !bytes.Equal(e.Bytes(), want) {
				t.Fatal("batch after SetProducer/SetTransactional differs from kmsg's")
			}

			// A Builder with Transactional sets the attribute itself.
			b := NewBuilder(BuilderOptions{Transactional: true})
			for i := range recs {
				if !b.Add(&recs[i]) {
					t.Fatal("Add refused a record")
				}
			}
			te, err := b.Finish(CodecNone)
			if err != nil {
				t.Fatal(err)
			}
			te.SetProducer(1<<40, 12, 77)
			if !bytes.Equal(te.Bytes(), e.Bytes()) {
				t.Fatal("batch of a Transactional Builder differs from one after SetTransactional")
			}
		})
	}
}

// kmsg can also parse; check that it reads our compressed batch header the
// same way (the records are compared through our decoder elsewhere).
func TestKmsgReadsOurHeader(t *testing.T) {
	recs := manyRecords(50, 6)
	for _, codec := range allCodecs {
		e := encode(t, codec, recs)
		e.SetProducer(5, 6, 7)
		var rb kmsg.RecordBatch
		if err := rb.ReadFrom(e.Bytes()); err != nil {
			t.Fatalf("%v: kmsg ReadFrom: %v", codec, err)
		}
		if rb.NumRecords != 50 || rb.LastOffsetDelta != 49 || rb.ProducerID != 5 || rb.ProducerEpoch != 6 ||
			rb.FirstSequence != 7 || rb.Attributes != int16(codec) || int(rb.Length) != len(e.Bytes())-12 ||
			uint32(rb.CRC) != crc32c(e.Bytes()[21:]) {
			t.Fatalf("%v: kmsg read %+v", codec, rb)
		}
		if codec == CodecNone {
			continue
		}
		raw, err := decompress(rb.Records, codec, 1<<30)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(raw, kmsgRecords(recs, recs[0].Timestamp, nil)) {
			t.Fatalf("%v: decompressed records differ from kmsg's encoding", codec)
		}
	}
}
