package process_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/riffle-go/riffle"
	"github.com/riffle-go/riffle/internal/crashtest"
	"github.com/riffle-go/riffle/process"
	"github.com/riffle-go/riffle/ranges"
	"github.com/riffle-go/riffle/rifftest"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Exactly once through crashes: a child process (this test binary,
// re-executed) runs a Processor under ExactlyOnce at concurrency 64,
// consuming "in" and producing two outputs per input to "out" (eosInputs,
// eosOutputs). The parent SIGKILLs it five times, then lets a sixth run
// until every input is committed. Every run uses the same transactional
// id, so its InitTransactions fences the killed run and aborts the
// transaction it left open. A read_committed reader must then see every
// input's outputs exactly once.
//
// The kills alternate between two kinds:
//   - caught (runs 0, 2, 4): the broker holds the child's next EndTxn
//     (commit) and the child is killed while it waits, so the kill lands
//     in an open transaction whose outputs were all written and whose
//     offsets were sent (TxnOffsetCommit handled). The EndTxn is then
//     dropped, never applied.
//   - random (runs 1, 3): the child is killed once the output topic grew
//     by a random amount, wherever its transaction is.
//
// Besides exactly once, the test asserts that each caught kill left
// outputs that read_uncommitted sees and read_committed does not (the kill
// did land in a transaction with outputs), and logs it for random kills.

const (
	eosCrashEnvChild   = "RIFFLE_PROCESS_EOS_CRASH_CHILD"
	eosCrashEnvBrokers = "RIFFLE_PROCESS_EOS_CRASH_BROKERS"
	eosCrashEnvMode    = "RIFFLE_PROCESS_EOS_CRASH_MODE"
	eosCrashEnvID      = "RIFFLE_PROCESS_EOS_CRASH_ID" // group and transactional id

	eosCrashPerPart = 2500 // × eosParts inputs
	eosCrashKills   = 5
)

// init runs before TestMain (and so before goleak): in child mode the
// process is an exactly-once crash child and never returns to the test
// machinery. (crash_test.go's child uses other variables.)
func init() { crashtest.RunChild(eosCrashEnvChild, "eos crash child", eosCrashChild) }

// eosCrashChild runs the processor until it is killed.
func eosCrashChild() error {
	addrs := strings.Split(os.Getenv(eosCrashEnvBrokers), ",")
	id := os.Getenv(eosCrashEnvID)
	var mode process.Mode
	switch m := os.Getenv(eosCrashEnvMode); m {
	case process.ByKey.String():
		mode = process.ByKey
	case process.Unordered.String():
		mode = process.Unordered
	default:
		return fmt.Errorf("unknown mode %q", m)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pcl, err := riffle.NewClient(riffle.SeedBrokers(addrs...))
	if err != nil {
		return err
	}
	pr, err := riffle.NewProducer(pcl, riffle.TransactionalID(id), riffle.TransactionTimeout(10*time.Second))
	if err != nil {
		return err
	}
	// Fences the killed run and aborts the transaction it left open.
	if err := pr.InitTransactions(ctx); err != nil {
		return fmt.Errorf("InitTransactions: %w", err)
	}
	cl, err := riffle.NewClient(riffle.SeedBrokers(addrs...))
	if err != nil {
		return err
	}
	_, err = process.New(cl, func(ctx context.Context, r *riffle.Record) error {
		time.Sleep(time.Duration(rand.IntN(2001)) * time.Microsecond)
		return eosOutputs(ctx, r)
	},
		process.ExactlyOnce(pr, riffle.CommitEvery{Interval: 100 * time.Millisecond}),
		process.Ordering(mode), process.Concurrency(64),
		process.OnError(func(err error) { fmt.Fprintln(os.Stderr, "eos crash child: processor error:", err) }),
		process.ConsumerOptions(
			riffle.ConsumerGroup(id), riffle.SubscribeTopics("in"),
			riffle.OffsetReset(riffle.ResetEarliest),
			riffle.SessionTimeout(time.Second), riffle.HeartbeatInterval(100*time.Millisecond),
			riffle.RebalanceTimeout(2*time.Second), riffle.RevokeTimeout(time.Second),
			riffle.FetchMaxWait(100*time.Millisecond),
		))
	if err != nil {
		return err
	}
	fmt.Fprintln(os.Stderr, "eos crash child: running")
	for {
		time.Sleep(time.Hour)
	}
}

func TestExactlyOnceProcessCrash(t *testing.T) {
	for _, mode := range []process.Mode{process.ByKey, process.Unordered} {
		t.Run(mode.String(), func(t *testing.T) { eosCrash(t, mode) })
	}
}

// endOffsets returns topic's end offsets per partition.
func endOffsets(t *testing.T, cl *riffle.Client, topic string) []int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ends, err := cl.Admin().ListOffsets(ctx, riffle.OffsetLatest, topic)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]int64, len(ends))
	for _, e := range ends {
		if e.Err != nil {
			t.Fatal(e.Err)
		}
		out[e.Partition] = e.Offset
	}
	return out
}

