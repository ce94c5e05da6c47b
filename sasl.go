package riffle

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"

	"github.com/riffle-go/riffle/internal/conn"
	"github.com/riffle-go/riffle/internal/sasl"
)

// SASLMechanism is a SASL mechanism with its credentials, given to the
// SASL option. The built-in ones are SASLPlain, SASLScramSHA256,
// SASLScramSHA512 and SASLOAuthBearer; plugin/awsmskiam adds AWS_MSK_IAM;
// implement it for any other mechanism the broker accepts.
//
// The client calls Authenticate once per authentication: when a connection
// is opened and, if the broker limits sessions (KIP-368,
// connections.max.reauth.ms), each time the connection re-authenticates.
// Calls come from many connections at once, so implementations must be
// safe for concurrent use. Errors should never contain secrets: they end
// up in logs.
type SASLMechanism interface {
	// Name is the mechanism name sent in SaslHandshake, as the broker
	// spells it ("PLAIN", "SCRAM-SHA-512", "OAUTHBEARER", ...).
	Name() string
	// Authenticate begins one exchange with broker and returns the
	// session that continues it and the client's first message, sent in
	// the first SaslAuthenticate request. ctx bounds the exchange (the
	// dial timeout, or the request timeout of a re-authentication) and
	// ends if the client closes.
	//
	// An error ends the attempt: the connection fails with an error that
	// matches ErrAuth and wraps this one, and the call that needed the
	// connection fails at once rather than retrying.
	Authenticate(ctx context.Context, broker SASLBroker) (SASLSession, []byte, error)
}

// SASLSession continues one exchange started by SASLMechanism.Authenticate.
// One connection drives it from one goroutine.
type SASLSession interface {
	// Challenge takes the broker's answer to the last message and returns
	// the next one. done means the client is satisfied: with a nil msg
	// the exchange ends; with a non-nil msg, msg is sent and the broker's
	// answer to it ends the exchange.
	//
	// An error fails the authentication (ErrAuth). If msg is also
	// non-nil, msg is sent first so that the broker can end the exchange
	// cleanly (RFC 7628 requires a client to answer an OAUTHBEARER error
	// with a single 0x01 byte), and the broker's error is added to err.
	Challenge(ctx context.Context, challenge []byte) (done bool, msg []byte, err error)
}

// SASLBroker describes the broker an exchange authenticates to.
type SASLBroker struct {
	// Addr is the address dialed, host:port: a seed broker or a broker's
	// advertised listener.
	Addr string
	// Host is Addr's host, as mechanisms that sign it (AWS_MSK_IAM) need.
	Host string
	// NodeID is the broker's node id, -1 for a seed broker.
	NodeID int32
	// Reauthentication is true when an open connection re-authenticates
	// because its session is about to end (KIP-368).
	Reauthentication bool
}

// saslAdapter is a user's mechanism as the connection layer calls it.
type saslAdapter struct{ m SASLMechanism }

func (a saslAdapter) Name() string { return a.m.Name() }

func (a saslAdapter) Start(ctx context.Context, b conn.SASLBroker) (conn.SASLSession, []byte, error) {
	host, _, err := net.SplitHostPort(b.Addr)
	if err != nil {
		host = b.Addr
	}
	s, msg, err := a.m.Authenticate(ctx, SASLBroker{Addr: b.Addr, Host: host, NodeID: b.NodeID, Reauthentication: b.Reauth})
	if err != nil {
		return nil, nil, err
	}
	if s == nil {
		return nil, nil, fmt.Errorf("%T.Authenticate returned no session", a.m)
	}
	return s, msg, nil
}

// SASLPlain is SASL/PLAIN. Use it only over TLS: the password travels as is.
func SASLPlain(user, pass string) SASLMechanism { return &builtinSASL{sasl.Plain(user, pass)} }

// SASLScramSHA256 is SASL/SCRAM-SHA-256 (RFC 7677).
func SASLScramSHA256(user, pass string) SASLMechanism {
	return &builtinSASL{sasl.ScramSHA256(user, pass)}
}

// SASLScramSHA512 is SASL/SCRAM-SHA-512.
func SASLScramSHA512(user, pass string) SASLMechanism {
	return &builtinSASL{sasl.ScramSHA512(user, pass)}
}

// builtinSASL is a pure mechanism of internal/sasl. Printing it never shows
// the password, with any fmt verb or slog, also as a field of another
// struct: held behind an interface, it is a pointer, which fmt prints as an
// address when it cannot call its methods (an unexported field).
type builtinSASL struct{ m sasl.Mechanism }

// Name implements SASLMechanism.
func (b *builtinSASL) Name() string { return b.m.Name() }

// Authenticate implements SASLMechanism.
func (b *builtinSASL) Authenticate(context.Context, SASLBroker) (SASLSession, []byte, error) {
	s, msg, err := b.m.Start()
	if err != nil {
		return nil, nil, err
	}
	return pureSession{s}, msg, nil
}

type pureSession struct{ s sasl.Session }

func (p pureSession) Challenge(_ context.Context, c []byte) (bool, []byte, error) { return p.s.Step(c) }

// String names the mechanism and user without the password.
func (b *builtinSASL) String() string { return fmt.Sprint(b.m) }

// GoString (%#v) shows the mechanism and user, never the password.
func (b *builtinSASL) GoString() string { return fmt.Sprintf("riffle.SASLMechanism(%#v)", b.m) }

// Format makes every fmt verb print String or GoString.
func (b *builtinSASL) Format(f fmt.State, verb rune) {
	formatRedacted(f, verb, b.String(), b.GoString())
}

// LogValue logs the mechanism and user, never the password.
func (b *builtinSASL) LogValue() slog.Value {
	if lv, ok := b.m.(slog.LogValuer); ok {
		return lv.LogValue()
	}
	return slog.StringValue(b.m.Name())
}

// formatRedacted prints plain or goSyntax whatever the verb, so that no
// verb (%d, %x, %+v) reaches fields that hold secrets.
func formatRedacted(f fmt.State, verb rune, plain, goSyntax string) {
	switch {
	case verb == 'v' && f.Flag('#'):
		io.WriteString(f, goSyntax)
	case verb == 'v', verb == 's', verb == 'q', verb == 'x', verb == 'X':
		fmt.Fprintf(f, fmt.FormatString(f, verb), plain)
	default:
		io.WriteString(f, plain)
	}
}
