package ranges_test

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/riffle-go/riffle"
	"github.com/riffle-go/riffle/ranges"
	"github.com/riffle-go/riffle/rifftest"
)

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// coverage records the offsets each partition's ranges covered and fails
// on an overlap or a gap.
type coverage map[riffle.TopicPartition]int64

func (c coverage) add(t *testing.T, rs []ranges.Range, max int64) {
	t.Helper()
	for _, r := range rs {
		tp := riffle.TopicPartition{Topic: r.Topic, Partition: r.Partition}
		if next := c[tp]; r.Low != next {
			t.Fatalf("range %s does not start where the last one of %s ended (%d)", r, tp, next)
		}
		if r.Len() <= 0 || (max > 0 && r.Len() > max) {
			t.Fatalf("range %s: length out of (0, %d]", r, max)
		}
		c[tp] = r.High
	}
}

func TestPlannerIncrementalWhileProducing(t *testing.T) {
	_, cl := setup(t, rifftest.Topic("t", 3))
	ctx := testCtx(t)
	pl, err := ranges.NewPlanner(cl, "g", []string{"t"}, ranges.MaxRecords(7))
	if err != nil {
		t.Fatal(err)
	}
	p, err := riffle.NewProducer(cl, riffle.WithPartitioner(riffle.RoundRobinPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	var produced, extra int
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			if err := p.ProduceSync(ctx, &riffle.Record{Topic: "t", Value: []byte(fmt.Sprint(i))}); err != nil {
				t.Error(err)
				return
			}
			produced++
		}
	}()
	cov := coverage{}
	r := ranges.NewReader(cl)
	defer r.Close()
	read := map[riffle.TopicPartition]int{}
	readAll := func(rs []ranges.Range) {
		for _, rg := range rs {
			offs, err := collect(t, r, rg)
			if err != nil {
				t.Fatalf("%s: %v", rg, err)
			}
			if int64(len(offs)) != rg.Len() {
				t.Fatalf("%s: read %d records", rg, len(offs))
			}
			read[riffle.TopicPartition{Topic: rg.Topic, Partition: rg.Partition}] += len(offs)
		}
	}
	for round := 0; round < 30; round++ {
		rs, err := pl.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		cov.add(t, rs, 7)
		readAll(rs)
		if round == 10 {
			// The topic grows: the new partitions are planned too.
			if _, err := cl.Admin().CreatePartitions(ctx, 5, "t"); err != nil {
				t.Fatal(err)
			}
		}
		if round == 12 { // Next refreshed the client's metadata
			produce(t, cl, "t", 3, 4, nil)
			produce(t, cl, "t", 4, 9, nil)
			extra += 13 // the producer goroutine may not know the new partitions yet
		}
	}
	close(stop)
	wg.Wait()
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
	rs, err := pl.Next(ctx) // what was appended since
	if err != nil {
		t.Fatal(err)
	}
	cov.add(t, rs, 7)
	readAll(rs)
	if rs, err := pl.Next(ctx); err != nil || len(rs) != 0 {
		t.Fatalf("nothing appended, yet Next returned %v, %v", rs, err)
	}
	// Every offset of every partition, exactly once.
	ends, err := cl.Admin().ListOffsets(ctx, riffle.OffsetLatest, "t")
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	for _, e := range ends {
		tp := riffle.TopicPartition{Topic: e.Topic, Partition: e.Partition}
		if cov[tp] != e.Offset {
			t.Errorf("%s: planned up to %d, high watermark %d", tp, cov[tp], e.Offset)
		}
		total += read[tp]
	}
	if total != produced+extra {
		t.Errorf("read %d records, produced %d", total, produced+extra)
	}
	if len(ends) != 5 {
		t.Errorf("%d partitions listed, want 5", len(ends))
	}
}

