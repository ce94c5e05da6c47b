package cluster

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/riffle-go/riffle/internal/errs"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// returnsWithin fails the test if fn does not return within d: calls
// after Close must not hang, and a context without deadline would let
// them hang forever.
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

// TestCallsAfterClose checks that every call on a closed cluster fails at
// once with ErrClientClosed (which matches ErrClosed), even for a topic
// still in the snapshot and with a context that never ends.
func TestCallsAfterClose(t *testing.T) {
	fake, _ := newKfake(t)
	c := newTestCluster(t, Config{Seeds: fake.ListenAddrs()})
	ctx := context.Background()
	c.TrackTopics("a")
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	if err := c.RefreshMetadata(cctx); err != nil {
		t.Fatal(err)
	}
	cancel()
	if c.Snapshot().Topics["a"] == nil {
		t.Fatal("tracked topic a not in the snapshot")
	}
	c.Close()
	for name, call := range map[string]func() error{
		"RefreshMetadata": func() error { return c.RefreshMetadata(ctx) },
		"RefreshOnce":     func() error { _, err := c.RefreshOnce(ctx); return err },
		"LookupTopic":     func() error { _, err := c.LookupTopic(ctx, "a"); return err },
		"Leader":          func() error { _, err := c.Leader(ctx, "a", 0); return err },
		"Conn":            func() error { _, err := c.Conn(ctx, 0, ClassOther); return err },
		"Request":         func() error { _, err := c.Request(ctx, 0, ClassOther, kmsg.NewPtrApiVersionsRequest()); return err },
		"RequestAny":      func() error { _, err := c.RequestAny(ctx, kmsg.NewPtrApiVersionsRequest()); return err },
		"AnyConn":         func() error { _, err := c.AnyConn(ctx); return err },
	} {
		var err error
		returnsWithin(t, 5*time.Second, name, func() { err = call() })
		if !errors.Is(err, errs.ErrClientClosed) || !errors.Is(err, errs.ErrClosed) {
			t.Errorf("%s after Close: %v, want ErrClientClosed matching ErrClosed", name, err)
		}
	}
	returnsWithin(t, 5*time.Second, "second Close", c.Close)
}

// TestConcurrentClose checks that concurrent Close calls all return once
// everything stopped (goleak checks the goroutines), whichever ran it.
func TestConcurrentClose(t *testing.T) {
	fake, _ := newKfake(t)
	c := newTestCluster(t, Config{Seeds: fake.ListenAddrs()})
	cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.RefreshMetadata(cctx); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	returnsWithin(t, 5*time.Second, "concurrent Close", func() {
		for range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c.Close()
				select {
				case <-c.Closed():
				default:
					t.Error("Close returned before the cluster was closed")
				}
			}()
		}
		wg.Wait()
	})
}
