package cluster

import (
	"context"
	"errors"
	"strings"

	"github.com/riffle-go/riffle/internal/conn"
	"github.com/riffle-go/riffle/internal/errs"
)

// AddrError is why one address could not be used.
type AddrError struct {
	Addr   string
	NodeID int32 // -1 for a seed
	Err    error
}

// Cause is a short classification: dial refused, timeout, dns, tls, auth,
// protocol, cancelled, backing off.
func (a AddrError) Cause() string {
	var de *conn.DialError
	if errors.As(a.Err, &de) {
		c := de.Cause()
		if strings.HasPrefix(a.Err.Error(), "backing off") {
			return "backing off after " + c
		}
		return c
	}
	if strings.HasPrefix(a.Err.Error(), "not tried") {
		return "not tried"
	}
	return "failed"
}

// UnreachableError says no broker could be reached, listing every address
// tried and why. It matches errs.ErrUnreachable, and errs.ErrAuth when every
// failure was an authentication failure.
type UnreachableError struct {
	Addrs []AddrError
	Ctx   error // the caller's context error, if it ended the attempt
}

// ExportUnreachable sets target to the exported twin of e (a copy as a
// riffle.UnreachableError: a type of its own, so that go doc shows its
// fields and methods) when target is a **riffle.UnreachableError, and
// reports whether it was. Package riffle registers it at init; through it,
// errors.As reaches the twin from the *UnreachableError made here.
var ExportUnreachable func(e *UnreachableError, target any) bool

// As sets target to e's exported twin (see ExportUnreachable).
func (e *UnreachableError) As(target any) bool {
	return ExportUnreachable != nil && ExportUnreachable(e, target)
}

func (e *UnreachableError) Error() string {
	var b strings.Builder
	b.WriteString("riffle: no broker reachable")
	if e.Ctx != nil {
		b.WriteString(" (" + e.Ctx.Error() + ")")
	}
	if len(e.Addrs) == 0 {
		b.WriteString(": no addresses to try")
	}
	for i, a := range e.Addrs {
		if i == 0 {
			b.WriteString(": ")
		} else {
			b.WriteString("; ")
		}
		b.WriteString(a.Addr + " (" + a.Cause() + ": " + a.Err.Error() + ")")
	}
	return b.String()
}

// Unwrap exposes ErrUnreachable, the context error, and ErrAuth when an
// authentication failure is among the causes (so callers can stop
// retrying bad credentials). When every address failed for good, it
// exposes their errors too, so the cause matches (errors.Is(err,
// ErrMalformed), errors.As(err, &x509.UnknownAuthorityError{})).
func (e *UnreachableError) Unwrap() []error {
	out := []error{errs.ErrUnreachable}
	if e.Ctx != nil {
		out = append(out, e.Ctx)
	}
	for _, a := range e.Addrs {
		if errors.Is(a.Err, errs.ErrAuth) {
			out = append(out, errs.ErrAuth)
			break
		}
	}
	if !e.Retriable() {
		for _, a := range e.Addrs {
			out = append(out, a.Err)
		}
	}
	return out
}

// Retriable reports whether another attempt may reach a broker: some
// address failed for a reason that can pass (refused, timeout, reset,
// backing off after one of those, not tried), or none was listed. When
// every address failed for good (a certificate not trusted, a peer that
// does not speak Kafka, bad credentials), retrying cannot help.
func (e *UnreachableError) Retriable() bool {
	if len(e.Addrs) == 0 {
		return true
	}
	for _, a := range e.Addrs {
		if errs.IsRetriable(a.Err) || errors.Is(a.Err, context.DeadlineExceeded) || errors.Is(a.Err, context.Canceled) {
			return true
		}
	}
	return false
}
