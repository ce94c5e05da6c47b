package process_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/riffle-go/riffle"
	"github.com/riffle-go/riffle/process"
	"github.com/riffle-go/riffle/rifftest"
)

// shareSetup starts a cluster whose topic "t" has partitions partitions
// of n records each, and points share group "g" at their start.
func shareSetup(t *testing.T, partitions int32, n int, lock time.Duration) *rifftest.Cluster {
	t.Helper()
	c := rifftest.New(t, rifftest.Topic("t", partitions),
		rifftest.BrokerConfig("group.share.record.lock.duration.ms", fmt.Sprint(lock.Milliseconds())),
		rifftest.BrokerConfig("share.record.lock.sweep.interval.ms", "50"),
		rifftest.BrokerConfig("group.share.heartbeat.interval.ms", "200"))
	cl := client(t, c)
	produce(t, cl, "t", partitions, n, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	offs := map[riffle.TopicPartition]int64{}
	for p := int32(0); p < partitions; p++ {
		offs[riffle.TopicPartition{Topic: "t", Partition: p}] = 0
	}
	res, err := cl.Admin().AlterShareGroupOffsets(ctx, "g", offs)
	if err != nil {
		t.Fatal(err)
	}
	for tp, err := range res {
		if err != nil {
			t.Fatalf("%v: %v", tp, err)
		}
	}
	return c
}

func shareOpts() process.Option {
	return process.ConsumerOptions(riffle.ShareGroup("g"), riffle.SubscribeTopics("t"))
}

// drained waits for the group's start offsets to reach n everywhere (every
// record accepted or archived) after the processor closed.
func drained(t *testing.T, cl *riffle.Client, partitions int32, n int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	offs, err := cl.Admin().DescribeShareGroupOffsets(ctx, "g", "t")
	if err != nil {
		t.Fatal(err)
	}
	if len(offs) != int(partitions) {
		t.Fatalf("offsets %v", offs)
	}
	for _, o := range offs {
		if o.StartOffset != n {
			t.Errorf("%v at %d, want %d", o.TopicPartition, o.StartOffset, n)
		}
	}
}

func TestShareRejectsOrderedModes(t *testing.T) {
	c := rifftest.New(t, rifftest.Topic("t", 1))
	cl := client(t, c)
	h := func(context.Context, *riffle.Record) error { return nil }
	for _, m := range []process.Mode{process.ByKey, process.ByPartition} {
		if _, err := process.NewShare(cl, h, process.Ordering(m), shareOpts()); !errors.Is(err, riffle.ErrInvalidConfig) {
			t.Errorf("%v: %v", m, err)
		}
	}
	p, err := process.NewShare(cl, h, process.Ordering(process.Unordered), shareOpts())
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// TestShareRetryAndDeadLetter: every third record fails twice then
// succeeds (retried); every fifth always fails and goes to the dead-letter
// function, then is accepted. The retries wait longer than the 1 s lock:
// renewal keeps the records.
func TestShareRetryAndDeadLetter(t *testing.T) {
	const n = 30
	c := shareSetup(t, 2, n, time.Second)
	cl := client(t, c)
	var mu sync.Mutex
	calls := map[string]int{}
	var dead, finished atomic.Int64
	done := make(chan struct{})
	p, err := process.NewShare(client(t, c), func(_ context.Context, r *riffle.Record) error {
		if r.DeliveryCount != 1 {
			t.Errorf("%d/%d delivered %d times", r.Partition, r.Offset, r.DeliveryCount)
		}
		k := fmt.Sprintf("%d/%d", r.Partition, r.Offset)
		mu.Lock()
		calls[k]++
		c := calls[k]
		mu.Unlock()
		switch {
		case r.Offset%5 == 0:
			return errors.New("poison")
		case r.Offset%3 == 0 && c < 3:
			return errors.New("transient")
		}
		return nil
	}, shareOpts(), process.Concurrency(8),
		process.Retry(process.RetryPolicy{Attempts: 3, Backoff: 800 * time.Millisecond, MaxBackoff: 800 * time.Millisecond}),
		process.DeadLetter(func(_ context.Context, r *riffle.Record, cause error, attempts int) error {
			if attempts != 3 || cause.Error() != "poison" {
				t.Errorf("dead letter %d after %d: %v", r.Offset, attempts, cause)
			}
			dead.Add(1)
			return nil
		}),
		process.WithHooks(process.Hooks{OnFinish: func(riffle.TopicPartition, int64, int, time.Duration, error) {
			if finished.Add(1) == 2*n {
				close(done)
			}
		}}))
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		t.Fatal("not every record finished")
	}
	if err := p.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	st := p.Stats()
	if dead.Load() != 2*6 || st.DeadLettered != 12 || st.Processed != 2*n-12 || st.Consumer.Accepted != 2*n || st.Consumer.Renewed == 0 {
		t.Fatalf("dead %d, stats %+v", dead.Load(), st)
	}
	drained(t, cl, 2, n)
}

// TestShareNoDeadLetterRejects: without a dead-letter function a record
// failing for good is rejected (archived, never delivered again) and
// reported.
func TestShareNoDeadLetterRejects(t *testing.T) {
	const n = 10
	c := shareSetup(t, 1, n, 5*time.Minute)
	cl := client(t, c)
	var reported atomic.Int64
	var seen atomic.Int64
	done := make(chan struct{})
	p, err := process.NewShare(client(t, c), func(_ context.Context, r *riffle.Record) error {
		defer func() {
			if seen.Add(1) == n {
				close(done)
			}
		}()
		if r.Offset%2 == 1 {
			return errors.New("bad")
		}
		return nil
	}, shareOpts(), process.OnError(func(err error) {
		var re *process.RecordError
		if errors.As(err, &re) {
			reported.Add(1)
		}
	}))
	if err != nil {
		t.Fatal(err)
	}
	<-done
	if err := p.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if st := p.Stats(); st.Rejected != n/2 || st.Consumer.Rejected != n/2 || reported.Load() != n/2 {
		t.Fatalf("reported %d, stats %+v", reported.Load(), st)
	}
	drained(t, cl, 1, n)
}

// TestShareCloseCancelIsRelease: handlers that never finish are cancelled
// at Close's deadline; their records are released (not failed), and the
// next member gets them with delivery count 2.
func TestShareCloseCancelIsRelease(t *testing.T) {
	const n = 4
	c := shareSetup(t, 1, n, 5*time.Minute)
	cl := client(t, c)
	var started atomic.Int64
	all := make(chan struct{})
	p, err := process.NewShare(client(t, c), func(ctx context.Context, _ *riffle.Record) error {
		if started.Add(1) == n {
			close(all)
		}
		<-ctx.Done()
		return ctx.Err()
	}, shareOpts(), process.Concurrency(n), process.OnError(func(err error) { t.Errorf("reported: %v", err) }))
	if err != nil {
		t.Fatal(err)
	}
	<-all
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if err := p.Close(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("close: %v", err)
	}
	if st := p.Stats(); st.Released != n || st.Failed != 0 || st.Consumer.Acquired != 0 {
		t.Fatalf("stats %+v", st)
	}
	var again atomic.Int64
	done := make(chan struct{})
	p2, err := process.NewShare(client(t, c), func(_ context.Context, r *riffle.Record) error {
		if r.DeliveryCount != 2 {
			t.Errorf("%d: delivery count %d", r.Offset, r.DeliveryCount)
		}
		if again.Add(1) == n {
			close(done)
		}
		return nil
	}, shareOpts())
	if err != nil {
		t.Fatal(err)
	}
	<-done
	if err := p2.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	drained(t, cl, 1, n)
}
