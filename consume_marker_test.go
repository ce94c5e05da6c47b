package riffle

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
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

// An ExactlyOnce pipeline (which reads committed) whose input ends in
// markers with no record for the handler after the last one it handled
// (an aborted transaction; a commit marker that comes in a fetch of its
// own) commits the offset past them: its committed lag
// reaches 0 when it is idle. Before, the transaction committed only
// offsets of records handled, so the group's lag read 1 (or more) on every
// transactional input for as long as nothing new came (issue 20 point 2:
// lag-based alerts never clear). A marker right after handled records
// rides in their transaction: no transaction of its own.
func TestExactlyOnceCommitsPastTrailingMarkers(t *testing.T) {
	t.Run("aborted-at-end", func(t *testing.T) { testEOSTrailingMarkers(t, true) })
	t.Run("marker-in-own-fetch", func(t *testing.T) { testEOSTrailingMarkers(t, false) })
}

func testEOSTrailingMarkers(t *testing.T, abortAtEnd bool) {
	fake := newFake(t, kfake.NumBrokers(1), kfake.SeedTopics(1, "in", "out"))
	cl := newTestClient(t, SeedBrokers(fake.ListenAddrs()...))
	ctx := txnCtx(t)
	tp := TopicPartition{"in", 0}
	src := startTxn(t, cl, "src")
	out := startTxn(t, cl, "out")

	var handled atomic.Int64
	release := make(chan struct{})
	var releaseOnce sync.Once
	t.Cleanup(func() { releaseOnce.Do(func() { close(release) }) })
	opts := []ConsumerOption{ConsumerGroup("g"), SubscribeTopics("in"), OffsetReset(ResetEarliest)}
	if !abortAtEnd {
		// Hold every fetch of in[0] at offset 3 (the marker) until
		// released.
		fake.ControlKey(int16(kmsg.Fetch), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
			fake.KeepControl()
			for _, ft := range kreq.(*kmsg.FetchRequest).Topics {
				for _, fp := range ft.Partitions {
					if fp.FetchOffset == 3 {
						fake.SleepControl(func() { <-release })
					}
				}
			}
			return nil, nil, false
		})
		// One batch a fetch: the records' batch (above 1 KiB: a
		// broker returns the first batch whole, and no more past the
		// limit), then the marker's alone.
		opts = append(opts, FetchPartitionMaxBytes(1<<10), FetchMaxBytes(1<<10))
	}
	cs, err := NewConsumer(cl, append(opts,
		ExactlyOnce(out, CommitEvery{Interval: 20 * time.Millisecond}),
		HandleRecord(func(ctx context.Context, r *Record) error {
			out.Produce(ctx, &Record{Topic: "out", Value: r.Value}, nil)
			handled.Add(1)
			return nil
		}))...)
	if err != nil {
		t.Fatal(err)
	}
	defer closeMember(t, cs)

	if err := src.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	big := recs("in", "c", 3)
	for _, r := range big {
		r.Value = append(r.Value, make([]byte, 600)...)
	}
	if err := src.ProduceSync(ctx, big...); err != nil {
		t.Fatal(err)
	}
	if err := src.CommitTransaction(ctx); err != nil {
		t.Fatal(err)
	}
	committed := func() int64 {
		offs, err := cl.Admin().FetchOffsets(ctx, "g")
		if err != nil {
			return -1
		}
		return offs[tp].Offset
	}
	if abortAtEnd {
		// The committed transaction's records and marker are
		// committed before the aborted transaction is written, so
		// that it comes in fetches of its own.
		waitUntil(t, 30*time.Second, func() bool { return committed() == 4 }, func() string {
			return fmt.Sprintf("committed offset %d, want 4: %v", committed(), statsString(cs))
		})
	} else {
		// The records' transaction commits offset 3 while the fetch
		// of the marker is held.
		waitUntil(t, 30*time.Second, func() bool { return committed() == 3 }, func() string {
			return fmt.Sprintf("committed offset %d, want 3 before the marker is fetched: %v", committed(), statsString(cs))
		})
		releaseOnce.Do(func() { close(release) })
	}
	want := int64(4) // 3 records, their marker
	if abortAtEnd {
		// An aborted transaction at the end: a gap of records the
		// handler never sees, then its marker.
		if err := src.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		if err := src.ProduceSync(ctx, recs("in", "a", 2)...); err != nil {
			t.Fatal(err)
		}
		if err := src.AbortTransaction(ctx); err != nil {
			t.Fatal(err)
		}
		want = 7
	}
	waitUntil(t, 30*time.Second, func() bool { return committed() == want }, func() string {
		return fmt.Sprintf("committed offset %d, want the high watermark %d: %v", committed(), want, statsString(cs))
	})
	if got := handled.Load(); got != 3 {
		t.Errorf("handled %d records, want 3", got)
	}
}
