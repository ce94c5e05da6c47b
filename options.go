package riffle

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"time"

	"github.com/riffle-go/riffle/internal/backoff"
	"github.com/riffle-go/riffle/internal/conn"
	"github.com/riffle-go/riffle/internal/errs"
)

// Option configures a Client.
type Option func(*clientConfig)

type clientConfig struct {
	seeds               []string
	clientID            string
	logger              *slog.Logger
	hooks               []Hook
	telemetry           TelemetryReporter
	telemetrySubscribed func(TelemetrySubscription) // tests only
	dial                func(ctx context.Context, network, addr string) (net.Conn, error)
	dialTimeout         time.Duration
	tls                 *tls.Config
	sasl                conn.SASLMechanism
	requestTimeout      time.Duration
	retryTimeout        time.Duration
	retryBackoff        backoff.Policy
	reconnectBackoff    backoff.Policy
	dialStagger         time.Duration
	idleTimeout         time.Duration
	brokerIdle          time.Duration // the brokers' connections.max.idle.ms; see BrokerIdleTimeout
	metadataMinAge      time.Duration
	metadataMaxAge      time.Duration
	maxResponseSize     int32
	maxInflight         int
	unknownTopicWait    time.Duration // see UnknownTopicWait
	unknownTopicRetries int           // 0: not set (no bound by refreshes); see UnknownTopicRetries
	maxVersions         map[int16]int16
	rack                string // client.rack; see Rack (rack.go)
}

func defaultClientConfig() clientConfig {
	return clientConfig{
		clientID:         "riffle",
		dialTimeout:      10 * time.Second,
		requestTimeout:   30 * time.Second,
		retryTimeout:     30 * time.Second,
		retryBackoff:     backoff.Policy{Base: 100 * time.Millisecond, Max: time.Second, Jitter: 0.2},
		reconnectBackoff: backoff.Policy{Base: 50 * time.Millisecond, Max: time.Second, Jitter: 0.2},
		dialStagger:      25 * time.Millisecond,
		idleTimeout:      30 * time.Second,
		brokerIdle:       9 * time.Minute,
		metadataMinAge:   100 * time.Millisecond,
		metadataMaxAge:   5 * time.Minute,
		maxResponseSize:  100 << 20,
		maxInflight:      5,
		unknownTopicWait: 5 * time.Second,
	}
}

func (c *clientConfig) validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{errs.ErrConfig}, args...)...)
	}
	switch {
	case len(c.seeds) == 0:
		return bad("no seed brokers (use SeedBrokers)")
	case c.dialTimeout <= 0, c.requestTimeout <= 0, c.retryTimeout <= 0, c.idleTimeout <= 0, c.brokerIdle <= 0,
		c.dialStagger <= 0, c.metadataMinAge <= 0, c.metadataMaxAge <= 0:
		return bad("durations must be positive")
	case c.metadataMinAge > c.metadataMaxAge:
		return bad("metadata min age %v above max age %v", c.metadataMinAge, c.metadataMaxAge)
	case c.maxResponseSize < 1<<10:
		return bad("max response size %d below 1 KiB", c.maxResponseSize)
	case c.maxInflight < 1:
		return bad("max in-flight requests per connection must be at least 1")
	case c.unknownTopicRetries < 0:
		return bad("unknown topic retries must be at least 1")
	case c.unknownTopicWait < 0:
		return bad("unknown topic wait %v is negative", c.unknownTopicWait)
	case c.retryBackoff.Base <= 0 || c.retryBackoff.Max < c.retryBackoff.Base:
		return bad("retry backoff must satisfy 0 < min <= max")
	case c.reconnectBackoff.Base <= 0 || c.reconnectBackoff.Max < c.reconnectBackoff.Base:
		return bad("reconnect backoff must satisfy 0 < min <= max")
	case c.sasl != nil && c.sasl.Name() == "":
		return bad("SASL mechanism %T has an empty name", c.sasl.(saslAdapter).m)
	}
	for _, s := range c.seeds {
		if err := validSeed(s); err != nil {
			return bad("seed %q: %v", s, err)
		}
	}
	return nil
}

// validSeed checks host:port as Java's bootstrap.servers parsing does: a
// host, and a numeric port in 1..65535. Errors here would otherwise only
// surface as dial failures, retried until the deadline.
func validSeed(s string) error {
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return fmt.Errorf("not host:port: %w", err)
	}
	if host == "" {
		return errors.New("no host")
	}
	if n, err := strconv.ParseUint(port, 10, 16); err != nil || n == 0 {
		return fmt.Errorf("port %q is not a number in 1..65535", port)
	}
	return nil
}

// SeedBrokers sets the bootstrap addresses (host:port). They are kept for the
// client's lifetime: used to bootstrap and whenever no known broker answers;
// a failed seed backs off and is tried again, never discarded. Required.
func SeedBrokers(addrs ...string) Option {
	return func(c *clientConfig) { c.seeds = append(c.seeds, addrs...) }
}

