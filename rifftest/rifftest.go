package rifftest

import (
	"crypto/tls"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"
)

// Cluster is a running in-process Kafka cluster. Create one with [New] in
// tests or [Start] elsewhere. All methods are safe for concurrent use.
type Cluster struct {
	kc *kfake.Cluster
	ca *authority // nil unless SelfSignedTLS was given

	// mu orders Addrs against Close. kfake answers ListenAddrs on its run
	// loop, and once the cluster is closed that loop is gone and the call
	// would block forever; so Close snapshots the addresses first and
	// Addrs serves the snapshot afterwards.
	mu     sync.RWMutex
	closed bool
	addrs  []string
}

// Option configures a [Cluster]. Options are applied in order; for options
// that set a single value, the last one wins.
type Option func(*config)

type config struct {
	brokers    int
	kopts      []kfake.Opt // from the rifftest options, in order
	rawKopts   []kfake.Opt // from KfakeOption, applied last so they win
	brokerCfgs map[string]string
	sasl       bool

	tls           *tls.Config
	selfSigned    bool
	requireClient bool

	errs []error
}

func (cfg *config) errorf(format string, args ...any) {
	cfg.errs = append(cfg.errs, fmt.Errorf("rifftest: "+format, args...))
}

// Brokers sets the number of brokers, overriding the default of 1. A single
// broker keeps tests fast and their failures easy to read; ask for more when
// the test is about leadership, routing or broker loss.
func Brokers(n int) Option {
	return func(cfg *config) {
		if n < 1 {
			cfg.errorf("Brokers(%d): need at least one broker", n)
			return
		}
		cfg.brokers = n
	}
}

// Topic creates a topic with the given number of partitions when the cluster
// starts, so a test does not have to race its own client's topic creation.
// It may be repeated; if a name repeats, the last partition count wins.
// Partition leaders are spread across the brokers.
func Topic(name string, partitions int32) Option {
	return func(cfg *config) {
		if name == "" {
			cfg.errorf("Topic: empty topic name")
			return
		}
		// kfake quietly turns a non-positive count into its default
		// of 10; a typo in a test should fail loudly instead.
		if partitions < 1 {
			cfg.errorf("Topic(%q, %d): need at least one partition", name, partitions)
			return
		}
		cfg.kopts = append(cfg.kopts, kfake.SeedTopics(partitions, name))
	}
}

// AutoCreateTopics lets a Metadata request that asks for auto-creation create
// the topics it names, as a broker with auto.create.topics.enable=true
// does. Auto-created topics get kfake's default of 10 partitions, which
// KfakeOption(kfake.DefaultNumPartitions(n)) changes.
func AutoCreateTopics() Option {
	return func(cfg *config) { cfg.kopts = append(cfg.kopts, kfake.AllowAutoTopicCreation()) }
}

// SASL turns on SASL authentication and adds a user who can authenticate
// with the given mechanism: "PLAIN", "SCRAM-SHA-256" or "SCRAM-SHA-512". It
// may be repeated to add users or mechanisms. Once SASL is on, every
// connection must authenticate before anything but ApiVersions and
// SaslHandshake is answered.
//
// Users are kfake superusers, so they keep working if a test turns on ACLs
// through KfakeOption(kfake.EnableACLs()).
func SASL(mechanism, user, pass string) Option {
	return func(cfg *config) {
		switch mechanism {
		case "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512":
		default:
			cfg.errorf("SASL: unsupported mechanism %q (want PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512)", mechanism)
			return
		}
		if user == "" {
			cfg.errorf("SASL(%s): empty user name", mechanism)
			return
		}
		cfg.sasl = true
		cfg.kopts = append(cfg.kopts, kfake.Superuser(mechanism, user, pass))
	}
}

// TLS makes every broker listen with TLS using cfg, which must carry the
// server certificate. The config is cloned, so later changes to cfg do not
// reach the cluster. To not manage certificates at all, use
// [SelfSignedTLS].
func TLS(cfg *tls.Config) Option {
	return func(c *config) {
		if cfg == nil {
			c.errorf("TLS: nil config")
			return
		}
		c.tls = cfg.Clone()
	}
}

// SelfSignedTLS makes every broker listen with TLS, using a certificate for
// 127.0.0.1, ::1 and localhost issued by a CA generated in memory for this
// cluster alone. Clients get a config trusting that CA from
// [Cluster.ClientTLS], and client certificates from the same CA from
// [Cluster.ClientCert]. Nothing is written to disk and nothing outlives the
// process.
func SelfSignedTLS() Option {
	return func(cfg *config) { cfg.selfSigned = true }
}

// RequireClientCert makes the brokers of a [SelfSignedTLS] cluster demand a
// client certificate signed by the cluster's CA (mutual TLS), failing the
// handshake of any client that presents none or one from elsewhere. Use
// [Cluster.ClientCert] to get an acceptable one. Without SelfSignedTLS,
// Start fails: with [TLS], set ClientAuth and ClientCAs on your own config.
func RequireClientCert() Option {
	return func(cfg *config) { cfg.requireClient = true }
}

// BrokerConfig sets a broker-level config at startup, as if by
// IncrementalAlterConfigs, for example "message.max.bytes". It may be
// repeated; for a repeated key the last value wins, and an empty value
// resets the key to its default. See [kfake.BrokerConfigs] for the configs
// kfake acts on.
func BrokerConfig(key, value string) Option {
	return func(cfg *config) {
		if key == "" {
			cfg.errorf("BrokerConfig: empty key")
			return
		}
		if cfg.brokerCfgs == nil {
			cfg.brokerCfgs = make(map[string]string)
		}
		cfg.brokerCfgs[key] = value
	}
}