// An Untracked Planner plans the same ranges and keeps none of them
// outstanding; its checkpoint's offsets are unchanged.
func TestPlannerUntracked(t *testing.T) {
	_, cl := setup(t, rifftest.Topic("t", 2))
	ctx := testCtx(t)
	produce(t, cl, "t", 0, 30, nil)
	for _, untracked := range []bool{false, true} {
		opts := []ranges.Option{ranges.MaxRecords(10)}
		if untracked {
			opts = append(opts, ranges.Untracked())
		}
		pl, err := ranges.NewPlanner(cl, "g", []string{"t"}, opts...)
		if err != nil {
			t.Fatal(err)
		}
		rs, err := pl.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		want := ranges.Outstanding{Ranges: 3, Offsets: 30}
		if untracked {
			want = ranges.Outstanding{}
		}
		if len(rs) != 3 {
			t.Fatalf("untracked %v: %d ranges: %v", untracked, len(rs), rs)
		}
		if got := pl.Checkpoint().Outstanding(); got != want {
			t.Errorf("untracked %v: outstanding %+v, want %+v", untracked, got, want)
		}
		if got := pl.Checkpoint().Offsets()[riffle.TopicPartition{Topic: "t", Partition: 0}]; got != 0 {
			t.Errorf("untracked %v: offset %d, want 0", untracked, got)
		}
	}
}

func TestCheckpointRestartResumesExactly(t *testing.T) {
	_, cl := setup(t, rifftest.Topic("t", 2))
	ctx := testCtx(t)
	produce(t, cl, "t", 0, 100, nil)
	produce(t, cl, "t", 1, 30, nil)
	pl, err := ranges.NewPlanner(cl, "g", []string{"t"}, ranges.MaxRecords(10))
	if err != nil {
		t.Fatal(err)
	}
	rs, err := pl.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 13 {
		t.Fatalf("%d ranges: %v", len(rs), rs)
	}
	cp := pl.Checkpoint()
	// Partition 0: [0,10) [10,20) [30,40) done, [20,30) not: offset 20.
	// Partition 1: [10,20) [20,30) done, [0,10) not: offset 0.
	for _, r := range []ranges.Range{{"t", 0, 30, 40}, {"t", 0, 10, 20}, {"t", 1, 20, 30}, {"t", 0, 0, 10}, {"t", 1, 10, 20}, {"t", 0, 10, 20}} {
		if err := cp.MarkDone(r); err != nil {
			t.Fatal(err)
		}
	}
	want := map[riffle.TopicPartition]int64{{Topic: "t", Partition: 0}: 20, {Topic: "t", Partition: 1}: 0}
	if got := cp.Offsets(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("offsets %v, want %v", got, want)
	}
	// Partition 0: 7 of its 10 ranges not done; partition 1: 1 of 3.
	if got := cp.Outstanding(); got != (ranges.Outstanding{Ranges: 8, Offsets: 80}) {
		t.Fatalf("outstanding %+v, want 8 ranges and 80 offsets", got)
	}
	if err := cp.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	// Every lag tool sees it.
	lags, err := cl.Admin().GroupLag(ctx, "g")
	if err != nil {
		t.Fatal(err)
	}
	if len(lags) != 2 || lags[0].Committed != 20 || lags[0].Lag != 80 || lags[1].Committed != 0 || lags[1].Lag != 30 {
		t.Fatalf("lag %v", lags)
	}

	// A new planner (a restarted process) plans again from the
	// checkpoint: the ranges not done, and those done above a gap.
	produce(t, cl, "t", 0, 5, nil)
	pl2, err := ranges.NewPlanner(cl, "g", []string{"t"}, ranges.MaxRecords(10), ranges.StartAt(riffle.AtLatest()))
	if err != nil {
		t.Fatal(err)
	}
	rs, err = pl2.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cov := coverage{{Topic: "t", Partition: 0}: 20, {Topic: "t", Partition: 1}: 0}
	cov.add(t, rs, 10)
	if cov[riffle.TopicPartition{Topic: "t", Partition: 0}] != 105 || cov[riffle.TopicPartition{Topic: "t", Partition: 1}] != 30 {
		t.Fatalf("replanned %v", rs)
	}
	if got := pl2.Checkpoint().Outstanding(); got != (ranges.Outstanding{Ranges: 12, Offsets: 115}) {
		t.Fatalf("outstanding %+v after replanning [20, 105) and [0, 30), want 12 ranges and 115 offsets", got)
	}
	for _, r := range rs {
		if err := pl2.Checkpoint().MarkDone(r); err != nil {
			t.Fatal(err)
		}
	}
	if got := pl2.Checkpoint().Outstanding(); got != (ranges.Outstanding{}) {
		t.Fatalf("outstanding %+v once every range is done", got)
	}
	if err := pl2.Checkpoint().Commit(ctx); err != nil {
		t.Fatal(err)
	}
	committed, err := cl.Admin().FetchOffsets(ctx, "g")
	if err != nil {
		t.Fatal(err)
	}
	if committed[riffle.TopicPartition{Topic: "t", Partition: 0}].Offset != 105 || committed[riffle.TopicPartition{Topic: "t", Partition: 1}].Offset != 30 {
		t.Fatalf("committed %v", committed)
	}
}

