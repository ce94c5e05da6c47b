package integration_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/riffle-go/riffle"
	"github.com/riffle-go/riffle/internal/kafkatest"
)

// env is the cluster the suite runs against, set by TestMain.
var env struct {
	addrs   []string
	nodes   int                // brokers in the cluster
	cluster *kafkatest.Cluster // nil with RIFFLE_KAFKA_BROKERS
	require bool
	// reauth is the SASL_SSL listener's session lifetime
	// (connections.max.reauth.ms) on a cluster the suite started.
	reauth time.Duration
	// version is the Kafka release of a cluster the suite started, ""
	// with RIFFLE_KAFKA_BROKERS.
	version string
	// features are what the cluster can do (features_test.go).
	features clusterFeatures
	// fewerNodes: RIFFLE_KAFKA_NODES asked for fewer nodes than the
	// suite's 3, so tests that need more skip even with REQUIRE.
	fewerNodes bool
}

// suiteReauth is the session lifetime of the SASL_SSL listener of the
// cluster the suite starts: short, so that every SASL test's connections
// re-authenticate (KIP-368) a few times while they run.
const suiteReauth = 3 * time.Second

func TestMain(m *testing.M) {
	req, err := kafkatest.Requested()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	env.require = req.Require
	if !req.Any() {
		os.Exit(m.Run()) // every test skips (or fails, with REQUIRE)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	if req.Start {
		logf := func(format string, args ...any) { fmt.Fprintf(os.Stderr, format+"\n", args...) }
		nodes := req.Nodes
		if nodes == 0 {
			nodes = 3
		}
		env.fewerNodes = nodes < 3
		c, err := kafkatest.Start(ctx, kafkatest.Config{Version: req.Version, Nodes: nodes, SASL: true, SASLReauth: suiteReauth, Logf: logf})
		if err != nil {
			cancel()
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		env.cluster, env.addrs, env.reauth, env.version = c, c.Addrs(), suiteReauth, c.Version()
	} else {
		env.addrs = req.Brokers
	}
	env.nodes, err = countBrokers(ctx)
	if err == nil {
		env.features, err = readFeatures(ctx)
	}
	cancel()
	code := 1
	if err != nil {
		fmt.Fprintf(os.Stderr, "integration: the cluster at %v does not answer: %v\n", env.addrs, err)
	} else {
		code = m.Run()
	}
	if env.cluster != nil {
		if err := env.cluster.Close(); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
	}
	os.Exit(code)
}

func countBrokers(ctx context.Context) (int, error) {
	cl, err := riffle.NewClient(riffle.SeedBrokers(env.addrs...))
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	bs, err := cl.Brokers(ctx)
	return len(bs), err
}

// need skips the test unless a cluster is there (fails with
// RIFFLE_KAFKA_REQUIRE=1), and runs it in parallel with the others.
func need(t *testing.T) {
	t.Helper()
	if len(env.addrs) == 0 {
		if env.require {
			t.Fatal(kafkatest.HowToRun + " (" + kafkatest.EnvRequire + "=1)")
		}
		t.Skip(kafkatest.HowToRun)
	}
	t.Parallel()
}

// needNodes skips the test unless the cluster has n brokers: with
// RIFFLE_KAFKA_REQUIRE=1 that is a failure, unless RIFFLE_KAFKA_NODES
// asked for the smaller cluster.
func needNodes(t *testing.T, n int) {
	t.Helper()
	if env.nodes >= n {
		return
	}
	msg := fmt.Sprintf("needs %d brokers, the cluster has %d", n, env.nodes)
	if env.require && !env.fewerNodes {
		t.Fatal(msg + " (" + kafkatest.EnvRequire + "=1)")
	}
	t.Skip(msg)
}

// rf is the replication factor of the suite's topics.
func rf() int16 { return int16(min(env.nodes, 3)) }

func timeout(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// testLog is a writer into t.Log that goes quiet once the test ends (the
// client's goroutines may log while they stop).
type testLog struct {
	mu   sync.Mutex
	t    *testing.T
	done bool
}

func (w *testLog) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.done {
		w.t.Log(strings.TrimRight(string(b), "\n"))
	}
	return len(b), nil
}

// client is a client of the cluster, with the client's defaults, whose
// warnings go to the test's log; closed when the test ends.
func client(t *testing.T, opts ...riffle.Option) *riffle.Client {
	t.Helper()
	w := &testLog{t: t}
	var out io.Writer = w
	lg := slog.New(slog.NewTextHandler(out, &slog.HandlerOptions{Level: slog.LevelWarn}))
	all := append([]riffle.Option{riffle.SeedBrokers(env.addrs...), riffle.Logger(lg)}, opts...)
	cl, err := riffle.NewClient(all...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cl.Close()
		w.mu.Lock()
		w.done = true
		w.mu.Unlock()
	})
	return cl
}

