package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/riffle-go/riffle"
	"github.com/spf13/cobra"
)

func (a *app) topicCmd() *cobra.Command {
	cmd := groupCmd(&cobra.Command{
		Use:   "topic",
		Short: "List, describe, create and delete topics, add partitions",
		Long: `Manage topics: list them, describe their partitions, offsets and configs,
create them, add partitions to them and delete them. Creating topics and
adding partitions can be checked by the brokers first (--validate-only).`,
		Example: `  riffle topic list
  riffle topic describe orders
  riffle topic create orders -p 12 -r 3 --config retention.ms=86400000
  riffle topic create orders -p 12 -r 3 --validate-only
  riffle topic add-partitions orders -p 24
  riffle topic delete orders`,
	})
	cmd.AddCommand(a.topicListCmd(), a.topicDescribeCmd(), a.topicCreateCmd(), a.topicAddPartitionsCmd(), a.topicDeleteCmd())
	return cmd
}

// ---- topic list ----

func (a *app) topicListCmd() *cobra.Command {
	var internal bool
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List topics with their partition count and replication factor",
		Long: `List the topics of the cluster, sorted by name, with their number of
partitions and replication factor. Internal topics (such as
__consumer_offsets) are hidden unless --internal is given.`,
		Example: `  riffle topic list
  riffle topic list --internal
  riffle topic list -o json | jq -r '.[].name'`,
		Args: cobra.NoArgs,
	}
	cmd.Flags().BoolVar(&internal, "internal", false, "include internal topics")
	output := addOutputFlag(cmd)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		cl, err := a.connect()
		if err != nil {
			return err
		}
		topics, err := listTopics(a.context(), cl, internal)
		if err != nil {
			return err
		}
		if *output == outputJSON {
			return writeJSON(a.stdout, topics)
		}
		printTopicList(a.stdout, topics)
		return nil
	}
	return cmd
}

type topicSummary struct {
	Name              string `json:"name"`
	ID                string `json:"id,omitempty"`
	Partitions        int    `json:"partitions"`
	ReplicationFactor int    `json:"replication_factor"`
	Internal          bool   `json:"internal"`
	Error             string `json:"error,omitempty"`
}

func listTopics(ctx context.Context, cl *riffle.Client, internal bool) ([]topicSummary, error) {
	details, err := cl.Admin().ListTopics(ctx)
	if err != nil {
		return nil, fmt.Errorf("listing topics: %w", err)
	}
	out := []topicSummary{}
	for _, d := range details {
		if d.Internal && !internal {
			continue
		}
		out = append(out, topicSummary{
			Name: d.Name, ID: topicID(d.ID), Partitions: len(d.Partitions),
			ReplicationFactor: replicationFactor(d.Partitions), Internal: d.Internal, Error: errText(d.Err),
		})
	}
	return out, nil
}

func printTopicList(w io.Writer, topics []topicSummary) {
	tw := newTable(w)
	withErr := slices.ContainsFunc(topics, func(t topicSummary) bool { return t.Error != "" })
	header := []any{"NAME", "PARTITIONS", "REPLICATION", "INTERNAL"}
	if withErr {
		header = append(header, "ERROR")
	}
	row(tw, header...)
	for _, t := range topics {
		cells := []any{t.Name, t.Partitions, t.ReplicationFactor, yesNo(t.Internal)}
		if withErr {
			cells = append(cells, orDash(t.Error))
		}
		row(tw, cells...)
	}
	tw.Flush()
}

// replicationFactor is the largest replica count among the partitions
// (they normally all have the same).
func replicationFactor(ps []riffle.PartitionDetail) int {
	n := 0
	for _, p := range ps {
		n = max(n, len(p.Replicas))
	}
	return n
}

// ---- topic describe ----

