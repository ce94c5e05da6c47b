package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/riffle-go/riffle"
	"github.com/spf13/cobra"
)

// shareCmd is "riffle share": share groups (KIP-932).
func (a *app) shareCmd() *cobra.Command {
	cmd := groupCmd(&cobra.Command{
		Use:   "share",
		Short: "List and describe share groups (KIP-932); reset their start offsets",
		Long: `Manage share groups (Kafka 4.2's queues): list them, describe their members,
assignments and start offsets, and reset their start offsets.`,
		Example: `  riffle share list
  riffle share describe jobs
  riffle share reset jobs --topic events --to earliest --execute`,
	})
	cmd.AddCommand(a.shareListCmd(), a.shareDescribeCmd(), a.shareResetCmd())
	return cmd
}

func (a *app) shareListCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List share groups with their state",
		Long: `List the share groups of the cluster, sorted by name, with their state.
Every broker is asked (ListGroups filtered by the share type); if some
broker cannot answer, the groups of the others are listed and riffle exits
with status 1.`,
		Example: `  riffle share list
  riffle share list -o json`,
		Args: cobra.NoArgs,
	}
	output := addOutputFlag(cmd)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		cl, err := a.connect()
		if err != nil {
			return err
		}
		groups, err := cl.Admin().ListShareGroups(a.context())
		if err != nil && groups == nil {
			return fmt.Errorf("listing share groups: %w", err)
		}
		out := make([]groupListingJSON, 0, len(groups))
		for _, g := range groups {
			out = append(out, groupListingJSON{Group: g.Group, State: g.State, ProtocolType: g.ProtocolType})
		}
		if *output == outputJSON {
			if werr := writeJSON(a.stdout, out); werr != nil {
				return werr
			}
		} else {
			tw := newTable(a.stdout)
			row(tw, "GROUP", "STATE")
			for _, g := range out {
				row(tw, g.Group, orDash(g.State))
			}
			tw.Flush()
		}
		return err
	}
	return cmd
}

type shareDescJSON struct {
	Group   string            `json:"group"`
	State   string            `json:"state"`
	Epoch   int32             `json:"epoch"`
	Members []shareMemberJSON `json:"members"`
	Offsets []shareOffsetJSON `json:"offsets"`
	Error   string            `json:"error,omitempty"`
}

type shareMemberJSON struct {
	MemberID string   `json:"member_id"`
	ClientID string   `json:"client_id"`
	Host     string   `json:"host"`
	Assigned []string `json:"assigned"`
}

type shareOffsetJSON struct {
	Topic       string `json:"topic"`
	Partition   int32  `json:"partition"`
	StartOffset int64  `json:"start_offset"`
	Lag         int64  `json:"lag"`
}

func (a *app) shareDescribeCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "describe GROUP...",
		Short: "Describe share groups: members, assignments, start offsets and lag",
		Long: `Describe share groups: their state and epoch, each member with the
partitions it fetches from (shared with the other members), and per
partition the group's start offset (every record before it is acknowledged
or archived) and lag.`,
		Example: `  riffle share describe jobs
  riffle share describe jobs -o json`,
		Args: cobra.MinimumNArgs(1),
	}
	output := addOutputFlag(cmd)
	cmd.RunE = func(cmd *cobra.Command, groups []string) error {
		cl, err := a.connect()
		if err != nil {
			return err
		}
		ctx := a.context()
		descs, err := cl.Admin().DescribeShareGroups(ctx, groups...)
		if err != nil {
			return fmt.Errorf("describing share groups: %w", err)
		}
		var out []shareDescJSON
		var failed []error
		shown := false // a group's error is in the output already
		for _, d := range descs {
			j := shareDescJSON{Group: d.Group, State: d.State, Epoch: d.GroupEpoch, Members: []shareMemberJSON{}, Offsets: []shareOffsetJSON{}}
			if d.Err != nil {
				// Shown in the output (the table's error line or the
				// JSON's error field): only the exit status is left.
				j.Error = d.Err.Error()
				shown = true
				out = append(out, j)
				continue
			}
			for _, m := range d.Members {
				mj := shareMemberJSON{MemberID: m.MemberID, ClientID: m.ClientID, Host: m.ClientHost, Assigned: []string{}}
				for _, tp := range m.Assigned {
					mj.Assigned = append(mj.Assigned, tp.String())
				}
				j.Members = append(j.Members, mj)
			}
			offs, oerr := cl.Admin().DescribeShareGroupOffsets(ctx, d.Group)
			if oerr != nil {
				failed = append(failed, fmt.Errorf("%s offsets: %w", d.Group, oerr))
			}
			for _, o := range offs {
				j.Offsets = append(j.Offsets, shareOffsetJSON{Topic: o.Topic, Partition: o.Partition, StartOffset: o.StartOffset, Lag: o.Lag})
			}
			out = append(out, j)
		}
		if *output == outputJSON {
			if werr := writeJSON(a.stdout, out); werr != nil {
				return werr
			}
		} else {
			for _, d := range out {
				fmt.Fprintf(a.stdout, "GROUP %s  state %s  epoch %d\n", d.Group, orDash(d.State), d.Epoch)
				if d.Error != "" {
					fmt.Fprintf(a.stdout, "  error: %s\n", d.Error)
					continue
				}
				tw := newTable(a.stdout)
				row(tw, "  MEMBER", "CLIENT", "HOST", "ASSIGNED")
				for _, m := range d.Members {
					row(tw, "  "+m.MemberID, m.ClientID, m.Host, strings.Join(m.Assigned, ","))
				}
				tw.Flush()
				tw = newTable(a.stdout)
				row(tw, "  TOPIC", "PARTITION", "START-OFFSET", "LAG")
				for _, o := range d.Offsets {
					row(tw, "  "+o.Topic, o.Partition, o.StartOffset, o.Lag)
				}
				tw.Flush()
			}
		}
		if err := errors.Join(failed...); err != nil || !shown {
			return err
		}
		return errReported
	}
	return cmd
}

