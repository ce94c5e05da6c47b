package process_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/riffle-go/riffle"
	"github.com/riffle-go/riffle/process"
	"github.com/riffle-go/riffle/rifftest"
)

// returnsWithin runs fn and fails the test if it has not returned within
// d, so that a call hanging on a context without deadline fails the test
// instead of stalling it.
func returnsWithin(t *testing.T, d time.Duration, what string, fn func()) {
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

// TestCallsAfterClose checks that a closed processor's calls return
// ErrProcessorClosed (matching riffle.ErrClosed) at once, with a context
// that never ends, and that concurrent Close calls each return only once
// the running records' handlers returned.
func TestCallsAfterClose(t *testing.T) {
	_, cl := setup(t, rifftest.Topic("c", 2))
	produce(t, cl, "c", 2, 10, nil)
	release := make(chan struct{})
	var started, returned atomic.Int32
	pr, err := process.New(cl, func(ctx context.Context, r *riffle.Record) error {
		started.Add(1)
		defer returned.Add(1)
		<-release
		return nil
	}, process.Concurrency(4), process.ConsumerOptions(groupOpts("gc", "c")...))
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, "records running", func() bool { return started.Load() > 0 })

	var wg sync.WaitGroup
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := pr.Close(context.Background()); err != nil {
				t.Error(err)
			}
			if s, r := started.Load(), returned.Load(); s != r {
				t.Errorf("Close returned with %d of %d handlers still running", s-r, s)
			}
		}()
	}
	close(release)
	returnsWithin(t, 20*time.Second, "concurrent Close", wg.Wait)

	ctx := context.Background()
	for name, call := range map[string]func() error{
		"Commit": func() error { return pr.Commit(ctx) },
		"Assign": func() error { return pr.Assign(riffle.Assignment{TopicPartition: riffle.TopicPartition{Topic: "c"}}) },
		"Close":  func() error { return pr.Close(ctx) },
	} {
		var err error
		returnsWithin(t, 5*time.Second, name, func() { err = call() })
		if name == "Close" {
			if err != nil {
				t.Errorf("second Close: %v, want nil", err)
			}
			continue
		}
		if !errors.Is(err, process.ErrProcessorClosed) || !errors.Is(err, riffle.ErrClosed) {
			t.Errorf("%s after Close: %v, want ErrProcessorClosed (matching riffle.ErrClosed)", name, err)
		}
	}
}

// TestSecondCloseHonoursContext checks that a Close called while another
// waits for running records returns when its own ctx ends.
func TestSecondCloseHonoursContext(t *testing.T) {
	_, cl := setup(t, rifftest.Topic("s", 1))
	produce(t, cl, "s", 1, 1, nil)
	release := make(chan struct{})
	started := make(chan struct{}, 1)
	pr, err := process.New(cl, func(context.Context, *riffle.Record) error {
		select {
		case started <- struct{}{}:
		default:
		}
		<-release // ignores ctx: Close waits for it
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	a := riffle.Assignment{TopicPartition: riffle.TopicPartition{Topic: "s"}, Start: riffle.AtEarliest()}
	if err := pr.Assign(a); err != nil {
		t.Fatal(err)
	}
	<-started
	first := make(chan error, 1)
	go func() { first <- pr.Close(context.Background()) }()
	waitFor(t, 30*time.Second, "Close to start", func() bool { return pr.Assign(a) != nil })
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	var got error
	returnsWithin(t, 5*time.Second, "second Close", func() { got = pr.Close(ctx) })
	if !errors.Is(got, context.DeadlineExceeded) {
		t.Errorf("second Close while the first drains: %v, want its ctx's error", got)
	}
	close(release)
	returnsWithin(t, 10*time.Second, "first Close", func() { got = <-first })
	if got != nil {
		t.Fatal(got)
	}
}
