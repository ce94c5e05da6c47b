package riffbeam

import (
	"encoding/binary"
	"fmt"
	"reflect"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/riffle-go/riffle"
)

// Record is a Kafka record as a plain Beam value: [Read] emits it (with
// the record's timestamp as its event time) and [Write] produces it. Its
// Beam coder is a compact binary encoding registered by this package.
type Record struct {
	Topic     string
	Partition int32
	Offset    int64
	Key       []byte // nil: no key
	Value     []byte // nil: a tombstone
	Headers   []Header
	Timestamp time.Time
}

// Header is a record header.
type Header struct {
	Key   string
	Value []byte
}

func init() {
	beam.RegisterCoder(reflect.TypeOf(Record{}), encodeRecord, decodeRecord)
}

// fromRiffle copies r into a Record. Key and Value keep aliasing r's
// slices (a Reader's records may be kept); headers are copied.
func fromRiffle(r *riffle.Record) Record {
	out := Record{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Key: r.Key, Value: r.Value, Timestamp: r.Timestamp}
	if len(r.Headers) > 0 {
		out.Headers = make([]Header, len(r.Headers))
		for i, h := range r.Headers {
			out.Headers[i] = Header{Key: h.Key, Value: h.Value}
		}
	}
	return out
}

// toRiffle makes a riffle.Record to produce; an empty Topic becomes topic.
func (r Record) toRiffle(topic string) *riffle.Record {
	out := &riffle.Record{Topic: r.Topic, Key: r.Key, Value: r.Value, Timestamp: r.Timestamp}
	if out.Topic == "" {
		out.Topic = topic
	}
	if len(r.Headers) > 0 {
		out.Headers = make([]riffle.Header, len(r.Headers))
		for i, h := range r.Headers {
			out.Headers[i] = riffle.Header{Key: h.Key, Value: h.Value}
		}
	}
	return out
}

// The coder: varint-prefixed fields; byte slices as length+1 so nil and
// empty differ (0 is nil). The timestamp is Unix milliseconds (Kafka's
// precision), with a flag for the zero time.
func encodeRecord(r Record) []byte {
	n := 32 + len(r.Topic) + len(r.Key) + len(r.Value)
	for _, h := range r.Headers {
		n += 16 + len(h.Key) + len(h.Value)
	}
	b := make([]byte, 0, n)
	b = appendBytes(b, []byte(r.Topic), false)
	b = binary.AppendVarint(b, int64(r.Partition))
	b = binary.AppendVarint(b, r.Offset)
	b = appendBytes(b, r.Key, true)
	b = appendBytes(b, r.Value, true)
	b = binary.AppendUvarint(b, uint64(len(r.Headers)))
	for _, h := range r.Headers {
		b = appendBytes(b, []byte(h.Key), false)
		b = appendBytes(b, h.Value, true)
	}
	if r.Timestamp.IsZero() {
		b = append(b, 0)
	} else {
		b = append(b, 1)
		b = binary.AppendVarint(b, r.Timestamp.UnixMilli())
	}
	return b
}

func appendBytes(b, v []byte, nullable bool) []byte {
	n := uint64(len(v))
	if nullable {
		if v == nil {
			return binary.AppendUvarint(b, 0)
		}
		n++
	}
	b = binary.AppendUvarint(b, n)
	return append(b, v...)
}

// errCorrupt: a Record encoding that does not decode.
var errCorrupt = fmt.Errorf("riffbeam: corrupt record encoding")

type decoder struct {
	b   []byte
	err error
}

func (d *decoder) uvarint() uint64 {
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.err = errCorrupt
		d.b = nil
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) varint() int64 {
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.err = errCorrupt
		d.b = nil
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) bytes(nullable bool) []byte {
	n := d.uvarint()
	if nullable {
		if n == 0 {
			return nil
		}
		n--
	}
	if n > uint64(len(d.b)) {
		d.err = errCorrupt
		d.b = nil
		return nil
	}
	v := d.b[:n:n]
	d.b = d.b[n:]
	return v
}

func decodeRecord(b []byte) (Record, error) {
	d := decoder{b: b}
	var r Record
	r.Topic = string(d.bytes(false))
	r.Partition = int32(d.varint())
	r.Offset = d.varint()
	r.Key = d.bytes(true)
	r.Value = d.bytes(true)
	if nh := d.uvarint(); nh > 0 && d.err == nil {
		if nh > uint64(len(d.b)) {
			return Record{}, errCorrupt
		}
		r.Headers = make([]Header, nh)
		for i := range r.Headers {
			r.Headers[i] = Header{Key: string(d.bytes(false)), Value: d.bytes(true)}
		}
	}
	if d.err == nil {
		if len(d.b) == 0 {
			d.err = errCorrupt
		} else {
			flag := d.b[0]
			d.b = d.b[1:]
			if flag == 1 {
				r.Timestamp = time.UnixMilli(d.varint())
			}
		}
	}
	if d.err != nil {
		return Record{}, d.err
	}
	return r, nil
}
