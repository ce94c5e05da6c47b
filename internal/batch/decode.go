package batch

import (
	"io"
	"slices"
	"unsafe"
)

// DecodeOptions configures decoding.
type DecodeOptions struct {
	// SkipCRC disables CRC verification (on by default, as in the Java
	// consumer's check.crcs).
	SkipCRC bool
	// MaxDecompressedSize bounds the decompressed size of one compressed
	// batch (or legacy wrapper message); zero means
	// DefaultMaxDecompressedSize. Larger batches fail with ErrTooLarge,
	// without more than about twice the limit being allocated (for zstd,
	// twice the larger of the limit and 8 MiB: see zstdMinMemory).
	MaxDecompressedSize int
}

func (o *DecodeOptions) maxSize() int {
	if o.MaxDecompressedSize > 0 {
		return o.MaxDecompressedSize
	}
	return DefaultMaxDecompressedSize
}

// Iterator walks the batches of a fetched record set: the concatenation of
// zero or more v2 record batches and legacy message set entries that a fetch
// response carries for one partition.
//
// Use it as:
//
//	it := batch.NewIterator(data, opts)
//	for {
//		b, err := it.Next()
//		if err == io.EOF {
//			break
//		}
//		if err != nil {
//			// only this batch is bad; b.BaseOffset says where
//		}
//		recs, err = b.AppendRecords(recs[:0])
//	}
type Iterator struct {
	data      []byte
	pos       int
	opts      DecodeOptions
	done      bool
	truncated bool
}

// NewIterator returns an Iterator over data. Decoded records alias data.
func NewIterator(data []byte, opts DecodeOptions) *Iterator {
	return &Iterator{data: data, opts: opts}
}

// Reset makes the Iterator iterate over data, reusing it.
func (it *Iterator) Reset(data []byte, opts DecodeOptions) {
	*it = Iterator{data: data, opts: opts}
}

// Truncated reports whether iteration ended at a partial batch. Brokers cut
// fetch responses at byte limits, so this is normal after other batches; a
// consumer that gets no complete batch at all and Truncated has hit a batch
// larger than its fetch size.
func (it *Iterator) Truncated() bool { return it.truncated }

// Pos returns the byte position of the next batch in the input.
func (it *Iterator) Pos() int { return it.pos }

// minimum entry sizes after the 12 bytes of offset and length.
const (
	minV2Length = headerSize - lengthOverhead // 49
	minV0Length = 4 + 1 + 1 + 4 + 4           // crc, magic, attributes, key, value
	minV1Length = minV0Length + 8             // plus timestamp
)

// Next decodes the header of the next batch and verifies its CRC. It returns
// io.EOF when no complete batch remains; a trailing partial batch is skipped
// silently.
//
// Any other error is a *BatchError concerning only the returned batch, whose
// header fields are filled in as far as they could be read. Iteration may
// continue with the next batch, unless the batch's length framing was
// unusable, in which case the next call returns io.EOF.
//
// For control batches, Next also decodes the control record type. For legacy
// compressed messages it decompresses the wrapped message set, because the
// batch's offsets are only known from inside it.
func (it *Iterator) Next() (Batch, error) {
	if it.done {
		return Batch{}, io.EOF
	}
	rem := it.data[it.pos:]
	if len(rem) < lengthOverhead {
		it.done = true
		it.truncated = len(rem) > 0
		return Batch{}, io.EOF
	}
	start := it.pos
	baseOffset := int64(be.Uint64(rem[offBaseOffset:]))
	length := int32(be.Uint32(rem[offLength:]))
	if length < 0 {
		it.done = true
		return Batch{BaseOffset: baseOffset}, it.fail(baseOffset, start, ErrCorrupt, "negative batch length")
	}
	if int64(length) > int64(len(rem)-lengthOverhead) {
		// Truncated by the broker's byte limits (or an absurd length,
		// which is indistinguishable): nothing is allocated for it.
		it.done = true
		it.truncated = true
		return Batch{}, io.EOF
	}
	if length < minV0Length {
		it.done = true
		return Batch{BaseOffset: baseOffset}, it.fail(baseOffset, start, ErrCorrupt, "batch length too small")
	}
	raw := rem[:lengthOverhead+int(length)]
	it.pos += len(raw)

	switch magic := int8(raw[offMagic]); magic {
	case 2:
		return it.decodeV2(raw, start)
	case 0, 1:
		return it.decodeLegacy(raw, start, magic)
	default:
		return Batch{BaseOffset: baseOffset, LastOffset: baseOffset, Magic: magic},
			it.fail(baseOffset, start, ErrUnsupported, "unknown magic")
	}
}

