// Package errs holds the client's error sentinels and classification. The
// root package re-exports them, so users match them with errors.Is without
// importing anything internal.
package errs

import (
	"context"
	"errors"
	"net"
	"os"
	"syscall"

	"github.com/riffle-go/riffle/internal/kafkaerr"
)

var (
	// ErrClosed: the object called (client, producer, consumer,
	// processor) was closed. Each object's own closed error matches it.
	ErrClosed = errors.New("riffle: closed")
	// ErrClientClosed: the client was closed, before or while the call
	// was waiting.
	ErrClientClosed = NewClosed("riffle: client closed")
	// ErrConnClosed: the connection died with the request in flight; the
	// outcome is unknown, so the request may or may not have been applied.
	ErrConnClosed = errors.New("riffle: connection closed")
	// ErrRequestTimeout: the broker did not answer within the request
	// timeout; the connection was closed because it may be wedged.
	ErrRequestTimeout = errors.New("riffle: request timed out")
	// ErrMalformed: the broker sent bytes that are not a valid response
	// (oversized frame, truncated body, wrong correlation id, undecodable).
	ErrMalformed = errors.New("riffle: malformed response")
	// ErrAuth: authentication failed; retrying with the same credentials
	// cannot help.
	ErrAuth = errors.New("riffle: authentication failed")
	// ErrUnreachable: no broker could be reached; the error also carries
	// an *UnreachableError listing every address and cause.
	ErrUnreachable = errors.New("riffle: no broker reachable")
	// ErrUnknownTopic: the topic does not exist (after the retry budget).
	ErrUnknownTopic = errors.New("riffle: unknown topic")
	// ErrInvalidPartition: a record's partition is not one its topic has
	// (after the wait for partitions just added).
	ErrInvalidPartition = errors.New("riffle: partition out of range")
	// ErrUnsupported: the broker does not support a request the client
	// needs at any version both understand.
	ErrUnsupported = errors.New("riffle: unsupported by broker")
	// ErrConfig: the configuration is invalid.
	ErrConfig = errors.New("riffle: invalid configuration")
)

// NewClosed returns a distinct sentinel error with message msg that also
// matches ErrClosed under errors.Is: an object's own closed error, so
// callers can match either that object's or any object's closing.
func NewClosed(msg string) error { return &closedError{msg: msg} }

type closedError struct{ msg string }

func (e *closedError) Error() string { return e.msg }

// Is makes every closed error match ErrClosed.
func (e *closedError) Is(target error) bool { return target == ErrClosed }

// IsRetriable reports whether retrying err (on the same or a new
// connection) may succeed.
func IsRetriable(err error) bool {
	if err == nil {
		return false
	}
	switch {
	case errors.Is(err, ErrAuth), errors.Is(err, ErrConfig), errors.Is(err, ErrClosed),
		errors.Is(err, ErrUnsupported), errors.Is(err, ErrUnknownTopic), errors.Is(err, ErrInvalidPartition), errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return false
	}
	// Errors that know better decide for themselves: a failed dial by
	// its stage and cause, an unreachable cluster by all its addresses.
	var r interface{ Retriable() bool }
	if errors.As(err, &r) {
		return r.Retriable()
	}
	switch {
	case errors.Is(err, ErrConnClosed), errors.Is(err, ErrRequestTimeout), errors.Is(err, ErrMalformed), errors.Is(err, ErrUnreachable):
		return true
	}
	var ke *kafkaerr.Error
	if errors.As(err, &ke) {
		return ke.Retriable
	}
	var ne net.Error
	if errors.As(err, &ne) {
		return true
	}
	return errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.EPIPE) || errors.Is(err, os.ErrDeadlineExceeded) || errors.Is(err, net.ErrClosed)
}
