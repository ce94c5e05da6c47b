package integration_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/riffle-go/riffle"
)

// Transaction administration on an open transaction and after its abort:
// the coordinator describes it (state, partitions, timeout, start),
// ListTransactions filters it by state, producer id and duration and names
// an unknown state, the partition's leader shows the producer with the
// transaction's first offset, and read_committed ListOffsets stops there
// (the last stable offset) until the abort.
func TestTransactionAdmin(t *testing.T) {
	need(t)
	cl := client(t)
	adm := cl.Admin()
	ctx := timeout(t, 3*time.Minute)
	tp := topic(t, cl, 1, nil)
	p0 := riffle.TopicPartition{Topic: tp, Partition: 0}
	p, err := riffle.NewProducer(cl)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(ctx)
	if err := p.ProduceSync(ctx, &riffle.Record{Topic: tp, Value: []byte("plain")}); err != nil {
		t.Fatal(err)
	}

	id := name(t, "txn")
	tx := txnProducer(t, cl, id, riffle.TransactionTimeout(2*time.Minute))
	if err := tx.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := tx.ProduceSync(ctx, &riffle.Record{Topic: tp, Value: []byte("t1")}, &riffle.Record{Topic: tp, Value: []byte("t2")}); err != nil {
		t.Fatal(err)
	}

	ds, err := adm.DescribeTransactions(ctx, id, name(t, "never"))
	if err != nil || len(ds) != 2 {
		t.Fatalf("DescribeTransactions: %v %v", ds, err)
	}
	d := ds[0]
	if d.Err != nil || d.State != riffle.TransactionStateOngoing || !slices.Equal(d.Partitions, []riffle.TopicPartition{p0}) ||
		d.Timeout != 2*time.Minute || d.StartTime.IsZero() || d.ProducerID < 0 || d.ProducerEpoch < 0 || d.Coordinator < 0 {
		t.Errorf("DescribeTransactions(open): %+v", d)
	}
	if !errors.Is(ds[1].Err, riffle.ErrTransactionalIDNotFound) {
		t.Errorf("DescribeTransactions(unknown id): %+v, want ErrTransactionalIDNotFound", ds[1])
	}

	listed := func(f riffle.TransactionFilters) bool {
		t.Helper()
		ls, err := adm.ListTransactions(ctx, f)
		if err != nil {
			t.Fatalf("ListTransactions(%+v): %v", f, err)
		}
		i := slices.IndexFunc(ls, func(l riffle.TransactionListing) bool { return l.TransactionalID == id })
		if i >= 0 && (ls[i].ProducerID != d.ProducerID || (len(f.States) > 0 && !slices.Contains(f.States, ls[i].State))) {
			t.Errorf("ListTransactions(%+v): %+v, described %+v", f, ls[i], d)
		}
		return i >= 0
	}
	if !listed(riffle.TransactionFilters{States: []string{riffle.TransactionStateOngoing}, ProducerIDs: []int64{d.ProducerID}}) {
		t.Errorf("ListTransactions(Ongoing, its producer id) lacks %s", id)
	}
	if listed(riffle.TransactionFilters{States: []string{riffle.TransactionStateCompleteAbort}}) {
		t.Errorf("ListTransactions(CompleteAbort) lists the open %s", id)
	}
	if listed(riffle.TransactionFilters{ProducerIDs: []int64{d.ProducerID + 1}}) {
		t.Errorf("ListTransactions(another producer id) lists %s", id)
	}
	eventually(t, time.Minute, "the transaction open for 1s", func() error {
		if !listed(riffle.TransactionFilters{MinDuration: time.Second}) {
			return errNotYet
		}
		return nil
	})
	if listed(riffle.TransactionFilters{MinDuration: time.Hour}) {
		t.Errorf("ListTransactions(open for an hour) lists %s", id)
	}
	_, err = adm.ListTransactions(ctx, riffle.TransactionFilters{States: []string{"Sleeping"}})
	if !errors.Is(err, riffle.ErrInvalidConfig) {
		t.Errorf("ListTransactions(unknown state): %v, want ErrInvalidConfig naming it", err)
	}

	prods, err := adm.DescribeProducers(ctx, p0)
	if err != nil || len(prods) != 1 || prods[0].Err != nil {
		t.Fatalf("DescribeProducers: %v %v", prods, err)
	}
	i := slices.IndexFunc(prods[0].Producers, func(s riffle.ProducerState) bool { return s.ProducerID == d.ProducerID })
	if len(prods[0].Producers) != 2 || i < 0 || prods[0].Producers[i].CurrentTxnStartOffset != 1 || prods[0].Producers[i].ProducerEpoch != d.ProducerEpoch ||
		prods[0].Producers[i].LastSequence != 1 {
		t.Errorf("DescribeProducers: %+v, want the plain producer and %d with its transaction from offset 1", prods[0].Producers, d.ProducerID)
	}

	lso := func() (committed, uncommitted int64) {
		t.Helper()
		for _, iso := range []riffle.IsolationLevel{riffle.ReadCommitted, riffle.ReadUncommitted} {
			los, err := adm.ListOffsetsIsolated(ctx, iso, riffle.OffsetLatest, tp)
			if err != nil || len(los) != 1 || los[0].Err != nil {
				t.Fatalf("ListOffsetsIsolated(%v): %v %v", iso, los, err)
			}
			if iso == riffle.ReadCommitted {
				committed = los[0].Offset
			} else {
				uncommitted = los[0].Offset
			}
		}
		return
	}
	if c, u := lso(); c != 1 || u != 3 {
		t.Errorf("latest offsets with the transaction open: read_committed %d, read_uncommitted %d, want 1 and 3", c, u)
	}

	if err := tx.AbortTransaction(ctx); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, "the abort complete", func() error {
		ds, err := adm.DescribeTransactions(ctx, id)
		if err != nil || ds[0].Err != nil || ds[0].State != riffle.TransactionStateCompleteAbort || len(ds[0].Partitions) != 0 {
			return fmt.Errorf("%+v %v", ds, err)
		}
		if c, u := lso(); c != 4 || u != 4 { // the abort marker at 3
			return fmt.Errorf("read_committed %d, read_uncommitted %d", c, u)
		}
		prods, err := adm.DescribeProducers(ctx, p0)
		if err != nil || prods[0].Err != nil {
			return fmt.Errorf("%v %v", prods, err)
		}
		for _, s := range prods[0].Producers {
			if s.ProducerID == d.ProducerID && (s.CurrentTxnStartOffset != -1 || s.CoordinatorEpoch < 0) {
				return fmt.Errorf("producer %+v", s)
			}
		}
		return nil
	})
	if !listed(riffle.TransactionFilters{States: []string{riffle.TransactionStateCompleteAbort}}) {
		t.Errorf("ListTransactions(CompleteAbort) lacks %s", id)
	}
}
