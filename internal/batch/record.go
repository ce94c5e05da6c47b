package batch

// Record is a single Kafka record.
//
// The same type serves both directions. When encoding, Offset is ignored (a
// record's offset within a batch is its position). When decoding, all fields
// are set, and the slices alias the decoded buffer (see the package
// documentation).
type Record struct {
	// Key is the record key. A nil Key is a null key, which is distinct on
	// the wire from an empty, non-nil key.
	Key []byte
	// Value is the record value. A nil Value is a null value (a tombstone
	// for compacted topics), distinct from an empty value.
	Value []byte
	// Headers are the record headers, in order.
	Headers []Header
	// Timestamp is the record timestamp in milliseconds since the Unix
	// epoch. Millis rather than time.Time because that is the wire unit:
	// converting would cost time on every record in both directions.
	Timestamp int64
	// Offset is the absolute offset of the record; set only by decoding.
	Offset int64
	// LeaderEpoch is the batch's partition leader epoch; set only by
	// decoding (-1 for legacy messages, which have none).
	LeaderEpoch int32
}

// Header is a record header. A nil Value is a null header value.
type Header struct {
	Key   string
	Value []byte
}

// TimestampType tells how the timestamps of a batch's records were assigned.
type TimestampType int8

const (
	// TimestampNone is the timestamp type of magic 0 messages, which have
	// no timestamps; their records have Timestamp -1.
	TimestampNone TimestampType = -1
	// TimestampCreateTime means the producer set the timestamps.
	TimestampCreateTime TimestampType = 0
	// TimestampLogAppendTime means the broker overwrote the timestamps
	// with its append time; every record of the batch then carries the
	// batch's MaxTimestamp.
	TimestampLogAppendTime TimestampType = 1
)

// String returns the Kafka name of the timestamp type.
func (t TimestampType) String() string {
	switch t {
	case TimestampNone:
		return "NoTimestampType"
	case TimestampCreateTime:
		return "CreateTime"
	case TimestampLogAppendTime:
		return "LogAppendTime"
	}
	return "TimestampType(?)"
}

// Bits of the v2 batch attributes (and, for the low four, of legacy message
// attributes).
const (
	attrCodecMask     = 0x07
	attrLogAppendTime = 0x08
	attrTransactional = 0x10
	attrControl       = 0x20
)
