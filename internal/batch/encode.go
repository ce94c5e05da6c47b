package batch

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/riffle-go/riffle/internal/bufpool"
)

// Layout of the v2 record batch header; every offset is from the batch start.
const (
	offBaseOffset      = 0  // int64
	offLength          = 8  // int32: bytes after this field
	offLeaderEpoch     = 12 // int32
	offMagic           = 16 // int8
	offCRC             = 17 // uint32, CRC-32C of everything from attributes on
	offAttributes      = 21 // int16
	offLastOffsetDelta = 23 // int32
	offBaseTimestamp   = 27 // int64
	offMaxTimestamp    = 35 // int64
	offProducerID      = 43 // int64
	offProducerEpoch   = 51 // int16
	offBaseSequence    = 53 // int32
	offNumRecords      = 57 // int32
	headerSize         = 61 // records start here

	// lengthOverhead is what the batch length field does not count.
	lengthOverhead = offLeaderEpoch
)

var be = binary.BigEndian

// BuilderOptions configures a Builder.
type BuilderOptions struct {
	// MaxBytes limits the encoded size of a batch, header included,
	// before compression. Zero means no limit. Kafka's own limit
	// (message.max.bytes) applies to the compressed batch, which is never
	// larger than this for compressible data; producers use this limit
	// as their batch.size.
	MaxBytes int
	// InitialCapacity is the capacity the first batch buffer is
	// allocated with; later batches use the size of the previous one.
	// Zero picks a small default.
	InitialCapacity int
	// Transactional sets the transactional attribute of the batches it
	// finishes (as SetTransactional does, without a second CRC pass).
	Transactional bool
}

// Builder accumulates the records of one batch for one partition, encoding
// each record into its wire form as it is added, so Add copies the record's
// bytes and the caller may reuse them immediately.
//
// A Builder is not safe for concurrent use. It can be reused after Finish or
// Reset.
type Builder struct {
	buf     []byte // header placeholder followed by encoded records
	max     int
	n       int32
	firstTS int64
	maxTS   int64
	capHint int
	attrs   uint16 // attributes besides the codec (BuilderOptions.Transactional)
}

// NewBuilder returns an empty Builder.
func NewBuilder(opts BuilderOptions) *Builder {
	b := &Builder{max: opts.MaxBytes, capHint: opts.InitialCapacity}
	if opts.Transactional {
		b.attrs = attrTransactional
	}
	if b.capHint <= 0 {
		b.capHint = 16 << 10
	}
	if b.max > 0 {
		b.capHint = min(b.capHint, b.max)
	}
	b.capHint = max(b.capHint, headerSize)
	return b
}

// EncodedSize returns the size of a v2 batch holding only rec, uncompressed.
// A record whose EncodedSize exceeds a Builder's MaxBytes can never be added.
func EncodedSize(rec *Record) int {
	body, ok := recordBodySize(rec, 0, 0)
	if !ok {
		return math.MaxInt
	}
	return headerSize + varintSize(int32(body)) + body
}

// BatchOverhead is the size of a v2 batch's header: an empty batch.
const BatchOverhead = headerSize

// RecordSizeBound returns an upper bound of the bytes rec takes in a batch
// (its length prefix included), whatever its offset and timestamp deltas:
// a producer can tell when a batch is full before encoding its records.
// It is math.MaxInt for a record that cannot be encoded.
func RecordSizeBound(rec *Record) int {
	body, ok := recordBodySize(rec, math.MinInt64, math.MinInt32) // the longest varints
	if !ok {
		return math.MaxInt
	}
	return varintSize(int32(body)) + body
}

// Sizes returns EncodedSize(rec) and RecordSizeBound(rec) from one pass
// over rec's fields (a producer needs both for every record).
func Sizes(rec *Record) (encoded, bound int) {
	body, ok := recordBodySize(rec, 0, 0)
	if !ok {
		return math.MaxInt, math.MaxInt
	}
	encoded = headerSize + varintSize(int32(body)) + body
	// The longest deltas take 10 (varlong) and 5 (varint) bytes where
	// zero deltas take one each.
	long := body + varlongSize(math.MinInt64) - varlongSize(0) + varintSize(math.MinInt32) - varintSize(0)
	if long > math.MaxInt32-headerSize-5 {
		return encoded, math.MaxInt
	}
	return encoded, varintSize(int32(long)) + long
}

// CheckSize returns an error wrapping ErrRecordTooLarge if rec cannot fit in
// a batch limited to maxBatchBytes (zero means no limit), so a producer can
// fail such a record at once instead of retrying it forever.
func CheckSize(rec *Record, maxBatchBytes int) error {
	size := EncodedSize(rec)
	if size == math.MaxInt {
		return fmt.Errorf("%w: record fields exceed 2 GiB", ErrRecordTooLarge)
	}
	if maxBatchBytes > 0 && size > maxBatchBytes {
		return fmt.Errorf("%w: %d bytes encoded, limit %d", ErrRecordTooLarge, size, maxBatchBytes)
	}
	return nil
}

