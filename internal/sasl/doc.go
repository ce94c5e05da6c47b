// Package sasl implements the client side of the SASL mechanisms that Kafka
// brokers accept over the SaslHandshake/SaslAuthenticate exchange: PLAIN
// (RFC 4616) and SCRAM-SHA-256 / SCRAM-SHA-512 (RFC 5802, RFC 7677).
//
// The package is deliberately pure: it performs no I/O, starts no goroutines
// and keeps no global state. The connection layer owns the wire, timeouts and
// Kafka error codes; this package only turns server messages into client
// messages. That split keeps the security-sensitive parsing small enough to
// test exhaustively and to fuzz without a broker.
//
// A typical exchange, as driven by the connection layer:
//
//	sess, msg, err := mech.Start()
//	for err == nil {
//		reply := sendSaslAuthenticate(msg) // connection layer
//		var done bool
//		done, msg, err = sess.Step(reply)
//		if done {
//			if msg != nil {
//				sendSaslAuthenticate(msg)
//			}
//			break
//		}
//	}
//
// Every server message is treated as hostile input: malformed messages are
// reported as [ErrProtocol], rejected credentials or an unverifiable server as
// [ErrAuthFailed], and no input makes the package panic. Passwords never appear
// in errors, in fmt output (any verb) or in log/slog output of the values this
// package returns, so mechanisms can be logged alongside other configuration.
//
// Usernames are sent as given: like the Java client and the broker, this
// package does not apply SASLprep (RFC 4013), so a non-ASCII credential must be
// supplied in the form the broker stored it.
package sasl
