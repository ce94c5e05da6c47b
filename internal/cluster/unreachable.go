package cluster

import (
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
// retrying bad credentials).
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
	return out
}
