package riffle

import (
	"context"
	"log/slog"
	"sort"
	"sync/atomic"

	"github.com/riffle-go/riffle/internal/cluster"
	"github.com/riffle-go/riffle/internal/conn"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Client is a connection to a Kafka cluster, shared by producers, consumers
// and the admin API. It dials lazily, keeps its seed brokers for its whole
// life, and keeps one connection per broker and traffic class (produce,
// fetch, group, other) so slow requests never delay control traffic.
//
// A Client is safe for concurrent use. Close it when done.
type Client struct {
	cfg clientConfig
	cl  *cluster.Cluster
	log *slog.Logger

	groupMember atomic.Bool // a group consumer uses this client
	hooks       dataHooks   // data-path hooks (hooks.go)
	telemetry   *telemetry  // KIP-714 pushes (TelemetryPush), or nil
}

// NewClient returns a client for the cluster reachable through the seed
// brokers. It validates the configuration but does not connect: the first
// call that needs the cluster does. Invalid configuration fails with an
// error matching ErrInvalidConfig.
func NewClient(opts ...Option) (*Client, error) {
	cfg := defaultClientConfig()
	for _, o := range opts {
		o(&cfg)
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	log := cfg.logger
	if log == nil {
		log = slog.New(defaultLogHandler{})
	}
	if cfg.sasl != nil && cfg.sasl.Name() == "PLAIN" && cfg.tls == nil {
		// Once per client, not per connection: the configuration is
		// what is wrong, and a warning per dial would drown the log.
		log.Warn("SASL PLAIN without DialTLS: the password crosses the network in clear text unless the Dialer encrypts",
			"seeds", cfg.seeds)
	}
	cc := &conn.Config{
		ClientID:        cfg.clientID,
		SoftwareName:    "riffle",
		SoftwareVersion: Version,
		Dial:            cfg.dial,
		DialTimeout:     cfg.dialTimeout,
		TLS:             cfg.tls,
		SASL:            cfg.sasl,
		MaxFrame:        cfg.maxResponseSize,
		MaxInflight:     cfg.maxInflight,
		RequestTimeout:  cfg.requestTimeout,
		MaxVersions:     versionCaps(cfg.maxVersions),
		IDMaxVersions:   idVersionCaps(cfg.maxVersions),
		Logger:          log,
	}
	var obs conn.Observer
	if o := newHookObserver(cfg.hooks); o != nil {
		obs = o
	}
	var tobs *telemetryObserver
	if cfg.telemetry != nil {
		tobs = &telemetryObserver{next: obs}
		obs = tobs
	}
	cc.Observer = obs
	cl, err := cluster.New(cluster.Config{
		Seeds:               cfg.seeds,
		Conn:                cc,
		DialStagger:         cfg.dialStagger,
		ReconnectBackoff:    cfg.reconnectBackoff,
		RetryBackoff:        cfg.retryBackoff,
		RetryTimeout:        cfg.retryTimeout,
		IdleTimeout:         cfg.idleTimeout,
		MetadataMinAge:      cfg.metadataMinAge,
		MetadataMaxAge:      cfg.metadataMaxAge,
		UnknownTopicWait:    cfg.unknownTopicWait,
		UnknownTopicRetries: cfg.unknownTopicRetries,
		Logger:              log,
	})
	if err != nil {
		return nil, err
	}
	c := &Client{cfg: cfg, cl: cl, log: log, hooks: newDataHooks(cfg.hooks)}
	if tobs != nil {
		c.telemetry = newTelemetry(cl, cfg.telemetry, log, &cfg)
		tobs.t = c.telemetry
		c.telemetry.start()
	}
	return c, nil
}

// Version is Riffle's version, sent to brokers in ApiVersions (KIP-511).
const Version = "0.1.0"

// Close closes every connection and stops every goroutine of the client.
// Calls in progress fail with ErrClientClosed. With TelemetryPush, the
// last telemetry push (Terminating) goes out first, waiting at most the
// RequestTimeout.
func (c *Client) Close() {
	if c.telemetry != nil {
		c.telemetry.close()
	}
	c.cl.Close()
}

// Ping checks that some broker answers, refreshing the cluster metadata.
// When none does, the error is an *UnreachableError naming each address.
func (c *Client) Ping(ctx context.Context) error {
	return c.cl.RefreshMetadata(ctx)
}

// Request sends a raw request to any broker, with retries, and returns its
// response. It is an escape hatch for APIs the client does not wrap; the
// version is chosen by negotiation.
func (c *Client) Request(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	return c.cl.RequestAny(ctx, req)
}

// BrokerMetadata describes one broker of the cluster.
type BrokerMetadata struct {
	NodeID int32
	Host   string
	Port   int32
	Rack   string
}

// Brokers returns the brokers of the cluster, sorted by node id, from
// fresh metadata.
func (c *Client) Brokers(ctx context.Context) ([]BrokerMetadata, error) {
	if err := c.cl.RefreshMetadata(ctx); err != nil {
		return nil, err
	}
	return brokersOf(c.cl.Snapshot()), nil
}

func brokersOf(s *cluster.Snapshot) []BrokerMetadata {
	out := make([]BrokerMetadata, 0, len(s.Brokers))
	for _, b := range s.Brokers {
		out = append(out, BrokerMetadata{NodeID: b.NodeID, Host: b.Host, Port: b.Port, Rack: b.Rack})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].NodeID < out[j].NodeID })
	return out
}

// versionCaps are the highest versions Riffle speaks for keys whose newer
// versions change semantics it does not implement yet: Produce v13 and
// Fetch v13 address topics by id only; OffsetCommit v10 does too (v9,
// which carries KIP-848 member epochs, is used); OffsetFetch v8+ is the
// multi-group form; FindCoordinator v4 batches keys. User caps apply on
// top.
func versionCaps(user map[int16]int16) map[int16]int16 {
	caps := map[int16]int16{0: 12, 1: 12, 8: 9, 9: 7, 10: 3}
	for k, v := range user {
		if c, ok := caps[k]; !ok || v < c {
			caps[k] = v
		}
	}
	return caps
}

// idVersionCaps are versionCaps for a request that names every topic by
// id (conn.ByTopicID: the consumer's fetches, from Fetch v13 on): the cap
// on its key that keeps by-name requests below the by-id versions does
// not apply (Fetch v16 brings the NodeEndpoints of leader hints, KIP-951).
// User caps still do.
func idVersionCaps(user map[int16]int16) map[int16]int16 {
	caps := versionCaps(user)
	if v, ok := user[1]; ok {
		caps[1] = v
	} else {
		delete(caps, 1)
	}
	return caps
}