func (a *app) shareResetCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "reset GROUP --topic TOPIC --to earliest|latest|OFFSET [--execute]",
		Short: "Reset a share group's start offsets (the group must have no members)",
		Long: `Reset the start offsets of a share group for the partitions of a topic:
earliest, latest or an absolute offset. Without --execute it only prints
what it would do. The group must be empty (no members).`,
		Example: `  riffle share reset jobs --topic tasks --to earliest
  riffle share reset jobs --topic tasks --to 1200 --execute`,
		Args: cobra.ExactArgs(1),
	}
	topic := cmd.Flags().String("topic", "", "topic whose partitions to reset (required)")
	to := cmd.Flags().String("to", "", "earliest, latest or an offset (required)")
	execute := cmd.Flags().Bool("execute", false, "apply the reset (default: preview)")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if *topic == "" || *to == "" {
			return usageErrorf("--topic and --to are required")
		}
		cl, err := a.connect()
		if err != nil {
			return err
		}
		ctx := a.context()
		var ts int64
		var abs int64 = -1
		switch *to {
		case "earliest":
			ts = -2
		case "latest":
			ts = -1
		default:
			if _, err := fmt.Sscan(*to, &abs); err != nil || abs < 0 {
				return usageErrorf("--to %q: want earliest, latest or an offset", *to)
			}
		}
		offsets := map[riffle.TopicPartition]int64{}
		if abs >= 0 {
			details, err := cl.Admin().ListTopics(ctx, *topic)
			if err != nil {
				return err
			}
			for _, d := range details {
				if d.Err != nil {
					return fmt.Errorf("topic %q: %w", d.Name, d.Err)
				}
				for _, p := range d.Partitions {
					offsets[riffle.TopicPartition{Topic: d.Name, Partition: p.Partition}] = abs
				}
			}
		} else {
			listed, err := cl.Admin().ListOffsets(ctx, ts, *topic)
			if err != nil {
				return err
			}
			for _, lo := range listed {
				if lo.Err != nil {
					return fmt.Errorf("%s[%d]: %w", lo.Topic, lo.Partition, lo.Err)
				}
				offsets[riffle.TopicPartition{Topic: lo.Topic, Partition: lo.Partition}] = lo.Offset
			}
		}
		tw := newTable(a.stdout)
		row(tw, "TOPIC", "PARTITION", "NEW-START-OFFSET")
		for tp, o := range offsets {
			row(tw, tp.Topic, tp.Partition, o)
		}
		tw.Flush()
		if !*execute {
			fmt.Fprintln(a.stdout, "(preview: add --execute to apply)")
			return nil
		}
		res, err := cl.Admin().AlterShareGroupOffsets(ctx, args[0], offsets)
		if err != nil {
			return fmt.Errorf("resetting share group %q: %w", args[0], err)
		}
		var failed []error
		for tp, e := range res {
			if e != nil {
				failed = append(failed, fmt.Errorf("%v: %w", tp, e))
			}
		}
		return errors.Join(failed...)
	}
	return cmd
}
