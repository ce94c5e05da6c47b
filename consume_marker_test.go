package riffle

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
)

// A transactional topic ends with a commit marker: a control record at
// the offset before the high watermark that is never handed to the
// handler. Until the fix Position and Processed stopped at the marker,
// one below the high watermark, so LagProcessed read 1 forever and a
// reader waiting for Position >= HighWatermark (riffle consume -e) never
// finished; a group committed the marker's offset, so the group's lag
// read 1 as well. Markers (and aborted records skipped under
// read_committed) count as handled once the records before them are.
func TestMarkerCountsAsProcessed(t *testing.T) {
	for _, iso := range []IsolationLevel{ReadUncommitted, ReadCommitted} {
		for _, kind := range []string{"record", "batch"} {
			// early: the consumer handles the records while the
			// transaction is open (read_uncommitted only), so the
			// marker comes alone in a later fetch.
			for _, early := range []bool{false, true} {
				if early && iso == ReadCommitted {
					continue
				}
				name := fmt.Sprintf("%s/%s/early=%v", map[IsolationLevel]string{ReadUncommitted: "uncommitted", ReadCommitted: "committed"}[iso], kind, early)
				t.Run(name, func(t *testing.T) { testMarkerProcessed(t, iso, kind, early) })
			}
		}
	}
}

func testMarkerProcessed(t *testing.T, iso IsolationLevel, kind string, early bool) {
	fake := newFake(t, kfake.NumBrokers(1), kfake.SeedTopics(1, "t"))
	cl := newTestClient(t, SeedBrokers(fake.ListenAddrs()...))
	ctx := txnCtx(t)
	tp := TopicPartition{"t", 0}

	// A committed transaction, and an aborted one before it: under
	// read_committed the aborted records are skipped like the markers.
	p := startTxn(t, cl, "txn")
	writeTxn := func(n int, commit bool) {
		t.Helper()
		if err := p.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		if err := p.ProduceSync(ctx, recs("t", "v", n)...); err != nil {
			t.Fatal(err)
		}
		if commit {
			if err := p.CommitTransaction(ctx); err != nil {
				t.Fatal(err)
			}
		} else if err := p.AbortTransaction(ctx); err != nil {
			t.Fatal(err)
		}
	}
	writeTxn(3, false)

	var handled atomic.Int64
	opts := []ConsumerOption{Isolation(iso), ConsumerGroup("g"), SubscribeTopics("t"), DisableAutoCommit(), OffsetReset(ResetEarliest)}
	if kind == "record" {
		opts = append(opts, HandleRecord(func(context.Context, *Record) error { handled.Add(1); return nil }))
	} else {
		opts = append(opts, HandleBatch(func(_ context.Context, b *FetchBatch) error { handled.Add(int64(len(b.Records))); return nil }))
	}
	cs, err := NewConsumer(cl, opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer closeMember(t, cs)

	if early {
		if err := p.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		if err := p.ProduceSync(ctx, recs("t", "w", 5)...); err != nil {
			t.Fatal(err)
		}
		// Handled before the marker exists: 3 aborted + 5 open,
		// read_uncommitted.
		waitUntil(t, 30*time.Second, func() bool { return handled.Load() == 8 }, func() string { return statsString(cs) })
		if err := p.CommitTransaction(ctx); err != nil {
			t.Fatal(err)
		}
	} else {
		writeTxn(5, true)
	}

	ends, err := cl.Admin().ListOffsets(ctx, OffsetLatest, "t")
	if err != nil {
		t.Fatal(err)
	}
	hw := ends[0].Offset // 3 aborted, their marker, 5 committed, their marker
	if hw != 10 {
		t.Fatalf("high watermark %d, want 10", hw)
	}
	part := func() PartitionStats {
		for _, ps := range cs.Stats().Partitions {
			if ps.TopicPartition == tp {
				return ps
			}
		}
		return PartitionStats{}
	}
	waitUntil(t, 30*time.Second, func() bool {
		ps := part()
		return ps.HighWatermark == hw && ps.Position == hw && ps.Processed == hw && ps.LagProcessed == 0
	}, func() string { return "not at the end: " + part().String() })
	want := int64(8)
	if iso == ReadCommitted {
		want = 5
	}
	if got := handled.Load(); got != want {
		t.Errorf("handled %d records, want %d", got, want)
	}
	if err := cs.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	offs, err := cl.Admin().FetchOffsets(ctx, "g")
	if err != nil {
		t.Fatal(err)
	}
	if got := offs[tp].Offset; got != hw {
		t.Errorf("committed offset %d, want the high watermark %d", got, hw)
	}
	if ps := part(); ps.LagCommitted != 0 {
		t.Errorf("LagCommitted %d, want 0: %v", ps.LagCommitted, ps)
	}
}
