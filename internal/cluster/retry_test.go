package cluster

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/riffle-go/riffle/internal/conn"
	"github.com/riffle-go/riffle/internal/errs"
	"github.com/riffle-go/riffle/internal/kafkaerr"
)

// idleCluster is a Cluster that never dials: Retry needs no network.
func idleCluster(t *testing.T, retryTimeout time.Duration) *Cluster {
	return newTestCluster(t, Config{Seeds: []string{"127.0.0.1:1"}, RetryTimeout: retryTimeout})
}

func refused(addr string) AddrError {
	return AddrError{Addr: addr, NodeID: -1, Err: &conn.DialError{Addr: addr, Stage: conn.StageDial, Err: fmt.Errorf("connect: %w", errs.ErrConnClosed)}}
}

func malformed(addr string) AddrError {
	return AddrError{Addr: addr, NodeID: -1, Err: &conn.DialError{Addr: addr, Stage: conn.StageAPIVersions, Err: fmt.Errorf("bad frame: %w", errs.ErrMalformed)}}
}

// TestRetryErrors checks what Retry returns: the cause, always; the
// context's error when the caller's context ended; RetryTimeout when the
// budget ran out first; and no retries of what cannot succeed.
func TestRetryErrors(t *testing.T) {
	notLeader := kafkaerr.ForCode(kafkaerr.NotLeaderForPartition)
	unreachable := &UnreachableError{Addrs: []AddrError{refused("a:1"), refused("b:1")}}
	hopeless := &UnreachableError{Addrs: []AddrError{malformed("a:1"), malformed("b:1")}}
	tests := []struct {
		name     string
		callerTO time.Duration // 0: no deadline
		attempts func(n int, ctx context.Context) error
		maxCalls int32 // 0: any
		check    func(t *testing.T, err error)
	}{
		{
			name:     "permanent failure returned at once",
			attempts: func(int, context.Context) error { return hopeless },
			maxCalls: 1,
			check: func(t *testing.T, err error) {
				if !errors.Is(err, errs.ErrMalformed) || errors.Is(err, context.DeadlineExceeded) {
					t.Fatalf("got %v", err)
				}
			},
		},
		{
			name: "unreachable with one transient address is retried",
			attempts: func(n int, _ context.Context) error {
				if n < 3 {
					return &UnreachableError{Addrs: []AddrError{malformed("a:1"), refused("b:1")}}
				}
				return nil
			},
			check: func(t *testing.T, err error) {
				if err != nil {
					t.Fatal(err)
				}
			},
		},
		{
			name:     "budget runs out: RetryTimeout named, cause kept",
			attempts: func(int, context.Context) error { return fmt.Errorf("t[0]: %w", notLeader) },
			check: func(t *testing.T, err error) {
				if !strings.HasPrefix(err.Error(), "gave up after RetryTimeout 100ms: t[0]: NOT_LEADER") ||
					!errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, notLeader) {
					t.Fatalf("got %v", err)
				}
			},
		},
		{
			name: "budget cuts an attempt short: the earlier cause is kept",
			attempts: func(n int, ctx context.Context) error {
				if n == 1 {
					return unreachable
				}
				<-ctx.Done()
				return ctx.Err()
			},
			check: func(t *testing.T, err error) {
				var ue *UnreachableError
				if !errors.As(err, &ue) || ue.Ctx != nil || !strings.Contains(err.Error(), "RetryTimeout") {
					t.Fatalf("got %v", err)
				}
			},
		},
		{
			name:     "caller's deadline: unreachable error kept, with the deadline",
			callerTO: 50 * time.Millisecond,
			attempts: func(int, context.Context) error { return unreachable },
			check: func(t *testing.T, err error) {
				var ue *UnreachableError
				if !errors.As(err, &ue) || !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, errs.ErrUnreachable) ||
					!strings.Contains(err.Error(), "a:1") || strings.Contains(err.Error(), "RetryTimeout") {
					t.Fatalf("got %v", err)
				}
			},
		},
		{
			name:     "caller's deadline: other causes joined",
			callerTO: 50 * time.Millisecond,
			attempts: func(int, context.Context) error { return notLeader },
			check: func(t *testing.T, err error) {
				if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, notLeader) ||
					err.Error() != "context deadline exceeded (last error: "+notLeader.Error()+")" {
					t.Fatalf("got %v", err)
				}
			},
		},
		{
			name:     "caller's deadline with no cause: the context's error",
			callerTO: 50 * time.Millisecond,
			attempts: func(_ int, ctx context.Context) error { <-ctx.Done(); return ctx.Err() },
			check: func(t *testing.T, err error) {
				if err != context.DeadlineExceeded {
					t.Fatalf("got %v", err)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := idleCluster(t, 100*time.Millisecond)
			ctx := context.Background()
			if tt.callerTO > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tt.callerTO)
				defer cancel()
			}
			var calls atomic.Int32
			err := c.Retry(ctx, func(ctx context.Context) error { return tt.attempts(int(calls.Add(1)), ctx) })
			tt.check(t, err)
			if tt.maxCalls > 0 && calls.Load() > tt.maxCalls {
				t.Fatalf("%d attempts, want at most %d", calls.Load(), tt.maxCalls)
			}
		})
	}
}

// TestRetryNested checks that a Retry inside a Retry reports the budget
// once, not "gave up after ...: gave up after ...".
func TestRetryNested(t *testing.T) {
	c := idleCluster(t, 100*time.Millisecond)
	err := c.Retry(context.Background(), func(ctx context.Context) error {
		return c.Retry(ctx, func(context.Context) error { return errs.ErrConnClosed })
	})
	if strings.Count(err.Error(), "gave up") != 1 || !errors.Is(err, errs.ErrConnClosed) {
		t.Fatalf("got %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	err = c.Retry(ctx, func(ctx context.Context) error {
		return c.Retry(ctx, func(context.Context) error { return errs.ErrConnClosed })
	})
	if strings.Count(err.Error(), "deadline exceeded") != 1 || !errors.Is(err, errs.ErrConnClosed) {
		t.Fatalf("got %v", err)
	}
}

// TestUnreachableRetriable checks the classification an unreachable
// error gets from its addresses.
func TestUnreachableRetriable(t *testing.T) {
	for _, tc := range []struct {
		name  string
		addrs []AddrError
		want  bool
	}{
		{"no addresses", nil, true},
		{"refused", []AddrError{refused("a:1")}, true},
		{"all malformed", []AddrError{malformed("a:1"), malformed("b:1")}, false},
		{"one refused", []AddrError{malformed("a:1"), refused("b:1")}, true},
		{"backing off after malformed", []AddrError{{Addr: "a:1", Err: fmt.Errorf("backing off after: %w", malformed("a:1").Err)}}, false},
		{"not tried", []AddrError{malformed("a:1"), {Addr: "b:1", Err: fmt.Errorf("not tried: %w", context.DeadlineExceeded)}}, true},
	} {
		ue := &UnreachableError{Addrs: tc.addrs}
		if got := errs.IsRetriable(ue); got != tc.want {
			t.Errorf("%s: retriable %v, want %v", tc.name, got, tc.want)
		}
		if got := errs.IsRetriable(fmt.Errorf("wrapped: %w", ue)); got != tc.want {
			t.Errorf("%s wrapped: retriable %v, want %v", tc.name, got, tc.want)
		}
	}
}
