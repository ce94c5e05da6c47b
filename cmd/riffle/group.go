package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/riffle-go/riffle"
	"github.com/spf13/cobra"
)

// consumerGroupCmd is "riffle group". (groupCmd is the helper that makes
// a command a group of subcommands.)
func (a *app) consumerGroupCmd() *cobra.Command {
	cmd := groupCmd(&cobra.Command{
		Use:   "group",
		Short: "List, describe and delete consumer groups; show lag; reset offsets",
		Long: `Manage consumer groups: list them, describe their members and assignments,
show how far they lag behind, reset their committed offsets and delete them.`,
		Example: `  riffle group list
  riffle group describe orders-service
  riffle group lag orders-service
  riffle group reset orders-service --to earliest --execute
  riffle group delete orders-service`,
	})
	cmd.AddCommand(a.groupListCmd(), a.groupDescribeCmd(), a.groupLagCmd(), a.groupResetCmd(), a.groupDeleteCmd())
	return cmd
}

// ---- group list ----

type groupListingJSON struct {
	Group        string `json:"group"`
	State        string `json:"state"`
	ProtocolType string `json:"protocol_type"`
}

func (a *app) groupListCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List consumer groups with their state",
		Long: `List the groups of the cluster, sorted by name, with their state (Stable,
Empty, PreparingRebalance, ...) and protocol type ("consumer" for consumer
groups). Every broker is asked, since each knows only the groups it
coordinates; if some broker cannot answer, the groups of the others are
listed and riffle exits with status 1.`,
		Example: `  riffle group list
  riffle group list -o json | jq -r '.[] | select(.state == "Empty") | .group'`,
		Args: cobra.NoArgs,
	}
	output := addOutputFlag(cmd)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		cl, err := a.connect()
		if err != nil {
			return err
		}
		groups, err := cl.Admin().ListGroups(a.context())
		if err != nil && groups == nil {
			return fmt.Errorf("listing groups: %w", err)
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
			row(tw, "GROUP", "STATE", "TYPE")
			for _, g := range out {
				row(tw, g.Group, orDash(g.State), orDash(g.ProtocolType))
			}
			tw.Flush()
		}
		return err // the listing is incomplete when some broker failed
	}
	return cmd
}

// ---- group describe ----

type groupDescriptionJSON struct {
	Group string `json:"group"`
	// Type is "classic" or "consumer" (KIP-848).
	Type         string `json:"type"`
	State        string `json:"state"`
	ProtocolType string `json:"protocol_type"`
	Protocol     string `json:"protocol"`
	// Coordinator is the coordinator's node id, -1 if unknown.
	Coordinator int32             `json:"coordinator"`
	Members     []groupMemberJSON `json:"members"`
	Error       string            `json:"error,omitempty"`
}

type groupMemberJSON struct {
	MemberID   string `json:"member_id"`
	InstanceID string `json:"instance_id,omitempty"`
	ClientID   string `json:"client_id"`
	ClientHost string `json:"client_host"`
	// Assigned maps each topic to its assigned partitions.
	Assigned map[string][]int32 `json:"assigned"`
	Error    string             `json:"error,omitempty"`
}

func (a *app) groupDescribeCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "describe GROUP...",
		Short: "Describe consumer groups: state, members and their partitions",
		Long: `Describe each named group: its state, protocol type, assignment protocol
and coordinator, then every member with its client id, host, static
instance id and the partitions assigned to it. Assignments are shown for
consumer groups in the Stable state (brokers send none while a group
rebalances).

A group that does not exist is reported on stderr and makes riffle exit
with status 1 after describing the others.`,
		Example: `  riffle group describe orders-service
  riffle group describe orders-service billing -o json`,
		Args: cobra.MinimumNArgs(1),
	}
	output := addOutputFlag(cmd)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		names, err := uniqueGroups(args)
		if err != nil {
			return err
		}
		cl, err := a.connect()
		if err != nil {
			return err
		}
		descs, err := cl.Admin().DescribeGroups(a.context(), names...)
		if err != nil {
			return fmt.Errorf("describing groups: %w", err)
		}
		out := make([]groupDescriptionJSON, len(descs))
		for i, d := range descs {
			out[i] = groupDescriptionToJSON(d)
		}
		if *output == outputJSON {
			if err := writeJSON(a.stdout, out); err != nil {
				return err
			}
		} else {
			printGroupDescriptions(a.stdout, out)
		}
		return reportItems(a, descs,
			func(d riffle.GroupDescription) (string, error) { return fmt.Sprintf("group %q", d.Group), d.Err }, nil)
	}
	return cmd
}

