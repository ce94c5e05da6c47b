package kafkaerr

import (
	"errors"
	"fmt"
)

type entry struct {
	name      string
	retriable bool
	desc      string
}

// Error is an error code returned by a Kafka broker.
//
// Errors compare equal with errors.Is when their codes match, so a wrapped
// *Error from a response matches the package-level value for its code.
type Error struct {
	Code        int16
	Name        string
	Retriable   bool
	Description string
}

func (e *Error) Error() string {
	return fmt.Sprintf("%s (%d): %s", e.Name, e.Code, e.Description)
}

// ErrAuthorization is the class of every *_AUTHORIZATION_FAILED code
// (IsAuthorization): an *Error with one of them matches it with errors.Is,
// besides the value for its own code.
var ErrAuthorization = errors.New("riffle: authorization failed")

// IsAuthorization reports whether code says the principal lacks an ACL:
// TOPIC_, GROUP_, CLUSTER_, TRANSACTIONAL_ID_ or
// DELEGATION_TOKEN_AUTHORIZATION_FAILED.
func IsAuthorization(code int16) bool {
	switch code {
	case TopicAuthorizationFailed, GroupAuthorizationFailed, ClusterAuthorizationFailed,
		TransactionalIDAuthorizationFailed, DelegationTokenAuthorizationFailed:
		return true
	}
	return false
}

// Is reports whether target is a Kafka error with the same code (an
// *Error or its exported twin, see Exported), or ErrAuthorization for an
// authorization code.
func (e *Error) Is(target error) bool {
	if target == ErrAuthorization {
		return IsAuthorization(e.Code)
	}
	t, ok := target.(*Error)
	if !ok && Exported.Of != nil {
		t = Exported.Of(target)
	}
	return t != nil && t.Code == e.Code
}

// As sets target to e when it points to e's exported twin (see Exported).
func (e *Error) As(target any) bool { return Exported.As != nil && Exported.As(e, target) }

// Exported connects Error to its exported twin, riffle.KafkaError: a type
// of its own (so that go doc shows its fields and methods) with the same
// fields, which package riffle registers here at init. Errors are created
// here, below riffle, so they are *Error; through these, errors.As reaches
// a *riffle.KafkaError and errors.Is compares codes with one.
var Exported struct {
	// As sets target, a **riffle.KafkaError, to e and reports whether it
	// was one.
	As func(e *Error, target any) bool
	// Of returns err as an *Error if it is a *riffle.KafkaError, else nil.
	Of func(err error) *Error
}

var cache = func() map[int16]*Error {
	m := make(map[int16]*Error, len(table))
	for code, en := range table {
		m[code] = &Error{Code: code, Name: en.name, Retriable: en.retriable, Description: en.desc}
	}
	return m
}()

// ForCode returns the error for a Kafka error code, nil for 0. Codes this
// table does not know (newer brokers) get an error naming the number rather
// than being folded into UNKNOWN_SERVER_ERROR, so logs stay truthful.
func ForCode(code int16) error {
	if code == 0 {
		return nil
	}
	if e, ok := cache[code]; ok {
		return e
	}
	return &Error{Code: code, Name: fmt.Sprintf("UNKNOWN_ERROR_CODE_%d", code), Description: "an error code this client does not know"}
}

// Typed is ForCode returning the concrete type; nil for 0.
func Typed(code int16) *Error {
	if code == 0 {
		return nil
	}
	return ForCode(code).(*Error)
}
