package fetch

import (
	"errors"
	"io"

	"github.com/riffle-go/riffle/internal/batch"
	"github.com/riffle-go/riffle/internal/kafkaerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DecodeOptions controls how a fetched partition is turned into records.
type DecodeOptions struct {
	ReadCommitted bool
	Batch         batch.DecodeOptions
}

// Partition is the decoded result of one partition of a fetch response.
type Partition struct {
	// Records are the user records at or after the fetch offset, in
	// offset order, with control records and (read_committed) aborted
	// transactions removed. They alias the response buffer.
	Records []batch.Record
	// NextOffset is where the next fetch starts: after the last complete
	// batch, which may be past the last record (compaction, markers).
	NextOffset    int64
	HighWatermark int64
	LastStable    int64
	LogStart      int64
	// Err is the partition's Kafka error, or a *batch.BatchError for a
	// corrupt batch. Records before a corrupt batch are still returned
	// and NextOffset stops at it.
	Err error
}

// DecodePartition decodes one partition of a fetch response fetched from
// fetchOffset. It never panics on any input.
func DecodePartition(rp *kmsg.FetchResponseTopicPartition, fetchOffset int64, opts DecodeOptions) Partition {
	out := Partition{
		NextOffset:    fetchOffset,
		HighWatermark: rp.HighWatermark,
		LastStable:    rp.LastStableOffset,
		LogStart:      rp.LogStartOffset,
	}
	if rp.ErrorCode != 0 {
		out.Err = kafkaerr.ForCode(rp.ErrorCode)
		return out
	}
	var filter *batch.AbortFilter
	if opts.ReadCommitted {
		aborted := make([]batch.AbortedTxn, len(rp.AbortedTransactions))
		for i, a := range rp.AbortedTransactions {
			aborted[i] = batch.AbortedTxn{ProducerID: a.ProducerID, FirstOffset: a.FirstOffset}
		}
		filter = batch.NewAbortFilter(aborted)
	}
	it := batch.NewIterator(rp.RecordBatches, opts.Batch)
	for {
		b, err := it.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			out.Err = err
			return out
		}
		if b.LastOffset < fetchOffset {
			// A batch the broker returned from before our offset (it
			// sends whole batches): skip, but let the filter see it.
			if filter != nil {
				filter.Drop(&b)
			}
			continue
		}
		drop := b.Control
		if filter != nil {
			drop = filter.Drop(&b)
		}
		if opts.ReadCommitted && b.Transactional && out.LastStable >= 0 && b.BaseOffset >= out.LastStable {
			// Past the last stable offset: not yet decided.
			return out
		}
		if !drop {
			start := len(out.Records)
			recs, err := b.AppendRecords(out.Records)
			if err != nil {
				out.Err = err
				return out
			}
			// Drop records before the fetch offset (first batch).
			if start == 0 {
				i := 0
				for i < len(recs) && recs[i].Offset < fetchOffset {
					i++
				}
				recs = recs[i:]
			}
			out.Records = recs
		}
		out.NextOffset = b.LastOffset + 1
	}
}