func (a *app) topicDescribeCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "describe TOPIC...",
		Short: "Describe topics: partitions, leaders, replicas, offsets and configs",
		Long: `Describe each named topic: for every partition its leader, leader epoch,
replicas, in-sync replicas (ISR), offline replicas, and earliest and latest
offsets; then the topic configs that differ from the defaults, with where
they come from.

A topic that does not exist is reported on stderr and makes riffle exit
with status 1 after describing the others.`,
		Example: `  riffle topic describe orders
  riffle topic describe orders payments -o json`,
		Args: cobra.MinimumNArgs(1),
	}
	output := addOutputFlag(cmd)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		names, err := uniqueTopics(args)
		if err != nil {
			return err
		}
		cl, err := a.connect()
		if err != nil {
			return err
		}
		topics, err := describeTopics(a.context(), cl, names)
		if err != nil {
			return err
		}
		if *output == outputJSON {
			if err := writeJSON(a.stdout, topics); err != nil {
				return err
			}
		} else {
			printTopicDescriptions(a.stdout, topics)
		}
		failed := false
		for _, t := range topics {
			for _, e := range t.errs {
				fmt.Fprintf(a.stderr, "riffle: topic %q: %s\n", t.Name, errText(e))
				failed = true
			}
		}
		if failed {
			return errReported
		}
		return nil
	}
	return cmd
}

type topicDescription struct {
	Name              string          `json:"name"`
	ID                string          `json:"id,omitempty"`
	Internal          bool            `json:"internal"`
	ReplicationFactor int             `json:"replication_factor"`
	Partitions        []partitionInfo `json:"partitions"`
	// Configs are the configs that differ from the defaults.
	Configs []configInfo `json:"configs"`
	Error   string       `json:"error,omitempty"`

	errs []error // what went wrong for this topic, for stderr
}

type partitionInfo struct {
	Partition   int32   `json:"partition"`
	Leader      int32   `json:"leader"`
	LeaderEpoch int32   `json:"leader_epoch"`
	Replicas    []int32 `json:"replicas"`
	ISR         []int32 `json:"isr"`
	Offline     []int32 `json:"offline"`
	// Offsets are null when they could not be listed (see Error).
	EarliestOffset *int64 `json:"earliest_offset"`
	LatestOffset   *int64 `json:"latest_offset"`
	Error          string `json:"error,omitempty"`
}

type configInfo struct {
	Name      string  `json:"name"`
	Value     *string `json:"value"` // null when sensitive
	Source    string  `json:"source"`
	Sensitive bool    `json:"sensitive,omitempty"`
	ReadOnly  bool    `json:"read_only,omitempty"`
}

