package process_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/riffle-go/riffle"
	"github.com/riffle-go/riffle/process"
	"github.com/riffle-go/riffle/rifftest"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Close under ExactlyOnce keeps to its caller's deadline while the
// transaction coordinator does not answer: the final commit is cut off at
// the deadline (not given 30 s of its own), and the error says the
// transaction is left to the broker's transaction timeout.
func TestExactlyOnceCloseKeepsDeadline(t *testing.T) {
	const perPart = 20
	c, cl := setup(t, rifftest.Topic("in", eosParts), rifftest.Topic("out", eosParts))
	eosInputs(t, cl, perPart)
	// Hold every transactional commit request once armed, until the test
	// ends (registered after setup: runs before the cluster closes).
	var armed atomic.Bool
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	kf := c.Kfake()
	for _, key := range []kmsg.Key{kmsg.AddOffsetsToTxn, kmsg.TxnOffsetCommit, kmsg.EndTxn} {
		kf.ControlKey(int16(key), func(kmsg.Request) (kmsg.Response, error, bool) {
			kf.KeepControl()
			if !armed.Load() {
				return nil, nil, false
			}
			kf.SleepControl(func() { <-release })
			return nil, errors.New("held"), true
		})
	}
	pr := txnProducer(t, c, "eos-close")
	var done atomic.Int64
	p, err := process.New(client(t, c), func(ctx context.Context, r *riffle.Record) error {
		defer done.Add(1)
		return eosOutputs(ctx, r)
	}, process.ExactlyOnce(pr, riffle.CommitEvery{Interval: 9 * time.Second}),
		process.ConsumerOptions(groupOpts("g-close", "in")...))
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "every input handled", func() bool { return done.Load() == eosParts*perPart })
	armed.Store(true)

	const deadline = 2 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	var cerr error
	returnsWithin(t, deadline+5*time.Second, "Close", func() { cerr = p.Close(ctx) })
	if !errors.Is(cerr, context.DeadlineExceeded) || !strings.Contains(cerr.Error(), "transaction timeout") {
		t.Fatalf("Close returned %v, want context.DeadlineExceeded naming the transaction left to the transaction timeout", cerr)
	}
}
