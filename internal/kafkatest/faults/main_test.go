package faults_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
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

// env is the cluster the suite runs against, started by TestMain.
var env struct {
	cluster *kafkatest.Cluster
	skip    string // why tests skip, when there is no cluster
	require bool
}

// ownCluster is the skip line in RIFFLE_KAFKA_BROKERS mode.
const ownCluster = "faults stops and kills nodes, so it runs only on a cluster it starts: " +
	kafkatest.EnvBrokers + " is not used here; set " + kafkatest.EnvVersion + "=" + kafkatest.Version

func TestMain(m *testing.M) {
	req, err := kafkatest.Requested()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	env.require = req.Require
	switch {
	case req.Start:
	case len(req.Brokers) > 0:
		env.skip = ownCluster
		os.Exit(m.Run())
	default:
		env.skip = kafkatest.HowToRun
		os.Exit(m.Run())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	logf := func(format string, args ...any) { fmt.Fprintf(os.Stderr, format+"\n", args...) }
	c, err := kafkatest.Start(ctx, kafkatest.Config{Version: req.Version, Nodes: 3, Logf: logf, StopTimeout: 15 * time.Second,
		BrokerConfigs: map[string]string{
			// The controller looks for leaderless partitions of topics
			// with unclean.leader.election.enable every 5 minutes by
			// default.
			"unclean.leader.election.interval.ms": "1000",
		}})
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	env.cluster = c
	code := m.Run()
	if err := c.Close(); err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
	os.Exit(code)
}

// need skips the test unless the suite started a cluster (fails with
// RIFFLE_KAFKA_REQUIRE=1), and starts any node a test before left down.
// Tests do not run in parallel: they stop nodes.
func need(t *testing.T) {
	t.Helper()
	if env.cluster == nil {
		if env.require {
			t.Fatal(env.skip + " (" + kafkatest.EnvRequire + "=1)")
		}
		t.Skip(env.skip)
	}
	for _, n := range env.cluster.Nodes() {
		if !n.Running() {
			if err := env.cluster.Restart(timeout(t, 3*time.Minute), n.ID); err != nil {
				t.Fatalf("restarting node %d left down: %v", n.ID, err)
			}
		}
	}
}

func timeout(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// testLog is a writer into t.Log that goes quiet once the test ends.
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

// client is a client of the cluster (every node a seed) whose warnings go
// to the test's log; closed when the test ends.
func client(t *testing.T, opts ...riffle.Option) *riffle.Client {
	t.Helper()
	w := &testLog{t: t}
	var out io.Writer = w
	lg := slog.New(slog.NewTextHandler(out, &slog.HandlerOptions{Level: slog.LevelWarn}))
	all := append([]riffle.Option{riffle.SeedBrokers(env.cluster.Addrs()...), riffle.Logger(lg),
		// Lookups wait as long as the 40 refreshes they had (bounded by
		// RetryTimeout, 30 s): nodes are down in these tests.
		riffle.UnknownTopicWait(30 * time.Second)}, opts...)
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

// name is a unique name for a topic of the test.
func name(t *testing.T) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%s-%s", unsafeName.ReplaceAllString(t.Name(), "_"), hex.EncodeToString(b[:]))
}

// topic creates a one-partition topic with rf replicas and configs, and
// waits until every replica is in sync under a leader.
func topic(t *testing.T, cl *riffle.Client, rf int16, configs map[string]string) (string, riffle.PartitionDetail) {
	t.Helper()
	tp := name(t)
	ctx := timeout(t, time.Minute)
	res, err := cl.Admin().CreateTopics(ctx, riffle.TopicSpec{Name: tp, Partitions: 1, ReplicationFactor: rf, Configs: configs})
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
	d := waitPartition(t, cl, tp, time.Minute, func(d riffle.PartitionDetail) error {
		if d.Leader < 0 || len(d.ISR) != int(rf) {
			return fmt.Errorf("leader %d, ISR %v", d.Leader, d.ISR)
		}
		return nil
	})
	return tp, d
}

// partition is topic's partition 0 as the metadata says now.
func partition(ctx context.Context, cl *riffle.Client, tp string) (riffle.PartitionDetail, error) {
	ds, err := cl.Admin().ListTopics(ctx, tp)
	if err != nil {
		return riffle.PartitionDetail{}, err
	}
	if len(ds) != 1 || ds[0].Err != nil || len(ds[0].Partitions) != 1 {
		return riffle.PartitionDetail{}, fmt.Errorf("ListTopics %s: %+v", tp, ds)
	}
	return ds[0].Partitions[0], nil
}

// waitPartition polls topic's partition 0 until cond accepts it, failing
// the test after d.
func waitPartition(t *testing.T, cl *riffle.Client, tp string, d time.Duration, cond func(riffle.PartitionDetail) error) riffle.PartitionDetail {
	t.Helper()
	var got riffle.PartitionDetail
	eventually(t, d, tp+" partition state", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		pd, err := partition(ctx, cl, tp)
		if err != nil {
			return err
		}
		got = pd
		return cond(pd)
	})
	return got
}

// eventually polls cond every 200 ms until it returns nil, failing the
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
		time.Sleep(200 * time.Millisecond)
	}
}

// readAll reads topic's partition 0 from its start to its high watermark
// as of the call, and returns the records' values in offset order.
func readAll(t *testing.T, cl *riffle.Client, tp string) []string {
	t.Helper()
	ctx := timeout(t, time.Minute)
	los, err := cl.Admin().ListOffsets(ctx, riffle.OffsetLatest, tp)
	if err != nil || len(los) != 1 || los[0].Err != nil {
		t.Fatalf("ListOffsets %s: %+v %v", tp, los, err)
	}
	end := los[0].Offset
	var mu sync.Mutex
	var got []string
	c, err := riffle.NewConsumer(cl,
		riffle.HandleRecord(func(_ context.Context, r *riffle.Record) error {
			mu.Lock()
			defer mu.Unlock()
			got = append(got, string(r.Value))
			return nil
		}),
		riffle.OnPartitionError(func(e *riffle.PartitionError) { t.Errorf("reading %s: %v", tp, e) }))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Assign(riffle.Assignment{TopicPartition: riffle.TopicPartition{Topic: tp}, Start: riffle.AtEarliest()}); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, "reading "+tp+" to its end", func() error {
		for _, ps := range c.Stats().Partitions {
			if ps.Position < end {
				return fmt.Errorf("at %d of %d", ps.Position, end)
			}
		}
		return nil
	})
	if _, err := c.Close(ctx); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	return slices.Clone(got)
}

// step logs what the test does next, with the time since it began.
type stepper struct {
	t     *testing.T
	began time.Time
}

func steps(t *testing.T) *stepper { return &stepper{t: t, began: time.Now()} }

func (s *stepper) log(format string, args ...any) {
	s.t.Helper()
	s.t.Logf("[%5.1fs] %s", time.Since(s.began).Seconds(), fmt.Sprintf(format, args...))
}