func (it *Iterator) fail(offset int64, pos int, err error, reason string) error {
	return &BatchError{Offset: offset, Pos: pos, Err: err, Reason: reason}
}

func (it *Iterator) decodeV2(raw []byte, start int) (Batch, error) {
	b := Batch{
		BaseOffset: int64(be.Uint64(raw[offBaseOffset:])),
		Magic:      2,
		raw:        raw,
		maxSize:    it.opts.maxSize(),
		pos:        start,
	}
	b.LastOffset = b.BaseOffset
	if len(raw) < headerSize {
		return b, it.fail(b.BaseOffset, start, ErrCorrupt, "batch length too small")
	}
	if !it.opts.SkipCRC {
		if want, got := be.Uint32(raw[offCRC:]), crc32c(raw[offAttributes:]); want != got {
			return b, it.fail(b.BaseOffset, start, ErrCorrupt, "CRC-32C mismatch")
		}
	}
	attrs := int16(be.Uint16(raw[offAttributes:]))
	lastDelta := int32(be.Uint32(raw[offLastOffsetDelta:]))
	b.LastOffset = b.BaseOffset + int64(lastDelta)
	b.PartitionLeaderEpoch = int32(be.Uint32(raw[offLeaderEpoch:]))
	b.Attributes = attrs
	b.Codec = Codec(attrs & attrCodecMask)
	b.TimestampType = TimestampType((attrs & attrLogAppendTime) >> 3)
	b.Transactional = attrs&attrTransactional != 0
	b.Control = attrs&attrControl != 0
	b.BaseTimestamp = int64(be.Uint64(raw[offBaseTimestamp:]))
	b.MaxTimestamp = int64(be.Uint64(raw[offMaxTimestamp:]))
	b.ProducerID = int64(be.Uint64(raw[offProducerID:]))
	b.ProducerEpoch = int16(be.Uint16(raw[offProducerEpoch:]))
	b.BaseSequence = int32(be.Uint32(raw[offBaseSequence:]))
	b.NumRecords = int32(be.Uint32(raw[offNumRecords:]))
	b.records = raw[headerSize:]
	b.ControlType = ControlUnknown

	switch {
	case lastDelta < 0:
		// A consumer advances to LastOffset+1; going backwards would
		// loop forever.
		b.LastOffset = b.BaseOffset
		return b, it.fail(b.BaseOffset, start, ErrCorrupt, "negative last offset delta")
	case b.NumRecords < 0:
		return b, it.fail(b.BaseOffset, start, ErrCorrupt, "negative record count")
	case !b.Codec.Valid():
		return b, it.fail(b.BaseOffset, start, ErrUnsupported, "unknown compression codec")
	}
	if b.Control {
		if err := b.decodeControlType(); err != nil {
			return b, err
		}
	}
	return b, nil
}

