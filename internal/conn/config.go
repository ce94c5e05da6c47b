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
	SASL        sasl.Mechanism

	MaxFrame       int32         // largest accepted response; 0 means 100 MiB
	MaxInflight    int           // pipelined requests per connection; 0 means 5
	RequestTimeout time.Duration // time for a broker to answer; 0 means 30 s

	// MaxVersions caps the version used per API key, below kmsg's own max.
	MaxVersions map[int16]int16

	Logger   *slog.Logger
	Observer Observer

	fmt *wire.Formatter
}

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
