package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"

	"github.com/riffle-go/riffle"
	"github.com/spf13/cobra"
)

// saslMechanism is the --sasl-mechanism flag: empty or one of the
// mechanisms riffle supports, normalised to upper case.
type saslMechanism string

var saslMechanisms = []string{"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"}

func (m *saslMechanism) String() string { return string(*m) }
func (m *saslMechanism) Type() string   { return "mechanism" }
func (m *saslMechanism) Set(s string) error {
	up := strings.ToUpper(strings.TrimSpace(s))
	for _, ok := range saslMechanisms {
		if up == ok {
			*m = saslMechanism(up)
			return nil
		}
	}
	return fmt.Errorf("want one of %s", strings.Join(saslMechanisms, ", "))
}

// checkSecurityFlags validates the combination of SASL and TLS flags and
// fills the password from the environment.
func (a *app) checkSecurityFlags(cmd *cobra.Command) error {
	if !cmd.Flags().Changed("sasl-password") {
		a.saslPassword = a.getenv(envSASLPassword)
	}
	switch {
	case a.saslMech == "" && a.saslUser != "":
		return usageErrorf("--sasl-user needs --sasl-mechanism (%s)", strings.Join(saslMechanisms, ", "))
	case a.saslMech == "" && cmd.Flags().Changed("sasl-password"):
		return usageErrorf("--sasl-password needs --sasl-mechanism (%s)", strings.Join(saslMechanisms, ", "))
	case a.saslMech != "" && a.saslUser == "":
		return usageErrorf("--sasl-mechanism %s needs --sasl-user", a.saslMech)
	case a.saslMech != "" && a.saslPassword == "":
		return usageErrorf("--sasl-mechanism %s needs a password: set %s or --sasl-password", a.saslMech, envSASLPassword)
	case (a.tlsCert == "") != (a.tlsKey == ""):
		return usageErrorf("--tls-cert and --tls-key go together")
	}
	if len(a.seedBrokers()) == 0 && (a.tlsCA != "" || a.tlsCert != "" || a.tlsInsecure) {
		return usageErrorf("--tls-ca, --tls-cert, --tls-key and --tls-insecure need --brokers: the embedded cluster has its own CA (use --tls alone)")
	}
	return nil
}

func (a *app) tlsEnabled() bool {
	return a.tlsOn || a.tlsCA != "" || a.tlsCert != "" || a.tlsKey != "" || a.tlsInsecure
}

// seedBrokers returns the brokers to connect to, from --brokers or the
// environment, with the default port added where missing. Empty means
// "start an embedded cluster".
func (a *app) seedBrokers() []string {
	list := cleanList(a.brokers)
	if len(list) == 0 {
		list = cleanList([]string{a.getenv(envBrokers)})
	}
	for i, b := range list {
		if !strings.Contains(b, ":") {
			list[i] = net.JoinHostPort(b, "9092")
		}
	}
	return list
}

// connect returns the client for the command, dialing lazily on first
// use. Without seed brokers it first starts the embedded cluster. With
// them, it checks that some seed answers (see bootstrap).
func (a *app) connect() (*riffle.Client, error) {
	if a.client != nil {
		return a.client, nil
	}
	if len(a.seedBrokers()) == 0 {
		if err := a.startEmbedded(); err != nil {
			return nil, err
		}
	}
	a.dials = &dialTracker{}
	cl, err := a.newClient(riffle.WithHooks(a.dials))
	if err != nil {
		if errors.Is(err, riffle.ErrInvalidConfig) {
			// Bad --brokers values are the only way to get here.
			return nil, &usageError{err}
		}
		return nil, err
	}
	a.client = cl
	if a.embedded == nil {
		if err := a.bootstrap(cl); err != nil {
			return nil, err
		}
	}
	return cl, nil
}

// newClient returns a new client to the cluster of the command (the
// embedded one if started), configured by the global flags.
func (a *app) newClient(extra ...riffle.Option) (*riffle.Client, error) {
	opts := []riffle.Option{riffle.ClientID(a.clientID), riffle.RetryTimeout(a.timeout)}
	if a.log != nil {
		opts = append(opts, riffle.Logger(a.log))
	}
	seeds := a.seedBrokers()
	var tlsCfg *tls.Config
	if a.embedded != nil {
		seeds = a.embedded.Addrs()
		tlsCfg = a.embedded.ClientTLS() // nil without --tls
	} else if a.tlsEnabled() {
		var err error
		if tlsCfg, err = a.tlsConfig(); err != nil {
			return nil, err
		}
	}
	opts = append(opts, riffle.SeedBrokers(seeds...))
	if tlsCfg != nil {
		opts = append(opts, riffle.DialTLS(tlsCfg))
	}
	if a.saslMech != "" {
		opts = append(opts, riffle.SASL(a.saslMechanism()))
	}
	cl, err := riffle.NewClient(append(opts, extra...)...)
	if err == nil && a.verbose {
		a.log.Debug("riffle client created", "seeds", seeds, "tls", tlsCfg != nil, "sasl", a.saslMechanism(), "timeout", a.timeout)
	}
	return cl, err
}

// saslMechanism returns the SASL mechanism of the flags; it prints as
// its name only, never the password.
func (a *app) saslMechanism() riffle.SASLMechanism {
	switch a.saslMech {
	case "PLAIN":
		return riffle.SASLPlain(a.saslUser, a.saslPassword)
	case "SCRAM-SHA-256":
		return riffle.SASLScramSHA256(a.saslUser, a.saslPassword)
	case "SCRAM-SHA-512":
		return riffle.SASLScramSHA512(a.saslUser, a.saslPassword)
	}
	return nil
}

// tlsConfig builds the client TLS config from the --tls-* flags.
func (a *app) tlsConfig() (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if a.tlsCA != "" {
		pem, err := os.ReadFile(a.tlsCA)
		if err != nil {
			return nil, fmt.Errorf("--tls-ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--tls-ca: no PEM certificate in %s", a.tlsCA)
		}
		cfg.RootCAs = pool
	}
	if a.tlsCert != "" {
		cert, err := tls.LoadX509KeyPair(a.tlsCert, a.tlsKey)
		if err != nil {
			return nil, fmt.Errorf("--tls-cert/--tls-key: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	if a.tlsInsecure {
		fmt.Fprintln(a.stderr, "riffle: warning: --tls-insecure: broker certificates are not verified")
		cfg.InsecureSkipVerify = true
	}
	return cfg, nil
}
