package riffle

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// returnsWithin runs fn and fails the test if it has not returned within
// d. Calls after Close use contexts without deadline: a call that waits
// for something that will never come would otherwise stall the test
// instead of failing it.
func returnsWithin(t testing.TB, d time.Duration, what string, fn func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn()
	}()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("%s did not return within %v", what, d)
	}
}

// wantClosed checks that err is sentinel and matches ErrClosed.
func wantClosed(t testing.TB, what string, err, sentinel error) {
	t.Helper()
	if !errors.Is(err, sentinel) || !errors.Is(err, ErrClosed) {
		t.Errorf("%s after Close: %v, want %v (matching ErrClosed)", what, err, sentinel)
	}
}

// TestClosedErrorsMatchErrClosed checks the sentinels' relations: each
// object's closed error matches ErrClosed, and not another object's.
func TestClosedErrorsMatchErrClosed(t *testing.T) {
	all := []error{ErrClientClosed, ErrProducerClosed, ErrConsumerClosed}
	for i, a := range all {
		if !errors.Is(a, ErrClosed) {
			t.Errorf("%v does not match ErrClosed", a)
		}
		if IsRetriable(a) {
			t.Errorf("%v is retriable", a)
		}
		for j, b := range all {
			if i != j && errors.Is(a, b) {
				t.Errorf("%v matches %v", a, b)
			}
		}
	}
	if errors.Is(ErrClosed, ErrClientClosed) {
		t.Error("ErrClosed matches ErrClientClosed: the general error must not match a specific one")
	}
}

// TestProducerCallsAfterClose checks that every producer call after Close
// fails at once with ErrProducerClosed, including Flush, and that Close
// is idempotent.
func TestProducerCallsAfterClose(t *testing.T) {
	fake := newFake(t, kfake.NumBrokers(1), kfake.SeedTopics(1, "t"))
	cl := newTestClient(t, SeedBrokers(fake.ListenAddrs()...))
	p, err := NewProducer(cl)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background() // no deadline: a hang would be forever
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := p.ProduceSync(cctx, &Record{Topic: "t", Value: []byte("v")}); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(cctx); err != nil {
		t.Fatal(err)
	}

	var got error
	returnsWithin(t, 5*time.Second, "Produce", func() {
		fired := make(chan error, 1)
		p.Produce(ctx, &Record{Topic: "t", Value: []byte("late")}, func(_ *Record, err error) { fired <- err })
		got = <-fired
	})
	wantClosed(t, "Produce", got, ErrProducerClosed)
	returnsWithin(t, 5*time.Second, "ProduceSync", func() {
		got = p.ProduceSync(ctx, &Record{Topic: "t", Value: []byte("late")})
	})
	wantClosed(t, "ProduceSync", got, ErrProducerClosed)
	returnsWithin(t, 5*time.Second, "Flush", func() { got = p.Flush(ctx) })
	wantClosed(t, "Flush", got, ErrProducerClosed)
	returnsWithin(t, 5*time.Second, "second Close", func() { got = p.Close(ctx) })
	if got != nil {
		t.Errorf("second Close: %v, want nil", got)
	}
}

// TestProducerConcurrentClose checks that concurrent Close calls all
// return only once every callback fired and every goroutine stopped.
func TestProducerConcurrentClose(t *testing.T) {
	fake := newFake(t, kfake.NumBrokers(1), kfake.SeedTopics(1, "t"))
	cl := newTestClient(t, SeedBrokers(fake.ListenAddrs()...))
	p, err := NewProducer(cl, Linger(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	const n = 100
	var fired atomic.Int32
	for range n {
		p.Produce(context.Background(), &Record{Topic: "t", Value: []byte("v")}, func(_ *Record, err error) {
			if err != nil {
				t.Error(err)
			}
			fired.Add(1)
		})
	}
	var wg sync.WaitGroup
	returnsWithin(t, 10*time.Second, "concurrent Close", func() {
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := p.Close(context.Background()); err != nil {
					t.Error(err)
				}
				if got := fired.Load(); got != n {
					t.Errorf("Close returned with %d of %d callbacks fired", got, n)
				}
			}()
		}
		wg.Wait()
	})
}

