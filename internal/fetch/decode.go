package fetch

import (
	"errors"
	"io"
	"slices"

	"github.com/riffle-go/riffle/internal/batch"
	"github.com/riffle-go/riffle/internal/kafkaerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DecodeOptions controls how a fetched partition is turned into records.
type DecodeOptions struct {
	ReadCommitted bool
	Batch         batch.DecodeOptions
	// End, if positive, is an offset the caller needs nothing at or
	// past: batches starting there are not decoded, and NextOffset stops
	// at the first of them (the offsets before it hold no records).
	End int64
}

// Partition is the decoded result of one partition of a fetch response.
type Partition struct {
	// Records are the user records at or after the fetch offset, in
	// offset order, with control records and (read_committed) aborted
	// transactions removed. They alias the response buffer.
	Records []batch.Record
	// NextOffset is where the next fetch starts: after the last complete
	// batch, which may be past the last record (compaction, markers).
	NextOffset int64
	// LastEpoch is the leader epoch of the batch that ends at NextOffset
	// (a control batch's too), -1 when no batch was decoded: the epoch
	// of the fetch position, to validate it or commit it (KIP-320).
	LastEpoch     int32
	HighWatermark int64
	LastStable    int64
	LogStart      int64
	// PreferredReplica is the partition's preferred read replica the
	// broker named (KIP-392, Fetch v11+), -1 if none. It is set whatever
	// the error; see ReadReplica.
	PreferredReplica int32
	// Bytes is how many bytes of the response the batches up to
	// NextOffset took (with End, those after it are not counted).
	Bytes int
	// Err is the partition's Kafka error, or a *batch.BatchError for a
	// corrupt batch. Records before a corrupt batch are still returned
	// and NextOffset stops at it.
	Err error
}

// DecodePartition decodes one partition of a fetch response fetched from
// fetchOffset, with the records in Records. It never panics on any input.
func DecodePartition(rp *kmsg.FetchResponseTopicPartition, fetchOffset int64, opts DecodeOptions) Partition {
	var sink SliceSink
	out := DecodePartitionTo(rp, fetchOffset, opts, &sink)
	out.Records = sink.Records
	return out
}

// Sink receives the records of one fetched partition as they are decoded,
// for callers with their own record type: converting each record as it
// comes avoids a second copy of every record.
type Sink interface {
	// Grow is called once, before the first Add, with an upper bound of
	// the records to come.
	Grow(n int)
	// Add takes the next record, in offset order. Its byte slices alias
	// the response (or a decompressed buffer) and may be kept.
	Add(r batch.Record)
	// Drop removes the last n records added: their batch turned out to
	// be corrupt, and records are delivered in whole batches or not at all.
	Drop(n int)
}

// SliceSink is a Sink collecting batch.Records.
type SliceSink struct{ Records []batch.Record }

// Grow implements Sink.
func (s *SliceSink) Grow(n int) { s.Records = slices.Grow(s.Records, n) }

// Add implements Sink.
func (s *SliceSink) Add(r batch.Record) { s.Records = append(s.Records, r) }

// Drop implements Sink.
func (s *SliceSink) Drop(n int) {
	keep := len(s.Records) - n
	clear(s.Records[keep:])
	s.Records = s.Records[:keep]
}

// DecodePartitionTo is DecodePartition delivering the records to sink
// instead of Records, which it leaves nil. Records before the fetch offset
// (the broker returns whole batches) are skipped.
func DecodePartitionTo(rp *kmsg.FetchResponseTopicPartition, fetchOffset int64, opts DecodeOptions, sink Sink) Partition {
	out := Partition{
		NextOffset:    fetchOffset,
		LastEpoch:     -1,
		HighWatermark: rp.HighWatermark,
		LastStable:    rp.LastStableOffset,
		LogStart:      rp.LogStartOffset,

		PreferredReplica: -1,
	}
	if rp.PreferredReadReplica >= 0 {
		out.PreferredReplica = rp.PreferredReadReplica
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
	// The sink sizes itself once for every record, from the batch
	// headers, instead of growing per batch. The headers are read before
	// any CRC check, so a corrupt record count is capped: at one record
	// per 32 wire bytes (real records of a few bytes, or highly
	// compressed ones, make the sink grow instead).
	if n := batch.CountRecords(rp.RecordBatches, fetchOffset); n > 0 {
		sink.Grow(min(n, len(rp.RecordBatches)/32+1))
	}
	it := batch.NewIterator(rp.RecordBatches, opts.Batch)
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
		if opts.End > 0 && b.BaseOffset >= opts.End {
			out.NextOffset = max(out.NextOffset, b.BaseOffset)
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
			added := 0
			_, err := b.EachRecord(func(r batch.Record) {
				if r.Offset >= fetchOffset {
					sink.Add(r)
					added++
				}
			})
			if err != nil {
				// Records before the bad batch stand; resume at it.
				if added > 0 {
					sink.Drop(added)
				}
				out.NextOffset = b.BaseOffset
				out.Err = err
				return out
			}
		}
		out.NextOffset = b.LastOffset + 1
		out.LastEpoch = b.PartitionLeaderEpoch
		out.Bytes = it.Pos()
	}
	if stopErr != nil {
		out.Err = stopErr
	}
	return out
}
