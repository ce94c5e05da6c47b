package riffle

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
)

// eosRig is a cluster with an input topic of n records and an output
// topic, for consume-transform-produce group members under ExactlyOnce.
// Each input "in-k" has two outputs, "in-k/a" and "in-k/b".
type eosRig struct {
	t     *testing.T
	mode  txnMode
	fake  *kfake.Cluster
	cl    *Client // for producing, reading and admin
	parts int32
	n     int
	group string
}

func newEOSRig(t *testing.T, mode txnMode, parts int32, n int) *eosRig {
	t.Helper()
	opts := append([]kfake.Opt{
		kfake.NumBrokers(3), kfake.SeedTopics(parts, "in", "out"),
		kfake.GroupMinSessionTimeout(100 * time.Millisecond),
		kfake.BrokerConfigs(map[string]string{ // KIP-848 timing, like the classic settings of eosMember
			"group.consumer.heartbeat.interval.ms": "100",
			"group.consumer.session.timeout.ms":    "3000",
		}),
	}, mode.opts...)
	fake := newFake(t, opts...)
	r := &eosRig{t: t, mode: mode, fake: fake, parts: parts, n: n, group: "eos"}
	r.cl = newTestClient(t, SeedBrokers(fake.ListenAddrs()...))
	in := recs("in", "in", n)
	for i, rec := range in {
		rec.Partition = int32(i) % parts
	}
	produceRecords(t, r.cl, in)
	return r
}

// transform produces the outputs of input rec with p.
func transform(ctx context.Context, p *Producer, rec *Record) {
	for _, suffix := range []string{"/a", "/b"} {
		p.Produce(ctx, &Record{Topic: "out", Key: rec.Key, Value: []byte(string(rec.Value) + suffix)}, nil)
	}
}

// eosMember starts a group member with a client and a transactional
// producer of its own; handle (nil: transform) handles each input.
func (r *eosRig) eosMember(txnID string, every CommitEvery, handle func(ctx context.Context, p *Producer, rec *Record) error, opts ...ConsumerOption) (*Consumer, *Producer) {
	r.t.Helper()
	copts := []Option{SeedBrokers(r.fake.ListenAddrs()...)}
	if testing.Verbose() && os.Getenv("RIFFLE_EOS_LOG") != "" {
		copts = append(copts, Logger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))))
	}
	cl := newTestClient(r.t, copts...)
	p := startTxn(r.t, cl, txnID)
	if handle == nil {
		handle = func(ctx context.Context, p *Producer, rec *Record) error {
			transform(ctx, p, rec)
			return nil
		}
	}
	all := append([]ConsumerOption{
		ConsumerGroup(r.group), SubscribeTopics("in"), OffsetReset(ResetEarliest),
		SessionTimeout(3 * time.Second), HeartbeatInterval(100 * time.Millisecond),
		RebalanceTimeout(6 * time.Second), RevokeTimeout(3 * time.Second),
		FetchMaxWait(100 * time.Millisecond), MaxBatchRecords(20),
		ExactlyOnce(p, every),
		HandleRecord(func(ctx context.Context, rec *Record) error { return handle(ctx, p, rec) }),
	}, opts...)
	cs, err := NewConsumer(cl, all...)
	if err != nil {
		r.t.Fatal(err)
	}
	return cs, p
}

// committed returns how many inputs the group's committed offsets cover.
func (r *eosRig) committed() int {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	offs, err := r.cl.Admin().FetchOffsets(ctx, r.group)
	if err != nil {
		r.t.Logf("fetching offsets: %v", err)
		return 0
	}
	n := 0
	for tp, om := range offs {
		if tp.Topic == "in" && om.Offset > 0 {
			n += int(om.Offset)
		}
	}
	return n
}

// committedString describes the group's committed offsets of "in".
func (r *eosRig) committedString() string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	offs, err := r.cl.Admin().FetchOffsets(ctx, r.group)
	if err != nil {
		return err.Error()
	}
	s := make([]string, 0, r.parts)
	for p := range r.parts {
		s = append(s, fmt.Sprintf("in[%d] %d", p, offs[TopicPartition{"in", p}].Offset))
	}
	return strings.Join(s, " ")
}