// TestProducerOnClosedClient checks that a producer whose client closed
// fails records at once, even for a topic it already knows (whose
// metadata is cached), instead of retrying until the delivery timeout.
func TestProducerOnClosedClient(t *testing.T) {
	fake := newFake(t, kfake.NumBrokers(1), kfake.SeedTopics(1, "t"))
	cl := newTestClient(t, SeedBrokers(fake.ListenAddrs()...))
	p, err := NewProducer(cl)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(context.Background())
	cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := p.ProduceSync(cctx, &Record{Topic: "t", Value: []byte("v")}); err != nil {
		t.Fatal(err)
	}
	cl.Close()
	var got error
	returnsWithin(t, 5*time.Second, "ProduceSync on a closed client", func() {
		got = p.ProduceSync(context.Background(), &Record{Topic: "t", Value: []byte("late")})
	})
	wantClosed(t, "ProduceSync on a closed client", got, ErrClientClosed)
}

// TestConsumerCallsAfterClose checks that every call on a closed group
// consumer returns ErrConsumerClosed at once with a context that never
// ends: before, Commit waited for a committer goroutine that was gone.
func TestConsumerCallsAfterClose(t *testing.T) {
	fake := newFake(t, kfake.NumBrokers(1), kfake.SeedTopics(2, "t"))
	cl := newTestClient(t, SeedBrokers(fake.ListenAddrs()...))
	cs, err := NewConsumer(cl, ConsumerGroup("g"), SubscribeTopics("t"),
		HeartbeatInterval(100*time.Millisecond), HandleRecord(func(context.Context, *Record) error { return nil }))
	if err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 20*time.Second, func() bool { return len(cs.Stats().Partitions) == 2 }, func() string { return statsString(cs) })
	closeConsumer(t, cs)

	ctx := context.Background()
	tp := TopicPartition{"t", 0}
	for name, call := range map[string]func() error{
		"Commit":        func() error { return cs.Commit(ctx) },
		"CommitOffsets": func() error { return cs.CommitOffsets(ctx, map[TopicPartition]int64{tp: 1}) },
		"CommitAsync": func() error {
			ch := make(chan error, 1)
			cs.CommitAsync(func(err error) { ch <- err })
			return <-ch
		},
		"Assign":   func() error { return cs.Assign(Assignment{tp, AtEarliest()}) },
		"Unassign": func() error { _, err := cs.Unassign(ctx, tp); return err },
		"Pause":    func() error { return cs.Pause(tp) },
		"Resume":   func() error { return cs.Resume(tp) },
	} {
		var err error
		returnsWithin(t, 5*time.Second, name, func() { err = call() })
		wantClosed(t, name, err, ErrConsumerClosed)
	}
	// The committer itself, as the member uses it, answers too.
	returnsWithin(t, 5*time.Second, "committer", func() {
		err = cs.member.commits.commitSync(ctx, map[TopicPartition]int64{tp: 1}, nil, nil)
	})
	wantClosed(t, "committer commitSync", err, ErrConsumerClosed)
	returnsWithin(t, 5*time.Second, "second Close", func() { _, err = cs.Close(ctx) })
	if err != nil {
		t.Errorf("second Close: %v, want nil", err)
	}
}