// describeTopics gathers metadata, offsets and configs of the topics, in
// the order given. Per-topic problems land in the topic's errs; the error
// is for failures of the whole call.
func describeTopics(ctx context.Context, cl *riffle.Client, names []string) ([]topicDescription, error) {
	adm := cl.Admin()
	details, err := adm.ListTopics(ctx, names...)
	if err != nil {
		return nil, fmt.Errorf("fetching topic metadata: %w", err)
	}
	byName := map[string]riffle.TopicDetail{}
	for _, d := range details {
		byName[d.Name] = d
	}
	out := make([]topicDescription, len(names))
	index := map[string]int{}
	var found []string // topics that exist, for the offset and config requests
	for i, name := range names {
		index[name] = i
		d, ok := byName[name]
		t := &out[i]
		t.Name, t.Partitions, t.Configs = name, []partitionInfo{}, []configInfo{}
		switch {
		case !ok:
			t.errs = append(t.errs, fmt.Errorf("missing from the metadata response"))
			t.Error = errText(t.errs[0])
			continue
		case d.Err != nil:
			t.errs = append(t.errs, d.Err)
			t.Error = errText(d.Err)
			continue
		}
		found = append(found, name)
		t.ID, t.Internal, t.ReplicationFactor = topicID(d.ID), d.Internal, replicationFactor(d.Partitions)
		for _, p := range d.Partitions {
			t.Partitions = append(t.Partitions, partitionInfo{
				Partition: p.Partition, Leader: p.Leader, LeaderEpoch: p.LeaderEpoch,
				Replicas: orEmpty(p.Replicas), ISR: orEmpty(p.ISR), Offline: orEmpty(p.Offline),
				Error: errText(p.Err),
			})
		}
	}
	if len(found) == 0 {
		return out, nil
	}

	partition := func(topic string, p int32) *partitionInfo {
		t := &out[index[topic]]
		for i := range t.Partitions {
			if t.Partitions[i].Partition == p {
				return &t.Partitions[i]
			}
		}
		return nil
	}
	for _, which := range []struct {
		ts   int64
		name string
	}{{riffle.OffsetEarliest, "earliest"}, {riffle.OffsetLatest, "latest"}} {
		offsets, err := adm.ListOffsets(ctx, which.ts, found...)
		if err != nil {
			return nil, fmt.Errorf("listing %s offsets: %w", which.name, err)
		}
		for _, o := range offsets {
			p := partition(o.Topic, o.Partition)
			if p == nil {
				continue
			}
			if o.Err != nil {
				if p.Error == "" {
					p.Error = fmt.Sprintf("%s offset: %s", which.name, errText(o.Err))
				}
				continue
			}
			off := o.Offset
			if which.ts == riffle.OffsetEarliest {
				p.EarliestOffset = &off
			} else {
				p.LatestOffset = &off
			}
		}
	}

	configs, err := adm.DescribeTopicConfigs(ctx, found...)
	if err != nil {
		return nil, fmt.Errorf("describing topic configs: %w", err)
	}
	for _, tc := range configs {
		i, ok := index[tc.Topic]
		if !ok {
			continue
		}
		t := &out[i]
		if tc.Err != nil {
			t.errs = append(t.errs, fmt.Errorf("configs: %w", tc.Err))
			t.Error = errText(t.errs[len(t.errs)-1])
			continue
		}
		for _, c := range tc.Configs {
			if c.IsDefault {
				continue
			}
			t.Configs = append(t.Configs, configInfo{Name: c.Name, Value: c.Value, Source: c.Source, Sensitive: c.Sensitive, ReadOnly: c.ReadOnly})
		}
	}
	return out, nil
}

func printTopicDescriptions(w io.Writer, topics []topicDescription) {
	first := true
	for _, t := range topics {
		if t.Error != "" && len(t.Partitions) == 0 {
			continue // reported on stderr
		}
		if !first {
			fmt.Fprintln(w)
		}
		first = false
		printTopicDescription(w, t)
	}
}

func printTopicDescription(w io.Writer, t topicDescription) {
	fmt.Fprintf(w, "Topic:        %s\n", t.Name)
	if t.ID != "" {
		fmt.Fprintf(w, "ID:           %s\n", t.ID)
	}
	fmt.Fprintf(w, "Partitions:   %d\nReplication:  %d\n", len(t.Partitions), t.ReplicationFactor)
	if t.Internal {
		fmt.Fprintf(w, "Internal:     yes\n")
	}
	fmt.Fprintln(w)

	tw := newTable(w)
	withErr := slices.ContainsFunc(t.Partitions, func(p partitionInfo) bool { return p.Error != "" })
	header := []any{"PARTITION", "LEADER", "EPOCH", "REPLICAS", "ISR", "OFFLINE", "EARLIEST", "LATEST"}
	if withErr {
		header = append(header, "ERROR")
	}
	row(tw, header...)
	for _, p := range t.Partitions {
		cells := []any{p.Partition, p.Leader, p.LeaderEpoch, ids(p.Replicas), ids(p.ISR), ids(p.Offline), offset(p.EarliestOffset), offset(p.LatestOffset)}
		if withErr {
			cells = append(cells, orDash(p.Error))
		}
		row(tw, cells...)
	}
	tw.Flush()

	fmt.Fprintln(w)
	if len(t.Configs) == 0 {
		fmt.Fprintln(w, "Configs:      all defaults")
		return
	}
	fmt.Fprintln(w, "Configs (non-default):")
	tw = newTable(w)
	for _, c := range t.Configs {
		value := "(sensitive)"
		if c.Value != nil {
			value = *c.Value
		} else if !c.Sensitive {
			value = "(unset)"
		}
		row(tw, "  "+c.Name, "= "+value, "("+strings.ToLower(strings.ReplaceAll(c.Source, "_", " "))+")")
	}
	tw.Flush()
}

