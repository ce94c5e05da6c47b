package riffle

import (
	"encoding/hex"
	"strconv"
	"time"
	"unicode/utf8"
	"unsafe"

	"github.com/riffle-go/riffle/internal/batch"
)

// Record is a Kafka record. To produce, set Topic, Value and optionally
// Key, Headers and Timestamp; the producer fills in Partition (unless the
// ManualPartitioner is used, which reads it), Offset and, for a zero
// Timestamp, the time it was produced.
//
// A nil Key is a null key (records without a key are spread by the
// partitioner), distinct from an empty key. A nil Value is a null value:
// a tombstone on compacted topics.
type Record struct {
	Topic     string
	Partition int32
	// LeaderEpoch is the leader epoch of the batch a consumed record was
	// written in (KIP-320), -1 if unknown; ignored when producing.
	LeaderEpoch int32
	Key         []byte
	Value       []byte
	Headers     []Header
	Timestamp   time.Time
	// Offset is set when the record was written (or consumed). It is -1
	// for acks=0, where the broker does not say.
	Offset int64
	// DeliveryCount is how many times a share group (KIP-932) has handed
	// this record to a member, this delivery included: 1 the first time,
	// 2 after a release or an expired acquisition lock, and so on (Java's
	// ConsumerRecord.deliveryCount). Zero for records not consumed through
	// a ShareConsumer.
	DeliveryCount int16

	share *shareRef // the acquisition a ShareConsumer acknowledges (a pointer: the field would add 64 bytes to every Record)
}

// Header is a record header. A nil Value is a null header value.
type Header struct {
	Key   string
	Value []byte
}

// String formats the header as key=value, the value quoted as text when
// it is valid UTF-8 (key="v"), as hex bytes otherwise (key=0x00ff), and
// key=null for a nil value, so that %v of a []Header is readable.
func (h Header) String() string {
	switch {
	case h.Value == nil:
		return h.Key + "=null"
	case utf8.Valid(h.Value):
		return h.Key + "=" + strconv.Quote(string(h.Value))
	}
	return h.Key + "=0x" + hex.EncodeToString(h.Value)
}

// Records are encoded and decoded with batch.Header, a struct identical to
// Header, so their headers are viewed as Headers in place: copying them
// would cost an allocation per record. The pointer conversions compile only
// while the two structs stay identical.

func headersFromBatch(hs []batch.Header) []Header {
	return unsafe.Slice((*Header)(unsafe.SliceData(hs)), len(hs))
}

func headersToBatch(hs []Header) []batch.Header {
	return unsafe.Slice((*batch.Header)(unsafe.SliceData(hs)), len(hs))
}

func (r *Record) size() int {
	n := len(r.Key) + len(r.Value)
	for _, h := range r.Headers {
		n += len(h.Key) + len(h.Value)
	}
	return n
}