// ClientID sets the client id sent with every request (default "riffle"),
// which brokers use in logs and quotas.
func ClientID(id string) Option { return func(c *clientConfig) { c.clientID = id } }

// Logger sets the logger. Records carry broker, topic and partition as
// attributes. Default: warnings and errors (a partition stopped by an
// error, credentials sent in clear text, metadata that cannot be
// refreshed, ...) go to slog.Default(), everything else is dropped; pass
// slog.New(slog.DiscardHandler) for silence.
func Logger(l *slog.Logger) Option { return func(c *clientConfig) { c.logger = l } }

// WithHooks adds metric hooks. Each hook implements any of the hook
// interfaces: connections (BrokerConnectHook, BrokerDisconnectHook,
// BrokerRequestHook, BrokerThrottleHook) and the data path of every
// Producer and Consumer of the client (ProduceBatchHook, FetchBatchHook,
// RebalanceHook, CommitHook); others are ignored.
func WithHooks(hooks ...Hook) Option {
	return func(c *clientConfig) { c.hooks = append(c.hooks, hooks...) }
}

// Dialer replaces the TCP dialer, for proxies or tests. The function must
// honour ctx.
func Dialer(fn func(ctx context.Context, network, addr string) (net.Conn, error)) Option {
	return func(c *clientConfig) { c.dial = fn }
}

// DialTimeout bounds one connection attempt, handshake included
// (default 10 s).
func DialTimeout(d time.Duration) Option { return func(c *clientConfig) { c.dialTimeout = d } }

// DialTLS enables TLS with cfg (cloned per connection; ServerName defaults
// to the broker host). Set cfg.Certificates for client certificates.
func DialTLS(cfg *tls.Config) Option { return func(c *clientConfig) { c.tls = cfg } }

// SASL enables SASL authentication with m: SASLPlain, SASLScramSHA256,
// SASLScramSHA512, SASLOAuthBearer, a plugin (plugin/awsmskiam) or a
// mechanism of your own. Every new connection authenticates, and a
// connection re-authenticates before the session the broker granted ends
// (KIP-368), between requests. nil disables SASL (the default).
func SASL(m SASLMechanism) Option {
	return func(c *clientConfig) {
		c.sasl = nil
		if m != nil {
			c.sasl = saslAdapter{m}
		}
	}
}

// RequestTimeout is how long a broker may take to answer a request before
// the connection is considered wedged and closed (default 30 s, as Java's
// request.timeout.ms). Long polls add their own wait on top.
func RequestTimeout(d time.Duration) Option { return func(c *clientConfig) { c.requestTimeout = d } }

// RetryTimeout bounds the retries of one operation, on top of its context
// (default 30 s). When it runs out before the context, the error reads
// "gave up after RetryTimeout 30s: <last failure>" and matches both
// context.DeadlineExceeded and that failure. Failures no retry can fix
// (bad credentials, an untrusted certificate, a peer that does not speak
// Kafka) are returned at once.
func RetryTimeout(d time.Duration) Option { return func(c *clientConfig) { c.retryTimeout = d } }

// RetryBackoff sets the exponential backoff between retries (default 100 ms
// to 1 s with 20% jitter, KIP-580).
func RetryBackoff(minDelay, maxDelay time.Duration) Option {
	return func(c *clientConfig) { c.retryBackoff = backoff.Policy{Base: minDelay, Max: maxDelay, Jitter: 0.2} }
}

// ReconnectBackoff sets the per-address backoff after failed connection
// attempts (default 50 ms to 1 s with 20% jitter).
func ReconnectBackoff(minDelay, maxDelay time.Duration) Option {
	return func(c *clientConfig) { c.reconnectBackoff = backoff.Policy{Base: minDelay, Max: maxDelay, Jitter: 0.2} }
}

// DialStagger is the happy-eyeballs delay (default 25 ms): when any broker
// will do (bootstrap, metadata, admin requests), the addresses are dialed
// in a shuffled order, the next one when the previous has no TCP
// connection after this long, or at once when it fails (refused,
// unresolvable). A dead seed ahead of a live one so costs one stagger, not
// a TCP timeout. Once some address has connected and is in its handshake
// (TLS, ApiVersions, SASL), the next waits 300 ms instead (or DialStagger,
// if longer), so a slow but healthy handshake does not open a connection to
// every seed. The first handshake to complete wins; the others are closed.
//
// Why not dial every seed at once (as librdkafka does, about every 50 ms)?
// Every client start would then open, authenticate and close a connection
// to each seed, multiplying the handshake load on brokers across a fleet;
// 25 ms is well above a TCP connect within a region, so a live first seed
// is almost always alone, and a blackholed one costs 25 ms.
func DialStagger(d time.Duration) Option { return func(c *clientConfig) { c.dialStagger = d } }

