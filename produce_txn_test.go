package riffle

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

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