func sum(xs []int64) int64 {
	var n int64
	for _, x := range xs {
		n += x
	}
	return n
}

// readOffsets returns the offsets of topic's records per partition, up to
// its end offsets, read committed or not.
func readOffsets(t *testing.T, cl *riffle.Client, topic string, committed bool) []map[int64]bool {
	t.Helper()
	ends := endOffsets(t, cl, topic)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var opts []ranges.Option
	if committed {
		opts = append(opts, ranges.ReadCommitted())
	}
	r := ranges.NewReader(cl, opts...)
	defer r.Close()
	out := make([]map[int64]bool, len(ends))
	for p, end := range ends {
		out[p] = map[int64]bool{}
		err := r.Read(ctx, ranges.Range{Topic: topic, Partition: int32(p), Low: 0, High: end}, func(rec *riffle.Record) error {
			out[p][rec.Offset] = true
			return nil
		})
		if err != nil {
			t.Fatalf("reading %s[%d]: %v", topic, p, err)
		}
	}
	return out
}

func eosCrash(t *testing.T, mode process.Mode) {
	const perPart = eosCrashPerPart
	total := eosParts * perPart
	id := "eos-crash-" + mode.String()
	c, cl := setup(t, rifftest.Topic("in", eosParts), rifftest.Topic("out", eosParts),
		rifftest.KfakeOption(kfake.GroupMinSessionTimeout(100*time.Millisecond)))
	start := time.Now()
	eosInputs(t, cl, perPart)
	env := []string{
		eosCrashEnvChild + "=1",
		eosCrashEnvBrokers + "=" + strings.Join(c.Addrs(), ","),
		eosCrashEnvMode + "=" + mode.String(),
		eosCrashEnvID + "=" + id,
	}

	// The catch: armed, the next EndTxn committing id's transaction is
	// held until release is closed (after the kill), then dropped with
	// its connection.
	kf := c.Kfake()
	var (
		catchMu sync.Mutex
		armed   bool
		caught  chan struct{}
		release chan struct{}
	)
	arm := func() (chan struct{}, chan struct{}) {
		catchMu.Lock()
		defer catchMu.Unlock()
		armed, caught, release = true, make(chan struct{}), make(chan struct{})
		return caught, release
	}
	kf.ControlKey(int16(kmsg.EndTxn), func(req kmsg.Request) (kmsg.Response, error, bool) {
		r := req.(*kmsg.EndTxnRequest)
		catchMu.Lock()
		if !armed || !r.Commit || r.TransactionalID != id {
			catchMu.Unlock()
			return nil, nil, false
		}
		armed = false
		got, rel := caught, release
		catchMu.Unlock()
		kf.KeepControl()
		close(got)
		kf.SleepControl(func() { <-rel })
		return nil, errors.New("the child was killed while its EndTxn was held"), true
	})

	var (
		cur  *crashtest.Child
		held chan struct{} // release of a caught EndTxn, until the kill
	)
	t.Cleanup(func() {
		if held != nil {
			close(held)
		}
	})
	startChild := func() { cur = crashtest.Start(t, "TestExactlyOnceProcessCrash", env) }
	// await polls cond until it holds; a child that exits, or a run that
	// takes too long, fails the test with its output.
	await := func(run int, what string, cond func() bool) {
		t.Helper()
		cur.Await(t, run, what, 60*time.Second, 10*time.Millisecond,
			func() string { return fmt.Sprintf("%d of %d inputs committed", committedInputs(t, cl, id), total) }, cond)
	}

	// ends[k]: the output end offsets after kill k, which bound what
	// run k wrote (runs never overlap).
	var ends [eosCrashKills + 1][]int64
	var kinds [eosCrashKills]string
	for k := range eosCrashKills {
		runStart := time.Now()
		startChild()
		began := sum(endOffsets(t, cl, "out"))
		// Anywhere from inside the run's first transaction to a few
		// commits later.
		base := committedInputs(t, cl, id)
		target := base + rand.IntN(total/25+1)
		await(k, fmt.Sprintf("%d inputs committed", target), func() bool {
			n := committedInputs(t, cl, id)
			return n >= target && (n > base || sum(endOffsets(t, cl, "out")) > began) || n == total
		})
		kind := "random"
		if k%2 == 0 && committedInputs(t, cl, id) < total {
			kind = "caught"
			got, rel := arm()
			held = rel
			await(k, "an EndTxn to catch", func() bool {
				select {
				case <-got:
					return true
				default:
					return false
				}
			})
		} else {
			// Up to a commit interval later.
			time.Sleep(time.Duration(rand.IntN(100)) * time.Millisecond)
		}
		cur.Kill(t)
		if held != nil {
			close(held)
			held = nil
		}
		kinds[k] = kind
		// Requests the child wrote just before it died may still be
		// in flight in the broker: let them land.
		time.Sleep(100 * time.Millisecond)
		ends[k] = endOffsets(t, cl, "out")
		t.Logf("run %d: %s kill after %d outputs (and markers) in %v; %d of %d inputs committed (%d at the run's start)",
			k, kind, sum(ends[k])-began, time.Since(runStart).Round(time.Millisecond), committedInputs(t, cl, id), total, base)
	}
	runStart := time.Now()
	startChild()
	await(eosCrashKills, "every input committed", func() bool { return committedInputs(t, cl, id) == total })
	out := cur.Output()
	cur.Kill(t)
	ends[eosCrashKills] = endOffsets(t, cl, "out")
	t.Logf("run %d: every input committed in %v", eosCrashKills, time.Since(runStart).Round(time.Millisecond))

	aborted := checkOutputs(t, cl, perPart, mode != process.Unordered)
	if t.Failed() {
		t.Logf("last child's output:\n%s", out)
	}

	// Per run: outputs it wrote that read_committed does not see.
	un, com := readOffsets(t, cl, "out", false), readOffsets(t, cl, "out", true)
	hidden := 0
	for k := range eosCrashKills + 1 {
		n := 0
		for p := range eosParts {
			low := int64(0)
			if k > 0 {
				low = ends[k-1][p]
			}
			for o := range un[p] {
				if o >= low && o < ends[k][p] && !com[p][o] {
					n++
				}
			}
		}
		hidden += n
		switch {
		case k == eosCrashKills:
			t.Logf("run %d (to the end): %d outputs hidden from read_committed", k, n)
		case kinds[k] == "caught" && n == 0:
			t.Errorf("run %d: the kill caught a commit (outputs written, offsets sent), yet none of the run's outputs is hidden from read_committed", k)
		default:
			t.Logf("run %d: %d outputs hidden from read_committed (killed or aborted transactions)", k, n)
		}
	}
	if hidden != aborted {
		t.Errorf("outputs hidden from read_committed: %d by offset, %d by count", hidden, aborted)
	}
	if aborted == 0 {
		t.Error("read_uncommitted sees no more outputs than read_committed: no kill landed in a transaction with outputs")
	}
	t.Logf("%s: %d outputs of killed or aborted transactions hidden from read_committed; total %v",
		mode, aborted, time.Since(start).Round(time.Millisecond))
}
