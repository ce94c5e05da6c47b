package main

import (
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/riffle-go/riffle/rifftest"
)

// The embedded cluster started when no brokers are given.
const (
	embeddedBrokers    = 3
	embeddedTopic      = "demo"
	embeddedPartitions = 6
)

// needsCluster lists the commands (paths below riffle) that refuse to run
// without --brokers or RIFFLE_BROKERS: they write to the cluster or read
// its records, and against an embedded cluster, empty when it starts and
// gone when riffle exits, they would succeed at nothing (produce would
// exit 0 having written into the void). The other commands only look,
// and show what an empty cluster looks like; demo and serve run their own.
var needsCluster = []string{
	"produce", "consume",
	"topic create", "topic add-partitions", "topic delete",
	"group reset", "group delete", "share reset",
	"ranges plan", "ranges read", "ranges commit",
	"acl create", "acl delete", "config set", "config delete",
	"records delete", "user scram set", "user scram delete",
}

// checkNeedsCluster refuses a command of needsCluster without brokers.
func (a *app) checkNeedsCluster(cmd *cobra.Command) error {
	path := strings.TrimPrefix(cmd.CommandPath(), cmd.Root().Name()+" ")
	if len(a.seedBrokers()) > 0 || !slices.Contains(needsCluster, path) {
		return nil
	}
	return usageErrorf("%s needs a cluster: give --brokers HOST:PORT or set %s. It does not run against "+
		"a throwaway embedded cluster, empty and gone when riffle exits; for a local cluster that lasts, "+
		"run \"riffle serve\" in another shell and export the %s line it prints", cmd.CommandPath(), envBrokers, envBrokers)
}

// startEmbedded starts an in-process cluster for this invocation (closed by
// app.close) and says so on stderr, since whatever the command does to it
// is gone when riffle exits.
func (a *app) startEmbedded() error {
	opts, with := a.embeddedOptions()
	c, err := rifftest.Start(opts...)
	if err != nil {
		return fmt.Errorf("starting the embedded cluster: %w", err)
	}
	a.embedded = c
	fmt.Fprintf(a.stderr, "riffle: no --brokers given; started an embedded %d-broker cluster%s at %s\n",
		embeddedBrokers, with, strings.Join(c.Addrs(), ","))
	return nil
}

// embeddedOptions are the options of the embedded cluster, and how they
// read after "cluster" (" with TLS", or ""). The cluster follows the
// security flags: --tls gives it a throwaway CA the client trusts, and
// --sasl-* gives it that user, so the TLS and SASL code paths can be
// tried without a real Kafka.
func (a *app) embeddedOptions() ([]rifftest.Option, string) {
	opts := []rifftest.Option{
		rifftest.Brokers(embeddedBrokers),
		rifftest.Topic(embeddedTopic, embeddedPartitions),
	}
	var extras []string
	if a.tlsEnabled() {
		opts = append(opts, rifftest.SelfSignedTLS())
		extras = append(extras, "TLS")
	}
	if a.saslMech != "" {
		opts = append(opts, rifftest.SASL(string(a.saslMech), a.saslUser, a.saslPassword))
		extras = append(extras, fmt.Sprintf("SASL/%s user %q", a.saslMech, a.saslUser))
	}
	with := ""
	if len(extras) > 0 {
		with = " with " + strings.Join(extras, " and ")
	}
	return opts, with
}