// ConnIdleTimeout closes connections unused for this long (default 30 s).
func ConnIdleTimeout(d time.Duration) Option { return func(c *clientConfig) { c.idleTimeout = d } }

// BrokerIdleTimeout is how long the brokers let a connection sit quiet
// before closing it (their connections.max.idle.ms). Default 9 min, the
// Java client's connections.max.idle.ms, under the brokers' default of
// 10. A broker closing a share consumer's fetch connection ends its share
// session and releases every record acquired through it, so a
// ShareConsumer holding records (handlers running longer than this, say)
// sends its broker a request when the connection has been quiet for nine
// tenths of it. The client's own idle reaper (ConnIdleTimeout) never
// closes such a connection. Lower it for brokers configured with a
// shorter connections.max.idle.ms.
func BrokerIdleTimeout(d time.Duration) Option { return func(c *clientConfig) { c.brokerIdle = d } }

// MetadataMinAge is the minimum time between two metadata refreshes, which
// bounds how hard a storm of leader errors hits the cluster (default 100 ms).
func MetadataMinAge(d time.Duration) Option { return func(c *clientConfig) { c.metadataMinAge = d } }

// MetadataMaxAge refreshes metadata periodically even without errors
// (default 5 min, as Java's metadata.max.age.ms).
func MetadataMaxAge(d time.Duration) Option { return func(c *clientConfig) { c.metadataMaxAge = d } }

// MaxResponseSize rejects (and closes the connection on) any response frame
// larger than n bytes (default 100 MiB).
func MaxResponseSize(n int32) Option { return func(c *clientConfig) { c.maxResponseSize = n } }

// MaxInflightPerConn caps pipelined requests per connection (default 5).
func MaxInflightPerConn(n int) Option { return func(c *clientConfig) { c.maxInflight = n } }

// UnknownTopicWait is how long a lookup of a topic by name waits for the
// topic to appear in the metadata before it fails with ErrUnknownTopic
// (default 5 s). It is the one budget of every such wait of the client:
// a producer's first use of a topic (unless the producer sets
// UnknownTopicTimeout), the Admin calls that look a topic's partitions or
// leaders up (ListOffsets, ListOffsetsIsolated, DeleteRecords,
// DescribeProducers), the ranges package's lookups, and a consumer's
// assigned partition whose topic or partition the metadata does not have
// (it is not failed: it keeps waiting, and is reported through
// OnPartitionError once it has waited this long). While refreshes answer
// UNKNOWN_TOPIC_OR_PARTITION or LEADER_NOT_AVAILABLE, the lookup
// refreshes again, spaced by the retry backoff and MetadataMinAge; then
// the error names the topic, the time waited and the last answer. 0
// fails at the first such answer. The caller's context bounds the wait
// too. A group leader's lookups while it assigns do not wait this long:
// a subscribed topic that does not exist gets no partitions, and the
// group rebalances when it appears.
//
// The wait is there because Kafka's brokers learn of a topic when they
// replay the metadata log: a topic created a moment ago (CreateTopics
// returned) is unknown to some brokers for a while, measured up to about
// 0.5 s on a loaded 3-node Kafka 4.4 cluster, and a lookup answered by
// such a broker would otherwise fail. Java's clients wait for a topic's
// metadata by time too: the producer up to max.block.ms, the consumer
// and the Admin's deleteRecords and describeProducers up to
// default.api.timeout.ms, both 60 s (its listOffsets fails at the first
// unknown answer), which hides a misspelt topic for a minute; 5 s is ten
// times the propagation seen and still fails a wrong topic name quickly,
// and one budget for every lookup keeps an Admin call and a producer of
// the same topic consistent.
func UnknownTopicWait(d time.Duration) Option {
	return func(c *clientConfig) { c.unknownTopicWait = d }
}

// UnknownTopicRetries is how many metadata refreshes must report a topic
// as unknown (UNKNOWN_TOPIC_OR_PARTITION) before a lookup fails with
// ErrUnknownTopic. When set, every lookup of the client (see
// UnknownTopicWait) ends at n such refreshes or its time budget, whichever
// comes first; unset, lookups wait by time only.
//
// Deprecated: a count of refreshes is no measure of how long a topic
// created a moment ago takes to reach every broker (refreshes come 100 ms
// apart at first, and one answered by a broker that has not caught up
// counts): use UnknownTopicWait. Kept so that existing code builds and
// behaves as before.
func UnknownTopicRetries(n int) Option {
	return func(c *clientConfig) {
		c.unknownTopicRetries = n
		if n < 1 {
			c.unknownTopicRetries = -1 // refused by validate
		}
	}
}

// MaxVersions caps the protocol version used for an API key, e.g. to
// emulate an older client. Versions are otherwise min(ours, broker's).
func MaxVersions(apiKey, version int16) Option {
	return func(c *clientConfig) {
		if c.maxVersions == nil {
			c.maxVersions = map[int16]int16{}
		}
		c.maxVersions[apiKey] = version
	}
}
