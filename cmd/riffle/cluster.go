package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/riffle-go/riffle"
	"github.com/spf13/cobra"
)

func (a *app) clusterCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "cluster",
		Short: "Show the cluster id, controller and brokers",
		Long: `Show the cluster id, the controller broker and every broker of the cluster
(node id, host, port, rack), as a broker describes them (DescribeCluster, or
metadata from brokers before Kafka 2.8).

With --authorized-operations it also shows the cluster operations (ACL
operations on the CLUSTER resource) that riffle's principal may perform, as
the broker reports them; "unknown" when it does not (before Kafka 2.3).`,
		Example: `  riffle --brokers localhost:9092 cluster
  riffle cluster -o json | jq '.brokers[].host'
  riffle cluster --authorized-operations`,
		Args: cobra.NoArgs,
	}
	var authorizedOps bool
	cmd.Flags().BoolVar(&authorizedOps, "authorized-operations", false, "show the cluster operations riffle's principal may perform")
	output := addOutputFlag(cmd)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		cl, err := a.connect()
		if err != nil {
			return err
		}
		info, err := describeCluster(a.context(), cl, authorizedOps)
		if err != nil {
			return err
		}
		if *output == outputJSON {
			return writeJSON(a.stdout, info)
		}
		printCluster(a.stdout, info)
		return nil
	}
	return cmd
}

type clusterJSON struct {
	ClusterID  string       `json:"cluster_id"`
	Controller int32        `json:"controller"`
	Brokers    []brokerJSON `json:"brokers"`
	// AuthorizedOperations are present with --authorized-operations when
	// the broker reported them (e.g. ["DESCRIBE","ALTER_CONFIGS"]).
	AuthorizedOperations *[]string `json:"authorized_operations,omitempty"`

	askedOps bool // --authorized-operations: print the line, "unknown" if absent
}

type brokerJSON struct {
	NodeID int32  `json:"node_id"`
	Host   string `json:"host"`
	Port   int32  `json:"port"`
	Rack   string `json:"rack,omitempty"`
}

func describeCluster(ctx context.Context, cl *riffle.Client, authorizedOps bool) (clusterJSON, error) {
	var opts []riffle.DescribeOption
	if authorizedOps {
		opts = append(opts, riffle.IncludeAuthorizedOperations())
	}
	ci, err := cl.Admin().DescribeCluster(ctx, opts...)
	if err != nil {
		return clusterJSON{}, fmt.Errorf("describing the cluster: %w", err)
	}
	out := clusterJSON{ClusterID: ci.ClusterID, Controller: ci.Controller, Brokers: []brokerJSON{}, askedOps: authorizedOps}
	for _, b := range ci.Brokers {
		out.Brokers = append(out.Brokers, brokerJSON{NodeID: b.NodeID, Host: b.Host, Port: b.Port, Rack: b.Rack})
	}
	if ops := ci.AuthorizedOperations.Operations(); ops != nil {
		names := make([]string, len(ops))
		for i, op := range ops {
			names[i] = op.String()
		}
		out.AuthorizedOperations = &names
	}
	return out, nil
}

func printCluster(w io.Writer, c clusterJSON) {
	controller := "unknown"
	if c.Controller >= 0 {
		controller = fmt.Sprint(c.Controller)
	}
	fmt.Fprintf(w, "Cluster ID:  %s\nController:  %s\nBrokers:     %d\n", orDash(c.ClusterID), controller, len(c.Brokers))
	if c.askedOps {
		ops := "unknown (not reported by the broker)"
		switch {
		case c.AuthorizedOperations == nil:
		case len(*c.AuthorizedOperations) == 0:
			ops = "none"
		default:
			ops = strings.Join(*c.AuthorizedOperations, ", ")
		}
		fmt.Fprintf(w, "Authorized:  %s\n", ops)
	}
	fmt.Fprintln(w)
	tw := newTable(w)
	row(tw, "ID", "HOST", "PORT", "RACK", "CONTROLLER")
	for _, b := range c.Brokers {
		ctl := ""
		if b.NodeID == c.Controller {
			ctl = "*"
		}
		row(tw, b.NodeID, b.Host, b.Port, orDash(b.Rack), ctl)
	}
	tw.Flush()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
