// Package lifecycle is the one shutdown story of the client's long-lived
// objects (cluster, producer, consumer, processor), as net/http's Server
// has one: it owns their goroutines and the steps of their Close.
//
// An object's life has three stages:
//
//   - open: Go starts goroutines, public calls work;
//   - closing (Close was called): public calls fail at once with the
//     object's ErrClosed, while Close drains; goroutines may still start,
//     since draining can need them (a producer's flush dials a broker);
//   - stopping (Stop was called): Go refuses, and the context every owned
//     goroutine watches is cancelled; Wait returns once all have returned.
//
// Finish marks the end of Close, so a second or concurrent Close waits for
// the first (Done, AwaitDone) instead of racing it.
package lifecycle

import (
	"context"
	"sync"
	"sync/atomic"
)

// Group owns an object's goroutines and shutdown. The zero value is not
// usable; create one with New. Safe for concurrent use.
type Group struct {
	ctx    context.Context // cancelled by Stop
	cancel context.CancelFunc

	closing atomic.Bool // Close was called

	mu       sync.Mutex // orders Go against Stop: no Add after Wait may run
	stopping bool
	wg       sync.WaitGroup

	finish sync.Once
	done   chan struct{} // closed by Finish
}

// New returns an open Group.
func New() *Group {
	ctx, cancel := context.WithCancel(context.Background())
	return &Group{ctx: ctx, cancel: cancel, done: make(chan struct{})}
}

// Context is cancelled when the Group stops; owned goroutines watch it.
func (g *Group) Context() context.Context { return g.ctx }

// Go starts each fn on its own goroutine, owned by the Group, and returns
// true; once the Group is stopping it starts none of them and returns
// false. The functions start together or not at all, for goroutines that
// only work in pairs (a sender and the reader of its answers).
func (g *Group) Go(fns ...func()) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.stopping {
		return false
	}
	g.wg.Add(len(fns))
	for _, fn := range fns {
		go func() {
			defer g.wg.Done()
			fn()
		}()
	}
	return true
}

// Close marks the Group closing and reports whether this call did: the
// first caller owns the shutdown (drain, Stop, Wait, Finish); later ones
// wait for it with Done or AwaitDone.
func (g *Group) Close() bool { return !g.closing.Swap(true) }

// Closing reports whether Close was called. Public methods check it to
// fail at once with the object's ErrClosed.
func (g *Group) Closing() bool { return g.closing.Load() }

// Stop refuses new goroutines and cancels the Context, without waiting.
// It also marks the Group closing. Idempotent.
func (g *Group) Stop() {
	g.closing.Store(true)
	g.mu.Lock()
	g.stopping = true
	g.mu.Unlock()
	g.cancel()
}

// Stopping reports whether Stop was called.
func (g *Group) Stopping() bool { return g.ctx.Err() != nil }

// Wait waits for every goroutine started by Go. Call it after Stop, or
// when the goroutines end by themselves.
func (g *Group) Wait() { g.wg.Wait() }

// Finish marks the shutdown complete, releasing Done. It stops the Group
// first if that was not done, but does not wait. Idempotent.
func (g *Group) Finish() {
	g.Stop()
	g.finish.Do(func() { close(g.done) })
}

// Done is closed when Finish was called.
func (g *Group) Done() <-chan struct{} { return g.done }

// AwaitDone waits until Finish was called or ctx ends (then it returns
// ctx's error; a finished Group wins over an ended ctx).
func (g *Group) AwaitDone(ctx context.Context) error {
	select {
	case <-g.done:
		return nil
	default:
	}
	select {
	case <-g.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
