package crash_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/riffle-go/riffle"
	"github.com/riffle-go/riffle/internal/kafkatest"
)

// env is the cluster the package runs against, set by TestMain.
var env struct {
	cluster *kafkatest.Cluster // nil: the tests skip (or fail with REQUIRE)
	skip    string             // why there is no cluster
	require bool
}

// noBrokersMode is the line the tests skip with when only
// RIFFLE_KAFKA_BROKERS is set.
const noBrokersMode = "the crash tests kill and restart brokers, so they start a cluster of their own: " +
	kafkatest.EnvBrokers + " does not apply; set " + kafkatest.EnvVersion + "=" + kafkatest.Version

func TestMain(m *testing.M) {
	req, err := kafkatest.Requested()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	env.require = req.Require
	switch {
	case req.Start, os.Getenv(kafkatest.EnvVersion) == kafkatest.Version:
		// Its own cluster, also when RIFFLE_KAFKA_BROKERS names one
		// (for the integration suite, which then uses that one).
	case len(req.Brokers) > 0:
		env.skip = noBrokersMode
		os.Exit(m.Run())
	default:
		env.skip = kafkatest.HowToRun
		os.Exit(m.Run())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	logf := func(format string, args ...any) { fmt.Fprintf(os.Stderr, format+"\n", args...) }
	c, err := kafkatest.Start(ctx, kafkatest.Config{Version: req.Version, Nodes: 3, Logf: logf})
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	env.cluster = c
	code := m.Run()
	// Every JVM goes, whatever the tests did (a node a failed test left
	// killed or stopped included); a JVM still running after Close is a
	// failure, and is killed. SIGKILL first: the data goes with the
	// directory, and three nodes stopping together with SIGTERM wait for
	// a controlled shutdown the lost quorum cannot finish.
	for _, n := range c.Nodes() {
		if err := c.Kill(n.ID); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
	}
	if err := c.Close(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		code = 1
	}
	if left := c.Leftovers(); len(left) > 0 {
		fmt.Fprintf(os.Stderr, "crash: JVMs still running after Close: %v; killing them\n", left)
		for _, pid := range left {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		code = 1
	}
	os.Exit(code)
}

// need skips the test unless the package's cluster runs (fails with
// RIFFLE_KAFKA_REQUIRE=1). The tests run one at a time: they kill nodes.
func need(t *testing.T) {
	t.Helper()
	if env.cluster == nil {
		if env.require {
			t.Fatal(env.skip + " (" + kafkatest.EnvRequire + "=1)")
		}
		t.Skip(env.skip)
	}
}

func timeout(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// testLog is a writer into t.Log that goes quiet once the test ends (the
// clients' goroutines may log while they stop) and after max lines (the
// kills make every client warn; the count of the rest is logged at the
// end).
type testLog struct {
	mu      sync.Mutex
	t       *testing.T
	done    bool
	lines   int
	dropped int
}

const maxLogLines = 150

func (w *testLog) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case w.done:
	case w.lines >= maxLogLines:
		w.dropped++
	default:
		w.lines++
		w.t.Log(strings.TrimRight(string(b), "\n"))
	}
	return len(b), nil
}

func (w *testLog) close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.done && w.dropped > 0 {
		w.t.Logf("(%d more client log lines not shown)", w.dropped)
	}
	w.done = true
}

// logs is the test's shared client log, made on first use.
var logs sync.Map // *testing.T -> *testLog

func logOf(t *testing.T) *testLog {
	w := &testLog{t: t}
	if old, loaded := logs.LoadOrStore(t, w); loaded {
		return old.(*testLog)
	}
	t.Cleanup(func() {
		w.close()
		logs.Delete(t)
	})
	return w
}

