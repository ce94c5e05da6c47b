package cluster

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/riffle-go/riffle/internal/errs"
)

// Retry calls fn until it succeeds, fails for a reason retrying cannot fix
// (errs.IsRetriable: bad credentials, a certificate not trusted, a peer
// that does not speak Kafka), the caller's ctx ends, or the retry budget
// (RetryTimeout) runs out. Between attempts it backs off (KIP-580).
//
// An error that ends the retries always carries the cause: when ctx ends
// it wraps ctx's error and the last failure (an *UnreachableError keeps
// its type and gains the context's error), and when the budget runs out
// first it says so, naming RetryTimeout rather than a context the caller
// never set, and wraps context.DeadlineExceeded and the last failure.
func (c *Cluster) Retry(ctx context.Context, fn func(context.Context) error) error {
	return c.retryFor(ctx, "RetryTimeout", c.cfg.RetryTimeout, fn)
}

// retryFor is Retry with a budget other than RetryTimeout, named name in
// the error when it runs out.
func (c *Cluster) retryFor(ctx context.Context, name string, limit time.Duration, fn func(context.Context) error) error {
	budget, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	var cause error // the last failure that says more than a context's end
	for attempt := 1; ; attempt++ {
		err := fn(budget)
		if err == nil {
			return nil
		}
		if c.ctx.Err() != nil {
			return errs.ErrClientClosed
		}
		var rt *retryTimeoutError
		if errors.As(err, &rt) && ctx.Err() == nil {
			return err // a nested Retry's budget, which is ours too
		}
		if ce := causeOf(err); ce != nil {
			cause = ce
		}
		switch {
		case ctx.Err() != nil:
			return withCtx(cause, ctx.Err())
		case !errs.IsRetriable(err) && !errors.Is(err, context.DeadlineExceeded):
			return err
		case budget.Err() != nil:
			return gaveUp(name, limit, cause, err)
		}
		c.log.Debug("retrying", "attempt", attempt, "err", err)
		t := time.NewTimer(c.cfg.RetryBackoff.Delay(attempt, rand.Float64()))
		select {
		case <-t.C:
		case <-budget.Done():
			t.Stop()
			if ctx.Err() != nil {
				return withCtx(cause, ctx.Err())
			}
			return gaveUp(name, limit, cause, err)
		case <-c.ctx.Done():
			t.Stop()
			return errs.ErrClientClosed
		}
	}
}

func gaveUp(name string, budget time.Duration, cause, last error) error {
	if cause == nil {
		cause = last
	}
	return &retryTimeoutError{name: name, budget: budget, cause: cause}
}

// retryTimeoutError: the retry budget ran out before the caller's context.
type retryTimeoutError struct {
	name   string // the option that set the budget
	budget time.Duration
	cause  error
}

func (e *retryTimeoutError) Error() string {
	return fmt.Sprintf("gave up after %s %v: %v", e.name, e.budget, e.cause)
}

func (e *retryTimeoutError) Unwrap() []error { return []error{context.DeadlineExceeded, e.cause} }

// ctxError is a context's end together with the failure before it.
type ctxError struct {
	ctx  error
	last error
}

func (e *ctxError) Error() string { return fmt.Sprintf("%v (last error: %v)", e.ctx, e.last) }

func (e *ctxError) Unwrap() []error { return []error{e.ctx, e.last} }

// withCtx joins a context's end with the failure that preceded it. An
// *UnreachableError stays one (its addresses are the point), recording the
// context's error.
func withCtx(cause, ctxErr error) error {
	var ue *UnreachableError
	switch {
	case cause == nil:
		return ctxErr
	case errors.As(cause, &ue) && ue == cause:
		cp := *ue
		cp.Ctx = ctxErr
		return &cp
	case errors.Is(cause, ctxErr):
		return cause
	}
	return &ctxError{ctx: ctxErr, last: cause}
}

// causeOf returns the failure in err without a context's end: nil for a
// bare context error.
func causeOf(err error) error {
	var ce *ctxError
	var ue *UnreachableError
	switch {
	case err == context.DeadlineExceeded || err == context.Canceled:
		return nil
	case errors.As(err, &ce) && ce == err:
		return ce.last
	case errors.As(err, &ue) && ue == err && ue.Ctx != nil:
		cp := *ue
		cp.Ctx = nil
		return &cp
	}
	return err
}
