// Command kafka runs a real Apache Kafka cluster (internal/kafkatest) until
// Ctrl-C, for trying Riffle, its CLI or the integration suite by hand:
//
//	go run ./internal/kafkatest/cmd/kafka -nodes 3
//	go run ./internal/kafkatest/cmd/kafka -version 3.9.1
//
// It prints the bootstrap addresses on stdout, as riffle serve does for the
// embedded cluster, and the export lines for the CLI and the suite.
// With -libs it only resolves the jars (as CI does before the suite) and
// prints where they are.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/riffle-go/riffle/internal/kafkatest"
)

type kvs map[string]string

func (m kvs) String() string { return fmt.Sprint(map[string]string(m)) }

func (m kvs) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	if !ok || k == "" {
		return fmt.Errorf("want key=value, got %q", s)
	}
	m[k] = v
	return nil
}

func main() {
	nodes := flag.Int("nodes", 1, "combined broker+controller nodes: 1 or 3")
	keep := flag.Bool("keep", false, "keep the cluster's directory (configs, data, logs) after Ctrl-C")
	logDirs := flag.Int("log-dirs", 2, "log directories per node, 1 to 4")
	libs := flag.Bool("libs", false, "only resolve the Kafka jars (mvn, into the cache) and print their directory")
	version := flag.String("version", kafkatest.Version, "the Kafka release: "+strings.Join(kafkatest.Versions, " or "))
	configs := kvs{}
	flag.Var(configs, "config", "a broker `key=value` for every node's server.properties (repeatable)")
	flag.Parse()
	if *libs {
		dir, err := kafkatest.LibsFor(context.Background(), *version)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		fmt.Println(dir)
		return
	}
	if err := run(*version, *nodes, *logDirs, *keep, configs); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run(version string, nodes, logDirs int, keep bool, configs kvs) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	logf := func(format string, args ...any) { fmt.Fprintf(os.Stderr, format+"\n", args...) }
	c, err := kafkatest.Start(ctx, kafkatest.Config{Version: version, Nodes: nodes, LogDirs: logDirs, KeepDir: keep, BrokerConfigs: configs, Logf: logf})
	if err != nil {
		return err
	}
	defer c.Close()
	for _, n := range c.Nodes() {
		fmt.Fprintf(os.Stderr, "node %d (rack %s): %s, pid %d, log %s\n", n.ID, n.Rack, n.Addr, n.PID(), n.LogPath())
	}
	addrs := strings.Join(c.Addrs(), ",")
	fmt.Println(addrs)
	fmt.Fprintf(os.Stderr, "in another shell:\n  export RIFFLE_BROKERS=%s          # the riffle CLI\n  export RIFFLE_KAFKA_BROKERS=%s    # the integration suite\nCtrl-C stops the cluster.\n", addrs, addrs)
	<-ctx.Done()
	fmt.Fprintln(os.Stderr, "stopping")
	return c.Close()
}
