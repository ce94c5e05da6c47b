package fetch

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"testing"

	"github.com/riffle-go/riffle/internal/batch"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// encodeAt returns an uncompressed batch of n records with offsets
// base..base+n-1.
func encodeAt(t *testing.T, base int64, n int) []byte {
	t.Helper()
	b := batch.NewBuilder(batch.BuilderOptions{})
	for i := range n {
		b.Add(&batch.Record{Value: []byte{byte(base) + byte(i)}, Timestamp: 1})
	}
	e, err := b.Finish(batch.CodecNone)
	if err != nil {
		t.Fatal(err)
	}
	out := bytes.Clone(e.Bytes())
	binary.BigEndian.PutUint64(out, uint64(base))
	return out
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// breakLastRecord corrupts the batch's last record (its header-count
// varint) and fixes the CRC, so the batch fails only when its records are
// decoded: after the earlier ones were already handed to the sink.
func breakLastRecord(b []byte) []byte {
	b = bytes.Clone(b)
	b[len(b)-1] = 0x7f // header count 63 in a record with no room for it
	binary.BigEndian.PutUint32(b[17:], crc32.Checksum(b[21:], castagnoli))
	return b
}

func TestDecodePartitionToDropsCorruptBatch(t *testing.T) {
	good := encodeAt(t, 10, 3) // 10..12
	bad := breakLastRecord(encodeAt(t, 13, 3))
	rp := &kmsg.FetchResponseTopicPartition{HighWatermark: 20, LastStableOffset: 20, RecordBatches: append(good, bad...)}

	// From 11: the first batch's record 10 is skipped, 11 and 12 stand;
	// the corrupt batch's first two records, already added, are dropped.
	var sink SliceSink
	res := DecodePartitionTo(rp, 11, DecodeOptions{}, &sink)
	var be *batch.BatchError
	if !errors.As(res.Err, &be) || !errors.Is(res.Err, batch.ErrCorrupt) {
		t.Fatalf("err = %v, want a corrupt-batch error", res.Err)
	}
	var offs []int64
	for _, r := range sink.Records {
		offs = append(offs, r.Offset)
	}
	if len(offs) != 2 || offs[0] != 11 || offs[1] != 12 {
		t.Fatalf("records %v, want [11 12]", offs)
	}
	if res.NextOffset != 13 {
		t.Fatalf("next offset %d, want 13 (the corrupt batch)", res.NextOffset)
	}

	// The same through DecodePartition.
	res = DecodePartition(rp, 10, DecodeOptions{})
	if len(res.Records) != 3 || res.NextOffset != 13 || res.Err == nil {
		t.Fatalf("DecodePartition: %d records, next %d, err %v", len(res.Records), res.NextOffset, res.Err)
	}
}

// countSink counts what it is given, to check Grow's bound.
type countSink struct{ grow, added int }

func (c *countSink) Grow(n int)       { c.grow = n }
func (c *countSink) Add(batch.Record) { c.added++ }
func (c *countSink) Drop(n int)       { c.added -= n }

func TestDecodePartitionToGrowBound(t *testing.T) {
	data := append(encodeAt(t, 0, 4), encodeAt(t, 4, 5)...)
	rp := &kmsg.FetchResponseTopicPartition{HighWatermark: 9, LastStableOffset: 9, RecordBatches: data}
	var c countSink
	res := DecodePartitionTo(rp, 2, DecodeOptions{}, &c)
	if res.Err != nil || res.NextOffset != 9 {
		t.Fatalf("err %v next %d", res.Err, res.NextOffset)
	}
	if c.added != 7 || c.grow < 1 || c.grow > len(data)/32+1 {
		t.Fatalf("added %d, grow %d", c.added, c.grow)
	}
	// A record count inflated by corruption (read before the CRC check)
	// sizes nothing beyond one record per 32 wire bytes.
	bad := bytes.Clone(data)
	binary.BigEndian.PutUint32(bad[57:], 1<<30)
	c = countSink{}
	DecodePartitionTo(&kmsg.FetchResponseTopicPartition{HighWatermark: 9, LastStableOffset: 9, RecordBatches: bad}, 0, DecodeOptions{}, &c)
	if c.grow > len(bad)/32+1 {
		t.Fatalf("a corrupt count grew the sink to %d records for %d bytes", c.grow, len(bad))
	}
}

// With End, batches starting at or past it are not decoded, and the next
// offset stops before them.
func TestDecodePartitionToEnd(t *testing.T) {
	data := append(encodeAt(t, 0, 4), encodeAt(t, 4, 4)...)
	data = append(data, breakLastRecord(encodeAt(t, 8, 4))...) // never decoded
	rp := &kmsg.FetchResponseTopicPartition{HighWatermark: 12, LastStableOffset: 12, RecordBatches: data}
	var sink SliceSink
	res := DecodePartitionTo(rp, 1, DecodeOptions{End: 6}, &sink)
	if res.Err != nil || res.NextOffset != 8 || len(sink.Records) != 7 {
		t.Fatalf("err %v next %d records %d; want nil, 8, 7 (1..7: the batch holding 6 is whole)", res.Err, res.NextOffset, len(sink.Records))
	}
	if want := 2 * len(encodeAt(t, 0, 4)); res.Bytes != want {
		t.Fatalf("bytes %d, want %d (the two batches read)", res.Bytes, want)
	}
	// A gap (compaction): nothing in [4, 6) past batch 0..3 but a batch
	// at 20: the next offset moves to it.
	gap := append(encodeAt(t, 0, 4), encodeAt(t, 20, 2)...)
	res = DecodePartitionTo(&kmsg.FetchResponseTopicPartition{HighWatermark: 22, LastStableOffset: 22, RecordBatches: gap}, 4, DecodeOptions{End: 6}, &SliceSink{})
	if res.Err != nil || res.NextOffset != 20 {
		t.Fatalf("gap: err %v next %d, want 20", res.Err, res.NextOffset)
	}
}
