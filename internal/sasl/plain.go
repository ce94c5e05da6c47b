package sasl

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
)

const plainName = "PLAIN"

// Plain returns the PLAIN mechanism (RFC 4616) for user and pass, with no
// authorization identity, so the broker authorizes as user.
//
// PLAIN sends the password in the clear inside the SASL message; use it only
// over TLS.
func Plain(user, pass string) Mechanism {
	return plainMechanism{user: user, pass: secret(pass)}
}

// PlainWithAuthzID is [Plain] with an authorization identity: the broker
// authenticates user but acts as authz. Kafka's built-in PLAIN server only
// accepts an authz equal to user (or empty); custom callbacks may differ.
func PlainWithAuthzID(authz, user, pass string) Mechanism {
	return plainMechanism{authz: authz, user: user, pass: secret(pass)}
}

type plainMechanism struct {
	authz string
	user  string
	pass  secret
}

// Name implements [Mechanism].
func (plainMechanism) Name() string { return plainName }

// Start implements [Mechanism]. It fails if any credential contains NUL,
// because NUL is PLAIN's field separator: letting it through would let a
// crafted username smuggle in a different authorization identity.
func (m plainMechanism) Start() (Session, []byte, error) {
	if strings.IndexByte(m.authz, 0) >= 0 || strings.IndexByte(m.user, 0) >= 0 ||
		strings.IndexByte(string(m.pass), 0) >= 0 {
		return nil, nil, errors.New("sasl: PLAIN: authzid, username and password must not contain NUL")
	}
	msg := make([]byte, 0, len(m.authz)+len(m.user)+len(m.pass)+2)
	msg = append(msg, m.authz...)
	msg = append(msg, 0)
	msg = append(msg, m.user...)
	msg = append(msg, 0)
	msg = append(msg, m.pass...)
	return &plainSession{user: m.user}, msg, nil
}

// String implements [fmt.Stringer] without the password.
func (m plainMechanism) String() string {
	if m.authz != "" {
		return fmt.Sprintf("PLAIN(authzid=%q, user=%q)", m.authz, m.user)
	}
	return fmt.Sprintf("PLAIN(user=%q)", m.user)
}

// GoString implements [fmt.GoStringer] without the password.
func (m plainMechanism) GoString() string {
	if m.authz != "" {
		return fmt.Sprintf("sasl.PlainWithAuthzID(%q, %q, %s)", m.authz, m.user, m.pass.GoString())
	}
	return fmt.Sprintf("sasl.Plain(%q, %s)", m.user, m.pass.GoString())
}

// Format implements [fmt.Formatter] so no verb can print the password.
func (m plainMechanism) Format(f fmt.State, verb rune) {
	formatSafe(f, verb, m.String(), m.GoString())
}

// LogValue implements [slog.LogValuer] without the password.
func (m plainMechanism) LogValue() slog.Value {
	attrs := []slog.Attr{slog.String("mechanism", plainName), slog.String("user", m.user)}
	if m.authz != "" {
		attrs = append(attrs, slog.String("authzid", m.authz))
	}
	return slog.GroupValue(attrs...)
}

// plainSession only waits for the server's verdict. It keeps no copy of the
// password: the whole exchange is the single message built by Start.
type plainSession struct {
	user string
	done bool
	err  error
}

// Step implements [Session]. The reply must be empty: PLAIN defines no server
// data, so anything else means the peer is not speaking PLAIN.
func (s *plainSession) Step(challenge []byte) (bool, []byte, error) {
	switch {
	case s.err != nil:
		return false, nil, s.err
	case s.done:
		s.err = failf(ErrProtocol, plainName, "server message after authentication completed")
	case len(challenge) != 0:
		s.err = failf(ErrProtocol, plainName, "unexpected %d-byte server reply", len(challenge))
	default:
		s.done = true
		return true, nil, nil
	}
	return false, nil, s.err
}

// String implements [fmt.Stringer].
func (s plainSession) String() string {
	return fmt.Sprintf("PLAIN session(user=%q, done=%t)", s.user, s.done)
}

// GoString implements [fmt.GoStringer].
func (s plainSession) GoString() string { return "&sasl." + s.String() }

// Format implements [fmt.Formatter], keeping output consistent with the
// mechanism types.
func (s plainSession) Format(f fmt.State, verb rune) {
	formatSafe(f, verb, s.String(), s.GoString())
}

// LogValue implements [slog.LogValuer].
func (s plainSession) LogValue() slog.Value {
	return slog.GroupValue(slog.String("mechanism", plainName), slog.String("user", s.user),
		slog.Bool("done", s.done))
}
