package interop

import (
	"context"
	"errors"
	"sort"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/riffle-go/riffle"
	"github.com/riffle-go/riffle/process"
	"github.com/riffle-go/riffle/ranges"
	"github.com/riffle-go/riffle/rifftest"
	"github.com/twmb/franz-go/pkg/kgo"
)

const n = 20

// Issue 20, point 11, with franz-go as the successor: a process.ExactlyOnce
// member finishes records out of offset order (offset 0 never finishes,
// the rest do), commits transactions meanwhile and closes; franz-go's
// GroupTransactSession, which reads only the committed offset (its own
// commit metadata is its member id, not a finished-offset map), takes the
// partition over. Every input's output must appear exactly once under
// read_committed. Before the fix, the outputs of offsets 1.. were
// committed with offset 0, and franz-go produced them again.
func TestExactlyOnceHandoverToFranzGo(t *testing.T) {
	c := rifftest.New(t, rifftest.Topic("in", 1), rifftest.Topic("out", 1))
	cl := riffleClient(t, c)
	produceInputs(t, cl)

	pr := txnProducer(t, cl, "riffle-eos")
	var done atomic.Int64
	p, err := process.New(cl, func(ctx context.Context, r *riffle.Record) error {
		if r.Offset == 0 {
			<-ctx.Done() // finishes last: never, in this member
			return ctx.Err()
		}
		defer done.Add(1)
		return process.Output(ctx, &riffle.Record{Topic: "out", Value: []byte(strconv.FormatInt(r.Offset, 10))})
	}, process.ExactlyOnce(pr, riffle.CommitEvery{Interval: 20 * time.Millisecond}),
		process.Ordering(process.Unordered), process.Concurrency(n),
		process.ConsumerOptions(groupOpts("g")...))
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "records 1.. finished", func() bool { return done.Load() == n-1 })
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	p.Close(ctx) // offset 0 still running at the deadline: an error naming it

	// The successor: franz-go's consume-transform-produce session.
	franzTransact(t, c, "g", "franz-eos")
	checkOutputs(t, cl)
}

// Issue 20, point 12, with franz-go as the predecessor: franz-go commits
// (in transactions) with its member id as the commit metadata; a
// process.ExactlyOnce member taking over must not fail on metadata it did
// not write, and must resume at the committed offset: every output once.
func TestExactlyOnceHandoverFromFranzGo(t *testing.T) {
	c := rifftest.New(t, rifftest.Topic("in", 1), rifftest.Topic("out", 1))
	cl := riffleClient(t, c)
	produceInputs(t, cl)

	franzTransactSome(t, c, "g", "franz-eos", n/2)

	pr := txnProducer(t, cl, "riffle-eos")
	var fails atomic.Int64
	p, err := process.New(cl, func(ctx context.Context, r *riffle.Record) error {
		return process.Output(ctx, &riffle.Record{Topic: "out", Value: []byte(strconv.FormatInt(r.Offset, 10))})
	}, process.ExactlyOnce(pr, riffle.CommitEvery{Interval: 20 * time.Millisecond}),
		process.OnError(func(err error) {
			fails.Add(1)
			t.Errorf("processor error: %v", err)
		}),
		process.ConsumerOptions(groupOpts("g")...))
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "every input committed", func() bool { return committed(t, cl, "g") == n })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := p.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	checkOutputs(t, cl)
}

