package kafkatest

import (
	"fmt"
	"os"
	"slices"
	"strings"
)

// The environment that asks for real-Kafka tests.
const (
	// EnvVersion (RIFFLE_KAFKA=4.4.0, or 3.9.1) starts a cluster of
	// that pinned version (one of Versions) for the run.
	EnvVersion = "RIFFLE_KAFKA"
	// EnvNodes (RIFFLE_KAFKA_NODES=1) is the number of nodes of the
	// cluster a suite starts, 1 or 3, when the suite lets it choose
	// (the integration suite: default 3).
	EnvNodes = "RIFFLE_KAFKA_NODES"
	// EnvBrokers (RIFFLE_KAFKA_BROKERS=host:port,...) uses a running
	// cluster instead, e.g. one from cmd/kafka.
	EnvBrokers = "RIFFLE_KAFKA_BROKERS"
	// EnvRequire (RIFFLE_KAFKA_REQUIRE=1) makes a test that would skip
	// for want of a cluster fail instead, as CI does.
	EnvRequire = "RIFFLE_KAFKA_REQUIRE"
)

// HowToRun is the line a real-Kafka test skips with.
const HowToRun = "real Kafka not requested: set " + EnvVersion + "=" + Version + " (or " + Version39 +
	"; starts a cluster; needs java 17+ and mvn) or " + EnvBrokers + "=host:port"

// Request is what the environment asks for.
type Request struct {
	// Start is set when EnvVersion asks for a cluster to be started.
	Start bool
	// Version is EnvVersion's release (Version when unset).
	Version string
	// Nodes is EnvNodes, 0 when unset.
	Nodes int
	// Brokers are EnvBrokers' addresses.
	Brokers []string
	// Require is EnvRequire.
	Require bool
}

// Requested reads the environment. An EnvVersion not in Versions is an
// error: only those releases are pinned.
func Requested() (Request, error) {
	r := Request{Require: os.Getenv(EnvRequire) == "1", Version: Version}
	switch n := os.Getenv(EnvNodes); n {
	case "":
	case "1", "3":
		r.Nodes = int(n[0] - '0')
	default:
		return r, fmt.Errorf("%s=%s: want 1 or 3", EnvNodes, n)
	}
	if b := strings.TrimSpace(os.Getenv(EnvBrokers)); b != "" {
		for _, a := range strings.Split(b, ",") {
			if a = strings.TrimSpace(a); a != "" {
				r.Brokers = append(r.Brokers, a)
			}
		}
	}
	if v := os.Getenv(EnvVersion); v != "" {
		if !slices.Contains(Versions, v) {
			return r, fmt.Errorf("%s=%s: only Kafka %s are pinned (internal/kafkatest/pom*.xml)", EnvVersion, v, strings.Join(Versions, ", "))
		}
		r.Version = v
		r.Start = len(r.Brokers) == 0
	}
	return r, nil
}

// Any says whether real-Kafka tests should run.
func (r Request) Any() bool { return r.Start || len(r.Brokers) > 0 }