// awaitCommitted waits until the group's committed offsets cover every
// input.
func (r *eosRig) awaitCommitted(d time.Duration, describe func() string) {
	r.t.Helper()
	waitUntil(r.t, d, func() bool { return r.committed() == r.n }, func() string {
		return fmt.Sprintf("%d of %d inputs committed (%s); %s", r.committed(), r.n, r.committedString(), describe())
	})
}

// wantOutputs returns the outputs of every input.
func (r *eosRig) wantOutputs() []string {
	out := make([]string, 0, 2*r.n)
	for i := range r.n {
		out = append(out, fmt.Sprintf("in-%d/a", i), fmt.Sprintf("in-%d/b", i))
	}
	slices.Sort(out)
	return out
}

// checkExactlyOnce checks that a read_committed reader of the output topic
// sees the outputs of every input exactly once. It returns how many
// outputs a read_uncommitted reader sees beyond those (aborted ones).
func (r *eosRig) checkExactlyOnce() int {
	r.t.Helper()
	got := readAll(r.t, r.cl, ReadCommitted, "out")
	if msg := multisetDiff(got, r.wantOutputs()); msg != "" {
		r.t.Errorf("read_committed outputs: %s", msg)
	}
	return len(readAll(r.t, r.cl, ReadUncommitted, "out")) - len(got)
}

// multisetDiff describes how got differs from want (both sorted): the
// values missing and the values seen more often than wanted, the first
// few of each; "" if they are equal.
func multisetDiff(got, want []string) string {
	count := map[string]int{}
	for _, v := range got {
		count[v]++
	}
	for _, v := range want {
		count[v]--
	}
	var missing, extra []string
	for v, c := range count {
		switch {
		case c < 0:
			missing = append(missing, v)
		case c > 0:
			extra = append(extra, fmt.Sprintf("%s×%d", v, c))
		}
	}
	if len(missing) == 0 && len(extra) == 0 {
		return ""
	}
	sort.Strings(missing)
	sort.Strings(extra)
	first := func(s []string) string {
		if len(s) > 10 {
			return strings.Join(s[:10], " ") + " ..."
		}
		return strings.Join(s, " ")
	}
	return fmt.Sprintf("%d outputs (want %d): %d missing [%s], %d extra [%s]",
		len(got), len(want), len(missing), first(missing), len(extra), first(extra))
}

func closeEOS(t *testing.T, cs *Consumer) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := cs.Close(ctx); err != nil {
		t.Errorf("close: %v", err)
	}
}

// A clean run: every input's outputs are visible exactly once to a
// read_committed reader, and the group's offsets cover every input; under
// both transaction protocols and both group protocols, committing by
// interval and by record count.
func TestExactlyOnceClean(t *testing.T) {
	forModes(t, func(t *testing.T, mode txnMode) {
		for _, tc := range []struct {
			name  string
			proto GroupProtocol
			every CommitEvery
		}{
			{"classic/interval", GroupProtocolClassic, CommitEvery{}},
			{"classic/records", GroupProtocolClassic, CommitEvery{Interval: 2 * time.Second, Records: 50}},
			{"kip848/interval", GroupProtocolConsumer, CommitEvery{Interval: 50 * time.Millisecond}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				if tc.proto == GroupProtocolConsumer && !mode.v2 {
					t.Skip("KIP-848 needs the current kfake versions")
				}
				r := newEOSRig(t, mode, 4, 1000)
				var lost atomic.Int32
				cs, _ := r.eosMember("eos-clean", tc.every, nil, WithGroupProtocol(tc.proto),
					OnPartitionsLost(func(context.Context, []TopicPartition) { lost.Add(1) }))
				r.awaitCommitted(60*time.Second, func() string { return statsString(cs) })
				closeEOS(t, cs)
				aborted := r.checkExactlyOnce()
				switch {
				case aborted != 0 && lost.Load() > 0:
					// A starved machine can miss the session
					// timeout: the loss must abort, and did.
					t.Logf("partitions lost %d times (the machine stalled past the session timeout); %d outputs aborted", lost.Load(), aborted)
				case aborted != 0:
					t.Errorf("a clean run aborted %d outputs", aborted)
				}
				st := cs.Stats()
				t.Logf("%d transactions committed, %d aborted", st.TxnCommitted, st.TxnAborted)
				if n := tc.every.Records; n > 0 && st.TxnCommitted < int64(r.n/n/2) {
					t.Errorf("%d transactions committed for %d inputs at CommitEvery.Records %d; want about %d", st.TxnCommitted, r.n, n, r.n/n)
				}
			})
		}
	})
}