func riffleClient(t *testing.T, c *rifftest.Cluster) *riffle.Client {
	t.Helper()
	cl, err := riffle.NewClient(riffle.SeedBrokers(c.Addrs()...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func produceInputs(t *testing.T, cl *riffle.Client) {
	t.Helper()
	pr, err := riffle.NewProducer(cl)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i := 0; i < n; i++ {
		if err := pr.ProduceSync(ctx, &riffle.Record{Topic: "in", Value: []byte(strconv.Itoa(i))}); err != nil {
			t.Fatal(err)
		}
	}
	if err := pr.Close(ctx); err != nil {
		t.Fatal(err)
	}
}

func txnProducer(t *testing.T, cl *riffle.Client, id string) *riffle.Producer {
	t.Helper()
	pr, err := riffle.NewProducer(cl, riffle.TransactionalID(id), riffle.TransactionTimeout(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := pr.InitTransactions(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		pr.Close(ctx)
	})
	return pr
}

func groupOpts(group string) []riffle.ConsumerOption {
	return []riffle.ConsumerOption{
		riffle.ConsumerGroup(group), riffle.SubscribeTopics("in"),
		riffle.OffsetReset(riffle.ResetEarliest),
		riffle.SessionTimeout(6 * time.Second), riffle.HeartbeatInterval(100 * time.Millisecond),
		riffle.RebalanceTimeout(10 * time.Second), riffle.RevokeTimeout(5 * time.Second),
		riffle.FetchMaxWait(100 * time.Millisecond),
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// committed is the group's committed offset of in[0] (0 if none).
func committed(t *testing.T, cl *riffle.Client, group string) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	offs, err := cl.Admin().FetchOffsets(ctx, group)
	if err != nil {
		return 0
	}
	return max(offs[riffle.TopicPartition{Topic: "in", Partition: 0}].Offset, 0)
}

func franzClient(t *testing.T, c *rifftest.Cluster, group, txnID string) *kgo.GroupTransactSession {
	t.Helper()
	s, err := kgo.NewGroupTransactSession(
		kgo.SeedBrokers(c.Addrs()...),
		kgo.TransactionalID(txnID),
		kgo.TransactionTimeout(10*time.Second),
		kgo.ConsumerGroup(group),
		kgo.ConsumeTopics("in"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.FetchMaxWait(100*time.Millisecond),
		kgo.DefaultProduceTopic("out"),
	)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// franzTransact runs franz-go's consume-transform-produce loop until the
// group has committed every input.
func franzTransact(t *testing.T, c *rifftest.Cluster, group, txnID string) {
	t.Helper()
	franzTransactSome(t, c, group, txnID, n)
}

// franzTransactSome runs franz-go's loop, one record a transaction, until
// upTo inputs are committed; then it leaves the group.
func franzTransactSome(t *testing.T, c *rifftest.Cluster, group, txnID string, upTo int64) {
	t.Helper()
	s := franzClient(t, c, group, txnID)
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var next int64 = -1 // the offset after the last committed input
	for next < upTo {
		fs := s.PollRecords(ctx, int(upTo-max(next, 0)))
		if err := ctx.Err(); err != nil {
			t.Fatalf("franz-go: %v (next offset %d)", err, next)
		}
		if errs := fs.Errors(); len(errs) > 0 {
			for _, e := range errs {
				if !errors.Is(e.Err, context.Canceled) {
					t.Logf("franz-go fetch error: %v", e.Err)
				}
			}
			continue
		}
		recs := fs.Records()
		if len(recs) == 0 {
			continue
		}
		if err := s.Begin(); err != nil {
			t.Fatal(err)
		}
		last := next
		for _, r := range recs {
			if r.Offset >= upTo {
				break
			}
			res := s.ProduceSync(ctx, &kgo.Record{Topic: "out", Value: []byte(strconv.FormatInt(r.Offset, 10))})
			if err := res.FirstErr(); err != nil {
				t.Fatal(err)
			}
			last = r.Offset + 1
		}
		ok, err := s.End(ctx, kgo.TryCommit)
		if err != nil {
			t.Fatalf("franz-go End: %v", err)
		}
		if ok {
			next = last
		}
	}
}

// checkOutputs reads out under read_committed, to its last stable
// offset, and wants the output of each input once.
func checkOutputs(t *testing.T, cl *riffle.Client) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ends, err := cl.Admin().ListOffsetsIsolated(ctx, riffle.ReadCommitted, riffle.OffsetLatest, "out")
	if err != nil || len(ends) != 1 || ends[0].Err != nil {
		t.Fatalf("the end of out: %v %+v", err, ends)
	}
	r := ranges.NewReader(cl, ranges.ReadCommitted())
	defer r.Close()
	var got []int
	err = r.Read(ctx, ranges.Range{Topic: "out", Partition: 0, Low: 0, High: ends[0].Offset}, func(rec *riffle.Record) error {
		v, err := strconv.Atoi(string(rec.Value))
		if err != nil {
			return err
		}
		got = append(got, v)
		return nil
	})
	if err != nil {
		t.Fatalf("reading out: %v", err)
	}
	sort.Ints(got)
	if len(got) != n {
		t.Fatalf("read_committed outputs for inputs %v, want each of 0..%d once", got, n-1)
	}
	for i, v := range got {
		if v != i {
			t.Fatalf("read_committed outputs for inputs %v, want each of 0..%d once", got, n-1)
		}
	}
}