// recordBodySize is the size of a record after its length prefix. ok is false
// if a field is too long for Kafka's int32 lengths.
func recordBodySize(r *Record, tsDelta int64, offDelta int32) (int, bool) {
	const maxField = math.MaxInt32
	if len(r.Key) > maxField || len(r.Value) > maxField || len(r.Headers) > maxField {
		return 0, false
	}
	s := 1 + varlongSize(tsDelta) + varintSize(offDelta) +
		bytesSize(r.Key) + bytesSize(r.Value) + varintSize(int32(len(r.Headers)))
	for i := range r.Headers {
		h := &r.Headers[i]
		if len(h.Key) > maxField || len(h.Value) > maxField {
			return 0, false
		}
		s += varintSize(int32(len(h.Key))) + len(h.Key) + bytesSize(h.Value)
	}
	if s > maxField-headerSize-5 {
		return 0, false
	}
	return s, true
}

// Add appends rec to the batch. It returns false, leaving the batch
// unchanged, if the batch would then exceed MaxBytes; the caller should
// Finish this batch and add rec to a new one. The first record of a batch is
// refused only if it alone exceeds the limit (see EncodedSize, CheckSize).
//
// Timestamps are encoded as deltas from the first record's timestamp, which
// becomes the batch's base timestamp; rec.Offset is ignored.
func (b *Builder) Add(rec *Record) bool {
	var tsDelta int64
	if b.n > 0 {
		tsDelta = rec.Timestamp - b.firstTS
	}
	body, ok := recordBodySize(rec, tsDelta, b.n)
	if !ok || b.n == math.MaxInt32 {
		return false
	}
	size := varintSize(int32(body)) + body
	cur := len(b.buf)
	if cur == 0 {
		cur = headerSize
	}
	if (b.max > 0 && cur+size > b.max) || cur+size-lengthOverhead > math.MaxInt32 {
		return false
	}

	if b.buf == nil {
		b.buf = bufpool.Get(max(b.capHint, headerSize+size))[:headerSize]
	}
	if b.n == 0 {
		b.firstTS = rec.Timestamp
		b.maxTS = rec.Timestamp
	} else if rec.Timestamp > b.maxTS {
		b.maxTS = rec.Timestamp
	}

	buf := b.buf
	p := len(buf)
	if cap(buf)-p < size {
		nb := bufpool.Get(max(2*cap(buf), p+size))[:p]
		copy(nb, buf)
		bufpool.Put(buf)
		buf = nb
	}
	buf = buf[:p+size]
	p = putVarint(buf, p, int32(body))
	buf[p] = 0 // record attributes: unused
	p = putVarlong(buf, p+1, tsDelta)
	p = putVarint(buf, p, b.n)
	p = putBytes(buf, p, rec.Key)
	p = putBytes(buf, p, rec.Value)
	p = putVarint(buf, p, int32(len(rec.Headers)))
	for i := range rec.Headers {
		h := &rec.Headers[i]
		p = putVarint(buf, p, int32(len(h.Key)))
		p += copy(buf[p:], h.Key)
		p = putBytes(buf, p, h.Value)
	}
	b.buf = buf
	b.n++
	return true
}

// NumRecords returns the number of records added since the last Finish or
// Reset.
func (b *Builder) NumRecords() int { return int(b.n) }

// Size returns the uncompressed encoded size of the batch so far, header
// included (the header size if empty).
func (b *Builder) Size() int { return max(len(b.buf), headerSize) }

// Reset discards the records added so far, keeping the buffer for reuse.
func (b *Builder) Reset() {
	if b.buf != nil {
		b.buf = b.buf[:headerSize]
	}
	b.n = 0
}

