package riffbeam

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/ptest"
	"github.com/riffle-go/riffle"
	"github.com/riffle-go/riffle/rifftest"
)

// TestMain initializes Beam; pipelines run on the Prism runner, in
// process (loopback), so the DoFns below share the test's memory.
func TestMain(m *testing.M) { ptest.Main(m) }

func init() {
	register.DoFn2x0[context.Context, Record](&collectFn{})
}

// collector gathers a pipeline's records in the test process: every
// (topic, partition, offset) with how often it was seen.
type collector struct {
	mu     sync.Mutex
	recs   map[string]Record
	counts map[string]int
	total  int
	// wait is closed when total reaches want.
	want int
	wait chan struct{}
	// stall, when set, is called for every record before it is counted.
	stall func(ctx context.Context, r Record)
}

var collectors sync.Map // name -> *collector

func newCollector(t *testing.T) (string, *collector) {
	name := t.Name()
	c := &collector{recs: map[string]Record{}, counts: map[string]int{}}
	collectors.Store(name, c)
	t.Cleanup(func() { collectors.Delete(name) })
	return name, c
}

func recKey(topic string, p int32, o int64) string { return fmt.Sprintf("%s/%d/%d", topic, p, o) }

func (c *collector) add(ctx context.Context, r Record) {
	if c.stall != nil {
		c.stall(ctx, r)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	k := recKey(r.Topic, r.Partition, r.Offset)
	c.recs[k] = r
	c.counts[k]++
	c.total++
	if c.wait != nil && c.total >= c.want {
		close(c.wait)
		c.wait = nil
	}
}

// waitFor returns a channel closed once n records were collected.
func (c *collector) waitFor(n int) <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := make(chan struct{})
	if c.total >= n {
		close(ch)
		return ch
	}
	c.want, c.wait = n, ch
	return ch
}

func (c *collector) snapshot() (map[string]Record, map[string]int, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	recs := make(map[string]Record, len(c.recs))
	counts := make(map[string]int, len(c.counts))
	for k, v := range c.recs {
		recs[k] = v
	}
	for k, v := range c.counts {
		counts[k] = v
	}
	return recs, counts, c.total
}

// collectFn hands every record to the named collector.
type collectFn struct{ Name string }

// ProcessElement collects r.
func (fn *collectFn) ProcessElement(ctx context.Context, r Record) {
	c, ok := collectors.Load(fn.Name)
	if !ok {
		panic("no collector " + fn.Name)
	}
	c.(*collector).add(ctx, r)
}

// cluster starts an embedded cluster with topic and returns its brokers
// and a client.
func cluster(t *testing.T, topic string, partitions int32) ([]string, *riffle.Client) {
	t.Helper()
	c := rifftest.New(t, rifftest.Topic(topic, partitions))
	cl, err := riffle.NewClient(riffle.SeedBrokers(c.Addrs()...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return c.Addrs(), cl
}

// produce writes n records to topic round robin, values "<from+i>", and
// waits for all of them.
func produce(t *testing.T, ctx context.Context, cl *riffle.Client, topic string, from, n int, ts time.Time) {
	t.Helper()
	p, err := riffle.NewProducer(cl, riffle.WithPartitioner(riffle.RoundRobinPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var first error
	for i := from; i < from+n; i++ {
		v := strconv.Itoa(i)
		p.Produce(ctx, &riffle.Record{Topic: topic, Key: []byte("k" + v), Value: []byte(v), Timestamp: ts}, func(_ *riffle.Record, err error) {
			if err != nil {
				mu.Lock()
				first = err
				mu.Unlock()
			}
		})
	}
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if first != nil {
		t.Fatal(first)
	}
}

// ends returns the high watermark of every partition of topic.
func ends(t *testing.T, ctx context.Context, cl *riffle.Client, topic string) map[int32]int64 {
	t.Helper()
	los, err := cl.Admin().ListOffsets(ctx, riffle.OffsetLatest, topic)
	if err != nil {
		t.Fatal(err)
	}
	out := map[int32]int64{}
	for _, lo := range los {
		if lo.Err != nil {
			t.Fatal(lo.Err)
		}
		out[lo.Partition] = lo.Offset
	}
	return out
}

// run runs p on Prism within the test's deadline.
func run(t *testing.T, ctx context.Context, p *beam.Pipeline) error {
	t.Helper()
	_, err := beam.Run(ctx, "prism", p)
	return err
}

// testCtx is a context that ends a little before the test's deadline.
func testCtx(t *testing.T) context.Context {
	d, ok := t.Deadline()
	if !ok {
		d = time.Now().Add(10 * time.Minute)
	}
	ctx, cancel := context.WithDeadline(context.Background(), d.Add(-10*time.Second))
	t.Cleanup(cancel)
	return ctx
}

// checkExactly fails unless the collector holds every offset below the
// ends exactly once, from the given starts (0 when absent), and nothing
// else.
func checkExactly(t *testing.T, c *collector, topic string, starts, ends map[int32]int64) {
	t.Helper()
	recs, counts, total := c.snapshot()
	want := 0
	for p, end := range ends {
		for o := starts[p]; o < end; o++ {
			want++
			k := recKey(topic, p, o)
			switch n := counts[k]; {
			case n == 0:
				t.Errorf("%s: missing", k)
			case n > 1:
				t.Errorf("%s: read %d times", k, n)
			}
			if r, ok := recs[k]; ok && string(r.Key) != "k"+string(r.Value) {
				t.Errorf("%s: key %q, value %q", k, r.Key, r.Value)
			}
		}
	}
	if total != want || len(counts) != want {
		t.Errorf("read %d records (%d distinct), want %d", total, len(counts), want)
	}
}
