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
