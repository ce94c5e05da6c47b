package sasl

import (
	"errors"
	"fmt"
)

// ErrAuthFailed reports that authentication did not succeed although the
// server spoke the protocol correctly: the server rejected the credentials
// (a SCRAM "e=" reply) or it failed to prove it knows them (a server signature
// that does not verify). Callers should not retry blindly with the same
// credentials. Match it with [errors.Is]; the wrapping error carries the reason.
var ErrAuthFailed = errors.New("sasl: authentication failed")

// ErrProtocol reports a server message that this client cannot accept: it is
// malformed, out of order, or asks for something the client refuses (such as
// an unsupported mandatory extension or a weak or abusive iteration count).
// It usually points at a broken or hostile broker rather than at the
// credentials. Match it with [errors.Is]; the wrapping error carries the reason.
var ErrProtocol = errors.New("sasl: protocol violation")

// failf wraps a sentinel with the mechanism name and a short reason. Reasons
// are fixed strings or server-controlled values quoted by the caller, never
// credentials, which is what keeps passwords out of every error.
func failf(sentinel error, mech, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s", sentinel, mech, fmt.Sprintf(format, args...))
}