// KfakeOption passes options straight to [kfake.NewCluster], for what
// rifftest does not wrap: a logger, MaxVersions to mimic an old Kafka,
// ACLs, DataDir, BlackholeProduce, SyntheticFetch and so on. Raw options
// are applied after everything rifftest derives from its own options, so
// they win: kfake.NumBrokers here overrides [Brokers].
func KfakeOption(opts ...kfake.Opt) Option {
	return func(cfg *config) {
		for _, o := range opts {
			if o != nil {
				cfg.rawKopts = append(cfg.rawKopts, o)
			}
		}
	}
}

// Start starts a cluster. The caller must call [Cluster.Close]; in tests,
// prefer [New], which does that for you.
func Start(opts ...Option) (*Cluster, error) {
	cfg := config{brokers: 1}
	for _, o := range opts {
		if o != nil {
			o(&cfg)
		}
	}
	if cfg.tls != nil && cfg.selfSigned {
		cfg.errorf("TLS and SelfSignedTLS are mutually exclusive")
	}
	if cfg.requireClient && !cfg.selfSigned {
		cfg.errorf("RequireClientCert needs SelfSignedTLS")
	}
	if err := errors.Join(cfg.errs...); err != nil {
		return nil, err
	}

	c := new(Cluster)
	kopts := []kfake.Opt{kfake.NumBrokers(cfg.brokers)}
	kopts = append(kopts, cfg.kopts...)
	if cfg.sasl {
		kopts = append(kopts, kfake.EnableSASL())
	}
	if len(cfg.brokerCfgs) > 0 {
		kopts = append(kopts, kfake.BrokerConfigs(cfg.brokerCfgs))
	}
	switch {
	case cfg.selfSigned:
		ca, err := newAuthority()
		if err != nil {
			return nil, err
		}
		srv, err := ca.serverConfig(cfg.requireClient)
		if err != nil {
			return nil, err
		}
		c.ca = ca
		kopts = append(kopts, kfake.TLS(srv))
	case cfg.tls != nil:
		kopts = append(kopts, kfake.TLS(cfg.tls))
	}
	kopts = append(kopts, cfg.rawKopts...)

	kc, err := kfake.NewCluster(kopts...)
	if err != nil {
		return nil, fmt.Errorf("rifftest: starting kfake: %w", err)
	}
	c.kc = kc
	return c, nil
}

// New starts a cluster for the duration of a test: it fails the test at once
// if the cluster cannot start, and registers [Cluster.Close] with
// tb.Cleanup so the brokers and their ports go away when the test (or
// subtest) that created them ends.
func New(tb testing.TB, opts ...Option) *Cluster {
	tb.Helper()
	c, err := Start(opts...)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(c.Close)
	return c
}

// Addrs returns the "127.0.0.1:port" address of every broker, in broker
// order. It reflects brokers added or removed through [Cluster.Kfake]. After
// Close it returns the addresses the cluster had when it closed, which now
// refuse connections.
func (c *Cluster) Addrs() []string {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.closed {
		return slices.Clone(c.addrs)
	}
	return c.kc.ListenAddrs()
}

// Kfake returns the underlying kfake cluster, for what rifftest does not
// wrap: injecting errors with Fault, intercepting requests with ControlKey,
// moving partitions with MoveTopicPartition, or changing membership with
// AddNode and RemoveNode.
//
// Do not call Close on it: close the [Cluster] instead. Most kfake methods,
// including the ListenAddrs behind [Cluster.Addrs], block forever on a
// closed kfake cluster, and only Cluster.Close knows to stop using it.
func (c *Cluster) Kfake() *kfake.Cluster { return c.kc }

// Close shuts the cluster down: listeners close before it returns, so the
// ports refuse new connections, and open connections are dropped. It is
// safe to call more than once and concurrently.
func (c *Cluster) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return
	}
	c.addrs = c.kc.ListenAddrs()
	c.closed = true
	c.kc.Close()
}

// ClientTLS returns a client TLS config that trusts the cluster's generated
// CA, or nil if the cluster was not started with [SelfSignedTLS]. It carries
// no client certificate; for a [RequireClientCert] cluster add one from
// [Cluster.ClientCert]. Each call returns a new config the caller may
// modify.
func (c *Cluster) ClientTLS() *tls.Config {
	if c.ca == nil {
		return nil
	}
	return c.ca.clientConfig()
}

// ClientCert issues a client certificate with the given common name, signed
// by the cluster's generated CA, for clients of a [RequireClientCert]
// cluster. It fails if the cluster was not started with [SelfSignedTLS].
func (c *Cluster) ClientCert(commonName string) (tls.Certificate, error) {
	if c.ca == nil {
		return tls.Certificate{}, errors.New("rifftest: ClientCert needs a cluster started with SelfSignedTLS")
	}
	return c.ca.clientCert(commonName)
}

// CACertPEM returns the PEM encoding of the cluster's generated CA
// certificate, for handing to a tool outside the process (say, kcat in the
// CLI demo), or nil if the cluster was not started with [SelfSignedTLS].
func (c *Cluster) CACertPEM() []byte {
	if c.ca == nil {
		return nil
	}
	return slices.Clone(c.ca.certPEM)
}