func groupDescriptionToJSON(d riffle.GroupDescription) groupDescriptionJSON {
	g := groupDescriptionJSON{
		Group: d.Group, Type: d.Type, State: d.State, ProtocolType: d.ProtocolType, Protocol: d.Protocol,
		Coordinator: d.Coordinator, Members: []groupMemberJSON{}, Error: errText(d.Err),
	}
	for _, m := range d.Members {
		mj := groupMemberJSON{
			MemberID: m.MemberID, InstanceID: m.InstanceID, ClientID: m.ClientID, ClientHost: m.ClientHost,
			Assigned: map[string][]int32{}, Error: errText(m.AssignmentErr),
		}
		for _, tp := range m.Assigned {
			mj.Assigned[tp.Topic] = append(mj.Assigned[tp.Topic], tp.Partition)
		}
		g.Members = append(g.Members, mj)
	}
	return g
}

func printGroupDescriptions(w io.Writer, groups []groupDescriptionJSON) {
	first := true
	for _, g := range groups {
		if g.Error != "" {
			continue // reported on stderr
		}
		if !first {
			fmt.Fprintln(w)
		}
		first = false
		printGroupDescription(w, g)
	}
}

func printGroupDescription(w io.Writer, g groupDescriptionJSON) {
	coordinator := "unknown"
	if g.Coordinator >= 0 {
		coordinator = fmt.Sprint(g.Coordinator)
	}
	fmt.Fprintf(w, "Group:          %s\n", g.Group)
	fmt.Fprintf(w, "Type:           %s\n", orDash(g.Type))
	fmt.Fprintf(w, "State:          %s\n", orDash(g.State))
	fmt.Fprintf(w, "Protocol type:  %s\n", orDash(g.ProtocolType))
	fmt.Fprintf(w, "Protocol:       %s\n", orDash(g.Protocol))
	fmt.Fprintf(w, "Coordinator:    %s\n", coordinator)
	fmt.Fprintf(w, "Members:        %d\n", len(g.Members))
	if len(g.Members) == 0 {
		return
	}
	fmt.Fprintln(w)
	tw := newTable(w)
	withErr := slices.ContainsFunc(g.Members, func(m groupMemberJSON) bool { return m.Error != "" })
	header := []any{"MEMBER", "CLIENT", "HOST", "INSTANCE", "ASSIGNED"}
	if withErr {
		header = append(header, "ERROR")
	}
	row(tw, header...)
	for _, m := range g.Members {
		cells := []any{m.MemberID, orDash(m.ClientID), orDash(m.ClientHost), orDash(m.InstanceID), assignedText(m.Assigned)}
		if withErr {
			cells = append(cells, orDash(m.Error))
		}
		row(tw, cells...)
	}
	tw.Flush()
}

// assignedText renders an assignment as "orders:0,1,2 payments:3", or
// "-" for none.
func assignedText(as map[string][]int32) string {
	if len(as) == 0 {
		return "-"
	}
	topics := make([]string, 0, len(as))
	for t := range as {
		topics = append(topics, t)
	}
	sort.Strings(topics)
	parts := make([]string, len(topics))
	for i, t := range topics {
		parts[i] = t + ":" + ids(as[t])
	}
	return strings.Join(parts, " ")
}

// ---- group lag ----

type groupLagJSON struct {
	Group      string             `json:"group"`
	Partitions []partitionLagJSON `json:"partitions"`
	// TotalLag sums the partitions whose lag is known.
	TotalLag int64 `json:"total_lag"`
}