var unsafeName = regexp.MustCompile(`[^a-zA-Z0-9._-]+`)

// name is a unique name for a topic, group or transactional id of the test.
func name(t *testing.T, what string) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	n := unsafeName.ReplaceAllString(t.Name(), "_")
	if len(n) > 150 {
		n = n[:150]
	}
	return fmt.Sprintf("%s-%s-%s", n, what, hex.EncodeToString(b[:]))
}

// topic creates a topic of the test with rf() replicas (and the
// cluster's min.insync.replicas, 2 on the harness's 3 nodes), deleted
// when the test ends. It does not wait for the topic to propagate: the
// client is to cope with a topic created a moment ago.
func topic(t *testing.T, cl *riffle.Client, partitions int32, configs map[string]string) string {
	t.Helper()
	tp := name(t, "t")
	ctx := timeout(t, time.Minute)
	res, err := cl.Admin().CreateTopics(ctx, riffle.TopicSpec{Name: tp, Partitions: partitions, ReplicationFactor: rf(), Configs: configs})
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

// endOffsets are the high watermarks of topic's partitions.
func endOffsets(t *testing.T, cl *riffle.Client, topic string) map[int32]int64 {
	t.Helper()
	ctx := timeout(t, time.Minute)
	los, err := cl.Admin().ListOffsets(ctx, riffle.OffsetLatest, topic)
	if err != nil {
		t.Fatal(err)
	}
	out := map[int32]int64{}
	for _, lo := range los {
		if lo.Err != nil {
			t.Fatalf("ListOffsets %s[%d]: %v", topic, lo.Partition, lo.Err)
		}
		out[lo.Partition] = lo.Offset
	}
	return out
}

// readAll reads every record of topic, from the start of each partition to
// its high watermark as of the call (taken once every producer is done), in
// isolation iso, and returns them by partition in offset order. A
// read_committed reader stops at the same offsets: positions move past
// aborted records and control records.
func readAll(t *testing.T, cl *riffle.Client, topic string, iso riffle.IsolationLevel) map[int32][]*riffle.Record {
	t.Helper()
	end := endOffsets(t, cl, topic)
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
	if err != nil {
		t.Fatal(err)
	}
	for p := range end {
		if err := c.Assign(riffle.Assignment{TopicPartition: riffle.TopicPartition{Topic: topic, Partition: p}, Start: riffle.AtEarliest()}); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, time.Minute, "reading "+topic+" to its end", func() error {
		for _, ps := range c.Stats().Partitions {
			if ps.Position < end[ps.Partition] {
				return fmt.Errorf("%s[%d] at %d of %d", topic, ps.Partition, ps.Position, end[ps.Partition])
			}
		}
		return nil
	})
	ctx := timeout(t, 30*time.Second)
	if _, err := c.Close(ctx); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	for p, rs := range got {
		if !slices.IsSortedFunc(rs, func(a, b *riffle.Record) int { return int(a.Offset - b.Offset) }) {
			t.Errorf("%s[%d]: records out of offset order", topic, p)
		}
	}
	return got
}

// eventually polls cond every 100 ms until it returns nil, failing the
// test with cond's last error after d.
func eventually(t *testing.T, d time.Duration, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not done after %v: %v", what, d, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitFor waits for ch to close, failing the test after d.
func waitFor(t *testing.T, d time.Duration, what string, ch <-chan struct{}) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(d):
		t.Fatalf("%s: not done after %v", what, d)
	}
}

// values are the values of rs, in order.
func values(rs []*riffle.Record) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = string(r.Value)
	}
	return out
}

// allValues are the values of every partition's records, sorted.
func allValues(by map[int32][]*riffle.Record) []string {
	var out []string
	for _, rs := range by {
		out = append(out, values(rs)...)
	}
	slices.Sort(out)
	return out
}

var errNotYet = errors.New("not yet")

// defect reports a known defect of Riffle that the real broker shows,
// written down in docs/real-kafka.md under id: the test skips with the
// symptom, or fails with RIFFLE_KAFKA_STRICT=1. A test calls it only on the
// symptom, so it passes on its own once the defect is fixed.
func defect(t *testing.T, id string, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf("KNOWN DEFECT %s (docs/real-kafka.md): %s", id, fmt.Sprintf(format, args...))
	if os.Getenv("RIFFLE_KAFKA_STRICT") == "1" {
		t.Fatal(msg)
	}
	t.Skip(msg)
}

// While no known defect is open no test calls defect; it stays for the
// next one the real broker shows.
var _ = defect