// A handler error aborts the transaction: its outputs (some written
// already) stay invisible to read_committed readers, every partition goes
// back to the last committed offsets, and the inputs since are delivered
// again; OnPartitionError gets the error and the partition goes on.
func TestExactlyOnceHandlerErrorAborts(t *testing.T) {
	forModes(t, func(t *testing.T, mode txnMode) {
		r := newEOSRig(t, mode, 4, 400)
		errBoom := errors.New("boom")
		var failed atomic.Bool
		var mu sync.Mutex
		deliveries := map[string]int{}
		var reported atomic.Value
		cs, _ := r.eosMember("eos-abort", CommitEvery{Interval: time.Second, Records: 100},
			func(ctx context.Context, p *Producer, rec *Record) error {
				mu.Lock()
				deliveries[string(rec.Value)]++
				mu.Unlock()
				transform(ctx, p, rec)
				if string(rec.Value) == "in-250" && failed.CompareAndSwap(false, true) {
					// Its outputs are written before it fails: the
					// abort must hide them.
					if err := p.Flush(ctx); err != nil {
						return err
					}
					return errBoom
				}
				return nil
			},
			OnPartitionError(func(pe *PartitionError) { reported.CompareAndSwap(nil, pe) }))
		r.awaitCommitted(60*time.Second, func() string { return statsString(cs) })
		closeEOS(t, cs)
		if !failed.Load() {
			t.Fatal("the failing input was never handled")
		}
		pe, _ := reported.Load().(*PartitionError)
		if pe == nil || !errors.Is(pe, errBoom) {
			t.Errorf("OnPartitionError got %v, want the handler's error", pe)
		}
		mu.Lock()
		again := 0
		for _, n := range deliveries {
			if n > 1 {
				again++
			}
		}
		boom := deliveries["in-250"]
		mu.Unlock()
		if boom != 2 || again < 2 {
			t.Errorf("the failed input was delivered %d times, %d inputs more than once; want 2 and the failed transaction's inputs again", boom, again)
		}
		aborted := r.checkExactlyOnce()
		if aborted < 2 {
			t.Errorf("read_uncommitted sees %d outputs beyond the committed ones; want at least the failed input's 2", aborted)
		}
		t.Logf("%d inputs delivered again, %d outputs aborted", again, aborted)
	})
}

// Rebalances while transactions are open: members join and leave (Close)
// as the inputs flow, so partitions are revoked with inputs handled in
// the open transaction, which must commit before they move (eager: every
// partition; cooperative and KIP-848: those that move). A read_committed
// reader sees every input's outputs exactly once.
func TestExactlyOnceRebalance(t *testing.T) {
	for _, tc := range []struct {
		name     string
		balancer GroupBalancer
		proto    GroupProtocol
	}{
		{"eager", RangeBalancer(), GroupProtocolClassic},
		{"cooperative", CooperativeStickyBalancer(), GroupProtocolClassic},
		{"kip848", CooperativeStickyBalancer(), GroupProtocolConsumer},
	} {
		t.Run(tc.name, func(t *testing.T) { runEOSRebalance(t, tc.balancer, tc.proto) })
	}
}

