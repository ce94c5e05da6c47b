package batch

import (
	"hash/crc32"
	"math"
)

// Legacy message sets (magic 0 and 1) predate record batches. Brokers still
// return them for topics whose data was written in the old formats and never
// rewritten. Each entry is
//
//	offset int64, size int32, crc uint32 (CRC-32 IEEE of what follows),
//	magic int8, attributes int8, [timestamp int64 if magic 1],
//	key (int32 length, -1 for null), value (int32 length, -1 for null)
//
// A compressed entry (attributes codec bits non-zero) is a wrapper whose
// value is a compressed message set of inner entries. For magic 0, inner
// offsets are absolute; for magic 1 they are relative, and the wrapper holds
// the absolute offset of the last inner message.
//
// Each outer entry becomes one Batch. This path is not tuned like the v2 one;
// it only has to be correct and safe.

type legacyMsg struct {
	offset int64
	magic  int8
	attrs  uint8
	ts     int64
	key    []byte
	value  []byte
}

// parseLegacy parses one complete entry (offset and size included) and
// returns a non-empty reason if it is malformed.
func parseLegacy(entry []byte, checkCRC bool) (m legacyMsg, reason string) {
	if len(entry) < lengthOverhead+minV0Length {
		return m, "message too short"
	}
	m.offset = int64(be.Uint64(entry))
	msg := entry[lengthOverhead:]
	if checkCRC && crc32.ChecksumIEEE(msg[4:]) != be.Uint32(msg) {
		return m, "CRC-32 mismatch"
	}
	m.magic = int8(msg[4])
	m.attrs = msg[5]
	p := 6
	switch m.magic {
	case 0:
		m.ts = -1
	case 1:
		if len(msg) < minV1Length {
			return m, "message too short"
		}
		m.ts = int64(be.Uint64(msg[p:]))
		p += 8
	default:
		return m, "bad magic in message set"
	}
	var ok bool
	if m.key, p, ok = legacyBytes(msg, p); !ok {
		return m, "bad key length"
	}
	if m.value, p, ok = legacyBytes(msg, p); !ok {
		return m, "bad value length"
	}
	if p != len(msg) {
		return m, "message size mismatch"
	}
	return m, ""
}

func legacyBytes(b []byte, p int) ([]byte, int, bool) {
	if len(b)-p < 4 {
		return nil, -1, false
	}
	n := int32(be.Uint32(b[p:]))
	p += 4
	if n == -1 {
		return nil, p, true
	}
	if n < 0 || int(n) > len(b)-p {
		return nil, -1, false
	}
	end := p + int(n)
	return b[p:end:end], end, true
}

