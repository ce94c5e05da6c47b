package conn

import (
	"context"
	"crypto/tls"
	"log/slog"
	"net"
	"time"

	"github.com/riffle-go/riffle/internal/sasl"
	"github.com/riffle-go/riffle/internal/wire"
)

// Config is shared by every connection of a client. Read-only after use.
type Config struct {
	ClientID        string
	SoftwareName    string
	SoftwareVersion string

	// Dial opens the raw connection; nil uses a net.Dialer with DialTimeout.
	Dial        func(ctx context.Context, network, addr string) (net.Conn, error)
	DialTimeout time.Duration
	TLS         *tls.Config
	SASL        SASLMechanism // nil: no authentication

	MaxFrame       int32         // largest accepted response; 0 means 100 MiB
	MaxInflight    int           // pipelined requests per connection; 0 means 5
	RequestTimeout time.Duration // time for a broker to answer; 0 means 30 s

	// MaxVersions caps the version used per API key, below kmsg's own max.
	MaxVersions map[int16]int16
	// IDMaxVersions replaces MaxVersions for a request that names every
	// topic by id (see ByTopicID): the caps that keep requests below the
	// versions addressing topics by id only do not bind it, the user's
	// do.
	IDMaxVersions map[int16]int16

	Logger   *slog.Logger
	Observer Observer

	fmt *wire.Formatter
}

// SASLMechanism starts SASL exchanges: one per new connection and one per
// re-authentication of an open connection (KIP-368).
type SASLMechanism interface {
	// Name is the mechanism sent in SaslHandshake.
	Name() string
	// Start begins one exchange with broker and returns its first message.
	// ctx bounds the exchange (the dial, or the re-authentication).
	Start(ctx context.Context, broker SASLBroker) (SASLSession, []byte, error)
}

// SASLBroker says whom an exchange authenticates to.
type SASLBroker struct {
	Addr   string // host:port as dialed
	NodeID int32  // -1 for a seed
	Reauth bool   // true when an open connection re-authenticates
}

// SASLSession is one exchange. Challenge takes the broker's reply and
// returns the next message; done ends the exchange on the client side (a
// non-nil msg with done is sent, and its answer ends the exchange). An
// error with a non-nil msg sends msg (so the broker can end the exchange,
// RFC 7628 §3.2.3) and then fails with the error.
type SASLSession interface {
	Challenge(ctx context.Context, challenge []byte) (done bool, msg []byte, err error)
}

// PureSASL adapts a pure mechanism of internal/sasl (no context, no I/O).
func PureSASL(m sasl.Mechanism) SASLMechanism { return pureSASL{m} }

type pureSASL struct{ m sasl.Mechanism }

func (p pureSASL) Name() string { return p.m.Name() }

func (p pureSASL) Start(context.Context, SASLBroker) (SASLSession, []byte, error) {
	s, msg, err := p.m.Start()
	if err != nil {
		return nil, nil, err
	}
	return pureSession{s}, msg, nil
}

type pureSession struct{ s sasl.Session }

func (p pureSession) Challenge(_ context.Context, c []byte) (bool, []byte, error) { return p.s.Step(c) }

func (cfg *Config) formatter() wire.Formatter {
	if cfg.fmt == nil {
		f := wire.NewFormatter(cfg.ClientID)
		cfg.fmt = &f
	}
	return *cfg.fmt
}

// Init prepares derived state; call once before sharing the config.
func (cfg *Config) Init() { cfg.formatter() }

func (cfg *Config) maxFrame() int32 {
	if cfg.MaxFrame <= 0 {
		return wire.DefaultMaxFrame
	}
	return cfg.MaxFrame
}

func (cfg *Config) maxInflight() int {
	if cfg.MaxInflight <= 0 {
		return 5
	}
	return cfg.MaxInflight
}

func (cfg *Config) requestTimeout() time.Duration {
	if cfg.RequestTimeout <= 0 {
		return 30 * time.Second
	}
	return cfg.RequestTimeout
}

func (cfg *Config) dialTimeout() time.Duration {
	if cfg.DialTimeout <= 0 {
		return 10 * time.Second
	}
	return cfg.DialTimeout
}