// Finish completes the batch, compressing its records with codec, and resets
// the Builder for a new batch. Compression happens here, on the caller's
// goroutine. The batch has base offset 0, partition leader epoch -1, the
// CreateTime timestamp type and no producer (id, epoch and base sequence
// -1) until SetProducer is called.
//
// Finish returns ErrEmpty if no record was added, and an error for an
// invalid codec.
func (b *Builder) Finish(codec Codec) (*Encoded, error) {
	if b.n == 0 {
		return nil, ErrEmpty
	}
	if !codec.Valid() {
		return nil, fmt.Errorf("%w: compression codec %d", ErrUnsupported, codec)
	}
	raw := b.buf
	var out []byte
	if codec == CodecNone {
		// Hand the buffer over: the uncompressed batch is already in
		// its final place. The next batch starts a buffer of the same
		// size, which is the best guess at what it will need.
		out = raw
		b.capHint = len(raw)
		b.buf = nil
	} else {
		// Compress into pooled scratch and copy out at the exact size:
		// the Encoded batch lives until the broker acknowledges it, and
		// compressors' worst-case bounds would pin far more memory than
		// the compressed data. The uncompressed buffer stays with the
		// Builder for the next batch.
		sp := getScratch()
		tmp := (*sp)[:0]
		tmp = grow(tmp, headerSize)[:headerSize]
		tmp, err := compress(tmp, raw[headerSize:], codec)
		if err != nil {
			putScratch(sp, tmp)
			return nil, err
		}
		out = bufpool.Get(len(tmp))[:len(tmp)]
		copy(out[headerSize:], tmp[headerSize:])
		putScratch(sp, tmp)
		b.buf = raw[:headerSize]
	}

	be.PutUint64(out[offBaseOffset:], 0)
	be.PutUint32(out[offLength:], uint32(len(out)-lengthOverhead))
	be.PutUint32(out[offLeaderEpoch:], math.MaxUint32) // -1
	out[offMagic] = 2
	be.PutUint16(out[offAttributes:], uint16(codec)|b.attrs)
	be.PutUint32(out[offLastOffsetDelta:], uint32(b.n-1))
	be.PutUint64(out[offBaseTimestamp:], uint64(b.firstTS))
	be.PutUint64(out[offMaxTimestamp:], uint64(b.maxTS))
	be.PutUint64(out[offProducerID:], math.MaxUint64)    // -1
	be.PutUint16(out[offProducerEpoch:], math.MaxUint16) // -1
	be.PutUint32(out[offBaseSequence:], math.MaxUint32)  // -1
	be.PutUint32(out[offNumRecords:], uint32(b.n))

	e := &Encoded{
		buf:          out,
		recordsCRC:   crc32c(out[headerSize:]),
		numRecords:   b.n,
		uncompressed: len(raw),
	}
	e.updateCRC()
	b.n = 0
	return e, nil
}

// Encoded is a finished record batch in wire form.
//
// The producer keeps it until the broker acknowledges it, possibly sending it
// several times; SetProducer and SetTransactional patch it in place. It is
// not safe to patch an Encoded while its bytes are being written elsewhere.
type Encoded struct {
	buf          []byte
	recordsCRC   uint32 // CRC-32C of buf[headerSize:], for cheap re-CRC
	numRecords   int32
	uncompressed int
}

// Release hands the batch's memory back for reuse by later batches, once the
// producer is done with it (acknowledged, or failed for good). Neither the
// Encoded nor any slice obtained from Bytes may be used afterwards. Calling
// Release is optional: an unreleased batch is simply garbage collected.
func (e *Encoded) Release() {
	if e.buf != nil {
		bufpool.Put(e.buf)
		e.buf = nil
	}
}

// Bytes returns the wire bytes of the batch. The slice aliases the Encoded
// and reflects later SetProducer calls.
func (e *Encoded) Bytes() []byte { return e.buf }

// NumRecords returns the number of records in the batch.
func (e *Encoded) NumRecords() int { return int(e.numRecords) }

// Codec returns the compression codec of the batch.
func (e *Encoded) Codec() Codec { return Codec(e.buf[offAttributes+1] & attrCodecMask) }

// UncompressedSize returns the size the batch had before compression, for
// compression-ratio metrics.
func (e *Encoded) UncompressedSize() int { return e.uncompressed }

// SetProducer sets the producer id, producer epoch and base sequence of the
// batch and updates its CRC, without recompressing: the producer calls it
// when the batch is first put into a produce request, and again should the
// sequence have to be reassigned.
func (e *Encoded) SetProducer(producerID int64, epoch int16, baseSequence int32) {
	be.PutUint64(e.buf[offProducerID:], uint64(producerID))
	be.PutUint16(e.buf[offProducerEpoch:], uint16(epoch))
	be.PutUint32(e.buf[offBaseSequence:], uint32(baseSequence))
	e.updateCRC()
}

// SetTransactional sets or clears the transactional attribute and updates
// the CRC.
func (e *Encoded) SetTransactional(transactional bool) {
	a := be.Uint16(e.buf[offAttributes:])
	if transactional {
		a |= attrTransactional
	} else {
		a &^= attrTransactional
	}
	be.PutUint16(e.buf[offAttributes:], a)
	e.updateCRC()
}

// updateCRC recomputes the batch CRC from the 40 header bytes it covers and
// the remembered CRC of the records.
func (e *Encoded) updateCRC() {
	h := crc32c(e.buf[offAttributes:headerSize])
	be.PutUint32(e.buf[offCRC:], crc32cCombine(h, e.recordsCRC, len(e.buf)-headerSize))
}
