package integration_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/riffle-go/riffle"
)

// A transaction left open by a producer that died (its client closed
// under it, so Close could not abort; a 10-minute transaction timeout, so
// the coordinator will not abort it during the test) holds back the
// partition's last stable offset, and read_committed consumers, at its
// first record. Admin.AbortTransaction, with the producer id and epoch
// DescribeProducers shows, writes the abort marker on the partition: the
// last stable offset moves to the end, and a read_committed consumer
// reads the records around the transaction but not its own. An epoch
// older than the producer's is refused (INVALID_PRODUCER_EPOCH).
func TestAbortHangingTransaction(t *testing.T) {
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
	if err := p.ProduceSync(ctx, &riffle.Record{Topic: tp, Value: []byte("before")}); err != nil {
		t.Fatal(err)
	}

	// The dying producer commits one transaction (under transactions v2
	// the commit bumps its epoch), then opens another and dies.
	id := name(t, "txn")
	dying := client(t)
	tx, err := riffle.NewProducer(dying, riffle.TransactionalID(id), riffle.TransactionTimeout(10*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.InitTransactions(ctx); err != nil {
		t.Fatal(err)
	}
	if err := tx.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := tx.ProduceSync(ctx, &riffle.Record{Topic: tp, Value: []byte("committed")}); err != nil {
		t.Fatal(err)
	}
	if err := tx.CommitTransaction(ctx); err != nil {
		t.Fatal(err)
	}
	var committedEpoch int16 = -1
	eventually(t, time.Minute, "the commit complete", func() error {
		ds, err := adm.DescribeTransactions(ctx, id)
		if err != nil || ds[0].Err != nil || ds[0].State != riffle.TransactionStateCompleteCommit {
			return fmt.Errorf("%+v %v", ds, err)
		}
		committedEpoch = ds[0].ProducerEpoch
		return nil
	})
	if err := tx.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := tx.ProduceSync(ctx, &riffle.Record{Topic: tp, Value: []byte("hanging-1")}, &riffle.Record{Topic: tp, Value: []byte("hanging-2")}); err != nil {
		t.Fatal(err)
	}
	dying.Close()
	_ = tx.Close(timeout(t, 10*time.Second)) // its abort cannot reach the coordinator
	if err := p.ProduceSync(ctx, &riffle.Record{Topic: tp, Value: []byte("after")}); err != nil {
		t.Fatal(err)
	}

	lso := func() (committed, end int64) {
		t.Helper()
		for _, iso := range []riffle.IsolationLevel{riffle.ReadCommitted, riffle.ReadUncommitted} {
			los, err := adm.ListOffsetsIsolated(ctx, iso, riffle.OffsetLatest, tp)
			if err != nil || len(los) != 1 || los[0].Err != nil {
				t.Fatalf("ListOffsetsIsolated(%v): %v %v", iso, los, err)
			}
			if iso == riffle.ReadCommitted {
				committed = los[0].Offset
			} else {
				end = los[0].Offset
			}
		}
		return
	}
	prods, err := adm.DescribeProducers(ctx, p0)
	if err != nil || len(prods) != 1 || prods[0].Err != nil {
		t.Fatalf("DescribeProducers: %v %v", prods, err)
	}
	i := slices.IndexFunc(prods[0].Producers, func(s riffle.ProducerState) bool { return s.CurrentTxnStartOffset >= 0 })
	if i < 0 {
		t.Fatalf("DescribeProducers: no producer with an open transaction: %+v", prods[0].Producers)
	}
	hung := prods[0].Producers[i]
	c, end := lso()
	t.Logf("hanging: %+v; last stable offset %d, end %d; epoch after the commit %d", hung, c, end, committedEpoch)
	if c != hung.CurrentTxnStartOffset || c >= end {
		t.Fatalf("read_committed latest offset %d (end %d), want the hanging transaction's start %d", c, end, hung.CurrentTxnStartOffset)
	}
	ds, err := adm.DescribeTransactions(ctx, id)
	if err != nil || ds[0].Err != nil || ds[0].State != riffle.TransactionStateOngoing || ds[0].ProducerID != hung.ProducerID {
		t.Fatalf("DescribeTransactions: %+v %v, want %d Ongoing", ds, err, hung.ProducerID)
	}

	spec := riffle.AbortTransactionSpec{
		TopicPartition:   p0,
		ProducerID:       hung.ProducerID,
		ProducerEpoch:    hung.ProducerEpoch,
		CoordinatorEpoch: max(hung.CoordinatorEpoch, 0),
	}
	if !env.features.txnV2() {
		// Transactions v1 (Kafka 3.9): commits bump no epoch.
		if hung.ProducerEpoch != committedEpoch {
			t.Errorf("the hanging transaction's epoch is %d, the committed one's %d: want the same under transactions v1", hung.ProducerEpoch, committedEpoch)
		}
	} else if hung.ProducerEpoch > 0 {
		stale := spec
		stale.ProducerEpoch = hung.ProducerEpoch - 1
		if err := adm.AbortTransaction(ctx, stale); !errors.Is(err, riffle.ErrInvalidProducerEpoch) {
			t.Errorf("AbortTransaction at an older epoch: %v, want ErrInvalidProducerEpoch", err)
		}
	} else {
		t.Errorf("the hanging transaction's epoch is %d: want it bumped by the commit", hung.ProducerEpoch)
	}
	if c2, _ := lso(); c2 != c {
		t.Fatalf("a refused abort moved the last stable offset from %d to %d", c, c2)
	}
	if err := adm.AbortTransaction(ctx, spec); err != nil {
		t.Fatalf("AbortTransaction(%v): %v", spec, err)
	}
	eventually(t, time.Minute, "the last stable offset at the end", func() error {
		if c, end := lso(); c != end {
			return fmt.Errorf("read_committed %d, end %d", c, end)
		}
		prods, err := adm.DescribeProducers(ctx, p0)
		if err != nil || prods[0].Err != nil {
			return fmt.Errorf("%v %v", prods, err)
		}
		for _, s := range prods[0].Producers {
			if s.ProducerID == hung.ProducerID && s.CurrentTxnStartOffset != -1 {
				return fmt.Errorf("producer %+v", s)
			}
		}
		return nil
	})
	if got := values(readAll(t, cl, tp, riffle.ReadCommitted)[0]); !slices.Equal(got, []string{"before", "committed", "after"}) {
		t.Errorf("read_committed after the abort: %q", got)
	}
	if got := values(readAll(t, cl, tp, riffle.ReadUncommitted)[0]); !slices.Equal(got, []string{"before", "committed", "hanging-1", "hanging-2", "after"}) {
		t.Errorf("read_uncommitted after the abort: %q", got)
	}
	// The coordinator was not told: the transaction is still open there
	// (until its timeout).
	ds, err = adm.DescribeTransactions(ctx, id)
	if err != nil || ds[0].Err != nil || ds[0].State != riffle.TransactionStateOngoing {
		t.Errorf("DescribeTransactions after the abort: %+v %v, want the coordinator's Ongoing", ds, err)
	}
}