// Batch is one decoded batch header: a v2 record batch, or a legacy message
// (a compressed wrapper message counts as one batch of its inner messages).
//
// Fields that legacy messages lack hold their "none" values: producer id,
// epoch, base sequence and partition leader epoch are -1.
type Batch struct {
	// BaseOffset is the offset of the first record of the batch.
	BaseOffset int64
	// LastOffset is BaseOffset plus the header's last offset delta. Log
	// compaction can remove the final records of a batch while keeping
	// this, so a consumer must resume after LastOffset, not after the last
	// record it saw.
	LastOffset int64
	// PartitionLeaderEpoch is the leader epoch the batch was appended in.
	PartitionLeaderEpoch int32
	// Magic is the format version: 2, or 0/1 for legacy messages.
	Magic int8
	// Attributes are the raw attribute bits; the fields below decode them.
	Attributes int16
	// Codec is the batch's compression codec.
	Codec Codec
	// TimestampType tells whether timestamps are the producer's or the
	// broker's append time (in which case all records get MaxTimestamp).
	TimestampType TimestampType
	// Transactional is set for batches written by a transactional producer.
	Transactional bool
	// Control is set for control batches, which carry transaction markers
	// (or KRaft control records), never user records.
	Control bool
	// ControlType is the type of the control record of a control batch,
	// ControlUnknown if it has none or is not a control batch.
	ControlType ControlType
	// BaseTimestamp is the timestamp record deltas are relative to.
	BaseTimestamp int64
	// MaxTimestamp is the largest record timestamp (or the log append
	// time).
	MaxTimestamp int64
	// ProducerID is the id of the idempotent or transactional producer
	// that wrote the batch, or -1.
	ProducerID int64
	// ProducerEpoch is the producer's epoch, or -1.
	ProducerEpoch int16
	// BaseSequence is the sequence number of the first record, or -1.
	BaseSequence int32
	// NumRecords is the record count from the header.
	NumRecords int32

	raw          []byte // the whole batch as received
	records      []byte // v2: record area; legacy: message or inner set
	decompressed bool   // records holds decompressed data
	maxSize      int
	skipCRC      bool // legacy inner messages
	pos          int  // byte position in the iterated input, for errors
}

// Bytes returns the wire bytes of the whole batch, aliasing the input.
func (b *Batch) Bytes() []byte { return b.raw }

// AppendRecords decodes the batch's records, decompressing them first if
// needed, and appends them to dst. Keys, values and headers alias the input
// (or the decompressed buffer, which is allocated per batch and retained only
// by the records). Header slices of all records share one allocation per
// call.
//
// On error, dst is returned unchanged along with a *BatchError.
func (b *Batch) AppendRecords(dst []Record) ([]Record, error) {
	orig := dst
	if n := int(b.NumRecords); n > 0 && n <= len(b.records) {
		// Grow geometrically: a fetch response holds many batches
		// appended to one slice, and growing to exactly len+n would
		// copy everything decoded so far once per batch. (n is bounded
		// by the raw size: a hostile count allocates nothing.)
		dst = slices.Grow(dst, n)
	}
	if _, err := b.EachRecord(func(r Record) { dst = append(dst, r) }); err != nil {
		clear(dst[len(orig):])
		return orig, err
	}
	return dst, nil
}

// EachRecord decodes the batch's records, decompressing them first if
// needed, and calls fn with each in order. (By value: a pointer to a
// reused Record would escape to the heap through fn.) Its byte slices
// alias the input (or the decompressed buffer) and may be kept, as with
// AppendRecords.
//
// It returns how many records fn saw. On error (a *BatchError) the batch is
// corrupt, and the n records fn already saw belong to it: a caller that
// wants whole batches or nothing must drop them.
func (b *Batch) EachRecord(fn func(r Record)) (n int, err error) {
	if b.Magic != 2 {
		recs, err := b.appendLegacy(nil)
		if err != nil {
			return 0, err
		}
		for _, r := range recs {
			fn(r)
		}
		return len(recs), nil
	}
	if err := b.decompress(); err != nil {
		return 0, err
	}
	n, reason := decodeV2Records(b.records, b, fn)
	if reason != "" {
		return n, &BatchError{Offset: b.BaseOffset, Pos: b.pos, Err: ErrCorrupt, Reason: reason}
	}
	return n, nil
}

// decompress replaces b.records with their decompressed form, once.
func (b *Batch) decompress() *BatchError {
	if b.Codec == CodecNone || b.decompressed {
		return nil
	}
	out, err := decompress(b.records, b.Codec, b.maxSize)
	if err != nil {
		return decompressError(b.BaseOffset, b.pos, err)
	}
	b.records = out
	b.decompressed = true
	return nil
}