type partitionLagJSON struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	// Committed, HighWatermark and Lag are null when unknown: no
	// committed offset, or the offsets could not be listed (see Error).
	Committed     *int64 `json:"committed"`
	HighWatermark *int64 `json:"high_watermark"`
	Lag           *int64 `json:"lag"`
	Member        string `json:"member,omitempty"`
	Error         string `json:"error,omitempty"`
}

func (a *app) groupLagCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "lag GROUP",
		Short: "Show how far a consumer group is behind, per partition",
		Long: `Show, for every partition a group has a committed offset for or that is
assigned to one of its members: the committed offset, the high watermark
(the offset the next record will get), the lag between them (records
still to consume) and the member that owns the partition now. A total
follows.

A partition without a committed offset shows "-" as its committed offset
and lag, and is left out of the total; with none committed, the total is
"unknown" (the group starts at its offset reset policy). A group that does not exist makes
riffle exit with status 1.`,
		Example: `  riffle group lag orders-service
  riffle group lag orders-service -o json | jq .total_lag`,
		Args: cobra.ExactArgs(1),
	}
	output := addOutputFlag(cmd)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		group := args[0]
		if strings.TrimSpace(group) == "" {
			return usageErrorf("empty group name")
		}
		cl, err := a.connect()
		if err != nil {
			return err
		}
		lags, err := cl.Admin().GroupLag(a.context(), group)
		if err != nil {
			return err
		}
		out := groupLagJSON{Group: group, Partitions: []partitionLagJSON{}}
		for _, l := range lags {
			pj := partitionLagJSON{Topic: l.Topic, Partition: l.Partition, Member: l.Member, Error: errText(l.Err)}
			pj.Committed = knownOffset(l.Committed)
			pj.HighWatermark = knownOffset(l.HighWatermark)
			if l.Committed >= 0 && l.HighWatermark >= 0 {
				lag := l.Lag
				pj.Lag = &lag
				out.TotalLag += lag
			}
			out.Partitions = append(out.Partitions, pj)
		}
		if *output == outputJSON {
			return writeJSON(a.stdout, out)
		}
		printGroupLag(a.stdout, out)
		return nil
	}
	return cmd
}

// knownOffset maps the library's -1 (unknown) to nil.
func knownOffset(o int64) *int64 {
	if o < 0 {
		return nil
	}
	return &o
}

func printGroupLag(w io.Writer, g groupLagJSON) {
	tw := newTable(w)
	withErr := slices.ContainsFunc(g.Partitions, func(p partitionLagJSON) bool { return p.Error != "" })
	header := []any{"TOPIC", "PARTITION", "COMMITTED", "HIGH-WATERMARK", "LAG", "MEMBER"}
	if withErr {
		header = append(header, "ERROR")
	}
	row(tw, header...)
	known := 0
	for _, p := range g.Partitions {
		cells := []any{p.Topic, p.Partition, dashOffset(p.Committed), dashOffset(p.HighWatermark), dashOffset(p.Lag), orDash(p.Member)}
		if withErr {
			cells = append(cells, orDash(p.Error))
		}
		row(tw, cells...)
		if p.Lag != nil {
			known++
		}
	}
	tw.Flush()
	switch none := len(g.Partitions) - known; {
	case known == 0 && none > 0:
		// Not 0: nothing committed is not caught up.
		fmt.Fprintf(w, "\nTotal lag:  unknown (none of %d partitions has a committed offset: the group starts where its offset reset policy says, earliest or latest)\n", none)
	case none > 0:
		fmt.Fprintf(w, "\nTotal lag:  %d (%d of %d partitions; %d without a committed offset, not counted)\n", g.TotalLag, known, len(g.Partitions), none)
	default:
		fmt.Fprintf(w, "\nTotal lag:  %d (%d of %d partitions)\n", g.TotalLag, known, len(g.Partitions))
	}
}

func dashOffset(o *int64) string {
	if o == nil {
		return "-"
	}
	return fmt.Sprint(*o)
}

// ---- group reset ----

type groupResetJSON struct {
	Group string `json:"group"`
	To    string `json:"to"`
	// Executed is false for a dry run.
	Executed   bool                 `json:"executed"`
	Partitions []partitionResetJSON `json:"partitions"`
}