func TestCheckpointStandalone(t *testing.T) {
	_, cl := setup(t, rifftest.Topic("t", 1))
	ctx := testCtx(t)
	produce(t, cl, "t", 0, 50, nil)
	// Ranges planned elsewhere, done here out of order, with a gap.
	cp := ranges.NewCheckpoint(cl, "g")
	for _, r := range []ranges.Range{{"t", 0, 20, 30}, {"t", 0, 0, 10}, {"t", 0, 40, 50}} {
		if err := cp.MarkDone(r); err != nil {
			t.Fatal(err)
		}
	}
	if got := cp.Offsets(); len(got) != 0 {
		t.Fatalf("offsets known before the start is: %v", got)
	}
	if err := cp.Commit(ctx); err != nil { // starts at earliest: 0
		t.Fatal(err)
	}
	if got := cp.Offsets()[riffle.TopicPartition{Topic: "t"}]; got != 10 {
		t.Fatalf("offset %d, want 10", got)
	}
	// Another process, later: it starts where the group stands.
	cp2 := ranges.NewCheckpoint(cl, "g")
	for _, r := range []ranges.Range{{"t", 0, 10, 20}, {"t", 0, 30, 40}, {"t", 0, 20, 30}} {
		if err := cp2.MarkDone(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := cp2.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	committed, err := cl.Admin().FetchOffsets(ctx, "g")
	if err != nil {
		t.Fatal(err)
	}
	if got := committed[riffle.TopicPartition{Topic: "t"}].Offset; got != 40 {
		t.Fatalf("committed %d, want 40 ([40, 50) was done by the first process only)", got)
	}
	if err := cp2.MarkDone(ranges.Range{Topic: "t", Low: 5, High: 4}); !errors.Is(err, ranges.ErrInvalidRange) {
		t.Fatalf("MarkDone of an invalid range: %v", err)
	}
	if err := ranges.NewCheckpoint(cl, "").Commit(ctx); !errors.Is(err, ranges.ErrNoGroup) {
		t.Fatalf("Commit without a group: %v", err)
	}
}

func TestCheckpointRefusesActiveGroup(t *testing.T) {
	c0, cl := setup(t, rifftest.Topic("t", 1))
	ctx := testCtx(t)
	produce(t, cl, "t", 0, 10, nil)
	pl, err := ranges.NewPlanner(cl, "busy", []string{"t"})
	if err != nil {
		t.Fatal(err)
	}
	rs, err := pl.Next(ctx)
	if err != nil || len(rs) != 1 {
		t.Fatalf("%v, %v", rs, err)
	}
	if err := pl.Checkpoint().MarkDone(rs[0]); err != nil {
		t.Fatal(err)
	}

	// A member joins the group.
	cl2, err := riffle.NewClient(riffle.SeedBrokers(c0.Addrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl2.Close()
	joined := make(chan struct{})
	var once sync.Once
	c, err := riffle.NewConsumer(cl2, riffle.ConsumerGroup("busy"), riffle.SubscribeTopics("t"), riffle.DisableCommits(),
		riffle.HandleRecord(func(context.Context, *riffle.Record) error { return nil }),
		riffle.OnPartitionsAssigned(func(context.Context, []riffle.TopicPartition) { once.Do(func() { close(joined) }) }))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	select {
	case <-joined:
	case <-ctx.Done():
		t.Fatal("the consumer never joined")
	}
	err = pl.Checkpoint().Commit(ctx)
	if !errors.Is(err, ranges.ErrGroupActive) || !errors.Is(err, riffle.ErrGroupActive) {
		t.Fatalf("Commit to an active group: %v", err)
	}
	if _, err := c.Close(ctx); err != nil {
		t.Fatal(err)
	}
	// Once it left, the same commit goes through.
	if err := pl.Checkpoint().Commit(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestPlannerReadCommittedStopsAtLSO(t *testing.T) {
	_, cl := setup(t, rifftest.Topic("t", 1))
	ctx := testCtx(t)
	produce(t, cl, "t", 0, 10, nil)
	p, err := riffle.NewProducer(cl, riffle.TransactionalID("tx"), riffle.WithPartitioner(riffle.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(ctx)
	if err := p.InitTransactions(ctx); err != nil {
		t.Fatal(err)
	}
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 5; i++ {
		if err := p.ProduceSync(ctx, &riffle.Record{Topic: "t", Value: []byte("tx")}); err != nil {
			t.Fatal(err)
		}
	}
	committed, err := ranges.NewPlanner(cl, "", []string{"t"}, ranges.ReadCommitted())
	if err != nil {
		t.Fatal(err)
	}
	uncommitted, err := ranges.NewPlanner(cl, "", []string{"t"})
	if err != nil {
		t.Fatal(err)
	}
	rs, err := committed.Next(ctx)
	if err != nil || len(rs) != 1 || rs[0] != (ranges.Range{Topic: "t", Low: 0, High: 10}) {
		t.Fatalf("read_committed plan with an open transaction: %v, %v", rs, err)
	}
	rs, err = uncommitted.Next(ctx)
	if err != nil || len(rs) != 1 || rs[0] != (ranges.Range{Topic: "t", Low: 0, High: 15}) {
		t.Fatalf("read_uncommitted plan: %v, %v", rs, err)
	}
	if rs, err := committed.Next(ctx); err != nil || len(rs) != 0 {
		t.Fatalf("still open: %v, %v", rs, err)
	}
	if err := p.CommitTransaction(ctx); err != nil {
		t.Fatal(err)
	}
	rs, err = committed.Next(ctx)
	if err != nil || len(rs) != 1 || rs[0] != (ranges.Range{Topic: "t", Low: 10, High: 16}) { // 5 records and the commit marker
		t.Fatalf("after the commit: %v, %v", rs, err)
	}
	r := ranges.NewReader(cl, ranges.ReadCommitted())
	defer r.Close()
	offs, err := collect(t, r, rs[0])
	if err != nil || len(offs) != 5 {
		t.Fatalf("read %v, %v", offs, err)
	}
}

func TestPlannerStartSpecAndWatch(t *testing.T) {
	_, cl := setup(t, rifftest.Topic("t", 2))
	ctx := testCtx(t)
	produce(t, cl, "t", 0, 10, nil)
	produce(t, cl, "t", 1, 10, nil)
	pl, err := ranges.NewPlanner(cl, "w", []string{"t"}, ranges.StartAt(riffle.AtLatest()))
	if err != nil {
		t.Fatal(err)
	}
	rs, err := pl.Next(ctx)
	if err != nil || len(rs) != 0 {
		t.Fatalf("from latest, nothing new yet: %v, %v", rs, err)
	}
	// The start is pinned by a commit before anything is done.
	if err := pl.Checkpoint().Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if lags, err := cl.Admin().GroupLag(ctx, "w"); err != nil || len(lags) != 2 || lags[0].Lag != 0 || lags[1].Lag != 0 {
		t.Fatalf("lag %v, %v", lags, err)
	}

	produce(t, cl, "t", 1, 3, nil)
	wctx, cancel := context.WithCancel(ctx)
	var got []ranges.Range
	err = pl.Watch(wctx, 10*time.Millisecond, func(_ context.Context, rs []ranges.Range) error {
		got = append(got, rs...)
		if len(got) == 1 {
			produce(t, cl, "t", 0, 2, nil)
			return nil
		}
		cancel()
		return nil
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Watch: %v", err)
	}
	sort.Slice(got, func(i, j int) bool { return got[i].Partition < got[j].Partition })
	want := []ranges.Range{{"t", 0, 10, 12}, {"t", 1, 10, 13}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("watched %v, want %v", got, want)
	}
	stop := errors.New("stop")
	produce(t, cl, "t", 0, 1, nil)
	if err := pl.Watch(ctx, time.Millisecond, func(context.Context, []ranges.Range) error { return stop }); err != stop {
		t.Fatalf("Watch returns fn's error: %v", err)
	}
	if _, err := ranges.NewPlanner(cl, "w", []string{"t"}, ranges.MaxRecords(-1)); !errors.Is(err, riffle.ErrInvalidConfig) {
		t.Fatalf("negative MaxRecords: %v", err)
	}
	if err := pl.Watch(ctx, 0, nil); !errors.Is(err, riffle.ErrInvalidConfig) {
		t.Fatalf("zero interval: %v", err)
	}
}

// produceAt produces n records to topic[partition] timestamped ts.
func produceAt(t *testing.T, cl *riffle.Client, topic string, partition int32, n int, ts time.Time) {
	t.Helper()
	p, err := riffle.NewProducer(cl, riffle.WithPartitioner(riffle.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t)
	for i := 0; i < n; i++ {
		if err := p.ProduceSync(ctx, &riffle.Record{Topic: topic, Partition: partition, Value: []byte(fmt.Sprint(i)), Timestamp: ts}); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
}

// Partitions added after the first round start where NewPartitionsStartAt
// says (earliest by default), not where StartAt does; one the group has an
// offset for starts there.
func TestPlannerNewPartitionsStartAt(t *testing.T) {
	old, recent := time.Now().Add(-time.Hour), time.Now()
	cut := recent.Add(-30 * time.Minute)
	for _, tc := range []struct {
		name string
		opts []ranges.Option
		// p1 holds 2 old and 2 recent records when the round finds it:
		// where its first range starts (-1: none planned yet).
		p1, base1 int64
	}{
		{"default: earliest", nil, 0, 0},
		{"earliest", []ranges.Option{ranges.NewPartitionsStartAt(riffle.AtEarliest())}, 0, 0},
		{"latest", []ranges.Option{ranges.NewPartitionsStartAt(riffle.AtLatest())}, -1, 4},
		{"time", []ranges.Option{ranges.NewPartitionsStartAt(riffle.AtTime(cut))}, 2, 2},
		{"offset", []ranges.Option{ranges.NewPartitionsStartAt(riffle.AtOffset(3))}, 3, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, cl := setup(t, rifftest.Topic("t", 1))
			ctx := testCtx(t)
			produce(t, cl, "t", 0, 5, nil)
			// StartAt latest: the topic is picked up where it stands.
			opts := append([]ranges.Option{ranges.StartAt(riffle.AtLatest())}, tc.opts...)
			pl, err := ranges.NewPlanner(cl, "g", []string{"t"}, opts...)
			if err != nil {
				t.Fatal(err)
			}
			if rs, err := pl.Next(ctx); err != nil || len(rs) != 0 {
				t.Fatalf("first round from latest: %v, %v", rs, err)
			}
			if _, err := cl.Admin().CreatePartitions(ctx, 3, "t"); err != nil {
				t.Fatal(err)
			}
			// Another client, which knows the new partitions, writes
			// to them before the planner's next round finds them.
			cl2, err := riffle.NewClient(riffle.SeedBrokers(c.Addrs()...))
			if err != nil {
				t.Fatal(err)
			}
			defer cl2.Close()
			produceAt(t, cl2, "t", 1, 2, old)
			produceAt(t, cl2, "t", 1, 2, recent)
			produceAt(t, cl2, "t", 2, 6, old)
			t2 := riffle.TopicPartition{Topic: "t", Partition: 2}
			if err := cl2.Admin().AlterGroupOffsets(ctx, "g", map[riffle.TopicPartition]int64{t2: 1}); err != nil {
				t.Fatal(err)
			}
			rs, err := pl.Next(ctx)
			if err != nil {
				t.Fatal(err)
			}
			want := []ranges.Range{{Topic: "t", Partition: 2, Low: 1, High: 6}}
			if tc.p1 >= 0 {
				want = append([]ranges.Range{{Topic: "t", Partition: 1, Low: tc.p1, High: 4}}, want...)
			}
			if fmt.Sprint(rs) != fmt.Sprint(want) {
				t.Fatalf("round after the partitions were added: %v, want %v", rs, want)
			}
			offs := pl.Checkpoint().Offsets()
			if got := offs[riffle.TopicPartition{Topic: "t", Partition: 1}]; got != tc.base1 {
				t.Fatalf("t[1] starts at %d, want %d", got, tc.base1)
			}
			if got := offs[riffle.TopicPartition{Topic: "t"}]; got != 5 {
				t.Fatalf("t[0] starts at %d, want 5 (StartAt latest)", got)
			}
			// Later rounds go on from there.
			produceAt(t, cl2, "t", 1, 3, recent)
			rs, err = pl.Next(ctx)
			if err != nil || len(rs) != 1 || rs[0] != (ranges.Range{Topic: "t", Partition: 1, Low: 4, High: 7}) {
				t.Fatalf("next round: %v, %v", rs, err)
			}
		})
	}
}

// A Planner's Checkpoint does not commit back the group's offsets it
// started from: another process may have committed further meanwhile.
func TestPlannerDoesNotRecommitTheGroupsOffsets(t *testing.T) {
	_, cl := setup(t, rifftest.Topic("t", 2))
	ctx := testCtx(t)
	produce(t, cl, "t", 0, 10, nil)
	produce(t, cl, "t", 1, 10, nil)
	t0, t1 := riffle.TopicPartition{Topic: "t"}, riffle.TopicPartition{Topic: "t", Partition: 1}
	if err := cl.Admin().AlterGroupOffsets(ctx, "g", map[riffle.TopicPartition]int64{t0: 5}); err != nil {
		t.Fatal(err)
	}
	pl, err := ranges.NewPlanner(cl, "g", []string{"t"}, ranges.StartAt(riffle.AtOffset(2)))
	if err != nil {
		t.Fatal(err)
	}
	rs, err := pl.Next(ctx)
	if err != nil || fmt.Sprint(rs) != fmt.Sprint([]ranges.Range{{"t", 0, 5, 10}, {"t", 1, 2, 10}}) {
		t.Fatalf("plan %v, %v", rs, err)
	}
	// Another process finishes [5, 8) of t[0] and commits it.
	other := ranges.NewCheckpoint(cl, "g")
	if err := other.MarkDone(ranges.Range{Topic: "t", Low: 5, High: 8}); err != nil {
		t.Fatal(err)
	}
	if err := other.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	committed := func() map[riffle.TopicPartition]int64 {
		t.Helper()
		got, err := cl.Admin().FetchOffsets(ctx, "g")
		if err != nil {
			t.Fatal(err)
		}
		return map[riffle.TopicPartition]int64{t0: got[t0].Offset, t1: got[t1].Offset}
	}
	// The planner's commit pins t[1]'s start (from the start spec) and
	// leaves t[0] where the other process put it.
	if err := pl.Checkpoint().Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if got := committed(); got[t0] != 8 || got[t1] != 2 {
		t.Fatalf("committed %v, want t[0] 8 and t[1] 2", got)
	}
	for _, r := range rs {
		if err := pl.Checkpoint().MarkDone(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := pl.Checkpoint().Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if got := committed(); got[t0] != 10 || got[t1] != 10 {
		t.Fatalf("committed %v once everything is done, want 10 and 10", got)
	}
}
