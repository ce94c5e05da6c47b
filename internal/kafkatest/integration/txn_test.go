package integration_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/riffle-go/riffle"
)

func txnProducer(t *testing.T, cl *riffle.Client, id string, opts ...riffle.ProducerOption) *riffle.Producer {
	t.Helper()
	p, err := riffle.NewProducer(cl, append([]riffle.ProducerOption{riffle.TransactionalID(id)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		p.Close(ctx)
	})
	ctx := timeout(t, time.Minute)
	if err := p.InitTransactions(ctx); err != nil {
		t.Fatal(err)
	}
	return p
}

// Committed transactions are visible to read_committed readers, aborted
// ones never; the coordinator describes the id; a second producer with
// the same id fences the first, whose open transaction is aborted.
func TestTransactionCommitAbortFence(t *testing.T) {
	need(t)
	cl := client(t)
	tp := topic(t, cl, 2, nil)
	id := name(t, "txn")
	ctx := timeout(t, 2*time.Minute)
	p1 := txnProducer(t, cl, id)
	run := func(p *riffle.Producer, commit bool, vals ...string) error {
		t.Helper()
		if err := p.BeginTransaction(); err != nil {
			return err
		}
		for _, v := range vals {
			if err := p.ProduceSync(ctx, &riffle.Record{Topic: tp, Key: []byte(v), Value: []byte(v)}); err != nil {
				return err
			}
		}
		if commit {
			return p.CommitTransaction(ctx)
		}
		return p.AbortTransaction(ctx)
	}
	if err := run(p1, true, "c1", "c2", "c3"); err != nil {
		t.Fatal(err)
	}
	if err := run(p1, false, "a1", "a2"); err != nil {
		t.Fatal(err)
	}
	if err := run(p1, true, "c4"); err != nil {
		t.Fatal(err)
	}

	ds, err := cl.Admin().DescribeTransactions(ctx, id)
	if err != nil || len(ds) != 1 || ds[0].Err != nil {
		t.Fatalf("DescribeTransactions: %v %v", ds, err)
	}
	if s := ds[0].State; s != riffle.TransactionStateCompleteCommit && s != "PrepareCommit" {
		t.Errorf("state after a commit: %s", s)
	}
	ls, err := cl.Admin().ListTransactions(ctx, riffle.TransactionFilters{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(ls, func(l riffle.TransactionListing) bool { return l.TransactionalID == id }) {
		t.Errorf("ListTransactions lacks %s", id)
	}

	// Fencing: p1 has a transaction open when p2 initializes the same id.
	if err := p1.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := p1.ProduceSync(ctx, &riffle.Record{Topic: tp, Value: []byte("zombie")}); err != nil {
		t.Fatal(err)
	}
	p2 := txnProducer(t, cl, id)
	err = p1.CommitTransaction(ctx)
	if !errors.Is(err, riffle.ErrProducerFenced) || !errors.Is(err, riffle.ErrTransactionFatal) {
		t.Fatalf("the fenced producer's commit: %v, want ErrProducerFenced (ErrTransactionFatal)", err)
	}
	if err := run(p2, true, "c5"); err != nil {
		t.Fatal(err)
	}
	got := allValues(readAll(t, cl, tp, riffle.ReadCommitted))
	if want := strings.Fields("c1 c2 c3 c4 c5"); !slices.Equal(got, want) {
		t.Errorf("read_committed: %q, want %q", got, want)
	}
	got = allValues(readAll(t, cl, tp, riffle.ReadUncommitted))
	if want := strings.Fields("a1 a2 c1 c2 c3 c4 c5 zombie"); !slices.Equal(got, want) {
		t.Errorf("read_uncommitted: %q, want %q", got, want)
	}
}

// Consume, transform, produce with ExactlyOnce in a group: a second member
// (its own transactional producer) joins midway; a read_committed reader
// sees every input's output exactly once, and the group's offsets end at
// the end of the input.
func TestExactlyOnceGroup(t *testing.T) {
	need(t)
	admin := client(t)
	const parts, n = 4, 400
	in := topic(t, admin, parts, nil)
	out := topic(t, admin, parts, nil)
	group := name(t, "g")
	ctx := timeout(t, 4*time.Minute)
	p, err := riffle.NewProducer(admin)
	if err != nil {
		t.Fatal(err)
	}
	var recs []*riffle.Record
	for i := range n {
		recs = append(recs, &riffle.Record{Topic: in, Key: []byte(strconv.Itoa(i)), Value: []byte(strconv.Itoa(i))})
	}
	if err := p.ProduceSync(ctx, recs...); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}

	var handled atomic.Int64
	var byMember [3]atomic.Int64
	member := func(i int) *riffle.Consumer {
		cl := client(t)
		tx := txnProducer(t, cl, name(t, fmt.Sprintf("eos%d", i)))
		c, err := riffle.NewConsumer(cl,
			riffle.ConsumerGroup(group), riffle.SubscribeTopics(in), riffle.OffsetReset(riffle.ResetEarliest),
			riffle.ExactlyOnce(tx, riffle.CommitEvery{Interval: 200 * time.Millisecond}),
			riffle.MaxBatchRecords(10),
			riffle.HandleRecord(func(ctx context.Context, r *riffle.Record) error {
				tx.Produce(ctx, &riffle.Record{Topic: out, Key: r.Key, Value: append([]byte("out-"), r.Value...)}, nil)
				handled.Add(1)
				byMember[i].Add(1)
				if i == 1 && handled.Load() > 100 && byMember[2].Load() == 0 {
					// Slow until member 2 takes partitions over, so
					// that the input is shared.
					time.Sleep(100 * time.Millisecond)
				}
				return nil
			}),
			riffle.OnGroupError(func(err error) { t.Logf("member %d: group error: %v", i, err) }),
			riffle.OnPartitionError(func(e *riffle.PartitionError) { t.Logf("member %d: %v", i, e) }))
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	a := member(1)
	eventually(t, time.Minute, "member 1 handling 100 inputs", func() error {
		if h := handled.Load(); h < 100 {
			return fmt.Errorf("%d handled", h)
		}
		return nil
	})
	b := member(2)
	end := endOffsets(t, admin, in)
	eventually(t, 3*time.Minute, "the group's offsets at the end of the input", func() error {
		committed, err := admin.Admin().FetchOffsets(ctx, group)
		if err != nil {
			return err
		}
		for part, off := range end {
			if got := committed[riffle.TopicPartition{Topic: in, Partition: part}].Offset; got != off {
				return fmt.Errorf("%s[%d] committed %d of %d", in, part, got, off)
			}
		}
		return nil
	})
	for _, c := range []*riffle.Consumer{a, b} {
		st := c.Stats()
		t.Logf("member: %d transactions committed, %d aborted", st.TxnCommitted, st.TxnAborted)
		if _, err := c.Close(ctx); err != nil {
			t.Errorf("Close: %v", err)
		}
	}
	seen := map[string]int{}
	for _, v := range allValues(readAll(t, admin, out, riffle.ReadCommitted)) {
		seen[v]++
	}
	for i := range n {
		if k := seen["out-"+strconv.Itoa(i)]; k != 1 {
			t.Errorf("output of input %d read %d times", i, k)
		}
	}
	if len(seen) != n {
		t.Errorf("%d distinct outputs, want %d", len(seen), n)
	}
	t.Logf("%d handler calls for %d inputs: %d by member 1, %d by member 2", handled.Load(), n, byMember[1].Load(), byMember[2].Load())
	if byMember[2].Load() == 0 {
		t.Errorf("member 2 handled nothing")
	}
}

// A transaction left open past TransactionTimeout is aborted by the
// coordinator, which bumps the producer's epoch once. Under transactions
// v2 it takes the old epoch for a retry, so a commit is refused with
// INVALID_TXN_STATE: the producer's commit fails fatally (Java: an
// InvalidTxnStateException) with ErrInvalidTxnState and
// ErrTransactionTimedOut; read_committed readers see none of the
// transaction's records. Under transactions v1 (Kafka 3.9) the bumped
// epoch fences the producer: the commit fails with PRODUCER_FENCED
// (ErrProducerFenced) and ErrTransactionTimedOut, as Java's fails with a
// ProducerFencedException.
func TestTransactionTimeoutAborts(t *testing.T) {
	need(t)
	cl := client(t)
	tp := topic(t, cl, 2, nil)
	id := name(t, "txn")
	ctx := timeout(t, 2*time.Minute)
	p := txnProducer(t, cl, id, riffle.TransactionTimeout(2*time.Second))
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := p.ProduceSync(ctx, &riffle.Record{Topic: tp, Partition: 0, Value: []byte("stalled-0")}, &riffle.Record{Topic: tp, Partition: 1, Value: []byte("stalled-1")}); err != nil {
		t.Fatal(err)
	}
	ds, err := cl.Admin().DescribeTransactions(ctx, id)
	if err != nil || len(ds) != 1 || ds[0].Err != nil {
		t.Fatalf("DescribeTransactions: %v %v", ds, err)
	}
	openEpoch := ds[0].ProducerEpoch
	if ds[0].State != riffle.TransactionStateOngoing || ds[0].Timeout != 2*time.Second {
		t.Fatalf("the open transaction: state %s, timeout %v", ds[0].State, ds[0].Timeout)
	}
	// The stall: the coordinator aborts it (its sweep runs every second
	// on the harness, transaction.abort.timed.out.transaction.cleanup.interval.ms).
	var after riffle.TransactionDescription
	eventually(t, time.Minute, "the coordinator aborting the timed-out transaction", func() error {
		ds, err := cl.Admin().DescribeTransactions(ctx, id)
		if err != nil {
			return err
		}
		if len(ds) != 1 || ds[0].Err != nil {
			return fmt.Errorf("%+v", ds)
		}
		after = ds[0]
		if after.State != riffle.TransactionStateCompleteAbort {
			return fmt.Errorf("state %s epoch %d", after.State, after.ProducerEpoch)
		}
		return nil
	})
	t.Logf("coordinator: epoch %d while open, %d after the timeout abort (%s)", openEpoch, after.ProducerEpoch, after.State)
	if after.ProducerEpoch <= openEpoch {
		t.Errorf("the timeout abort left the epoch at %d (was %d): no fence", after.ProducerEpoch, openEpoch)
	}
	err = p.CommitTransaction(ctx)
	t.Logf("commit after the timeout: %v", err)
	if !env.features.txnV2() {
		if !errors.Is(err, riffle.ErrProducerFenced) || !errors.Is(err, riffle.KafkaErrorForCode(90)) || !errors.Is(err, riffle.ErrTransactionTimedOut) {
			t.Fatalf("commit after the timeout (transactions v1): %v, want ErrProducerFenced (PRODUCER_FENCED) and ErrTransactionTimedOut", err)
		}
		if err := p.BeginTransaction(); !errors.Is(err, riffle.ErrProducerFenced) {
			t.Errorf("begin after the fenced commit: %v, want ErrProducerFenced", err)
		}
	} else {
		if !errors.Is(err, riffle.ErrTransactionFatal) || !errors.Is(err, riffle.ErrInvalidTxnState) || !errors.Is(err, riffle.ErrTransactionTimedOut) {
			t.Fatalf("commit after the timeout: %v, want ErrTransactionFatal with ErrInvalidTxnState and ErrTransactionTimedOut", err)
		}
		if err := p.BeginTransaction(); !errors.Is(err, riffle.ErrTransactionFatal) {
			t.Errorf("begin after the failed commit: %v, want ErrTransactionFatal", err)
		}
	}
	if got := allValues(readAll(t, cl, tp, riffle.ReadCommitted)); len(got) != 0 {
		t.Errorf("read_committed sees %q of the timed-out transaction", got)
	}
	if got := allValues(readAll(t, cl, tp, riffle.ReadUncommitted)); !slices.Equal(got, []string{"stalled-0", "stalled-1"}) {
		t.Errorf("read_uncommitted: %q", got)
	}
}

// The same with the stalled producer's next call a produce: it fails
// with INVALID_PRODUCER_EPOCH, abortable (Java's
// InvalidProducerEpochException); the abort then asks the coordinator,
// which (transactions v2) takes the old epoch for a retry of its own
// abort and answers the bumped epoch: the producer goes on, as Java's
// does, and its next transaction commits. Under transactions v1 (Kafka
// 3.9) no epoch is left for the producer: the abort fails with
// ErrProducerFenced and ErrTransactionTimedOut, and a new producer of the
// same id (InitTransactions) goes on.
func TestTransactionTimeoutThenAbort(t *testing.T) {
	need(t)
	cl := client(t)
	tp := topic(t, cl, 1, nil)
	id := name(t, "txn")
	ctx := timeout(t, 2*time.Minute)
	p := txnProducer(t, cl, id, riffle.TransactionTimeout(2*time.Second))
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := p.ProduceSync(ctx, &riffle.Record{Topic: tp, Value: []byte("stalled")}); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, "the coordinator aborting the timed-out transaction", func() error {
		ds, err := cl.Admin().DescribeTransactions(ctx, id)
		if err != nil {
			return err
		}
		if len(ds) != 1 || ds[0].Err != nil || ds[0].State != riffle.TransactionStateCompleteAbort {
			return fmt.Errorf("%+v", ds)
		}
		return nil
	})
	perr := p.ProduceSync(ctx, &riffle.Record{Topic: tp, Value: []byte("late")})
	t.Logf("produce after the timeout: %v", perr)
	if !errors.Is(perr, riffle.ErrTransactionAbortable) || !errors.Is(perr, riffle.KafkaErrorForCode(47)) {
		t.Fatalf("produce after the timeout: %v, want ErrTransactionAbortable wrapping INVALID_PRODUCER_EPOCH", perr)
	}
	if !env.features.txnV2() {
		err := p.AbortTransaction(ctx)
		t.Logf("abort after the timeout (transactions v1): %v", err)
		if !errors.Is(err, riffle.ErrProducerFenced) || !errors.Is(err, riffle.ErrTransactionTimedOut) {
			t.Fatalf("abort after the timeout (transactions v1): %v, want ErrProducerFenced and ErrTransactionTimedOut", err)
		}
		p = txnProducer(t, client(t), id, riffle.TransactionTimeout(2*time.Second))
	} else if err := p.AbortTransaction(ctx); err != nil {
		t.Fatalf("abort after the timeout: %v, want the producer to go on with the coordinator's epoch", err)
	}
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := p.ProduceSync(ctx, &riffle.Record{Topic: tp, Value: []byte("next")}); err != nil {
		t.Fatal(err)
	}
	if err := p.CommitTransaction(ctx); err != nil {
		t.Fatal(err)
	}
	if got := allValues(readAll(t, cl, tp, riffle.ReadCommitted)); !slices.Equal(got, []string{"next"}) {
		t.Errorf("read_committed: %q, want only the next transaction's record", got)
	}
}

// Transactions version 2 (KIP-890) is finalized on a 4.4 cluster, and
// under it every transaction ends with an epoch bump: the coordinator's
// epoch after each commit is one more than before, and the partition's
// producer state (DescribeProducers) follows. On Kafka 3.9 (no
// transaction.version finalized) transactions are v1, negotiated without
// an error: the epoch stays where InitTransactions put it.
func TestTransactionVersion2BumpsEpoch(t *testing.T) {
	need(t)
	cl := client(t)
	ctx := timeout(t, 2*time.Minute)
	feats, err := cl.Admin().DescribeFeatures(ctx)
	if err != nil {
		t.Fatal(err)
	}
	bump := int16(1)
	if r, ok := feats.Finalized["transaction.version"]; is39() {
		if ok && r.Max >= 2 {
			t.Fatalf("transaction.version finalized at %+v on Kafka %s", r, env.version)
		}
		bump = 0
	} else if !ok || r.Max != 2 {
		t.Fatalf("transaction.version finalized at %+v (%v), want 2", r, ok)
	}
	tp := topic(t, cl, 1, nil)
	id := name(t, "txn")
	p := txnProducer(t, cl, id)
	coordEpoch := func() (int64, int16) {
		t.Helper()
		ds, err := cl.Admin().DescribeTransactions(ctx, id)
		if err != nil || len(ds) != 1 || ds[0].Err != nil {
			t.Fatalf("DescribeTransactions: %v %v", ds, err)
		}
		return ds[0].ProducerID, ds[0].ProducerEpoch
	}
	pid, epoch := coordEpoch()
	for i := range 4 {
		if err := p.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		if err := p.ProduceSync(ctx, &riffle.Record{Topic: tp, Value: []byte(strconv.Itoa(i))}); err != nil {
			t.Fatal(err)
		}
		if err := p.CommitTransaction(ctx); err != nil {
			t.Fatal(err)
		}
		gotPID, got := coordEpoch()
		if gotPID != pid || got != epoch+bump {
			t.Errorf("transaction %d: coordinator has producer %d epoch %d, want %d epoch %d", i, gotPID, got, pid, epoch+bump)
		}
		epoch = got
		// The commit marker is written with the bumped epoch: the
		// partition's producer state has it once the marker landed.
		eventually(t, 30*time.Second, "the partition's producer state at the coordinator's epoch", func() error {
			ps, err := cl.Admin().DescribeProducers(ctx, riffle.TopicPartition{Topic: tp})
			if err != nil {
				return err
			}
			if len(ps) != 1 || ps[0].Err != nil {
				return fmt.Errorf("%v", ps)
			}
			for _, s := range ps[0].Producers {
				if s.ProducerID == pid && s.ProducerEpoch == epoch && s.CurrentTxnStartOffset < 0 {
					return nil
				}
			}
			return fmt.Errorf("%v, want producer %d at epoch %d with no open transaction", ps[0], pid, epoch)
		})
	}
	t.Logf("producer %d at epoch %d after 4 transactions", pid, epoch)
	if got := allValues(readAll(t, cl, tp, riffle.ReadCommitted)); !slices.Equal(got, strings.Fields("0 1 2 3")) {
		t.Errorf("read_committed: %q", got)
	}
}
