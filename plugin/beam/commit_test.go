package riffbeam

import (
	"context"
	"errors"
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
	cons := joinGroup(t, ctx, brokers, "etl", "events")
	defer cons.Close(ctx)
	p, s := beam.NewPipelineWithRoot()
	beam.ParDo0(s, &collectFn{Name: "none"}, Read(s, brokers, []string{"events"}, Group("etl"), CommitOffsets(), StartLatest()))
	err := run(t, ctx, p)
	if err == nil || !strings.Contains(err.Error(), riffle.ErrGroupActive.Error()) {
		t.Fatalf("pipeline error %v, want one saying %q", err, riffle.ErrGroupActive)
	}
}

// joinGroup returns a consumer that joined group, subscribed to topic,
// and commits nothing: the group has an active member until it closes.
func joinGroup(t *testing.T, ctx context.Context, brokers []string, group, topic string) *riffle.Consumer {
	t.Helper()
	member, err := riffle.NewClient(riffle.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(member.Close)
	joined := make(chan struct{})
	var once sync.Once
	cons, err := riffle.NewConsumer(member, riffle.ConsumerGroup(group), riffle.SubscribeTopics(topic), riffle.DisableCommits(),
		riffle.HandleRecord(func(context.Context, *riffle.Record) error { return nil }),
		riffle.OnPartitionsAssigned(func(context.Context, []riffle.TopicPartition) { once.Do(func() { close(joined) }) }))
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-joined:
	case <-ctx.Done():
		t.Fatal(ctx.Err())
	}
	return cons
}

// finalizations is a beam.BundleFinalization that keeps the callbacks for
// the test to run.
type finalizations struct{ fns []func() error }

func (f *finalizations) RegisterCallback(_ time.Duration, fn func() error) {
	f.fns = append(f.fns, fn)
}

// A finalization whose commit fails reports the error, and its ranges
// stay done: the next finalization's commit in the process commits them
// too, whatever partition it is about.
func TestFailedFinalizationCommitRetriedByTheNext(t *testing.T) {
	ctx := testCtx(t)
	brokers, cl := cluster(t, "events", 2)
	fn := &readFn{Spec: readSpec{Brokers: brokers, Topics: []string{"events"}, Group: "etl", Commit: true, StartKind: 1, CommitNanos: int64(20 * time.Second)}}
	if err := fn.Setup(); err != nil {
		t.Fatal(err)
	}
	defer fn.Teardown()
	var bf finalizations
	failFinalization(t, ctx, brokers, fn, &bf)
	fn.finalize(&bf, partition{Topic: "events", Partition: 1}, 0, 4)
	if err := bf.fns[1](); err != nil {
		t.Fatal(err)
	}
	got, err := cl.Admin().FetchOffsets(ctx, "etl")
	if err != nil {
		t.Fatal(err)
	}
	for p, want := range map[int32]int64{0: 10, 1: 4} {
		if o := got[riffle.TopicPartition{Topic: "events", Partition: p}].Offset; o != want {
			t.Errorf("events[%d]: committed %d, want %d", p, o, want)
		}
	}
}

// failFinalization finalizes events[0] [0, 10) while another member holds
// group etl, so that its commit fails with ErrGroupActive (bf.fns[0]), and
// then lets the group go.
func failFinalization(t *testing.T, ctx context.Context, brokers []string, fn *readFn, bf *finalizations) {
	t.Helper()
	cons := joinGroup(t, ctx, brokers, "etl", "events")
	fn.finalize(bf, partition{Topic: "events", Partition: 0}, 0, 10)
	if err := bf.fns[0](); !errors.Is(err, riffle.ErrGroupActive) {
		t.Fatalf("commit to an active group: %v", err)
	}
	if _, err := cons.Close(ctx); err != nil {
		t.Fatal(err)
	}
}

// A finalization commit that failed is made by the process's last commit,
// when the last read instance of the group is torn down, even with no
// finalization after it.
func TestFailedFinalizationCommittedAtTeardown(t *testing.T) {
	ctx := testCtx(t)
	brokers, cl := cluster(t, "events", 2)
	fn := &readFn{Spec: readSpec{Brokers: brokers, Topics: []string{"events"}, Group: "etl", Commit: true, StartKind: 1, CommitNanos: int64(20 * time.Second)}}
	if err := fn.Setup(); err != nil {
		t.Fatal(err)
	}
	other := &readFn{Spec: fn.Spec}
	if err := other.Setup(); err != nil { // a second instance shares the checkpoint
		t.Fatal(err)
	}
	var bf finalizations
	failFinalization(t, ctx, brokers, fn, &bf)
	committed := func() int64 {
		got, err := cl.Admin().FetchOffsets(ctx, "etl")
		if err != nil {
			t.Fatal(err)
		}
		return got[riffle.TopicPartition{Topic: "events", Partition: 0}].Offset
	}
	fn.Teardown()
	if o := committed(); o == 10 {
		t.Fatal("committed at the first teardown, while another instance still holds the checkpoint")
	}
	other.Teardown()
	if o := committed(); o != 10 {
		t.Fatalf("events[0]: committed %d after the last teardown, want 10", o)
	}
}