func decompressError(offset int64, pos int, err error) *BatchError {
	switch err {
	case ErrTooLarge:
		return &BatchError{Offset: offset, Pos: pos, Err: ErrTooLarge, Reason: "decompression limit reached"}
	case ErrUnsupported:
		return &BatchError{Offset: offset, Pos: pos, Err: ErrUnsupported, Reason: "unknown compression codec"}
	}
	return &BatchError{Offset: offset, Pos: pos, Err: ErrCorrupt, Reason: "decompression failed: " + err.Error()}
}

// minRecordSize is the smallest possible encoded v2 record: length,
// attributes, timestamp delta, offset delta, key length, value length and
// header count, one byte each. Record counts are checked against it before
// anything is allocated for them.
const minRecordSize = 7

// decodeV2Records decodes the batch's records from data, calling fn with
// each; it returns how many it passed, and a non-empty reason on malformed
// input (strings rather than errors keep the hot loop free of
// allocation-prone code).
func decodeV2Records(data []byte, b *Batch, fn func(Record)) (int, string) {
	n := int(b.NumRecords)
	if n > len(data)/minRecordSize {
		return 0, "record count exceeds batch size"
	}
	logAppend := b.TimestampType == TimestampLogAppendTime
	var hdrs []Header // shared backing store for all records' headers
	p := 0
	for i := range n {
		length, q := readVarint(data, p)
		if q < 0 || length < 0 || int(length) > len(data)-q {
			return i, "bad record length"
		}
		end := q + int(length)
		rec := data[:end] // reads below cannot run past the record
		q++               // attributes: unused
		tsDelta, q := readVarlong(rec, q)
		offDelta, q := readVarint(rec, q)
		key, q := readBytes(rec, q)
		value, q := readBytes(rec, q)
		nh, q := readVarint(rec, q)
		if q < 0 || nh < 0 || int(nh) > (end-q)/2 {
			return i, "malformed record"
		}
		var headers []Header
		if nh > 0 {
			start := len(hdrs)
			for range nh {
				var hk, hv []byte
				hk, q = readBytes(rec, q)
				hv, q = readBytes(rec, q)
				if q < 0 || hk == nil {
					return i, "malformed record header"
				}
				hdrs = append(hdrs, Header{Key: aliasString(hk), Value: hv})
			}
			headers = hdrs[start:len(hdrs):len(hdrs)]
		}
		if q != end {
			return i, "record length mismatch"
		}
		ts := b.BaseTimestamp + tsDelta
		if logAppend {
			ts = b.MaxTimestamp
		}
		fn(Record{Key: key, Value: value, Headers: headers, Timestamp: ts, Offset: b.BaseOffset + int64(offDelta), LeaderEpoch: b.PartitionLeaderEpoch})
		p = end
	}
	if p != len(data) {
		return n, "trailing bytes after records"
	}
	return n, ""
}

// aliasString returns b as a string without copying. Header keys decoded
// this way alias the batch buffer like keys and values do; copying them would
// be the one allocation per header left in decoding.
func aliasString(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}

// CountRecords returns an upper bound of the records of the complete v2
// batches in data that end at or after from, reading only their headers
// (no CRC, no decompression): enough to size a buffer before decoding.
// Counts are capped by the bytes each batch really has, so a hostile
// header cannot inflate the result beyond len(data)/minRecordSize. Legacy
// messages count one record each (a compressed wrapper may hold more;
// the bound is then low and the buffer grows).
func CountRecords(data []byte, from int64) int {
	total := 0
	for len(data) >= lengthOverhead {
		length := int32(be.Uint32(data[offLength:]))
		if length < minV0Length || int64(length) > int64(len(data)-lengthOverhead) {
			break
		}
		raw := data[:lengthOverhead+int(length)]
		data = data[len(raw):]
		if raw[offMagic] != 2 || len(raw) < headerSize {
			total++
			continue
		}
		last := int64(be.Uint64(raw[offBaseOffset:])) + int64(int32(be.Uint32(raw[offLastOffsetDelta:])))
		if last < from || be.Uint16(raw[offAttributes:])&attrControl != 0 {
			continue
		}
		n := int(int32(be.Uint32(raw[offNumRecords:])))
		total += max(0, min(n, (len(raw)-headerSize)/minRecordSize))
	}
	return total
}
