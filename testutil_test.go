package riffle

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/riffle-go/riffle/internal/batch"
	"github.com/riffle-go/riffle/internal/cluster"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// readPartition reads every record of topic/partition from offset 0 to the
// high watermark with raw fetches, independently of the consumer, so
// producer tests check what the broker really stored.
func readPartition(t testing.TB, ctx context.Context, cl *Client, topic string, partition int32) []batch.Record {
	t.Helper()
	var out []batch.Record
	offset := int64(0)
	for {
		pm, err := cl.cl.Leader(ctx, topic, partition)
		if err != nil {
			t.Fatal(err)
		}
		req := kmsg.NewPtrFetchRequest()
		req.ReplicaID = -1
		req.MaxWaitMillis = 0
		req.MaxBytes = 8 << 20
		ft := kmsg.NewFetchRequestTopic()
		ft.Topic = topic
		fp := kmsg.NewFetchRequestTopicPartition()
		fp.Partition = partition
		fp.FetchOffset = offset
		fp.PartitionMaxBytes = 8 << 20
		fp.CurrentLeaderEpoch = -1
		ft.Partitions = append(ft.Partitions, fp)
		req.Topics = append(req.Topics, ft)
		resp, err := cl.cl.Request(ctx, pm.Leader, cluster.ClassFetch, req)
		if err != nil {
			t.Fatal(err)
		}
		fr := resp.(*kmsg.FetchResponse)
		rp := fr.Topics[0].Partitions[0]
		if rp.ErrorCode != 0 {
			if rp.ErrorCode == 1 && len(out) == 0 && rp.LogStartOffset > offset {
				offset = rp.LogStartOffset // records before it were deleted
				continue
			}
			if errors.Is(KafkaErrorForCode(rp.ErrorCode), ErrNotLeaderForPartition) {
				cl.cl.RefreshMetadata(ctx)
				continue
			}
			t.Fatalf("fetch %s[%d]@%d: %v", topic, partition, offset, KafkaErrorForCode(rp.ErrorCode))
		}
		it := batch.NewIterator(rp.RecordBatches, batch.DecodeOptions{})
		progressed := false
		for {
			b, err := it.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("decode %s[%d]: %v", topic, partition, err)
			}
			if b.Control {
				offset = b.LastOffset + 1
				progressed = true
				continue
			}
			recs, err := b.AppendRecords(nil)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range recs {
				if r.Offset >= offset {
					out = append(out, r)
				}
			}
			offset = b.LastOffset + 1
			progressed = true
		}
		if offset >= rp.HighWatermark || !progressed {
			if offset < rp.HighWatermark {
				t.Fatalf("no progress at %s[%d]@%d (hw %d)", topic, partition, offset, rp.HighWatermark)
			}
			return out
		}
	}
}

// countOver returns how much count() grew over at least window, and how
// long the measuring really took. On a loaded machine the sleep can
// overrun its window by seconds, so a test that bounds a rate (no spin)
// bounds it per measured second (see rateLimit), not per requested
// window.
func countOver(window time.Duration, count func() int64) (n int64, took time.Duration) {
	before, start := count(), time.Now()
	time.Sleep(window)
	return count() - before, time.Since(start)
}

// rateLimit is the most events a rate of perSecond allows in took.
func rateLimit(perSecond float64, took time.Duration) int64 {
	return int64(perSecond * took.Seconds())
}
