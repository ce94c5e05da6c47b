package riffbeam

import (
	"errors"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/riffle-go/riffle"
)

// boundedRecords is the size of the exact bounded read (100,000 asked by
// the issue; see README for its time under -race).
const boundedRecords = 100_000

// A bounded read of a 12-partition topic through Prism reads every
// offset exactly once, and nothing else.
func TestBoundedReadExact(t *testing.T) {
	ctx := testCtx(t)
	brokers, cl := cluster(t, "events", 12)
	n := boundedRecords
	if testing.Short() {
		n = 5_000
	}
	produce(t, ctx, cl, "events", 0, n, time.Time{})
	hw := ends(t, ctx, cl, "events")

	name, c := newCollector(t)
	p, s := beam.NewPipelineWithRoot()
	recs := Read(s, brokers, []string{"events"})
	beam.ParDo0(s, &collectFn{Name: name}, recs)
	if err := run(t, ctx, p); err != nil {
		t.Fatal(err)
	}
	checkExactly(t, c, "events", nil, hw)
}

// Initial splits (SplitSize) cut every partition into many restrictions;
// together they still cover every offset once.
func TestReadSplitInitially(t *testing.T) {
	ctx := testCtx(t)
	brokers, cl := cluster(t, "events", 3)
	produce(t, ctx, cl, "events", 0, 3000, time.Time{})
	hw := ends(t, ctx, cl, "events")

	name, c := newCollector(t)
	p, s := beam.NewPipelineWithRoot()
	beam.ParDo0(s, &collectFn{Name: name}, Read(s, brokers, []string{"events"}, SplitSize(77)))
	if err := run(t, ctx, p); err != nil {
		t.Fatal(err)
	}
	checkExactly(t, c, "events", nil, hw)
}

func TestTryReadInvalid(t *testing.T) {
	_, s := beam.NewPipelineWithRoot()
	for name, tc := range map[string]struct {
		brokers, topics []string
		opts            []ReadOption
	}{
		"no brokers":                    {nil, []string{"t"}, nil},
		"no topics":                     {[]string{"b:9092"}, nil, nil},
		"empty topic":                   {[]string{"b:9092"}, []string{""}, nil},
		"commit no group":               {[]string{"b:9092"}, []string{"t"}, []ReadOption{CommitOffsets()}},
		"negative split":                {[]string{"b:9092"}, []string{"t"}, []ReadOption{SplitSize(-1)}},
		"new partitions start, bounded": {[]string{"b:9092"}, []string{"t"}, []ReadOption{NewPartitionsStartLatest()}},
	} {
		_, err := TryRead(s, tc.brokers, tc.topics, tc.opts...)
		if !errors.Is(err, ErrInvalidOption) || !errors.Is(err, riffle.ErrInvalidConfig) {
			t.Errorf("%s: %v, want ErrInvalidOption", name, err)
		}
	}
}
