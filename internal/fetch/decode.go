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
// fetchOffset, with the records in Records. It never panics on any input.
func DecodePartition(rp *kmsg.FetchResponseTopicPartition, fetchOffset int64, opts DecodeOptions) Partition {
	var recs []batch.Record
	out := DecodePartitionTo(rp, fetchOffset, opts, nil,
		func(total int) { recs = make([]batch.Record, 0, total) },
		func(rs []batch.Record) { recs = append(recs, rs...) })
	out.Records = recs
	return out
}

// DecodePartitionTo is DecodePartition for callers with their own record
// type: it calls size once with an upper bound of the records to come, then
// emit with each batch's records (which alias the response and, after emit
// returns, are overwritten: convert them, don't keep the slice). scratch,
// if not nil, is reused across calls to decode into. Records is left nil.
func DecodePartitionTo(rp *kmsg.FetchResponseTopicPartition, fetchOffset int64, opts DecodeOptions,
	scratch *[]batch.Record, size func(total int), emit func([]batch.Record)) Partition {
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
	// First pass: batch headers only (cheap), deciding what to keep; then
	// one allocation for every record, instead of growing per batch.
	it := batch.NewIterator(rp.RecordBatches, opts.Batch)
	var keep []batch.Batch
	var total int
	var stopErr error
	for {
		b, err := it.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			stopErr = err
			break
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
			break // past the last stable offset: not yet decided
		}
		if !drop {
			keep = append(keep, b)
			total += int(b.NumRecords)
		}
		out.NextOffset = b.LastOffset + 1
	}
	if total > 0 {
		size(total)
	}
	var buf []batch.Record
	if scratch != nil {
		buf = *scratch
	}
	first := true
	for i := range keep {
		b := &keep[i]
		recs, err := b.AppendRecords(buf[:0])
		if err != nil {
			// Records before the bad batch stand; resume at it.
			out.NextOffset = b.BaseOffset
			out.Err = err
			break
		}
		buf = recs
		if first {
			// Drop records before the fetch offset (first batch).
			j := 0
			for j < len(recs) && recs[j].Offset < fetchOffset {
				j++
			}
			recs = recs[j:]
			first = false
		}
		emit(recs)
	}
	if scratch != nil {
		clear(buf)
		*scratch = buf[:0]
	}
	if out.Err != nil {
		return out
	}
	if stopErr != nil {
		out.Err = stopErr
	}
	return out
}
