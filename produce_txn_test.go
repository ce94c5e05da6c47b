package riffle

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

// txnMode is a transaction protocol to run a test under: v1 (the classic
// one, forced with a cluster that speaks Kafka 3.9) or v2 (KIP-890, which
// kfake's current versions finalize).
type txnMode struct {
	name string
	v2   bool
	opts []kfake.Opt
}

var txnModes = []txnMode{
	{"v1", false, []kfake.Opt{kfake.MaxVersions(kversion.V3_9_0())}},
	{"v2", true, nil},
}

// forModes runs f once per transaction protocol.
func forModes(t *testing.T, f func(t *testing.T, mode txnMode)) {
	for _, mode := range txnModes {
		t.Run(mode.name, func(t *testing.T) { f(t, mode) })
	}
}

// txnCluster starts a 3-broker cluster with the topics (4 partitions each)
// and a client of it. An observing fault counts AddPartitionsToTxn
// requests, so tests can check which protocol ran.
func txnCluster(t *testing.T, mode txnMode, topics ...string) (*kfake.Cluster, *Client, *kfake.FaultHandle) {
	t.Helper()
	opts := append([]kfake.Opt{kfake.NumBrokers(3), kfake.SeedTopics(4, topics...)}, mode.opts...)
	fake := newFake(t, opts...)
	adds := fake.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.AddPartitionsToTxn}, Observe: true, Count: -1})
	cl := newTestClient(t, SeedBrokers(fake.ListenAddrs()...))
	return fake, cl, adds
}

func txnCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// startTxn returns a transactional producer with InitTransactions done;
// it is closed at the end of the test.
func startTxn(t *testing.T, cl *Client, id string, opts ...ProducerOption) *Producer {
	t.Helper()
	p, err := NewProducer(cl, append([]ProducerOption{TransactionalID(id)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		p.Close(ctx)
	})
	if err := p.InitTransactions(txnCtx(t)); err != nil {
		t.Fatal(err)
	}
	return p
}

// recs returns n records for topic with values prefix-0 ... prefix-(n-1),
// keyed so they spread over the partitions.
func recs(topic, prefix string, n int) []*Record {
	out := make([]*Record, n)
	for i := range out {
		v := fmt.Sprintf("%s-%d", prefix, i)
		out[i] = &Record{Topic: topic, Key: []byte(v), Value: []byte(v)}
	}
	return out
}

func values(rs []*Record) []string {
	var out []string
	for _, r := range rs {
		out = append(out, string(r.Value))
	}
	slices.Sort(out)
	return out
}

// readAll consumes every partition of topic to its end at isolation iso
// and returns the values read, sorted.
func readAll(t *testing.T, cl *Client, iso IsolationLevel, topic string) []string {
	t.Helper()
	ctx := txnCtx(t)
	ends, err := cl.Admin().ListOffsets(ctx, OffsetLatest, topic)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ends {
		if e.Err != nil {
			t.Fatalf("end offset of %s[%d]: %v", topic, e.Partition, e.Err)
		}
	}
	var mu sync.Mutex
	var got []string
	cs, err := NewConsumer(cl, Isolation(iso), HandleRecord(func(ctx context.Context, r *Record) error {
		mu.Lock()
		got = append(got, string(r.Value))
		mu.Unlock()
		return nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	assignAll(t, cs, topic, int32(len(ends)), AtEarliest())
	// Done when fetching passed the end of every partition and every
	// record fetched was handled.
	waitUntil(t, 30*time.Second, func() bool {
		for _, e := range ends {
			if fetchedTo(cs, topic, e.Partition) < e.Offset {
				return false
			}
		}
		for _, ps := range cs.Stats().Partitions {
			if ps.BufferedRecords > 0 || ps.Position != ps.Processed {
				return false
			}
		}
		return true
	}, func() string { return "not consumed to the end: " + statsString(cs) })
	closeConsumer(t, cs)
	mu.Lock()
	defer mu.Unlock()
	slices.Sort(got)
	return got
}

func checkRead(t *testing.T, cl *Client, topic string, committed, uncommitted []string) {
	t.Helper()
	slices.Sort(committed)
	slices.Sort(uncommitted)
	if got := readAll(t, cl, ReadCommitted, topic); !slices.Equal(got, committed) {
		t.Errorf("read_committed read %d records %v, want %d %v", len(got), got, len(committed), committed)
	}
	if got := readAll(t, cl, ReadUncommitted, topic); !slices.Equal(got, uncommitted) {
		t.Errorf("read_uncommitted read %d records %v, want %d %v", len(got), got, len(uncommitted), uncommitted)
	}
}

// checkProtocol checks which transaction protocol ran: v1 adds partitions
// with AddPartitionsToTxn, v2 never does and bumps the epoch with every
// transaction.
func checkProtocol(t *testing.T, mode txnMode, adds *kfake.FaultHandle, p *Producer, epochBefore int16) {
	t.Helper()
	epoch := p.currentIdentity().Epoch
	if mode.v2 {
		if adds.Hits() != 0 || epoch <= epochBefore {
			t.Errorf("v2: %d AddPartitionsToTxn, epoch %d -> %d", adds.Hits(), epochBefore, epoch)
		}
		return
	}
	if adds.Hits() == 0 || epoch != epochBefore {
		t.Errorf("v1: %d AddPartitionsToTxn, epoch %d -> %d", adds.Hits(), epochBefore, epoch)
	}
}

// Committed records are visible to read_committed consumers, once each.
func TestTxnCommitVisible(t *testing.T) {
	forModes(t, func(t *testing.T, mode txnMode) {
		_, cl, adds := txnCluster(t, mode, "t")
		p := startTxn(t, cl, "txn-commit")
		ctx := txnCtx(t)
		epoch := p.currentIdentity().Epoch
		if err := p.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		rs := recs("t", "c", 40)
		for _, r := range rs {
			p.Produce(ctx, r, nil)
		}
		if err := p.CommitTransaction(ctx); err != nil {
			t.Fatal(err)
		}
		checkProtocol(t, mode, adds, p, epoch)
		checkRead(t, cl, "t", values(rs), values(rs))
	})
}

// Aborted records are invisible to read_committed consumers (and visible
// to read_uncommitted ones); the producer then runs the next transaction.
func TestTxnAbortInvisible(t *testing.T) {
	forModes(t, func(t *testing.T, mode txnMode) {
		_, cl, _ := txnCluster(t, mode, "t")
		p := startTxn(t, cl, "txn-abort")
		ctx := txnCtx(t)
		if err := p.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		aborted := recs("t", "a", 20)
		if err := p.ProduceSync(ctx, aborted...); err != nil {
			t.Fatal(err) // written, in the transaction
		}
		if err := p.AbortTransaction(ctx); err != nil {
			t.Fatal(err)
		}
		if err := p.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		committed := recs("t", "c", 10)
		if err := p.ProduceSync(ctx, committed...); err != nil {
			t.Fatal(err)
		}
		if err := p.CommitTransaction(ctx); err != nil {
			t.Fatal(err)
		}
		checkRead(t, cl, "t", values(committed), append(values(aborted), values(committed)...))
	})
}

// Records buffered but not yet sent when the transaction aborts fail with
// ErrTransactionAborted, each callback once, and are never written.
func TestTxnAbortFailsUnsent(t *testing.T) {
	forModes(t, func(t *testing.T, mode txnMode) {
		_, cl, _ := txnCluster(t, mode, "t")
		p := startTxn(t, cl, "txn-unsent", Linger(time.Minute))
		ctx := txnCtx(t)
		if err := p.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		errs := map[string][]error{}
		for _, r := range recs("t", "u", 10) {
			p.Produce(ctx, r, func(r *Record, err error) {
				mu.Lock()
				errs[string(r.Value)] = append(errs[string(r.Value)], err)
				mu.Unlock()
			})
		}
		if err := p.AbortTransaction(ctx); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		if len(errs) != 10 {
			t.Errorf("%d callbacks after the abort, want 10", len(errs))
		}
		for v, es := range errs {
			if len(es) != 1 || !errors.Is(es[0], ErrTransactionAborted) {
				t.Errorf("%s: callbacks %v", v, es)
			}
		}
		mu.Unlock()
		checkRead(t, cl, "t", nil, nil)
	})
}

// Records produced outside a transaction fail at once (Java's
// IllegalStateException), as do transactional calls out of order; a
// non-transactional producer has no transactions.
func TestTxnStateErrors(t *testing.T) {
	_, cl, _ := txnCluster(t, txnModes[1], "t")
	ctx := txnCtx(t)
	p, err := NewProducer(cl, TransactionalID("txn-state"))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(ctx)
	produceErr := func() error {
		ch := make(chan error, 1)
		p.Produce(ctx, &Record{Topic: "t", Value: []byte("x")}, func(_ *Record, err error) { ch <- err })
		return <-ch
	}
	if err := produceErr(); !errors.Is(err, ErrTransactionState) {
		t.Fatalf("produce before InitTransactions: %v", err)
	}
	if err := p.BeginTransaction(); !errors.Is(err, ErrTransactionState) {
		t.Fatalf("begin before InitTransactions: %v", err)
	}
	if err := p.InitTransactions(ctx); err != nil {
		t.Fatal(err)
	}
	if err := p.InitTransactions(ctx); !errors.Is(err, ErrTransactionState) {
		t.Fatalf("InitTransactions twice: %v", err)
	}
	if err := produceErr(); !errors.Is(err, ErrTransactionState) || !strings.Contains(err.Error(), "BeginTransaction") {
		t.Fatalf("produce outside a transaction: %v", err)
	}
	if err := p.ProduceSync(ctx, &Record{Topic: "t"}); !errors.Is(err, ErrTransactionState) {
		t.Fatalf("ProduceSync outside a transaction: %v", err)
	}
	for name, f := range map[string]func() error{
		"commit": func() error { return p.CommitTransaction(ctx) },
		"abort":  func() error { return p.AbortTransaction(ctx) },
		"offsets": func() error {
			return p.SendOffsetsToTransaction(ctx, map[TopicPartition]OffsetAndMetadata{{"t", 0}: {Offset: 1}}, GroupMetadata{GroupID: "g", GenerationID: -1})
		},
	} {
		if err := f(); !errors.Is(err, ErrTransactionState) {
			t.Errorf("%s outside a transaction: %v", name, err)
		}
	}
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := p.BeginTransaction(); !errors.Is(err, ErrTransactionState) {
		t.Fatalf("begin twice: %v", err)
	}
	if err := p.ProduceSync(ctx, &Record{Topic: "t", Value: []byte("in")}); err != nil {
		t.Fatal(err)
	}
	if err := p.CommitTransaction(ctx); err != nil {
		t.Fatal(err)
	}
	if err := produceErr(); !errors.Is(err, ErrTransactionState) {
		t.Fatalf("produce after the commit: %v", err)
	}

	plain, err := NewProducer(cl)
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close(ctx)
	if err := plain.BeginTransaction(); !errors.Is(err, ErrTransactionState) {
		t.Fatalf("BeginTransaction without TransactionalID: %v", err)
	}
	if err := plain.InitTransactions(ctx); !errors.Is(err, ErrTransactionState) {
		t.Fatalf("InitTransactions without TransactionalID: %v", err)
	}
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := p.BeginTransaction(); !errors.Is(err, ErrProducerClosed) {
		t.Fatalf("begin after Close: %v", err)
	}
}

// A transactional producer is idempotent with acks=all; its timeout must
// fit the protocol.
func TestTxnConfig(t *testing.T) {
	cl := newTestClient(t, SeedBrokers("127.0.0.1:1"))
	for name, opts := range map[string][]ProducerOption{
		"not idempotent": {TransactionalID("x"), DisableIdempotence()},
		"acks=1":         {TransactionalID("x"), DisableIdempotence(), Acknowledgements(AcksLeader)},
		"acks=1 only":    {TransactionalID("x"), Acknowledgements(AcksLeader)},
		"zero timeout":   {TransactionalID("x"), TransactionTimeout(0)},
		"huge timeout":   {TransactionalID("x"), TransactionTimeout(1000 * time.Hour)},
	} {
		if _, err := NewProducer(cl, opts...); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%s: %v", name, err)
		}
	}
	p, err := NewProducer(cl, TransactionalID("x"), TransactionTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if p.cfg.txnTimeout != time.Second {
		t.Fatalf("timeout %v", p.cfg.txnTimeout)
	}
	p.Close(context.Background())
	p, _ = NewProducer(cl, TransactionalID("x"))
	if p.cfg.txnTimeout != 60*time.Second {
		t.Fatalf("default timeout %v, want Java's 60 s", p.cfg.txnTimeout)
	}
	p.Close(context.Background())
}

// A record of the transaction that fails makes the commit fail
// (abortable) without committing anything; after the abort the next
// transaction commits.
func TestTxnFailedRecordAbortsCommit(t *testing.T) {
	forModes(t, func(t *testing.T, mode txnMode) {
		_, cl, _ := txnCluster(t, mode, "t")
		p := startTxn(t, cl, "txn-failed-record", WithPartitioner(ManualPartitioner()))
		ctx := txnCtx(t)
		if err := p.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		goodErr := make(chan error, 1)
		p.Produce(ctx, &Record{Topic: "t", Partition: 1, Value: []byte("good")}, func(_ *Record, err error) { goodErr <- err })
		bad := make(chan error, 1)
		p.Produce(ctx, &Record{Topic: "t", Partition: 99, Value: []byte("bad")}, func(_ *Record, err error) { bad <- err })
		if err := <-bad; !errors.Is(err, ErrInvalidPartition) {
			t.Fatalf("bad record: %v", err)
		}
		err := p.CommitTransaction(ctx)
		if !errors.Is(err, ErrTransactionAbortable) || !errors.Is(err, ErrInvalidPartition) {
			t.Fatalf("commit: %v", err)
		}
		// Until the abort, the transaction refuses everything else.
		if err := p.BeginTransaction(); !errors.Is(err, ErrTransactionAbortable) {
			t.Fatalf("begin before the abort: %v", err)
		}
		if err := p.ProduceSync(ctx, &Record{Topic: "t", Value: []byte("x")}); !errors.Is(err, ErrTransactionAbortable) {
			t.Fatalf("produce before the abort: %v", err)
		}
		if err := p.AbortTransaction(ctx); err != nil {
			t.Fatal(err)
		}
		// The abort gave every record its outcome.
		wroteGood := <-goodErr == nil
		if err := p.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		next := &Record{Topic: "t", Partition: 2, Value: []byte("next")}
		if err := p.ProduceSync(ctx, next); err != nil {
			t.Fatal(err)
		}
		if err := p.CommitTransaction(ctx); err != nil {
			t.Fatal(err)
		}
		committed := []string{"next"}
		uncommitted := []string{"next"}
		if wroteGood {
			uncommitted = append(uncommitted, "good") // written before the abort
		}
		checkRead(t, cl, "t", committed, uncommitted)
	})
}

// A callback may abort its transaction: the abort waits for the records'
// outcomes, not for their callbacks (a Flush and a commit wait for the
// callbacks, so a callback must not call those). A record failing in
// Produce (no such partition) aborts from its callback, as does a record
// the broker acknowledged.
func TestTxnAbortFromCallback(t *testing.T) {
	forModes(t, func(t *testing.T, mode txnMode) {
		_, cl, _ := txnCluster(t, mode, "t")
		p := startTxn(t, cl, "txn-abort-callback", WithPartitioner(ManualPartitioner()))
		ctx := txnCtx(t)
		for _, part := range []int32{99, 1} {
			if err := p.BeginTransaction(); err != nil {
				t.Fatal(err)
			}
			aborted := make(chan error, 1)
			actx, cancel := context.WithTimeout(ctx, 10*time.Second)
			p.Produce(ctx, &Record{Topic: "t", Partition: part, Value: []byte("x")}, func(*Record, error) {
				aborted <- p.AbortTransaction(actx)
			})
			if err := <-aborted; err != nil {
				t.Fatalf("partition %d: AbortTransaction from the callback: %v", part, err)
			}
			cancel()
		}
		if err := p.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		if err := p.ProduceSync(ctx, &Record{Topic: "t", Partition: 2, Value: []byte("next")}); err != nil {
			t.Fatal(err)
		}
		if err := p.CommitTransaction(ctx); err != nil {
			t.Fatal(err)
		}
		checkRead(t, cl, "t", []string{"next"}, []string{"next", "x"}) // x: written, then aborted
	})
}

// Two producers with the same transactional id: InitTransactions of the
// second fences the first, whose open transaction is aborted and whose
// later writes fail; the first ends with ErrProducerFenced and refuses
// everything after. Nothing it wrote becomes visible.
func TestTxnFencing(t *testing.T) {
	forModes(t, func(t *testing.T, mode txnMode) {
		_, cl, _ := txnCluster(t, mode, "t")
		ctx := txnCtx(t)
		old := startTxn(t, cl, "txn-fence")
		if err := old.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		before := recs("t", "old-before", 8)
		if err := old.ProduceSync(ctx, before...); err != nil {
			t.Fatal(err)
		}
		cur := startTxn(t, cl, "txn-fence") // fences old
		after := recs("t", "old-after", 8)
		if err := old.ProduceSync(ctx, after...); err == nil {
			t.Fatal("a fenced producer wrote records")
		}
		// The failed records made the transaction abortable; under v1
		// adding a partition the transaction did not hold yet may
		// already have met the fence.
		if err := old.CommitTransaction(ctx); !errors.Is(err, ErrTransactionAbortable) && !errors.Is(err, ErrProducerFenced) {
			t.Fatalf("commit of the fenced producer: %v", err)
		}
		err := old.AbortTransaction(ctx)
		t.Logf("abort of the fenced producer: %v", err)
		if !errors.Is(err, ErrProducerFenced) || !errors.Is(err, ErrTransactionFatal) {
			t.Fatalf("abort of the fenced producer: %v", err)
		}
		if err := old.BeginTransaction(); !errors.Is(err, ErrProducerFenced) {
			t.Fatalf("begin after fencing: %v", err)
		}
		if err := old.ProduceSync(ctx, &Record{Topic: "t", Value: []byte("old-later")}); !errors.Is(err, ErrProducerFenced) {
			t.Fatalf("produce after fencing: %v", err)
		}
		if err := old.SendOffsetsToTransaction(ctx, map[TopicPartition]OffsetAndMetadata{{"t", 0}: {Offset: 1}}, GroupMetadata{GroupID: "g", GenerationID: -1}); !errors.Is(err, ErrProducerFenced) {
			t.Fatalf("offsets after fencing: %v", err)
		}
		if err := cur.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		mine := recs("t", "new", 8)
		if err := cur.ProduceSync(ctx, mine...); err != nil {
			t.Fatal(err)
		}
		if err := cur.CommitTransaction(ctx); err != nil {
			t.Fatal(err)
		}
		if got := readAll(t, cl, ReadCommitted, "t"); !slices.Equal(got, values(mine)) {
			t.Fatalf("read_committed read %v, want only the new producer's %v", got, values(mine))
		}
	})
}

// A producer fenced between its writes and its commit cannot commit:
// the commit fails fatally (v1: PRODUCER_FENCED; v2: the coordinator's
// INVALID_TXN_STATE for a transaction it aborted) and nothing is visible.
func TestTxnFencedCommit(t *testing.T) {
	forModes(t, func(t *testing.T, mode txnMode) {
		_, cl, _ := txnCluster(t, mode, "t")
		ctx := txnCtx(t)
		old := startTxn(t, cl, "txn-fence-commit")
		if err := old.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		if err := old.ProduceSync(ctx, recs("t", "old", 8)...); err != nil {
			t.Fatal(err)
		}
		startTxn(t, cl, "txn-fence-commit")
		err := old.CommitTransaction(ctx)
		t.Logf("commit of the fenced producer: %v", err)
		if !errors.Is(err, ErrTransactionFatal) || !mode.v2 && !errors.Is(err, ErrProducerFenced) {
			t.Fatalf("commit of the fenced producer: %v", err)
		}
		if err := old.BeginTransaction(); !errors.Is(err, ErrTransactionFatal) {
			t.Fatalf("begin after the failed commit: %v", err)
		}
		checkRead(t, cl, "t", nil, values(recs("t", "old", 8)))
	})
}

// The coordinator aborts a transaction left open past TransactionTimeout;
// the producer's next operation reports it (fatally, naming the timeout),
// and none of the transaction's records become visible.
func TestTxnTimeout(t *testing.T) {
	forModes(t, func(t *testing.T, mode txnMode) {
		_, cl, _ := txnCluster(t, mode, "t")
		ctx := txnCtx(t)
		p := startTxn(t, cl, "txn-timeout", TransactionTimeout(time.Second))
		if err := p.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		rs := recs("t", "late", 8)
		if err := p.ProduceSync(ctx, rs...); err != nil {
			t.Fatal(err)
		}
		// Wait for the coordinator to abort it (no assertion on when).
		waitUntil(t, 30*time.Second, func() bool { return coordTxnState(t, cl, "txn-timeout") == TransactionStateEmpty },
			func() string { return "the coordinator never aborted the transaction" })
		err := p.CommitTransaction(ctx)
		t.Logf("commit after the timeout: %v", err)
		if !errors.Is(err, ErrTransactionFatal) || !errors.Is(err, ErrTransactionTimedOut) || !strings.Contains(err.Error(), "TransactionTimeout") {
			t.Fatalf("commit after the timeout: %v", err)
		}
		// v2: the coordinator takes the old epoch for a retry of its
		// own abort and refuses the commit (INVALID_TXN_STATE), as
		// Kafka 4.4 does; v1: the old epoch is fenced.
		if mode.v2 && !errors.Is(err, ErrInvalidTxnState) || !mode.v2 && !errors.Is(err, ErrProducerFenced) {
			t.Fatalf("commit after the timeout (v2 %v): %v", mode.v2, err)
		}
		if err := p.BeginTransaction(); !errors.Is(err, ErrTransactionFatal) {
			t.Fatalf("begin after the timeout: %v", err)
		}
		checkRead(t, cl, "t", nil, values(rs))
	})
}

// A record produced after the coordinator aborted the transaction for
// its TransactionTimeout fails; the abort then asks the coordinator.
// Under v2 the partition leader answers INVALID_PRODUCER_EPOCH
// (abortable, Java's InvalidProducerEpochException), and the coordinator
// takes the abort with the old epoch for a retry of its own and answers
// the epoch it bumped: the producer goes on, as Java's does (Kafka 4.4,
// TestTransactionTimeoutThenAbort in the integration suite). Under v1 the
// producer cannot go on.
//
// kfake's produce with a stale epoch adds the partition to a new
// transaction before it checks the epoch (its implicit KIP-890 add),
// after which the coordinator fences the abort; Kafka's leader verifies
// with the coordinator first and adds nothing. So under v2 the leader's
// answer is injected (a fault) as Kafka gives it.
func TestTxnTimeoutAbortGoesOn(t *testing.T) {
	forModes(t, func(t *testing.T, mode txnMode) {
		fake, cl, _ := txnCluster(t, mode, "t")
		ctx := txnCtx(t)
		p := startTxn(t, cl, "txn-timeout-abort", TransactionTimeout(time.Second))
		if err := p.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		rs := recs("t", "late", 4)
		if err := p.ProduceSync(ctx, rs...); err != nil {
			t.Fatal(err)
		}
		waitUntil(t, 30*time.Second, func() bool { return coordTxnState(t, cl, "txn-timeout-abort") == TransactionStateEmpty },
			func() string { return "the coordinator never aborted the transaction" })
		if mode.v2 {
			fake.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: "t", Err: kerr.InvalidProducerEpoch})
		}
		perr := p.ProduceSync(ctx, &Record{Topic: "t", Partition: rs[0].Partition, Value: []byte("after")})
		if !mode.v2 {
			// kfake answers PRODUCER_FENCED (AddPartitionsToTxn) or
			// INVALID_TXN_STATE (a partition the old transaction
			// had): either way the producer cannot go on.
			if perr == nil {
				t.Fatal("v1 produce after the timeout succeeded")
			}
			if err := p.AbortTransaction(ctx); !errors.Is(err, ErrTransactionFatal) {
				t.Fatalf("v1 abort after the timeout: %v, want ErrTransactionFatal", err)
			}
			return
		}
		if !errors.Is(perr, ErrTransactionAbortable) || !errors.Is(perr, KafkaErrorForCode(kerr.InvalidProducerEpoch.Code)) {
			t.Fatalf("produce after the timeout: %v, want ErrTransactionAbortable with INVALID_PRODUCER_EPOCH", perr)
		}
		if err := p.AbortTransaction(ctx); err != nil {
			t.Fatalf("v2 abort after the timeout: %v, want the producer to go on", err)
		}
		if err := p.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		next := recs("t", "next", 4)
		if err := p.ProduceSync(ctx, next...); err != nil {
			t.Fatal(err)
		}
		if err := p.CommitTransaction(ctx); err != nil {
			t.Fatal(err)
		}
		checkRead(t, cl, "t", values(next), append(values(rs), values(next)...))
	})
}

// coordTxnState returns the coordinator's state of the transactional id
// (TransactionStateOngoing, TransactionStateEmpty, ...), "" if it lists
// none.
func coordTxnState(t *testing.T, cl *Client, id string) string {
	t.Helper()
	ls, err := cl.Admin().ListTransactions(txnCtx(t), TransactionFilters{})
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range ls {
		if l.TransactionalID == id {
			return l.State
		}
	}
	return ""
}

// 50 goroutines produce in one transaction; the commit waits for every
// record produced before it: each is visible once.
func TestTxnConcurrentProducers(t *testing.T) {
	forModes(t, func(t *testing.T, mode txnMode) {
		_, cl, _ := txnCluster(t, mode, "t", "u")
		ctx := txnCtx(t)
		p := startTxn(t, cl, "txn-concurrent")
		if err := p.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		const goroutines, each = 50, 40
		var want []string
		var wg sync.WaitGroup
		var mu sync.Mutex
		var failed []error
		for g := 0; g < goroutines; g++ {
			topic := []string{"t", "u"}[g%2]
			rs := recs(topic, fmt.Sprintf("g%d", g), each)
			if topic == "t" {
				want = append(want, values(rs)...)
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				for _, r := range rs {
					p.Produce(ctx, r, func(r *Record, err error) {
						if err != nil {
							mu.Lock()
							failed = append(failed, err)
							mu.Unlock()
						}
					})
				}
			}()
		}
		wg.Wait()
		if err := p.CommitTransaction(ctx); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		if len(failed) > 0 {
			t.Fatalf("%d records failed: %v", len(failed), failed[0])
		}
		mu.Unlock()
		got := readAll(t, cl, ReadCommitted, "t")
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Fatalf("read_committed read %d records, want %d, each once", len(got), len(want))
		}
		if n := len(readAll(t, cl, ReadCommitted, "u")); n != goroutines/2*each {
			t.Fatalf("topic u: %d records, want %d", n, goroutines/2*each)
		}
	})
}

// Offsets sent to a transaction are committed with it, and only then:
// an aborted transaction commits none; a consumer's GroupMetadata fences
// them (KIP-447): a stale generation makes the transaction abortable.
func TestTxnSendOffsets(t *testing.T) {
	forModes(t, func(t *testing.T, mode txnMode) {
		protocols := []GroupProtocol{GroupProtocolClassic}
		if mode.v2 {
			protocols = append(protocols, GroupProtocolConsumer) // KIP-848: member epochs
		}
		for _, proto := range protocols {
			t.Run(fmt.Sprint(proto), func(t *testing.T) { testSendOffsets(t, mode, proto) })
		}
	})
}

func testSendOffsets(t *testing.T, mode txnMode, proto GroupProtocol) {
	fake, cl, _ := txnCluster(t, mode, "in", "out")
	ctx := txnCtx(t)
	ccl := newTestClient(t, SeedBrokers(fake.ListenAddrs()...)) // one group member per client
	assigned := make(chan struct{}, 1)
	cs, err := NewConsumer(ccl, ConsumerGroup("g"), SubscribeTopics("in"), DisableAutoCommit(), WithGroupProtocol(proto),
		OnPartitionsAssigned(func(context.Context, []TopicPartition) {
			select {
			case assigned <- struct{}{}:
			default:
			}
		}),
		HandleRecord(func(context.Context, *Record) error { return nil }))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close(context.Background()) })
	select {
	case <-assigned:
	case <-ctx.Done():
		t.Fatal("never assigned")
	}
	gm := cs.GroupMetadata()
	if gm.GroupID != "g" || gm.MemberID == "" || gm.GenerationID <= 0 || gm.GroupInstanceID != "" {
		t.Fatalf("group metadata %+v", gm)
	}
	committed := func() map[TopicPartition]int64 {
		offs, err := cl.Admin().FetchOffsets(ctx, "g")
		if err != nil {
			t.Fatal(err)
		}
		out := map[TopicPartition]int64{}
		for tp, om := range offs {
			out[tp] = om.Offset
		}
		return out
	}
	in0, in1, in2 := TopicPartition{"in", 0}, TopicPartition{"in", 1}, TopicPartition{"in", 2}
	p := startTxn(t, cl, "txn-offsets")

	// Aborted: the offsets are not committed.
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := p.ProduceSync(ctx, recs("out", "aborted", 4)...); err != nil {
		t.Fatal(err)
	}
	if err := p.SendOffsetsToTransaction(ctx, map[TopicPartition]OffsetAndMetadata{in0: {Offset: 5, LeaderEpoch: -1}, in1: {Offset: 6, LeaderEpoch: -1}}, gm); err != nil {
		t.Fatal(err)
	}
	if err := p.AbortTransaction(ctx); err != nil {
		t.Fatal(err)
	}
	if got := committed(); len(got) != 0 {
		t.Fatalf("offsets of an aborted transaction committed: %v", got)
	}

	// Committed: the offsets are committed with the records, not before.
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := p.SendOffsetsToTransaction(ctx, map[TopicPartition]OffsetAndMetadata{in0: {Offset: 7, LeaderEpoch: -1, Metadata: "m"}, in2: {Offset: 3, LeaderEpoch: -1}}, cs.GroupMetadata()); err != nil {
		t.Fatal(err)
	}
	if err := p.ProduceSync(ctx, recs("out", "committed", 4)...); err != nil {
		t.Fatal(err)
	}
	if got := committed(); len(got) != 0 {
		t.Fatalf("offsets committed before the transaction: %v", got)
	}
	if err := p.CommitTransaction(ctx); err != nil {
		t.Fatal(err)
	}
	want := map[TopicPartition]int64{in0: 7, in2: 3}
	if got := committed(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("committed %v, want %v", got, want)
	}
	offs, _ := cl.Admin().FetchOffsets(ctx, "g")
	if offs[in0].Metadata != "m" {
		t.Fatalf("metadata %q", offs[in0].Metadata)
	}

	// A member from another generation: the coordinator refuses the
	// offsets, and the transaction must be aborted.
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	stale := cs.GroupMetadata()
	stale.GenerationID += 5
	err = p.SendOffsetsToTransaction(ctx, map[TopicPartition]OffsetAndMetadata{in0: {Offset: 9, LeaderEpoch: -1}}, stale)
	if !errors.Is(err, ErrTransactionAbortable) {
		t.Fatalf("offsets of a stale generation: %v", err)
	}
	if err := p.CommitTransaction(ctx); !errors.Is(err, ErrTransactionAbortable) {
		t.Fatalf("commit after refused offsets: %v", err)
	}
	if err := p.AbortTransaction(ctx); err != nil {
		t.Fatal(err)
	}
	if got := committed(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("committed %v after the refused offsets, want %v", got, want)
	}
	checkRead(t, cl, "out", values(recs("out", "committed", 4)), append(values(recs("out", "aborted", 4)), values(recs("out", "committed", 4))...))
}

