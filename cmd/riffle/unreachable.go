package main

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/riffle-go/riffle"
)

// bootstrapWait is how long connect waits for a first answer from the
// seed brokers before the command starts. When every address refused the
// connection or did not resolve by then, the command fails at once instead
// of retrying until --timeout; otherwise (an answer, a dial still
// running, a TLS or SASL failure) the command goes on with the normal
// timeouts, so a slow but live cluster still works.
const bootstrapWait = time.Second

// bootstrapError is the failure of a command whose seed brokers all
// refused or did not resolve.
type bootstrapError struct{ ue *riffle.UnreachableError }

func (e *bootstrapError) Error() string { return unreachableLine(e.ue) }
func (e *bootstrapError) Unwrap() error { return e.ue }

// bootstrap checks that some seed broker answers. It fails only when
// every address failed fast (see bootstrapWait); the library keeps its
// own retry budget (RetryTimeout) for everything else.
func (a *app) bootstrap(cl *riffle.Client) error {
	ctx, cancel := context.WithTimeout(a.context(), bootstrapWait)
	defer cancel()
	// The client warns about the first failed metadata refresh; what
	// bootstrap makes of it is reported instead.
	a.logQuiet.Store(true)
	defer a.logQuiet.Store(false)
	err := cl.Ping(ctx)
	var ue *riffle.UnreachableError
	if err == nil || !errors.As(err, &ue) || !allFailedFast(ue) {
		return nil
	}
	return &bootstrapError{ue}
}

// allFailedFast reports whether every address of ue was refused or did
// not resolve: failures that retrying within seconds will not fix.
func allFailedFast(ue *riffle.UnreachableError) bool {
	if len(ue.Addrs) == 0 {
		return false
	}
	for _, ae := range ue.Addrs {
		var dnsErr *net.DNSError
		switch {
		case errors.Is(ae.Err, syscall.ECONNREFUSED):
		case errors.As(ae.Err, &dnsErr) && !dnsErr.IsTimeout && !dnsErr.IsTemporary:
		default:
			return false
		}
	}
	return true
}

// unreachableLine renders ue on one line: "no broker reachable:" then
// each address with why it failed, addresses that failed the same way
// grouped, every cause said once.
func unreachableLine(ue *riffle.UnreachableError) string {
	return "no broker reachable: " + groupReasons(ue.Addrs)
}

// unreachableText is errText(err) with the library's unreachable error,
// where err has one, rendered by unreachableLine (its own text repeats
// the cause of each address up to three times).
func unreachableText(err error) string {
	msg := errText(err)
	var ue *riffle.UnreachableError
	if !errors.As(err, &ue) || len(ue.Addrs) == 0 {
		return msg
	}
	if full := ue.Error(); strings.Contains(msg, full) {
		return strings.Replace(msg, full, unreachableLine(ue), 1)
	}
	if full := errText(ue); strings.Contains(msg, full) {
		return strings.Replace(msg, full, unreachableLine(ue), 1)
	}
	return msg
}

// groupReasons renders addresses and their failures as
// "a:1, b:2: connection refused; c:3: no such host", sorted by address.
func groupReasons(addrs []riffle.AddrError) string {
	addrs = slices.Clone(addrs)
	slices.SortStableFunc(addrs, func(a, b riffle.AddrError) int { return strings.Compare(a.Addr, b.Addr) })
	var reasons []string
	byReason := map[string][]string{}
	for _, ae := range addrs {
		r := addrReason(ae)
		if !slices.Contains(byReason[r], ae.Addr) {
			if byReason[r] == nil {
				reasons = append(reasons, r)
			}
			byReason[r] = append(byReason[r], ae.Addr)
		}
	}
	parts := make([]string, len(reasons))
	for i, r := range reasons {
		parts[i] = strings.Join(byReason[r], ", ") + ": " + r
	}
	return strings.Join(parts, "; ")
}

// addrReason says in a few words why one address failed: "connection
// refused", "no such host", "timeout (no answer after 1s)", "tls
// (x509: certificate signed by unknown authority)". That the client is now
// backing off after the failure is left out.
func addrReason(ae riffle.AddrError) string {
	var dnsErr *net.DNSError
	var opErr *net.OpError
	switch {
	case errors.Is(ae.Err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.As(ae.Err, &dnsErr) && dnsErr.IsNotFound:
		return "no such host"
	case errors.As(ae.Err, &dnsErr):
		return "DNS lookup failed (" + dnsErr.Err + ")"
	}
	cause := strings.TrimPrefix(ae.Cause(), "backing off after ")
	if cause == "not tried" || cause == "cancelled" {
		return cause
	}
	detail := dialDetail(ae)
	if errors.As(ae.Err, &opErr) && opErr.Err != nil && strings.Contains(detail, opErr.Err.Error()) {
		detail = opErr.Err.Error() // without "dial tcp ADDR: "
	}
	detail = strings.TrimSuffix(detail, ": "+context.DeadlineExceeded.Error())
	if detail == "" || detail == cause || detail == context.DeadlineExceeded.Error() {
		return cause
	}
	return cause + " (" + detail + ")"
}

// dialDetail is the message of the error under the library's per-address
// wrappers ("ADDR: CAUSE (...)", "backing off after: ..."): what actually
// went wrong.
func dialDetail(ae riffle.AddrError) string {
	for e := ae.Err; e != nil; e = errors.Unwrap(e) {
		msg := e.Error()
		if strings.HasPrefix(msg, "backing off after: ") || strings.HasPrefix(msg, "not tried: ") {
			continue
		}
		if strings.HasPrefix(msg, ae.Addr+": ") {
			if inner := errors.Unwrap(e); inner != nil {
				return errText(inner)
			}
			return strings.TrimPrefix(msg, ae.Addr+": ")
		}
		return errText(e)
	}
	return ""
}

// cliLogHandler is the client's log handler without --verbose: as the
// library's default, warnings and errors go to slog.Default() and the
// rest is dropped; but the warning that a metadata refresh failed is
// dropped while bootstrap runs (the command reports that failure itself)
// and when it only says the client was closed, and so are the warnings
// about partitions consume stopped itself (--count, --to).
type cliLogHandler struct {
	quiet *atomic.Bool
	wrap  []func(slog.Handler) slog.Handler
}

const refreshFailedMsg = "metadata refresh failed"

func (h *cliLogHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= slog.LevelWarn && slog.Default().Handler().Enabled(ctx, l)
}

func (h *cliLogHandler) Handle(ctx context.Context, r slog.Record) error {
	if r.Message == refreshFailedMsg && h.quiet.Load() {
		return nil
	}
	drop := false
	r.Attrs(func(at slog.Attr) bool {
		if err, ok := at.Value.Any().(error); ok {
			drop = errors.Is(err, errStop) || (r.Message == refreshFailedMsg && errors.Is(err, riffle.ErrClientClosed))
		}
		return !drop
	})
	if drop {
		return nil
	}
	dh := slog.Default().Handler()
	for _, w := range h.wrap {
		dh = w(dh)
	}
	return dh.Handle(ctx, r)
}

func (h *cliLogHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &cliLogHandler{quiet: h.quiet, wrap: append(slices.Clip(h.wrap), func(d slog.Handler) slog.Handler { return d.WithAttrs(as) })}
}

func (h *cliLogHandler) WithGroup(name string) slog.Handler {
	return &cliLogHandler{quiet: h.quiet, wrap: append(slices.Clip(h.wrap), func(d slog.Handler) slog.Handler { return d.WithGroup(name) })}
}
