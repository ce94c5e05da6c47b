package kafkatest

import (
	"fmt"
	"os"
	"strings"
)

// The environment that asks for real-Kafka tests.
const (
	// EnvVersion (RIFFLE_KAFKA=4.4.0) starts a cluster of the pinned
	// version for the run.
	EnvVersion = "RIFFLE_KAFKA"
	// EnvBrokers (RIFFLE_KAFKA_BROKERS=host:port,...) uses a running
	// cluster instead, e.g. one from cmd/kafka.
	EnvBrokers = "RIFFLE_KAFKA_BROKERS"
	// EnvRequire (RIFFLE_KAFKA_REQUIRE=1) makes a test that would skip
	// for want of a cluster fail instead, as CI does.
	EnvRequire = "RIFFLE_KAFKA_REQUIRE"
)

// HowToRun is the line a real-Kafka test skips with.
const HowToRun = "real Kafka not requested: set " + EnvVersion + "=" + Version +
	" (starts a cluster; needs java 17+ and mvn) or " + EnvBrokers + "=host:port"

// Request is what the environment asks for.
type Request struct {
	// Start is set when EnvVersion asks for a cluster to be started.
	Start bool
	// Brokers are EnvBrokers' addresses.
	Brokers []string
	// Require is EnvRequire.
	Require bool
}

// Requested reads the environment. An EnvVersion other than Version is an
// error: only that release is pinned.
func Requested() (Request, error) {
	r := Request{Require: os.Getenv(EnvRequire) == "1"}
	if b := strings.TrimSpace(os.Getenv(EnvBrokers)); b != "" {
		for _, a := range strings.Split(b, ",") {
			if a = strings.TrimSpace(a); a != "" {
				r.Brokers = append(r.Brokers, a)
			}
		}
	}
	switch v := os.Getenv(EnvVersion); v {
	case "":
	case Version:
		r.Start = len(r.Brokers) == 0
	default:
		return r, fmt.Errorf("%s=%s: only Kafka %s is pinned (internal/kafkatest/pom.xml)", EnvVersion, v, Version)
	}
	return r, nil
}

// Any says whether real-Kafka tests should run.
func (r Request) Any() bool { return r.Start || len(r.Brokers) > 0 }