type partitionResetJSON struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	// Current is the committed offset before the reset, null if none.
	Current *int64 `json:"current"`
	New     int64  `json:"new"`
}

func (a *app) groupResetCmd() *cobra.Command {
	var (
		to      string
		topics  []string
		execute bool
	)
	cmd := &cobra.Command{
		Use:   "reset GROUP --to earliest|latest|OFFSET|TIME [--topic TOPIC...] [--execute]",
		Short: "Reset the committed offsets of an inactive consumer group",
		Long: `Reset the committed offsets of a group, on every partition of the topics
given with --topic (by default, of every topic the group has committed
offsets for), to:

  earliest   the first offset still in the log
  latest     the end of the log: the group skips everything written so far
  OFFSET     an exact offset, clamped to each partition's earliest and latest
  TIME       an RFC 3339 time (2024-05-01T12:00:00Z): the first record at or
             after it, or the end of the log where no record is that recent

Without --execute this is a dry run: riffle prints the current and new
offset of every partition and changes nothing. With --execute it commits
the new offsets. The group must have no members (state Empty or Dead):
stop its consumers first, or riffle exits with status 1.`,
		Example: `  riffle group reset orders-service --to earliest
  riffle group reset orders-service --to earliest --execute
  riffle group reset orders-service --to 2024-05-01T12:00:00Z --topic orders --execute
  riffle group reset orders-service --to 1500 --topic orders -o json`,
		Args: cobra.ExactArgs(1),
	}
	cmd.Flags().StringVar(&to, "to", "", "where to reset to, the `TARGET`: earliest, latest, an offset or an RFC 3339 time (required)")
	cmd.Flags().StringSliceVarP(&topics, "topic", "t", nil, "`TOPIC` to reset (repeatable; default: every topic the group has offsets for)")
	cmd.Flags().BoolVar(&execute, "execute", false, "commit the new offsets (default: dry run)")
	output := addOutputFlag(cmd)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		group := args[0]
		if strings.TrimSpace(group) == "" {
			return usageErrorf("empty group name")
		}
		target, desc, err := parseResetTarget(to)
		if err != nil {
			return err
		}
		topics = cleanList(topics)
		if cmd.Flags().Changed("topic") && len(topics) == 0 {
			return usageErrorf("--topic is empty")
		}
		if _, err := uniqueTopics(topics); err != nil {
			return err
		}
		cl, err := a.connect()
		if err != nil {
			return err
		}
		ctx := a.context()
		adm := cl.Admin()
		current, err := adm.FetchOffsets(ctx, group)
		if err != nil {
			return err
		}
		var planned map[riffle.TopicPartition]int64
		if execute {
			planned, err = adm.ResetOffsets(ctx, group, target, topics...)
			if errors.Is(err, riffle.ErrGroupActive) {
				return fmt.Errorf("%w (nothing was reset)", err)
			}
		} else {
			if err := a.warnIfActive(ctx, adm, group); err != nil {
				return err
			}
			planned, err = adm.PreviewResetOffsets(ctx, group, target, topics...)
		}
		if err != nil {
			return fmt.Errorf("resetting the offsets of group %q: %w", group, err)
		}
		if len(planned) == 0 {
			return fmt.Errorf("group %q has no committed offsets to reset: name the topics with --topic", group)
		}
		out := groupResetJSON{Group: group, To: desc, Executed: execute, Partitions: []partitionResetJSON{}}
		for tp, o := range planned {
			pr := partitionResetJSON{Topic: tp.Topic, Partition: tp.Partition, New: o}
			if c, ok := current[tp]; ok {
				off := c.Offset
				pr.Current = &off
			}
			out.Partitions = append(out.Partitions, pr)
		}
		sort.Slice(out.Partitions, func(i, j int) bool {
			pi, pj := out.Partitions[i], out.Partitions[j]
			if pi.Topic != pj.Topic {
				return pi.Topic < pj.Topic
			}
			return pi.Partition < pj.Partition
		})
		if *output == outputJSON {
			return writeJSON(a.stdout, out)
		}
		if execute {
			fmt.Fprintf(a.stdout, "Reset group %q to %s:\n\n", group, desc)
		} else {
			fmt.Fprintf(a.stdout, "Dry run: group %q would be reset to %s (pass --execute to commit):\n\n", group, desc)
		}
		tw := newTable(a.stdout)
		row(tw, "TOPIC", "PARTITION", "CURRENT", "NEW")
		for _, p := range out.Partitions {
			row(tw, p.Topic, p.Partition, dashOffset(p.Current), p.New)
		}
		tw.Flush()
		return nil
	}
	return cmd
}

