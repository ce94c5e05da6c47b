package process_test

import (
	"context"
	"sort"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/riffle-go/riffle"
	"github.com/riffle-go/riffle/process"
	"github.com/riffle-go/riffle/rifftest"
)

// Exactly once across a handover to a member that reads only the committed
// offset (a riffle.ExactlyOnce consumer, franz-go, Java): records finish
// out of offset order (offset 0 never finishes, the rest do), transactions
// commit meanwhile, then the member closes. The committed offset C must
// alone say what is done: read_committed, the outputs are those of inputs
// [0, C) exactly, so a successor resuming at C neither repeats an output
// (one of a record at or above C) nor loses one. Before the fix, the
// outputs of offsets 1.. were committed with offset 0.
func TestExactlyOnceHandoverCommittedOffsetOnly(t *testing.T) {
	const n = 20
	c, cl := setup(t, rifftest.Topic("in", 1), rifftest.Topic("out", 1))
	produce(t, cl, "in", 1, n, nil)
	pr := txnProducer(t, c, "eos-handover")
	var done atomic.Int64
	p, err := process.New(client(t, c), func(ctx context.Context, r *riffle.Record) error {
		if r.Offset == 0 {
			<-ctx.Done() // finishes last: never, in this member
			return ctx.Err()
		}
		defer done.Add(1)
		return process.Output(ctx, &riffle.Record{Topic: "out", Value: []byte(strconv.FormatInt(r.Offset, 10))})
	}, process.ExactlyOnce(pr, riffle.CommitEvery{Interval: 20 * time.Millisecond}),
		process.Ordering(process.Unordered), process.Concurrency(n),
		process.ConsumerOptions(groupOpts("g-handover", "in")...))
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "records 1.. finished", func() bool { return done.Load() == n-1 })
	// Close's final commit (and any commit point before) carries the
	// finished records' transaction.
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	p.Close(ctx) // offset 0 still running at the deadline: an error naming it

	offs, err := cl.Admin().FetchOffsets(context.Background(), "g-handover")
	if err != nil {
		t.Fatal(err)
	}
	committed := offs[riffle.TopicPartition{Topic: "in", Partition: 0}].Offset
	var got []int
	for _, kv := range readTopic(t, cl, "out", true)[0] {
		v, _ := strconv.Atoi(kv[1:]) // key is empty: "=<offset>"
		got = append(got, v)
	}
	sort.Ints(got)
	if int64(len(got)) != max(committed, 0) {
		t.Fatalf("committed offset %d, but read_committed outputs for inputs %v: a successor resuming at the committed offset repeats those at or above it", committed, got)
	}
	for i, v := range got {
		if v != i {
			t.Fatalf("committed offset %d, outputs for inputs %v", committed, got)
		}
	}

	// The successor: a riffle.ExactlyOnce consumer in the same group
	// (reads only the committed offset) handles the rest; every input's
	// output must then appear exactly once.
	pr2 := txnProducer(t, c, "eos-handover-2")
	cs, err := riffle.NewConsumer(client(t, c), append(groupOpts("g-handover", "in"),
		riffle.ExactlyOnce(pr2, riffle.CommitEvery{Interval: 20 * time.Millisecond}),
		riffle.HandleRecord(func(ctx context.Context, r *riffle.Record) error {
			pr2.Produce(ctx, &riffle.Record{Topic: "out", Value: []byte(strconv.FormatInt(r.Offset, 10))}, nil)
			return nil
		}))...)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "the successor committing every input", func() bool { return committedInputs(t, cl, "g-handover") == n })
	cctx, ccancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer ccancel()
	if _, err := cs.Close(cctx); err != nil {
		t.Fatal(err)
	}
	got = got[:0]
	for _, kv := range readTopic(t, cl, "out", true)[0] {
		v, _ := strconv.Atoi(kv[1:])
		got = append(got, v)
	}
	sort.Ints(got)
	if len(got) != n {
		t.Fatalf("after the handover, read_committed outputs for inputs %v, want each of 0..%d once", got, n-1)
	}
	for i, v := range got {
		if v != i {
			t.Fatalf("after the handover, read_committed outputs for inputs %v, want each of 0..%d once", got, n-1)
		}
	}
}