// client is a client of the cluster (every node a seed) whose warnings go
// to the test's log; closed when the test ends. It waits longer than the
// default for a topic created a moment ago (docs/real-kafka.md, D1).
func client(t *testing.T, opts ...riffle.Option) *riffle.Client {
	t.Helper()
	lg := slog.New(slog.NewTextHandler(logOf(t), &slog.HandlerOptions{Level: slog.LevelWarn}))
	all := append([]riffle.Option{riffle.SeedBrokers(env.cluster.Addrs()...), riffle.Logger(lg),
		riffle.UnknownTopicWait(30 * time.Second)}, opts...)
	cl, err := riffle.NewClient(all...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

var unsafeName = regexp.MustCompile(`[^a-zA-Z0-9._-]+`)

// name is a unique name for a topic, group or transactional id of the test.
func name(t *testing.T, what string) string {
	var b [3]byte
	_, _ = rand.Read(b[:])
	n := unsafeName.ReplaceAllString(t.Name(), "_")
	if len(n) > 100 {
		n = n[:100]
	}
	return fmt.Sprintf("%s-%s-%s", n, what, hex.EncodeToString(b[:]))
}

// topic creates a topic with replication factor 3 (min.insync.replicas 2,
// the harness's cluster default), deleted when the test ends.
func topic(t *testing.T, cl *riffle.Client, what string, partitions int32) string {
	t.Helper()
	tp := name(t, what)
	ctx := timeout(t, time.Minute)
	res, err := cl.Admin().CreateTopics(ctx, riffle.TopicSpec{Name: tp, Partitions: partitions, ReplicationFactor: 3,
		Configs: map[string]string{"min.insync.replicas": "2"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := res.Err(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, _ = cl.Admin().DeleteTopics(ctx, tp)
	})
	return tp
}

// eventually polls cond every 200 ms until it returns nil, and returns
// cond's last error after d.
func eventually(d time.Duration, cond func() error) error {
	deadline := time.Now().Add(d)
	for {
		err := cond()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not done after %v: %w", d, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// must fails the test with what when err is not nil.
func must(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// endOffsets are the high watermarks (ReadUncommitted) or last stable
// offsets of topic's partitions.
func endOffsets(ctx context.Context, cl *riffle.Client, iso riffle.IsolationLevel, topic string) (map[int32]int64, error) {
	los, err := cl.Admin().ListOffsetsIsolated(ctx, iso, riffle.OffsetLatest, topic)
	if err != nil {
		return nil, err
	}
	out := map[int32]int64{}
	for _, lo := range los {
		if lo.Err != nil {
			return nil, fmt.Errorf("ListOffsets %s[%d]: %w", topic, lo.Partition, lo.Err)
		}
		out[lo.Partition] = lo.Offset
	}
	return out, nil
}

// readAll reads every record of topic from the start of each partition to
// its end as of the call, in isolation iso, and returns them by partition
// in offset order.
func readAll(t *testing.T, cl *riffle.Client, topic string, iso riffle.IsolationLevel) map[int32][]*riffle.Record {
	t.Helper()
	ctx := timeout(t, 2*time.Minute)
	var end map[int32]int64
	must(t, "the ends of "+topic, eventually(time.Minute, func() (err error) {
		end, err = endOffsets(ctx, cl, iso, topic)
		return err
	}))
	var mu sync.Mutex
	got := map[int32][]*riffle.Record{}
	c, err := riffle.NewConsumer(cl, riffle.Isolation(iso),
		riffle.HandleRecord(func(_ context.Context, r *riffle.Record) error {
			mu.Lock()
			defer mu.Unlock()
			got[r.Partition] = append(got[r.Partition], r)
			return nil
		}),
		riffle.OnPartitionError(func(e *riffle.PartitionError) { t.Errorf("reading %s: %v", topic, e) }))
	must(t, "reader", err)
	for p := range end {
		must(t, "assign", c.Assign(riffle.Assignment{TopicPartition: riffle.TopicPartition{Topic: topic, Partition: p}, Start: riffle.AtEarliest()}))
	}
	must(t, "reading "+topic+" to its end", eventually(time.Minute, func() error {
		for _, ps := range c.Stats().Partitions {
			if ps.Position < end[ps.Partition] {
				return fmt.Errorf("%s[%d] at %d of %d", topic, ps.Partition, ps.Position, end[ps.Partition])
			}
		}
		return nil
	}))
	_, err = c.Close(ctx)
	must(t, "closing the reader", err)
	mu.Lock()
	defer mu.Unlock()
	return got
}

// ledger counts how often each value was handled.
type ledger struct {
	mu     sync.Mutex
	seen   map[string]int
	byPart map[riffle.TopicPartition]int // handlings per partition
	calls  atomic.Int64
}

func newLedger() *ledger {
	return &ledger{seen: map[string]int{}, byPart: map[riffle.TopicPartition]int{}}
}

func (l *ledger) add(r *riffle.Record) {
	l.calls.Add(1)
	l.mu.Lock()
	l.seen[string(r.Value)]++
	l.byPart[riffle.TopicPartition{Topic: r.Topic, Partition: r.Partition}]++
	l.mu.Unlock()
}

// progress is how many records of each partition were handled.
func (l *ledger) progress() map[riffle.TopicPartition]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return maps.Clone(l.byPart)
}

// missing counts the values of want not handled yet, and returns the
// first few.
func (l *ledger) missing(want []string) (int, []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	var some []string
	for _, v := range want {
		if l.seen[v] == 0 {
			n++
			if len(some) < 5 {
				some = append(some, v)
			}
		}
	}
	return n, some
}

// dups counts the values handled more than once and the extra handlings.
func (l *ledger) dups() (values, extra int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, n := range l.seen {
		if n > 1 {
			values++
			extra += n - 1
		}
	}
	return values, extra
}
