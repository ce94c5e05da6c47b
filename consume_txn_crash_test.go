package riffle

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/riffle-go/riffle/internal/crashtest"
)

// Exactly once through crashes: a child process (this test binary,
// re-executed) consumes, transforms and produces under ExactlyOnce; the
// parent SIGKILLs it at random points five times (whatever transaction is
// open, with outputs written or offsets sent), then lets a sixth run to
// the end. Each run fences the previous one with the same transactional
// id. A read_committed reader must see every input's outputs exactly once.

const (
	eosCrashEnvChild   = "RIFFLE_EOS_CRASH_CHILD"
	eosCrashEnvBrokers = "RIFFLE_EOS_CRASH_BROKERS"

	eosCrashParts = 4
	eosCrashN     = 4000
	eosCrashKills = 5
)

// init runs before TestMain (and so before goleak): in child mode the
// process is a crash child and never returns to the test machinery.
func init() { crashtest.RunChild(eosCrashEnvChild, "eos crash child", eosCrashChild) }

// eosCrashChild runs the group member until it is killed.
func eosCrashChild() error {
	addrs := strings.Split(os.Getenv(eosCrashEnvBrokers), ",")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pcl, err := NewClient(SeedBrokers(addrs...))
	if err != nil {
		return err
	}
	p, err := NewProducer(pcl, TransactionalID("eos-crash"))
	if err != nil {
		return err
	}
	// Fences the killed run and aborts the transaction it left open.
	if err := p.InitTransactions(ctx); err != nil {
		return err
	}
	cl, err := NewClient(SeedBrokers(addrs...))
	if err != nil {
		return err
	}
	_, err = NewConsumer(cl,
		ConsumerGroup("eos"), SubscribeTopics("in"), OffsetReset(ResetEarliest),
		SessionTimeout(time.Second), HeartbeatInterval(100*time.Millisecond),
		RebalanceTimeout(2*time.Second), RevokeTimeout(time.Second),
		FetchMaxWait(100*time.Millisecond), MaxBatchRecords(20),
		ExactlyOnce(p, CommitEvery{}),
		OnPartitionError(func(pe *PartitionError) { fmt.Fprintln(os.Stderr, "eos crash child: partition error:", pe) }),
		HandleRecord(func(ctx context.Context, r *Record) error {
			time.Sleep(time.Duration(rand.IntN(1001)) * time.Microsecond)
			transform(ctx, p, r)
			return nil
		}),
	)
	if err != nil {
		return err
	}
	fmt.Fprintln(os.Stderr, "eos crash child: running")
	for {
		time.Sleep(time.Hour)
	}
}

func TestExactlyOnceCrash(t *testing.T) {
	r := newEOSRig(t, txnModes[1], eosCrashParts, eosCrashN)
	start := time.Now()
	env := []string{
		eosCrashEnvChild + "=1",
		eosCrashEnvBrokers + "=" + strings.Join(r.fake.ListenAddrs(), ","),
	}
	// outputs returns the end offsets of the output topic, summed:
	// outputs written, committed or not, and transaction markers.
	outputs := func() int64 {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		ends, err := r.cl.Admin().ListOffsets(ctx, OffsetLatest, "out")
		if err != nil {
			t.Fatal(err)
		}
		var n int64
		for _, e := range ends {
			if e.Err != nil {
				t.Fatal(e.Err)
			}
			n += e.Offset
		}
		return n
	}

	var cur *crashtest.Child
	startChild := func() { cur = crashtest.Start(t, "TestExactlyOnceCrash", env) }
	// await polls cond until it holds; a child that exits, or a run that
	// makes no progress for long, fails the test with its output.
	await := func(run int, what string, cond func() bool) {
		t.Helper()
		cur.Await(t, run, what, 90*time.Second, 20*time.Millisecond,
			func() string { return fmt.Sprintf("%d of %d inputs committed", r.committed(), r.n) }, cond)
	}

	for k := range eosCrashKills {
		startChild()
		began := outputs()
		// Anywhere from inside the first transaction to a few
		// commits later.
		target := began + 200 + rand.Int64N(2501)
		await(k, fmt.Sprintf("output end offsets to reach %d", target), func() bool { return outputs() >= target || r.committed() == r.n })
		cur.Kill(t)
		t.Logf("run %d: killed after %d outputs (and markers) in %v; %d of %d inputs committed",
			k, outputs()-began, time.Since(start).Round(time.Millisecond), r.committed(), r.n)
	}
	startChild()
	await(eosCrashKills, "every input committed", func() bool { return r.committed() == r.n })
	cur.Kill(t)
	aborted := r.checkExactlyOnce()
	t.Logf("%d outputs of killed or aborted transactions hidden from read_committed; total %v", aborted, time.Since(start).Round(time.Millisecond))
}