// Retriable errors on every transactional request (the coordinator not
// available, moved, loading, a concurrent transaction, a timeout) are
// retried inside the call until it succeeds.
func TestTxnRetriableFaults(t *testing.T) {
	forModes(t, func(t *testing.T, mode txnMode) {
		fake, cl, _ := txnCluster(t, mode, "in", "out")
		const id = "txn-faults"
		type fault struct {
			key    kmsg.Key
			err    *kerr.Error
			count  int
			v1only bool
		}
		faults := []fault{
			{kmsg.FindCoordinator, kerr.CoordinatorNotAvailable, 2, false},
			{kmsg.InitProducerID, kerr.CoordinatorLoadInProgress, 2, false},
			{kmsg.InitProducerID, kerr.ConcurrentTransactions, 1, false},
			{kmsg.InitProducerID, kerr.NotCoordinator, 1, false},
			{kmsg.AddPartitionsToTxn, kerr.ConcurrentTransactions, 2, true},
			{kmsg.AddPartitionsToTxn, kerr.NotCoordinator, 1, true},
			{kmsg.AddOffsetsToTxn, kerr.CoordinatorLoadInProgress, 2, true},
			{kmsg.AddOffsetsToTxn, kerr.ConcurrentTransactions, 1, true},
			{kmsg.TxnOffsetCommit, kerr.CoordinatorLoadInProgress, 2, false},
			{kmsg.TxnOffsetCommit, kerr.NotCoordinator, 1, false},
			{kmsg.TxnOffsetCommit, kerr.RequestTimedOut, 1, false},
			{kmsg.EndTxn, kerr.ConcurrentTransactions, 2, false},
			{kmsg.EndTxn, kerr.NotCoordinator, 1, false},
			{kmsg.EndTxn, kerr.CoordinatorLoadInProgress, 1, false},
		}
		handles := make([]*kfake.FaultHandle, len(faults))
		for i, f := range faults {
			kf := kfake.Fault{Keys: []kmsg.Key{f.key}, TxnID: id, Err: f.err, Count: f.count}
			if f.key == kmsg.TxnOffsetCommit {
				kf.Group = "g"
			}
			handles[i] = fake.Fault(kf)
		}
		groupLookups := fake.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.FindCoordinator}, Group: "g", Err: kerr.CoordinatorLoadInProgress, Count: 1})
		// And a connection that dies under the first InitProducerId,
		// EndTxn and TxnOffsetCommit (the outcome is unknown).
		var kills atomic.Int32
		for _, key := range []kmsg.Key{kmsg.InitProducerID, kmsg.EndTxn, kmsg.TxnOffsetCommit} {
			fake.ControlKey(int16(key), func(kmsg.Request) (kmsg.Response, error, bool) {
				kills.Add(1)
				return nil, errors.New("connection killed"), true
			})
		}
		ctx := txnCtx(t)
		p := startTxn(t, cl, id)
		if err := p.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		rs := recs("out", "r", 12)
		for _, r := range rs {
			p.Produce(ctx, r, nil)
		}
		tp := TopicPartition{"in", 1}
		if err := p.SendOffsetsToTransaction(ctx, map[TopicPartition]OffsetAndMetadata{tp: {Offset: 42, LeaderEpoch: -1}}, GroupMetadata{GroupID: "g", GenerationID: -1}); err != nil {
			t.Fatal(err)
		}
		if err := p.CommitTransaction(ctx); err != nil {
			t.Fatal(err)
		}
		for i, f := range faults {
			want := f.count
			if f.v1only && mode.v2 {
				want = 0 // v2 sends no AddPartitionsToTxn or AddOffsetsToTxn
			}
			if got := handles[i].Hits(); got != want {
				t.Errorf("%s %s: injected %d times, want %d", f.key.Name(), f.err.Message, got, want)
			}
		}
		if kills.Load() != 3 {
			t.Errorf("%d connections killed, want 3", kills.Load())
		}
		if groupLookups.Hits() != 1 {
			t.Errorf("group coordinator lookup faulted %d times", groupLookups.Hits())
		}
		offs, err := cl.Admin().FetchOffsets(ctx, "g")
		if err != nil {
			t.Fatal(err)
		}
		if offs[tp].Offset != 42 || len(offs) != 1 {
			t.Errorf("committed offsets %v", offs)
		}
		checkRead(t, cl, "out", values(rs), values(rs))
	})
}