func (it *Iterator) decodeLegacy(raw []byte, start int, magic int8) (Batch, error) {
	b := Batch{
		BaseOffset:           int64(be.Uint64(raw)),
		PartitionLeaderEpoch: -1,
		Magic:                magic,
		ProducerID:           -1,
		ProducerEpoch:        -1,
		BaseSequence:         -1,
		ControlType:          ControlUnknown,
		raw:                  raw,
		maxSize:              it.opts.maxSize(),
		skipCRC:              it.opts.SkipCRC,
		pos:                  start,
	}
	b.LastOffset = b.BaseOffset
	m, reason := parseLegacy(raw, !it.opts.SkipCRC)
	if reason != "" {
		return b, it.fail(b.BaseOffset, start, ErrCorrupt, reason)
	}
	b.Attributes = int16(m.attrs)
	b.Codec = Codec(m.attrs & attrCodecMask)
	if magic == 0 {
		b.TimestampType = TimestampNone
	} else {
		b.TimestampType = TimestampType((m.attrs & attrLogAppendTime) >> 3)
	}
	b.BaseTimestamp, b.MaxTimestamp = m.ts, m.ts
	if b.Codec == CodecNone {
		b.NumRecords = 1
		b.records = raw
		return b, nil
	}
	if b.Codec > CodecLZ4 {
		return b, it.fail(b.BaseOffset, start, ErrUnsupported, "compression codec not valid for legacy messages")
	}
	if m.value == nil {
		return b, it.fail(b.BaseOffset, start, ErrCorrupt, "compressed message without value")
	}
	inner, err := decompress(m.value, b.Codec, b.maxSize)
	if err != nil {
		return b, decompressError(b.BaseOffset, start, err)
	}
	b.records = inner
	b.decompressed = true

	// Validate the inner set now and learn its offsets: a consumer needs
	// BaseOffset and LastOffset before it decides to decode records.
	var count int
	var first, last int64
	for rem := inner; len(rem) > 0; count++ {
		entry, reason := nextLegacyEntry(rem)
		if reason == "" {
			var im legacyMsg
			im, reason = parseLegacy(entry, !it.opts.SkipCRC)
			if reason == "" && im.attrs&attrCodecMask != 0 {
				reason = "nested compression"
			}
			if count == 0 {
				first = im.offset
			}
			last = im.offset
		}
		if reason != "" {
			return b, it.fail(b.BaseOffset, start, ErrCorrupt, "inner message: "+reason)
		}
		rem = rem[len(entry):]
	}
	if count == 0 {
		return b, it.fail(b.BaseOffset, start, ErrCorrupt, "compressed message set is empty")
	}
	if count > math.MaxInt32 {
		return b, it.fail(b.BaseOffset, start, ErrCorrupt, "too many inner messages")
	}
	b.NumRecords = int32(count)
	wrapper := b.BaseOffset
	if magic == 1 {
		// Relative inner offsets: the wrapper's offset is that of the
		// last inner message.
		b.BaseOffset = wrapper - last + first
		b.LastOffset = wrapper
	} else {
		b.BaseOffset = first
		// Never report a last offset below the wrapper's: the consumer
		// resumes after it, and must not fetch this wrapper again.
		b.LastOffset = max(last, wrapper)
	}
	return b, nil
}

// nextLegacyEntry returns the first entry of a message set.
func nextLegacyEntry(set []byte) ([]byte, string) {
	if len(set) < lengthOverhead {
		return nil, "truncated"
	}
	size := int32(be.Uint32(set[offLength:]))
	if size < minV0Length || int64(size) > int64(len(set)-lengthOverhead) {
		return nil, "bad size"
	}
	return set[:lengthOverhead+int(size)], ""
}

func (b *Batch) appendLegacy(dst []Record) ([]Record, error) {
	corrupt := func(reason string) ([]Record, error) {
		return dst, &BatchError{Offset: b.BaseOffset, Pos: b.pos, Err: ErrCorrupt, Reason: reason}
	}
	if b.records == nil {
		return corrupt("batch was not decoded")
	}
	if b.Codec == CodecNone {
		m, reason := parseLegacy(b.records, false) // CRC checked by Next
		if reason != "" {
			return corrupt(reason)
		}
		return append(dst, Record{Key: m.key, Value: m.value, Timestamp: m.ts, Offset: m.offset, LeaderEpoch: -1}), nil
	}
	orig := len(dst)
	if cap(dst)-orig < int(b.NumRecords) {
		nd := make([]Record, orig, orig+int(b.NumRecords))
		copy(nd, dst)
		dst = nd
	}
	// Magic 1 inner offsets are relative; Next derived BaseOffset for the
	// first of them, so each maps to BaseOffset + (rel - firstRel).
	var firstRel int64
	haveFirst := false
	for rem := b.records; len(rem) > 0; {
		entry, reason := nextLegacyEntry(rem)
		if reason != "" {
			return corrupt(reason)
		}
		rem = rem[len(entry):]
		m, reason := parseLegacy(entry, false) // CRCs checked by Next
		if reason != "" {
			return corrupt(reason)
		}
		off := m.offset
		if b.Magic == 1 {
			if !haveFirst {
				firstRel, haveFirst = m.offset, true
			}
			off = b.BaseOffset + m.offset - firstRel
		}
		ts := m.ts
		switch {
		case b.Magic == 0:
			ts = -1
		case b.TimestampType == TimestampLogAppendTime:
			ts = b.MaxTimestamp
		}
		dst = append(dst, Record{Key: m.key, Value: m.value, Timestamp: ts, Offset: off, LeaderEpoch: -1})
	}
	return dst, nil
}
