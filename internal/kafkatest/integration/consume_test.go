package integration_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/riffle-go/riffle"
)

// collector gathers the records a consumer hands its handler.
type collector struct {
	mu   sync.Mutex
	recs []*riffle.Record
	ch   chan struct{} // signalled on every record
}

func newCollector() *collector { return &collector{ch: make(chan struct{}, 1)} }

func (c *collector) handle(_ context.Context, r *riffle.Record) error {
	c.mu.Lock()
	c.recs = append(c.recs, r)
	c.mu.Unlock()
	select {
	case c.ch <- struct{}{}:
	default:
	}
	return nil
}

func (c *collector) values() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return values(c.recs)
}

// waitValues waits until the collector holds n records, then returns
// their values.
func (c *collector) waitValues(t *testing.T, n int) []string {
	t.Helper()
	eventually(t, time.Minute, fmt.Sprintf("%d records", n), func() error {
		if got := c.values(); len(got) < n {
			return fmt.Errorf("%d records: %q", len(got), got)
		}
		return nil
	})
	return c.values()
}

// Where an assigned partition starts: earliest, latest, an offset, a
// timestamp (the first record at or after it).
func TestConsumeStartOffsets(t *testing.T) {
	need(t)
	cl := client(t)
	tp := topic(t, cl, 1, nil)
	ctx := timeout(t, 2*time.Minute)
	p, err := riffle.NewProducer(cl)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(ctx)
	base := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	var recs []*riffle.Record
	for i := range 10 {
		recs = append(recs, &riffle.Record{Topic: tp, Value: []byte(fmt.Sprint(i)), Timestamp: base.Add(time.Duration(i) * time.Second)})
	}
	if err := p.ProduceSync(ctx, recs...); err != nil {
		t.Fatal(err)
	}
	tp0 := riffle.TopicPartition{Topic: tp, Partition: 0}
	run := func(start riffle.StartOffset, want []string, then func()) {
		t.Helper()
		col := newCollector()
		c, err := riffle.NewConsumer(cl, riffle.HandleRecord(col.handle),
			riffle.OnPartitionError(func(e *riffle.PartitionError) { t.Errorf("%v: %v", start, e) }))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close(ctx)
		if err := c.Assign(riffle.Assignment{TopicPartition: tp0, Start: start}); err != nil {
			t.Fatal(err)
		}
		if then != nil {
			// AtLatest: wait until the consumer has resolved its
			// position, then produce.
			eventually(t, time.Minute, "the position of "+start.String(), func() error {
				for _, ps := range c.Stats().Partitions {
					if ps.Position >= 0 {
						return nil
					}
				}
				return errNotYet
			})
			then()
		}
		got := col.waitValues(t, len(want))
		if !slices.Equal(got, want) {
			t.Errorf("%v: got %q, want %q", start, got, want)
		}
	}
	run(riffle.AtEarliest(), strings.Fields("0 1 2 3 4 5 6 7 8 9"), nil)
	run(riffle.AtOffset(7), strings.Fields("7 8 9"), nil)
	run(riffle.AtTime(base.Add(4*time.Second)), strings.Fields("4 5 6 7 8 9"), nil)
	run(riffle.AtTime(base.Add(4500*time.Millisecond)), strings.Fields("5 6 7 8 9"), nil)
	run(riffle.AtLatest(), []string{"new"}, func() {
		if err := p.ProduceSync(ctx, &riffle.Record{Topic: tp, Value: []byte("new")}); err != nil {
			t.Fatal(err)
		}
	})

	// ListOffsets agrees.
	los, err := cl.Admin().ListOffsets(ctx, base.Add(4500*time.Millisecond).UnixMilli(), tp)
	if err != nil || len(los) != 1 || los[0].Offset != 5 {
		t.Errorf("ListOffsets by time: %v %v, want offset 5", los, err)
	}
}

// read_committed skips an aborted transaction interleaved, in one
// partition, with a committed one and with plain idempotent records;
// read_uncommitted sees everything.
func TestReadCommittedSkipsAborted(t *testing.T) {
	need(t)
	cl := client(t)
	tp := topic(t, cl, 1, nil)
	ctx := timeout(t, 2*time.Minute)
	txn := func(id string) *riffle.Producer {
		p, err := riffle.NewProducer(cl, riffle.TransactionalID(name(t, id)))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Close(context.Background()) })
		if err := p.InitTransactions(ctx); err != nil {
			t.Fatal(err)
		}
		if err := p.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		return p
	}
	aborting, committing := txn("a"), txn("b")
	plain, err := riffle.NewProducer(cl)
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close(ctx)
	write := func(p *riffle.Producer, v string) {
		t.Helper()
		if err := p.ProduceSync(ctx, &riffle.Record{Topic: tp, Value: []byte(v)}); err != nil {
			t.Fatalf("%s: %v", v, err)
		}
	}
	write(aborting, "a1")
	write(committing, "b1")
	write(plain, "c1")
	write(aborting, "a2")
	write(committing, "b2")
	if err := aborting.AbortTransaction(ctx); err != nil {
		t.Fatal(err)
	}
	write(plain, "c2")
	if err := committing.CommitTransaction(ctx); err != nil {
		t.Fatal(err)
	}
	// A later transaction after the abort marker, committed.
	if err := aborting.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	write(aborting, "a3")
	if err := aborting.CommitTransaction(ctx); err != nil {
		t.Fatal(err)
	}
	got := values(readAll(t, cl, tp, riffle.ReadCommitted)[0])
	if want := strings.Fields("b1 c1 b2 c2 a3"); !slices.Equal(got, want) {
		t.Errorf("read_committed: %q, want %q", got, want)
	}
	got = values(readAll(t, cl, tp, riffle.ReadUncommitted)[0])
	if want := strings.Fields("a1 b1 c1 a2 b2 c2 a3"); !slices.Equal(got, want) {
		t.Errorf("read_uncommitted: %q, want %q", got, want)
	}
}