// warnIfActive says on stderr that --execute would fail because the
// group has members.
func (a *app) warnIfActive(ctx context.Context, adm *riffle.Admin, group string) error {
	descs, err := adm.DescribeGroups(ctx, group)
	if err != nil {
		return fmt.Errorf("describing group %q: %w", group, err)
	}
	d := descs[0]
	if d.Err != nil || d.State == riffle.GroupStateEmpty || d.State == riffle.GroupStateDead {
		return nil
	}
	fmt.Fprintf(a.stderr, "riffle: warning: group %q is %s with %d member(s): --execute will fail until they stop\n", group, d.State, len(d.Members))
	return nil
}

// parseResetTarget parses --to. It returns the target and how to name it
// in output.
func parseResetTarget(s string) (riffle.StartOffset, string, error) {
	s = strings.TrimSpace(s)
	switch strings.ToLower(s) {
	case "":
		return riffle.StartOffset{}, "", usageErrorf("--to is required: earliest, latest, an offset or an RFC 3339 time")
	case "earliest":
		return riffle.AtEarliest(), "earliest", nil
	case "latest":
		return riffle.AtLatest(), "latest", nil
	}
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		if n < 0 {
			return riffle.StartOffset{}, "", usageErrorf("--to %d: offsets are not negative", n)
		}
		return riffle.AtOffset(n), fmt.Sprintf("offset %d", n), nil
	}
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return riffle.AtTime(t), t.Format(time.RFC3339Nano), nil
	}
	return riffle.StartOffset{}, "", usageErrorf("--to %q: want earliest, latest, an offset or an RFC 3339 time such as 2024-05-01T12:00:00Z", s)
}

// ---- group delete ----

func (a *app) groupDeleteCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "delete GROUP...",
		Aliases: []string{"rm"},
		Short:   "Delete consumer groups and their committed offsets",
		Long: `Delete one or more groups with all their committed offsets. Only groups
without members can be deleted. There is no confirmation prompt and no
undo.

Each group is reported on its own line: deleted ones on stdout, failures
(such as a group that still has members, NON_EMPTY_GROUP, or does not
exist, GROUP_ID_NOT_FOUND) on stderr. riffle exits with status 1 if any
group could not be deleted.`,
		Example: `  riffle group delete orders-service
  riffle group delete old-a old-b`,
		Args: cobra.MinimumNArgs(1),
	}
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		names, err := uniqueGroups(args)
		if err != nil {
			return err
		}
		cl, err := a.connect()
		if err != nil {
			return err
		}
		results, err := cl.Admin().DeleteGroups(a.context(), names...)
		if err != nil {
			return fmt.Errorf("deleting groups: %w", err)
		}
		failed := 0
		for _, r := range results {
			if r.Err != nil {
				fmt.Fprintf(a.stderr, "riffle: group %q: %s\n", r.Group, errText(r.Err))
				failed++
				continue
			}
			fmt.Fprintf(a.stdout, "deleted group %q\n", r.Group)
		}
		if failed > 0 {
			return errReported
		}
		return nil
	}
	return cmd
}

// uniqueGroups rejects empty and repeated group names.
func uniqueGroups(args []string) ([]string, error) {
	seen := map[string]bool{}
	for _, g := range args {
		switch {
		case strings.TrimSpace(g) == "":
			return nil, usageErrorf("empty group name")
		case seen[g]:
			return nil, usageErrorf("group %q given twice", g)
		}
		seen[g] = true
	}
	return args, nil
}
