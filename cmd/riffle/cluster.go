package main

import (
	"context"
	"fmt"
	"io"

	"github.com/riffle-go/riffle"
	"github.com/spf13/cobra"
)

func (a *app) clusterCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "cluster",
		Short: "Show the cluster id, controller and brokers",
		Long: `Show the cluster id, the controller broker and every broker of the cluster
(node id, host, port, rack), from fresh metadata.`,
		Example: `  riffle --brokers localhost:9092 cluster
  riffle cluster -o json | jq '.brokers[].host'`,
		Args: cobra.NoArgs,
	}
	output := addOutputFlag(cmd)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		cl, err := a.connect()
		if err != nil {
			return err
		}
		info, err := describeCluster(a.context(), cl)
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
}

type brokerJSON struct {
	NodeID int32  `json:"node_id"`
	Host   string `json:"host"`
	Port   int32  `json:"port"`
	Rack   string `json:"rack,omitempty"`
}

func describeCluster(ctx context.Context, cl *riffle.Client) (clusterJSON, error) {
	ci, err := cl.Admin().DescribeCluster(ctx)
	if err != nil {
		return clusterJSON{}, fmt.Errorf("describing the cluster: %w", err)
	}
	out := clusterJSON{ClusterID: ci.ClusterID, Controller: ci.Controller, Brokers: []brokerJSON{}}
	for _, b := range ci.Brokers {
		out.Brokers = append(out.Brokers, brokerJSON{NodeID: b.NodeID, Host: b.Host, Port: b.Port, Rack: b.Rack})
	}
	return out, nil
}

func printCluster(w io.Writer, c clusterJSON) {
	controller := "unknown"
	if c.Controller >= 0 {
		controller = fmt.Sprint(c.Controller)
	}
	fmt.Fprintf(w, "Cluster ID:  %s\nController:  %s\nBrokers:     %d\n\n", orDash(c.ClusterID), controller, len(c.Brokers))
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
