package riffbeam

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/riffle-go/riffle"
)

// A checkpointed bounded read (Group + CommitOffsets) commits what it read
// when Prism finalizes its bundles; run again after more records were
// produced, it reads only the new ones, and commits the new ends.
func TestCheckpointedReadTwice(t *testing.T) {
	ctx := testCtx(t)
	brokers, cl := cluster(t, "events", 4)
	produce(t, ctx, cl, "events", 0, 400, time.Time{})
	first := ends(t, ctx, cl, "events")

	read := func() *collector {
		t.Helper()
		name, c := newCollector(t)
		p, s := beam.NewPipelineWithRoot()
		recs := Read(s, brokers, []string{"events"}, Group("etl"), CommitOffsets(), SplitSize(33))
		beam.ParDo0(s, &collectFn{Name: name}, recs)
		if err := run(t, ctx, p); err != nil {
			t.Fatal(err)
		}
		collectors.Delete(name)
		return c
	}
	committed := func(want map[int32]int64) {
		t.Helper()
		got, err := cl.Admin().FetchOffsets(ctx, "etl")
		if err != nil {
			t.Fatal(err)
		}
		for p, end := range want {
			if o := got[riffle.TopicPartition{Topic: "events", Partition: p}].Offset; o != end {
				t.Errorf("events[%d]: committed %d, want %d", p, o, end)
			}
		}
	}

	c := read()
	checkExactly(t, c, "events", nil, first)
	committed(first)

	produce(t, ctx, cl, "events", 400, 200, time.Time{})
	second := ends(t, ctx, cl, "events")
	c = read()
	checkExactly(t, c, "events", first, second)
	committed(second)

	c = read() // nothing new
	if _, _, n := c.snapshot(); n != 0 {
		t.Errorf("third read got %d records, want none", n)
	}
}

// A group with an active member refuses the read's standalone commits:
// the pipeline fails before reading.
func TestCheckpointedReadGroupActive(t *testing.T) {
	ctx := testCtx(t)
	brokers, cl := cluster(t, "events", 1)
	produce(t, ctx, cl, "events", 0, 10, time.Time{})
	member, err := riffle.NewClient(riffle.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer member.Close()
	joined := make(chan struct{})
	var once sync.Once
	cons, err := riffle.NewConsumer(member, riffle.ConsumerGroup("etl"), riffle.SubscribeTopics("events"),
		riffle.HandleRecord(func(context.Context, *riffle.Record) error { return nil }),
		riffle.OnPartitionsAssigned(func(context.Context, []riffle.TopicPartition) { once.Do(func() { close(joined) }) }))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close(ctx)
	select {
	case <-joined:
	case <-ctx.Done():
		t.Fatal(ctx.Err())
	}
	p, s := beam.NewPipelineWithRoot()
	beam.ParDo0(s, &collectFn{Name: "none"}, Read(s, brokers, []string{"events"}, Group("etl"), CommitOffsets(), StartLatest()))
	err = run(t, ctx, p)
	if err == nil || !strings.Contains(err.Error(), riffle.ErrGroupActive.Error()) {
		t.Fatalf("pipeline error %v, want one saying %q", err, riffle.ErrGroupActive)
	}
}