// Close aborts an open transaction (as the Java client does): its records
// never become visible, and the coordinator holds nothing open.
func TestTxnCloseAborts(t *testing.T) {
	forModes(t, func(t *testing.T, mode txnMode) {
		_, cl, _ := txnCluster(t, mode, "t")
		ctx := txnCtx(t)
		p := startTxn(t, cl, "txn-close")
		if err := p.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		rs := recs("t", "open", 6)
		if err := p.ProduceSync(ctx, rs...); err != nil {
			t.Fatal(err)
		}
		if err := p.Close(ctx); err != nil {
			t.Fatal(err)
		}
		if st := coordTxnState(t, cl, "txn-close"); st != TransactionStateEmpty {
			t.Fatalf("coordinator state %q after Close", st)
		}
		checkRead(t, cl, "t", nil, values(rs))
	})
}

// Errors the coordinators answer are classified as the Java client does:
// an authorization failure on the transactional id is fatal (every later
// call fails at once), one on the group is abortable (abort, carry on).
func TestTxnCoordinatorErrors(t *testing.T) {
	forModes(t, func(t *testing.T, mode txnMode) {
		t.Run("InitProducerId fatal", func(t *testing.T) {
			fake, cl, _ := txnCluster(t, mode, "t")
			fake.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.InitProducerID}, TxnID: "denied", Err: kerr.TransactionalIDAuthorizationFailed})
			ctx := txnCtx(t)
			p, err := NewProducer(cl, TransactionalID("denied"))
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close(ctx)
			err = p.InitTransactions(ctx)
			if !errors.Is(err, ErrTransactionFatal) || !errors.Is(err, ErrTransactionalIDAuthorization) {
				t.Fatalf("InitTransactions: %v", err)
			}
			if err := p.InitTransactions(ctx); !errors.Is(err, ErrTransactionalIDAuthorization) {
				t.Fatalf("InitTransactions again: %v", err)
			}
			if err := p.BeginTransaction(); !errors.Is(err, ErrTransactionalIDAuthorization) {
				t.Fatalf("begin: %v", err)
			}
		})
		t.Run("EndTxn fatal", func(t *testing.T) {
			fake, cl, _ := txnCluster(t, mode, "t")
			ctx := txnCtx(t)
			p := startTxn(t, cl, "end-denied")
			fake.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.EndTxn}, TxnID: "end-denied", Err: kerr.TransactionalIDAuthorizationFailed})
			if err := p.BeginTransaction(); err != nil {
				t.Fatal(err)
			}
			if err := p.ProduceSync(ctx, recs("t", "x", 3)...); err != nil {
				t.Fatal(err)
			}
			if err := p.CommitTransaction(ctx); !errors.Is(err, ErrTransactionFatal) || !errors.Is(err, ErrTransactionalIDAuthorization) {
				t.Fatalf("commit: %v", err)
			}
			if err := p.ProduceSync(ctx, recs("t", "y", 1)...); !errors.Is(err, ErrTransactionFatal) {
				t.Fatalf("produce after a fatal error: %v", err)
			}
			if err := p.AbortTransaction(ctx); !errors.Is(err, ErrTransactionFatal) {
				t.Fatalf("abort after a fatal error: %v", err)
			}
		})
		t.Run("TxnOffsetCommit abortable", func(t *testing.T) {
			fake, cl, _ := txnCluster(t, mode, "t")
			ctx := txnCtx(t)
			p := startTxn(t, cl, "group-denied")
			fake.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.TxnOffsetCommit}, Group: "g", Err: kerr.GroupAuthorizationFailed})
			if err := p.BeginTransaction(); err != nil {
				t.Fatal(err)
			}
			if err := p.ProduceSync(ctx, recs("t", "x", 3)...); err != nil {
				t.Fatal(err)
			}
			offsets := map[TopicPartition]OffsetAndMetadata{{"t", 0}: {Offset: 1, LeaderEpoch: -1}}
			err := p.SendOffsetsToTransaction(ctx, offsets, GroupMetadata{GroupID: "g", GenerationID: -1})
			if !errors.Is(err, ErrTransactionAbortable) || !errors.Is(err, KafkaErrorForCode(kerr.GroupAuthorizationFailed.Code)) {
				t.Fatalf("offsets: %v", err)
			}
			if err := p.AbortTransaction(ctx); err != nil {
				t.Fatal(err)
			}
			if err := p.BeginTransaction(); err != nil {
				t.Fatal(err)
			}
			if err := p.ProduceSync(ctx, recs("t", "y", 3)...); err != nil {
				t.Fatal(err)
			}
			if err := p.SendOffsetsToTransaction(ctx, offsets, GroupMetadata{GroupID: "g", GenerationID: -1}); err != nil {
				t.Fatal(err)
			}
			if err := p.CommitTransaction(ctx); err != nil {
				t.Fatal(err)
			}
			checkRead(t, cl, "t", values(recs("t", "y", 3)), append(values(recs("t", "x", 3)), values(recs("t", "y", 3))...))
		})
	})
}
