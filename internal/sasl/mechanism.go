package sasl

// Mechanism is a configured SASL mechanism, credentials included. A Mechanism
// is immutable and may be shared between connections; each authentication
// attempt calls Start to obtain its own [Session].
//
// Printing a Mechanism with fmt (any verb) or log/slog shows its name and
// username but never the password.
type Mechanism interface {
	// Name returns the mechanism name sent in SaslHandshake, such as
	// "PLAIN", "SCRAM-SHA-256" or "SCRAM-SHA-512".
	Name() string
	// Start begins a new exchange and returns the first client message,
	// which the client sends before hearing anything from the server.
	Start() (Session, []byte, error)
}

// Session continues one authentication exchange. It is a state machine with
// no I/O of its own, and is not safe for concurrent use; one connection drives
// it from one goroutine.
type Session interface {
	// Step consumes the server's reply and returns the next client message;
	// done is true when authentication finished successfully on the client
	// side (the caller then sends no more messages; if done and msg is nil
	// nothing is sent).
	//
	// Any error is final: the session stays failed and later calls return
	// the same error. Errors wrap [ErrProtocol] or [ErrAuthFailed] when the
	// server's reply caused them.
	Step(challenge []byte) (done bool, msg []byte, err error)
}
