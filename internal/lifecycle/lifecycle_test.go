package lifecycle

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestStages checks what each stage allows.
func TestStages(t *testing.T) {
	for _, tc := range []struct {
		name                   string
		enter                  func(*Group)
		closing, stopping, gos bool
		done                   bool
	}{
		{"open", func(*Group) {}, false, false, true, false},
		{"closing", func(g *Group) { g.Close() }, true, false, true, false},
		{"stopping", func(g *Group) { g.Close(); g.Stop() }, true, true, false, false},
		{"stop without close", func(g *Group) { g.Stop() }, true, true, false, false},
		{"finished", func(g *Group) { g.Close(); g.Stop(); g.Wait(); g.Finish() }, true, true, false, true},
		{"finish alone", func(g *Group) { g.Finish() }, true, true, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := New()
			tc.enter(g)
			if got := g.Closing(); got != tc.closing {
				t.Errorf("Closing() = %v, want %v", got, tc.closing)
			}
			if got := g.Stopping(); got != tc.stopping {
				t.Errorf("Stopping() = %v, want %v", got, tc.stopping)
			}
			if got := g.Context().Err() != nil; got != tc.stopping {
				t.Errorf("context cancelled = %v, want %v", got, tc.stopping)
			}
			var ran atomic.Bool
			if got := g.Go(func() { ran.Store(true) }); got != tc.gos {
				t.Errorf("Go() = %v, want %v", got, tc.gos)
			}
			g.Stop()
			g.Wait()
			if ran.Load() != tc.gos {
				t.Errorf("fn ran = %v, want %v", ran.Load(), tc.gos)
			}
			select {
			case <-g.Done():
				if !tc.done {
					t.Error("Done closed before Finish")
				}
			default:
				if tc.done {
					t.Error("Done not closed after Finish")
				}
			}
			g.Finish()
		})
	}
}

// TestCloseOnce checks that exactly one of many concurrent Close calls
// owns the shutdown, and that the others' AwaitDone returns once it
// finished.
func TestCloseOnce(t *testing.T) {
	g := New()
	var owners atomic.Int32
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if g.Close() {
				owners.Add(1)
				g.Stop()
				g.Wait()
				g.Finish()
				return
			}
			errs <- g.AwaitDone(context.Background())
		}()
	}
	wg.Wait()
	close(errs)
	if n := owners.Load(); n != 1 {
		t.Fatalf("%d callers own the shutdown, want 1", n)
	}
	for err := range errs {
		if err != nil {
			t.Fatalf("AwaitDone: %v", err)
		}
	}
}

// TestAwaitDoneHonoursContext checks that a later Close never waits past
// its context for a first Close that does not finish.
func TestAwaitDoneHonoursContext(t *testing.T) {
	g := New()
	g.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := g.AwaitDone(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("AwaitDone = %v, want context.Canceled", err)
	}
	g.Finish()
	if err := g.AwaitDone(ctx); err != nil {
		t.Fatalf("AwaitDone after Finish = %v, want nil (done wins over a dead context)", err)
	}
}

// TestStopWaitsForOwned checks that Stop cancels the context the owned
// goroutines watch and Wait returns only once they all returned.
func TestStopWaitsForOwned(t *testing.T) {
	g := New()
	var exited atomic.Int32
	for range 8 {
		g.Go(func() {
			<-g.Context().Done()
			time.Sleep(time.Millisecond)
			exited.Add(1)
		})
	}
	g.Stop()
	g.Wait()
	if n := exited.Load(); n != 8 {
		t.Fatalf("Wait returned with %d of 8 goroutines exited", n)
	}
}

// TestGoAllOrNothing checks that the functions of one Go call start
// together or not at all.
func TestGoAllOrNothing(t *testing.T) {
	g := New()
	var n atomic.Int32
	if !g.Go(func() { n.Add(1) }, func() { n.Add(1) }) {
		t.Fatal("Go refused while open")
	}
	g.Stop()
	if g.Go(func() { n.Add(10) }, func() { n.Add(10) }) {
		t.Fatal("Go accepted while stopping")
	}
	g.Wait()
	if got := n.Load(); got != 2 {
		t.Fatalf("ran %d, want both of the first call and none of the second", got)
	}
}

// TestGoRacesStop hammers Go against Stop and Wait: every accepted
// goroutine has run when Wait returns, and none starts after (the race
// detector flags a WaitGroup Add racing Wait).
func TestGoRacesStop(t *testing.T) {
	for range 50 {
		g := New()
		var accepted, ran atomic.Int32
		var callers sync.WaitGroup
		for range 4 {
			callers.Add(1)
			go func() {
				defer callers.Done()
				for range 50 {
					if g.Go(func() { ran.Add(1) }) {
						accepted.Add(1)
					}
				}
			}()
		}
		g.Stop()
		g.Wait()
		atWait := ran.Load()
		callers.Wait()
		if a := accepted.Load(); a != atWait || ran.Load() != atWait {
			t.Fatalf("accepted %d, ran %d by Wait, %d in the end", a, atWait, ran.Load())
		}
	}
}
