package process_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/riffle-go/riffle"
	"github.com/riffle-go/riffle/process"
	"github.com/riffle-go/riffle/rifftest"
)

// A processor at the end of a transactional topic is at its high
// watermark: the commit marker after the last record counts as processed
// once the record before it finished (until the fix Processed stopped at
// the marker, LagProcessed read 1, and the group committed the marker's
// offset). The consumer hands the gap to the processor with an offer of
// no records when the marker comes alone.
func TestProcessorPastCommitMarker(t *testing.T) {
	c, cl := setup(t, rifftest.Topic("t", 1))
	pr, err := riffle.NewProducer(cl, riffle.TransactionalID("m"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	defer pr.Close(ctx)
	if err := pr.InitTransactions(ctx); err != nil {
		t.Fatal(err)
	}
	if err := pr.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if err := pr.ProduceSync(ctx, &riffle.Record{Topic: "t", Value: []byte{byte(i)}}); err != nil {
			t.Fatal(err)
		}
	}
	var done atomic.Int64
	p, err := process.New(cl, func(context.Context, *riffle.Record) error { done.Add(1); return nil },
		process.ConsumerOptions(groupOpts("g", "t")...))
	if err != nil {
		t.Fatal(err)
	}
	// Read uncommitted: the records are processed before the marker
	// exists, which then comes alone.
	waitFor(t, 30*time.Second, "5 records processed", func() bool { return done.Load() == 5 })
	if err := pr.CommitTransaction(ctx); err != nil {
		t.Fatal(err)
	}
	tp := riffle.TopicPartition{Topic: "t", Partition: 0}
	var last riffle.PartitionStats
	waitFor(t, 30*time.Second, "the processor at the high watermark", func() bool {
		for _, ps := range p.Consumer().Stats().Partitions {
			if ps.TopicPartition == tp {
				last = ps
				return ps.HighWatermark == 6 && ps.Position == 6 && ps.Processed == 6 && ps.LagProcessed == 0
			}
		}
		return false
	})
	t.Log(last)
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
	offs, err := client(t, c).Admin().FetchOffsets(ctx, "g")
	if err != nil {
		t.Fatal(err)
	}
	if got := offs[tp].Offset; got != 6 {
		t.Errorf("committed %d, want the high watermark 6", got)
	}
}