func offset(o *int64) string {
	if o == nil {
		return "?"
	}
	return fmt.Sprint(*o)
}

// ---- topic create ----

func (a *app) topicCreateCmd() *cobra.Command {
	var (
		partitions   int32
		replication  int16
		configs      []string
		validateOnly bool
	)
	cmd := &cobra.Command{
		Use:   "create TOPIC...",
		Short: "Create topics",
		Long: `Create one or more topics with the same partition count, replication
factor and configs. Without -p or -r the broker defaults apply
(num.partitions, default.replication.factor).

Each topic is reported on its own line: created ones on stdout, failures
(such as a topic that already exists) on stderr. riffle exits with status
1 if any topic could not be created.

With --validate-only the brokers check the topics (name, partitions,
replication factor, configs, authorization, create policies) and create
nothing: each topic that would be created is reported as such.`,
		Example: `  riffle topic create orders
  riffle topic create orders payments -p 12 -r 3
  riffle topic create compacted -p 1 --config cleanup.policy=compact --config min.compaction.lag.ms=60000
  riffle topic create orders -p 12 -r 5 --validate-only`,
		Args: cobra.MinimumNArgs(1),
	}
	cmd.Flags().Int32VarP(&partitions, "partitions", "p", -1, "number `N` of partitions (default: the broker's num.partitions)")
	cmd.Flags().Int16VarP(&replication, "replication", "r", -1, "replication factor `N`, replicas per partition (default: the broker's default.replication.factor)")
	cmd.Flags().StringArrayVarP(&configs, "config", "c", nil, "topic config `KEY=VALUE` (repeatable)")
	cmd.Flags().BoolVar(&validateOnly, "validate-only", false, "only have the brokers check the topics: create nothing")
	defaultInUsage(cmd.Flags(), "partitions", "replication")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		names, err := uniqueTopics(args)
		if err != nil {
			return err
		}
		if partitions == 0 || partitions < -1 {
			return usageErrorf("--partitions must be positive (or -1 for the broker default), got %d", partitions)
		}
		if replication == 0 || replication < -1 {
			return usageErrorf("--replication must be positive (or -1 for the broker default), got %d", replication)
		}
		cfg, err := parseConfigs(configs)
		if err != nil {
			return err
		}
		cl, err := a.connect()
		if err != nil {
			return err
		}
		specs := make([]riffle.TopicSpec, len(names))
		for i, n := range names {
			specs[i] = riffle.TopicSpec{Name: n, Partitions: partitions, ReplicationFactor: replication, Configs: cfg}
		}
		if validateOnly {
			results, err := cl.Admin().ValidateOnly().CreateTopics(a.context(), specs...)
			if err != nil {
				return fmt.Errorf("validating topics: %w", err)
			}
			return a.reportTopicResults("would create", results)
		}
		results, err := cl.Admin().CreateTopics(a.context(), specs...)
		if err != nil {
			return fmt.Errorf("creating topics: %w", err)
		}
		return a.reportTopicResults("created", results)
	}
	return cmd
}

// ---- topic add-partitions ----

