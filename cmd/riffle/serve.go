package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/riffle-go/riffle/rifftest"
	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kfake"
)

func (a *app) serveCmd() *cobra.Command {
	var port int
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run an embedded cluster until Ctrl-C, for other commands to use",
		Long: fmt.Sprintf(`Start the embedded %d-broker cluster (with a topic %q of %d partitions)
and keep it running until Ctrl-C, so that several riffle commands, or any
Kafka client, can use the same cluster: without --brokers each command
starts a cluster of its own, which is gone when the command ends.

serve prints on stdout the line that points riffle at the cluster,

  export %s=127.0.0.1:PORT,127.0.0.1:PORT,127.0.0.1:PORT

to paste in another shell. The data lives in memory: it is gone when serve
stops. --port fixes the ports (PORT, PORT+1, PORT+2) instead of taking free
ones at random.

The cluster follows the security flags, as the embedded cluster of any
command does: with --tls it serves TLS with a throwaway CA, which serve
writes to a file and names (connect with --tls-ca FILE); with
--sasl-mechanism, --sasl-user and a password it requires that user.

serve runs until Ctrl-C (status 130, as for every command a signal stops),
or until --timeout when that is given explicitly (status 0).`, embeddedBrokers, embeddedTopic, embeddedPartitions, envBrokers),
		Example: `  # Terminal 1
  riffle serve

  # Terminal 2: paste the export line serve printed, then
  export RIFFLE_BROKERS=127.0.0.1:40123,127.0.0.1:40124,127.0.0.1:40125
  riffle topic create events
  riffle topic describe events

  # Fixed ports: the brokers listen on 19092, 19093 and 19094
  riffle serve --port 19092`,
		Args: cobra.NoArgs,
	}
	cmd.Flags().IntVar(&port, "port", 0, fmt.Sprintf("listen on `PORT` and the %d ports after it (default: free ports chosen at random)", embeddedBrokers-1))
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		switch {
		case cmd.Flags().Changed("brokers"):
			return usageErrorf("serve starts a cluster of its own: --brokers does not apply")
		case a.tlsCA != "" || a.tlsCert != "" || a.tlsInsecure:
			return usageErrorf("serve makes its own CA: use --tls alone")
		case port < 0 || port+embeddedBrokers-1 > 65535:
			return usageErrorf("--port %d: want a port from 1 to %d", port, 65536-embeddedBrokers)
		}
		opts, with := a.embeddedOptions()
		if port > 0 {
			ports := make([]int, embeddedBrokers)
			for i := range ports {
				ports[i] = port + i
			}
			opts = append(opts, rifftest.KfakeOption(kfake.Ports(ports...)))
		}
		c, err := rifftest.Start(opts...)
		if err != nil {
			return fmt.Errorf("starting the embedded cluster: %w", err)
		}
		a.embedded = c // closed by app.close, whatever happens
		fmt.Fprintf(a.stderr, "riffle: serving an embedded %d-broker cluster%s with topic %q (%d partitions) until Ctrl-C; in another shell run:\n",
			embeddedBrokers, with, embeddedTopic, embeddedPartitions)
		fmt.Fprintf(a.stdout, "export %s=%s\n", envBrokers, strings.Join(c.Addrs(), ","))
		if a.tlsEnabled() {
			f, err := os.CreateTemp("", "riffle-serve-ca-*.pem")
			if err == nil {
				_, err = f.Write(c.CACertPEM())
				if cerr := f.Close(); err == nil {
					err = cerr
				}
				defer os.Remove(f.Name())
			}
			if err != nil {
				return fmt.Errorf("writing the CA certificate: %w", err)
			}
			fmt.Fprintf(a.stderr, "riffle: and connect with --tls-ca %s\n", f.Name())
		}
		if a.saslMech != "" {
			fmt.Fprintf(a.stderr, "riffle: and authenticate with --sasl-mechanism %s --sasl-user %s and %s\n", a.saslMech, a.saslUser, envSASLPassword)
		}

		ctx := a.runContext(cmd)
		<-ctx.Done()
		c.Close()
		a.embedded = nil
		if a.interrupted() != nil {
			return fmt.Errorf("embedded cluster stopped: %w", ctx.Err())
		}
		fmt.Fprintf(a.stderr, "riffle: embedded cluster stopped (--timeout %v)\n", a.timeout)
		return nil
	}
	return cmd
}
