package riffbeam

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/riffle-go/riffle"
)

// An unbounded read picks up records produced after the pipeline started,
// and a partition added while it runs; it ends (Prism cannot drain a Go
// pipeline, so the read is bounded by Until) once every partition has a
// record at or after the Until time, which it does not emit. Every record
// before it is read exactly once.
func TestUnboundedRead(t *testing.T) {
	ctx := testCtx(t)
	brokers, cl := cluster(t, "events", 3)
	early := time.Now().Add(-time.Minute).Truncate(time.Millisecond)
	produce(t, ctx, cl, "events", 0, 30, early)

	until := time.Now().Add(time.Hour).Truncate(time.Millisecond)
	name, c := newCollector(t)
	first := c.waitFor(30)
	p, s := beam.NewPipelineWithRoot()
	recs := Read(s, brokers, []string{"events"}, Unbounded(), Until(until),
		PollInterval(50*time.Millisecond), DiscoveryInterval(100*time.Millisecond))
	beam.ParDo0(s, &collectFn{Name: name}, recs)
	done := make(chan error, 1)
	go func() { done <- run(t, ctx, p) }()

	wait := func(ch <-chan struct{}, what string) {
		t.Helper()
		select {
		case <-ch:
		case err := <-done:
			t.Fatalf("pipeline ended (%v) before %s", err, what)
		case <-ctx.Done():
			t.Fatalf("%s: %v", what, ctx.Err())
		}
	}
	wait(first, "reading the records produced before the start")
	t.Log("read the records produced before the start")

	// Records produced after the pipeline started, and a new partition.
	second := c.waitFor(30 + 30 + 10)
	produce(t, ctx, cl, "events", 30, 30, time.Time{})
	if _, err := cl.Admin().CreatePartitions(ctx, 4, "events"); err != nil {
		t.Fatal(err)
	}
	cl2, err := riffle.NewClient(riffle.SeedBrokers(brokers...)) // metadata with the new partition
	if err != nil {
		t.Fatal(err)
	}
	defer cl2.Close()
	pr, err := riffle.NewProducer(cl2, riffle.WithPartitioner(riffle.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	for i := 60; i < 70; i++ {
		v := []byte{byte('0' + i/10), byte('0' + i%10)}
		if err := pr.ProduceSync(ctx, &riffle.Record{Topic: "events", Partition: 3, Key: append([]byte("k"), v...), Value: v}); err != nil {
			t.Fatal(err)
		}
	}
	wait(second, "reading the records produced after the start and on the new partition")
	t.Log("read the records produced after the start")

	// The end: a record at the Until time on every partition.
	for part := int32(0); part < 4; part++ {
		if err := pr.ProduceSync(ctx, &riffle.Record{Topic: "events", Partition: part, Value: []byte("end"), Timestamp: until}); err != nil {
			t.Fatal(err)
		}
	}
	pr.Close(ctx)
	t.Log("produced the end records")
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-ctx.Done():
		t.Fatalf("the read did not end: %v", ctx.Err())
	}
	hw := ends(t, ctx, cl, "events")
	for part := range hw {
		hw[part]-- // the end records are not read
	}
	checkExactly(t, c, "events", nil, hw)
	recs2, _, _ := c.snapshot()
	if r := recs2[recKey("events", 0, 0)]; !r.Timestamp.Equal(early) {
		t.Errorf("timestamp %v, want %v", r.Timestamp, early)
	}
}

// The bounded read ends on its own; Until drops records at or after it.
func TestBoundedUntil(t *testing.T) {
	ctx := testCtx(t)
	brokers, cl := cluster(t, "events", 2)
	t0 := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	produce(t, ctx, cl, "events", 0, 20, t0)
	produce(t, ctx, cl, "events", 20, 20, t0.Add(time.Minute))
	name, c := newCollector(t)
	p, s := beam.NewPipelineWithRoot()
	beam.ParDo0(s, &collectFn{Name: name}, Read(s, brokers, []string{"events"}, Until(t0.Add(time.Second))))
	if err := run(t, ctx, p); err != nil {
		t.Fatal(err)
	}
	checkExactly(t, c, "events", nil, map[int32]int64{0: 10, 1: 10})
}

// With NewPartitionsStartLatest a partition added while an unbounded
// read runs starts at its end when discovered: records written to it
// before discovery are skipped, later ones are read (the starting offset
// is committed to the group at discovery, which tells the test when that
// was). With NewPartitionsStartTime(t0) it starts at its first record
// stamped t0 or later, among those written before discovery. Partitions
// that existed at the start are read from their earliest offset (the
// start spec) as before. The partition is created and written to right
// after the first discovery round, well within the discovery interval,
// so it is discovered with those records in it.
func TestUnboundedNewPartitionsStart(t *testing.T) {
	t0 := time.Now().Add(-time.Minute).Truncate(time.Millisecond)
	for _, tc := range []struct {
		name  string
		opt   ReadOption
		stamp func(i int) time.Time // the timestamp of the new partition's record i (offset i-60) written before discovery
		start int64                 // the new partition's starting offset
	}{
		{"latest", NewPartitionsStartLatest(), func(int) time.Time { return time.Time{} }, 10},
		{"time", NewPartitionsStartTime(t0), func(i int) time.Time {
			if i < 65 {
				return t0.Add(-time.Minute) // offsets 0-4: before t0
			}
			return t0.Add(time.Second)
		}, 5},
	} {
		t.Run(tc.name, func(t *testing.T) { testNewPartitionsStart(t, tc.opt, tc.stamp, tc.start) })
	}
}

func testNewPartitionsStart(t *testing.T, opt ReadOption, stamp func(int) time.Time, wantStart int64) {
	ctx := testCtx(t)
	brokers, cl := cluster(t, "events", 3)
	produce(t, ctx, cl, "events", 0, 30, time.Time{})

	until := time.Now().Add(time.Hour).Truncate(time.Millisecond)
	name, c := newCollector(t)
	first := c.waitFor(30)
	p, s := beam.NewPipelineWithRoot()
	recs := Read(s, brokers, []string{"events"}, Unbounded(), Until(until), Group("etl"), CommitOffsets(),
		opt, PollInterval(50*time.Millisecond), DiscoveryInterval(3*time.Second))
	beam.ParDo0(s, &collectFn{Name: name}, recs)
	done := make(chan error, 1)
	go func() { done <- run(t, ctx, p) }()
	wait := func(ch <-chan struct{}, what string) {
		t.Helper()
		select {
		case <-ch:
		case err := <-done:
			t.Fatalf("pipeline ended (%v) before %s", err, what)
		case <-ctx.Done():
			t.Fatalf("%s: %v", what, ctx.Err())
		}
	}
	wait(first, "reading the records produced before the start")

	// A new partition, written to before the next discovery round.
	if _, err := cl.Admin().CreatePartitions(ctx, 4, "events"); err != nil {
		t.Fatal(err)
	}
	cl2, err := riffle.NewClient(riffle.SeedBrokers(brokers...)) // metadata with the new partition
	if err != nil {
		t.Fatal(err)
	}
	defer cl2.Close()
	// A long linger and a Flush: the records of one produce3 go in one
	// batch, so a discovery round sees all of them or none.
	pr, err := riffle.NewProducer(cl2, riffle.WithPartitioner(riffle.ManualPartitioner()), riffle.Linger(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close(ctx)
	produce3 := func(from, to int) {
		t.Helper()
		var failed atomic.Int32
		for i := from; i < to; i++ {
			v := []byte{byte('0' + i/10), byte('0' + i%10)}
			pr.Produce(ctx, &riffle.Record{Topic: "events", Partition: 3, Key: append([]byte("k"), v...), Value: v, Timestamp: stamp(i)}, func(_ *riffle.Record, err error) {
				if err != nil {
					failed.Add(1)
					t.Error(err)
				}
			})
		}
		if err := pr.Flush(ctx); err != nil || failed.Load() != 0 {
			t.Fatalf("producing to the new partition: %v", err)
		}
	}
	produce3(60, 70) // offsets 0-9: before discovery; those before wantStart are skipped

	// Discovery commits the new partition's starting offset.
	var start int64 = -1
	for start < 0 {
		got, err := cl.Admin().FetchOffsets(ctx, "etl")
		if err != nil {
			t.Fatal(err)
		}
		if o, ok := got[riffle.TopicPartition{Topic: "events", Partition: 3}]; ok {
			start = o.Offset
			break
		}
		select {
		case <-time.After(50 * time.Millisecond):
		case err := <-done:
			t.Fatalf("pipeline ended (%v) before discovering the new partition", err)
		case <-ctx.Done():
			t.Fatalf("new partition never discovered: %v", ctx.Err())
		}
	}
	if start != wantStart {
		t.Fatalf("new partition starts at %d, want %d", start, wantStart)
	}
	second := c.waitFor(30 + int(10-wantStart) + 5)
	produce3(70, 75) // offsets 10-14: after discovery, read
	wait(second, "reading the records produced on the new partition after discovery")

	for part := int32(0); part < 4; part++ {
		if err := pr.ProduceSync(ctx, &riffle.Record{Topic: "events", Partition: part, Value: []byte("end"), Timestamp: until}); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-ctx.Done():
		t.Fatalf("the read did not end: %v", ctx.Err())
	}
	hw := ends(t, ctx, cl, "events")
	for part := range hw {
		hw[part]-- // the end records are not read
	}
	checkExactly(t, c, "events", map[int32]int64{3: wantStart}, hw)
}
