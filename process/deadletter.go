package process

import (
	"context"
	"strconv"

	"github.com/riffle-go/riffle"
)

// Headers DeadLetterTopic adds to a dead-lettered record.
const (
	HeaderError     = "riffle.dlq.error"     // the last error's text
	HeaderTopic     = "riffle.dlq.topic"     // source topic
	HeaderPartition = "riffle.dlq.partition" // source partition, decimal
	HeaderOffset    = "riffle.dlq.offset"    // source offset, decimal
	HeaderAttempts  = "riffle.dlq.attempts"  // handler calls made, decimal
)

// DeadLetterTopic returns a DeadLetterFunc that produces a failed record to
// topic with pr, keeping its key, value, timestamp and headers and adding
// HeaderError, HeaderTopic, HeaderPartition, HeaderOffset and
// HeaderAttempts. It returns once the write is acknowledged (so the source
// record is committed only after that), or the write's error, which stops
// the source partition at the record. The partition in the DLQ topic is
// chosen by pr's partitioner (partition 0 with the ManualPartitioner).
//
// Under ExactlyOnce the dead-lettered record is an output of the failed
// record (Output): it is produced by the transactional producer, in the
// transaction that marks the record finished, and pr is not used.
func DeadLetterTopic(pr *riffle.Producer, topic string) DeadLetterFunc {
	return func(ctx context.Context, r *riffle.Record, cause error, attempts int) error {
		hs := make([]riffle.Header, 0, len(r.Headers)+5)
		hs = append(hs, r.Headers...)
		hs = append(hs,
			riffle.Header{Key: HeaderError, Value: []byte(cause.Error())},
			riffle.Header{Key: HeaderTopic, Value: []byte(r.Topic)},
			riffle.Header{Key: HeaderPartition, Value: strconv.AppendInt(nil, int64(r.Partition), 10)},
			riffle.Header{Key: HeaderOffset, Value: strconv.AppendInt(nil, r.Offset, 10)},
			riffle.Header{Key: HeaderAttempts, Value: strconv.AppendInt(nil, int64(attempts), 10)},
		)
		dl := &riffle.Record{Topic: topic, Key: r.Key, Value: r.Value, Headers: hs, Timestamp: r.Timestamp}
		if ctx.Value(outputsKey{}) != nil {
			return Output(ctx, dl)
		}
		return pr.ProduceSync(ctx, dl)
	}
}