func (a *app) topicAddPartitionsCmd() *cobra.Command {
	var (
		partitions   int32
		validateOnly bool
	)
	cmd := &cobra.Command{
		Use:   "add-partitions TOPIC... -p N",
		Short: "Raise the partition count of topics",
		Long: `Raise the partition count of one or more topics to N, the new total (as
kafka-topics.sh --alter --partitions N). Partitions cannot be removed: a
count below the current one fails (INVALID_PARTITIONS). Existing records
stay where they are, so new records of a key may go to another partition
than the key's earlier ones.

Each topic is reported on its own line: changed ones on stdout, failures
on stderr. riffle exits with status 1 if any topic failed. With
--validate-only the brokers check the change and make none.`,
		Example: `  riffle topic add-partitions orders -p 24
  riffle topic add-partitions orders payments -p 12 --validate-only`,
		Args: cobra.MinimumNArgs(1),
	}
	cmd.Flags().Int32VarP(&partitions, "partitions", "p", 0, "the new total number `N` of partitions (required)")
	cmd.Flags().BoolVar(&validateOnly, "validate-only", false, "only have the brokers check the change: add no partition")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		names, err := uniqueTopics(args)
		if err != nil {
			return err
		}
		if partitions <= 0 {
			return usageErrorf("--partitions (the new total) must be positive, got %d", partitions)
		}
		cl, err := a.connect()
		if err != nil {
			return err
		}
		line := func(verb string) func(string) string {
			return func(topic string) string { return fmt.Sprintf("%s topic %q to %d partitions", verb, topic, partitions) }
		}
		if validateOnly {
			results, err := cl.Admin().ValidateOnly().CreatePartitions(a.context(), partitions, names...)
			if err != nil {
				return fmt.Errorf("validating partitions: %w", err)
			}
			return a.reportTopics(results, line("would raise"))
		}
		results, err := cl.Admin().CreatePartitions(a.context(), partitions, names...)
		if err != nil {
			return fmt.Errorf("adding partitions: %w", err)
		}
		return a.reportTopics(results, line("raised"))
	}
	return cmd
}

// parseConfigs parses --config key=value flags.
func parseConfigs(kvs []string) (map[string]string, error) {
	if len(kvs) == 0 {
		return nil, nil
	}
	out := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		k, v, ok := strings.Cut(kv, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			return nil, usageErrorf("--config %q: want key=value", kv)
		}
		if _, dup := out[k]; dup {
			return nil, usageErrorf("--config %s given twice", k)
		}
		out[k] = v
	}
	return out, nil
}

// ---- topic delete ----

func (a *app) topicDeleteCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "delete TOPIC...",
		Aliases: []string{"rm"},
		Short:   "Delete topics",
		Long: `Delete one or more topics and all their data. There is no confirmation
prompt and no undo.

Each topic is reported on its own line: deleted ones on stdout, failures
(such as a topic that does not exist) on stderr. riffle exits with status
1 if any topic could not be deleted.`,
		Example: `  riffle topic delete orders
  riffle topic delete orders payments`,
		Args: cobra.MinimumNArgs(1),
	}
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		names, err := uniqueTopics(args)
		if err != nil {
			return err
		}
		cl, err := a.connect()
		if err != nil {
			return err
		}
		results, err := cl.Admin().DeleteTopics(a.context(), names...)
		if err != nil {
			return fmt.Errorf("deleting topics: %w", err)
		}
		return a.reportTopicResults("deleted", results)
	}
	return cmd
}

// reportTopicResults prints one line per topic: successes on stdout
// ("VERB topic NAME"), failures on stderr. It returns errReported if any
// topic failed.
func (a *app) reportTopicResults(verb string, results riffle.TopicResults) error {
	return a.reportTopics(results, func(topic string) string { return fmt.Sprintf("%s topic %q", verb, topic) })
}

// reportTopics is reportTopicResults with success lines from line.
func (a *app) reportTopics(results riffle.TopicResults, line func(topic string) string) error {
	failed := 0
	for _, r := range results {
		if r.Err != nil {
			fmt.Fprintf(a.stderr, "riffle: topic %q: %s\n", r.Topic, errText(r.Err))
			failed++
			continue
		}
		fmt.Fprintln(a.stdout, line(r.Topic))
	}
	if failed > 0 {
		return errReported
	}
	return nil
}

// uniqueTopics rejects empty and repeated topic names.
func uniqueTopics(args []string) ([]string, error) {
	seen := map[string]bool{}
	for _, t := range args {
		switch {
		case strings.TrimSpace(t) == "":
			return nil, usageErrorf("empty topic name")
		case seen[t]:
			return nil, usageErrorf("topic %q given twice", t)
		}
		seen[t] = true
	}
	return args, nil
}