// TestConsumerConcurrentClose checks that concurrent Close calls of a
// group consumer all return, each only once the client is free for
// another group member, and leave nothing running (goleak).
func TestConsumerConcurrentClose(t *testing.T) {
	fake := newFake(t, kfake.NumBrokers(1), kfake.SeedTopics(2, "t"))
	cl := newTestClient(t, SeedBrokers(fake.ListenAddrs()...))
	opts := []ConsumerOption{ConsumerGroup("g"), SubscribeTopics("t"),
		HeartbeatInterval(100 * time.Millisecond), HandleRecord(func(context.Context, *Record) error { return nil })}
	cs, err := NewConsumer(cl, opts...)
	if err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 20*time.Second, func() bool { return len(cs.Stats().Partitions) == 2 }, func() string { return statsString(cs) })
	var wg sync.WaitGroup
	returnsWithin(t, 20*time.Second, "concurrent Close", func() {
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := cs.Close(context.Background()); err != nil {
					t.Error(err)
				}
				if cl.groupMember.Load() {
					t.Error("Close returned while the client still had the member")
				}
			}()
		}
		wg.Wait()
	})
	// The client takes a new member at once.
	cs2, err := NewConsumer(cl, opts...)
	if err != nil {
		t.Fatal(err)
	}
	closeConsumer(t, cs2)
}

// TestClientCallsAfterClose checks that client calls after Close fail at
// once with ErrClientClosed, including lookups of topics whose metadata
// is cached.
func TestClientCallsAfterClose(t *testing.T) {
	fake := newFake(t, kfake.NumBrokers(1), kfake.SeedTopics(2, "t"))
	cl := newTestClient(t, SeedBrokers(fake.ListenAddrs()...))
	cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := cl.Admin().ListOffsets(cctx, OffsetLatest, "t"); err != nil {
		t.Fatal(err)
	}
	cl.Close()
	ctx := context.Background()
	adm := cl.Admin()
	for name, call := range map[string]func() error{
		"Ping":        func() error { return cl.Ping(ctx) },
		"Request":     func() error { _, err := cl.Request(ctx, kmsg.NewPtrMetadataRequest()); return err },
		"Brokers":     func() error { _, err := cl.Brokers(ctx); return err },
		"ListTopics":  func() error { _, err := adm.ListTopics(ctx); return err },
		"ListOffsets": func() error { _, err := adm.ListOffsets(ctx, OffsetLatest, "t"); return err },
		"ListGroups":  func() error { _, err := adm.ListGroups(ctx); return err },
	} {
		var err error
		returnsWithin(t, 5*time.Second, name, func() { err = call() })
		wantClosed(t, name, err, ErrClientClosed)
	}
	var wg sync.WaitGroup
	returnsWithin(t, 5*time.Second, "concurrent Close", func() {
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				cl.Close()
			}()
		}
		wg.Wait()
	})
}

// TestConsumerSecondCloseHonoursContext checks that a Close called while
// another is still draining waits for it only as long as its own ctx.
func TestConsumerSecondCloseHonoursContext(t *testing.T) {
	fake := newFake(t, kfake.NumBrokers(1), kfake.SeedTopics(1, "t"))
	cl := newTestClient(t, SeedBrokers(fake.ListenAddrs()...))
	produceN(t, cl, "t", 1, 1)
	release := make(chan struct{})
	started := make(chan struct{}, 1)
	cs, err := NewConsumer(cl, HandleRecord(func(context.Context, *Record) error {
		select {
		case started <- struct{}{}:
		default:
		}
		<-release // ignores ctx: Close waits for it
		return nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	assignAll(t, cs, "t", 1, AtEarliest())
	<-started
	first := make(chan error, 1)
	go func() {
		_, err := cs.Close(context.Background())
		first <- err
	}()
	// Assign fails once the first Close started.
	waitUntil(t, 30*time.Second, func() bool { return cs.Assign(Assignment{TopicPartition{"t", 0}, AtEarliest()}) != nil }, func() string { return "Close did not start" })
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	var got error
	returnsWithin(t, 5*time.Second, "second Close", func() { _, got = cs.Close(ctx) })
	if !errors.Is(got, context.DeadlineExceeded) {
		t.Errorf("second Close while the first drains: %v, want its ctx's error", got)
	}
	close(release)
	returnsWithin(t, 10*time.Second, "first Close", func() { got = <-first })
	if got != nil {
		t.Fatal(got)
	}
}