func runEOSRebalance(t *testing.T, b GroupBalancer, proto GroupProtocol) {
	const n = 3000
	r := newEOSRig(t, txnModes[1], 6, n)
	var revokedWhileOpen atomic.Int64
	type running struct {
		cs *Consumer
		id int
	}
	var members []running
	next := 0
	start := func() {
		id := next
		next++
		cs, _ := r.eosMember(fmt.Sprintf("eos-%d", id), CommitEvery{Interval: 300 * time.Millisecond},
			func(ctx context.Context, p *Producer, rec *Record) error {
				// Work that takes time, so rebalances find
				// transactions with inputs in them.
				select {
				case <-time.After(time.Duration(8+rand.IntN(5)) * time.Millisecond):
				case <-ctx.Done():
					return ctx.Err()
				}
				transform(ctx, p, rec)
				return nil
			},
			Balancers(b), WithGroupProtocol(proto),
			OnPartitionsRevoked(func(_ context.Context, tps []TopicPartition) { t.Logf("member %d revoked %v", id, tps) }),
			OnPartitionsLost(func(_ context.Context, tps []TopicPartition) { t.Logf("member %d lost %v", id, tps) }),
			OnGroupError(func(err error) { t.Logf("member %d: %v", id, err) }),
		)
		members = append(members, running{cs, id})
	}
	stop := func(i int) {
		m := members[i]
		members = append(members[:i:i], members[i+1:]...)
		revokedWhileOpen.Add(m.cs.eos.revokeCommits.Load())
		closeEOS(t, m.cs)
		t.Logf("member %d closed: %d transactions committed (%d by a revoke with inputs in it), %d aborted",
			m.id, m.cs.eos.commits.Load(), m.cs.eos.revokeCommits.Load(), m.cs.eos.aborts.Load())
	}
	describe := func() string {
		var b strings.Builder
		for _, m := range members {
			fmt.Fprintf(&b, "member %d: %s\n", m.id, statsString(m.cs))
		}
		return b.String()
	}
	progress := func(frac int) {
		waitUntil(t, 60*time.Second, func() bool { return r.committed() >= n*frac/6 }, func() string {
			return fmt.Sprintf("%d of %d inputs committed, want %d/6\n%s", r.committed(), n, frac, describe())
		})
	}
	start()
	progress(1)
	start() // joins: the first gives partitions up
	progress(2)
	start()
	progress(3)
	stop(0) // leaves: its partitions move to the others
	progress(4)
	start()
	stop(0)
	progress(5)
	r.awaitCommitted(60*time.Second, describe)
	for len(members) > 0 {
		stop(0)
	}
	if aborted := r.checkExactlyOnce(); aborted > 0 {
		t.Logf("%d outputs aborted", aborted)
	}
	if revokedWhileOpen.Load() == 0 {
		t.Error("no revoke found a transaction with inputs in it: the test did not rebalance mid-transaction")
	}
}

// With HandleRecord, commit points come at the record boundary where they
// are due, not at the end of a handler chunk (MaxBatchRecords, here the
// default 1,000): by interval (the default CommitEvery{} commits every
// 100 ms, and a crash redoes at most that much work) and by record count.
// The handler is slow enough that 1,000 records take many intervals; the
// first 1,000 records are fetched and buffered at once.
func TestExactlyOnceCommitsWithinChunk(t *testing.T) {
	for _, tc := range []struct {
		name  string
		every CommitEvery
		want  int64 // commits at least, before record 1000 is handled
	}{
		{"interval", CommitEvery{}, 2},
		{"records", CommitEvery{Interval: 5 * time.Second, Records: 100}, 5}, // 9: at 100, 200, ... 900
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newEOSRig(t, txnModes[1], 1, 1500)
			var commitsAt1000 atomic.Int64
			commitsAt1000.Store(-1)
			var cs *Consumer
			ready := make(chan struct{}) // cs is set
			cs, _ = r.eosMember("eos-chunk", tc.every, func(ctx context.Context, p *Producer, rec *Record) error {
				<-ready
				transform(ctx, p, rec)
				if tc.every.Records == 0 {
					time.Sleep(time.Millisecond) // 1,000 records: 10 intervals or more
				}
				if rec.Offset == 999 {
					commitsAt1000.Store(cs.eos.commits.Load())
				}
				return nil
			}, MaxBatchRecords(1000))
			close(ready)
			r.awaitCommitted(60*time.Second, func() string { return statsString(cs) })
			closeEOS(t, cs)
			r.checkExactlyOnce()
			if got := commitsAt1000.Load(); got < tc.want {
				t.Errorf("%d transactions committed before record 1000 was handled; want at least %d (commit points must not wait for the 1,000-record chunk)", got, tc.want)
			}
			t.Logf("%d transactions committed before record 1000, %d in all", commitsAt1000.Load(), cs.Stats().TxnCommitted)
		})
	}
}
