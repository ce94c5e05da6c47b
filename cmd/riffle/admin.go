package main

import (
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"

	"github.com/riffle-go/riffle"
	"github.com/spf13/cobra"
)

// Commands for the rest of the admin API: acl, config, records, user.

// envScramPassword is where "riffle user scram set" reads the password.
const envScramPassword = "RIFFLE_SCRAM_PASSWORD"

// ==== acl ====

func (a *app) aclCmd() *cobra.Command {
	cmd := groupCmd(&cobra.Command{
		Use:   "acl",
		Short: "List, create and delete ACLs",
		Long: `Manage access control lists (the cluster needs an authorizer): list the
ACLs a filter matches, create ACLs, and delete the ACLs filters match.
Enum values are Kafka's names in any case, e.g. --resource-type topic,
--pattern prefixed, --operation describe-configs, --permission deny.`,
		Example: `  riffle acl list
  riffle acl list --principal User:alice -o json
  riffle acl create --resource-type topic --resource orders --principal User:alice --operation read --operation describe
  riffle acl delete --principal User:alice --resource-type topic`,
	})
	cmd.AddCommand(a.aclListCmd(), a.aclCreateCmd(), a.aclDeleteCmd())
	return cmd
}

// aclFlags are the flags that describe an ACL or a filter.
type aclFlags struct {
	resourceType, resource, pattern, principal, host, permission string
	operations                                                   []string
}

func (f *aclFlags) add(cmd *cobra.Command, filter bool) {
	fs := cmd.Flags()
	anyNote := ""
	if filter {
		anyNote = " (default: any)"
	}
	fs.StringVar(&f.resourceType, "resource-type", "", "resource `TYPE`: topic, group, cluster, transactional-id, delegation-token, user"+anyNote)
	fs.StringVar(&f.resource, "resource", "", "resource `NAME` (kafka-cluster for the cluster; * for every one)"+anyNote)
	if filter {
		fs.StringVar(&f.pattern, "pattern", "", "pattern `TYPE`: literal, prefixed, match (the ACLs that apply to --resource) or any (default: any)")
	} else {
		fs.StringVar(&f.pattern, "pattern", "", "pattern `TYPE`: literal or prefixed (default: literal)")
	}
	fs.StringVar(&f.principal, "principal", "", "`PRINCIPAL`, e.g. User:alice"+anyNote)
	hostNote := " (default: * for every host)"
	if filter {
		hostNote = anyNote
	}
	fs.StringVar(&f.host, "host", "", "client `HOST`"+hostNote)
	fs.StringArrayVar(&f.operations, "operation", nil, "`OPERATION`: all, read, write, create, delete, alter, describe, cluster-action, describe-configs, alter-configs, idempotent-write, ... (repeatable)"+anyNote)
	permNote := " (default: allow)"
	if filter {
		permNote = anyNote
	}
	fs.StringVar(&f.permission, "permission", "", "`PERMISSION`: allow or deny"+permNote)
}

// filters returns one filter per --operation (one with any operation when
// none is given).
func (f *aclFlags) filters() ([]riffle.ACLFilter, error) {
	base := riffle.ACLFilter{ResourceName: f.resource, Principal: f.principal, Host: f.host}
	var err error
	if f.resourceType != "" {
		if base.ResourceType, err = riffle.ParseACLResourceType(f.resourceType); err != nil {
			return nil, usageErrorf("--resource-type: %s", errText(err))
		}
	}
	if f.pattern != "" {
		if base.PatternType, err = riffle.ParseACLPatternType(f.pattern); err != nil {
			return nil, usageErrorf("--pattern: %s", errText(err))
		}
	}
	if f.permission != "" {
		if base.Permission, err = riffle.ParseACLPermission(f.permission); err != nil {
			return nil, usageErrorf("--permission: %s", errText(err))
		}
	}
	if len(f.operations) == 0 {
		return []riffle.ACLFilter{base}, nil
	}
	var out []riffle.ACLFilter
	for _, o := range f.operations {
		fl := base
		if fl.Operation, err = riffle.ParseACLOperation(o); err != nil {
			return nil, usageErrorf("--operation: %s", errText(err))
		}
		out = append(out, fl)
	}
	return out, nil
}

type aclJSON struct {
	ResourceType string `json:"resource_type"`
	Resource     string `json:"resource"`
	Pattern      string `json:"pattern"`
	Principal    string `json:"principal"`
	Host         string `json:"host"`
	Operation    string `json:"operation"`
	Permission   string `json:"permission"`
	Error        string `json:"error,omitempty"`
}

func toACLJSON(b riffle.ACLBinding, err error) aclJSON {
	return aclJSON{ResourceType: b.ResourceType.String(), Resource: b.ResourceName, Pattern: b.PatternType.String(),
		Principal: b.Principal, Host: b.Host, Operation: b.Operation.String(), Permission: b.Permission.String(), Error: errText(err)}
}

func printACLs(w io.Writer, acls []aclJSON) {
	tw := newTable(w)
	row(tw, "RESOURCE-TYPE", "RESOURCE", "PATTERN", "PRINCIPAL", "HOST", "OPERATION", "PERMISSION")
	for _, b := range acls {
		row(tw, b.ResourceType, b.Resource, b.Pattern, b.Principal, b.Host, b.Operation, b.Permission)
	}
	tw.Flush()
}

func (a *app) aclListCmd() *cobra.Command {
	var f aclFlags
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List the ACLs a filter matches",
		Long: `List the ACLs of the cluster, sorted, or those the filter flags match (each
flag left out matches anything). With several --operation flags, the ACLs
of any of them are listed.`,
		Example: `  riffle acl list
  riffle acl list --resource-type topic --resource orders --pattern match
  riffle acl list --principal User:alice -o json`,
		Args: cobra.NoArgs,
	}
	f.add(cmd, true)
	output := addOutputFlag(cmd)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		filters, err := f.filters()
		if err != nil {
			return err
		}
		cl, err := a.connect()
		if err != nil {
			return err
		}
		out := []aclJSON{}
		for _, fl := range filters {
			acls, err := cl.Admin().DescribeACLs(a.context(), fl)
			if err != nil {
				return fmt.Errorf("listing ACLs: %w", err)
			}
			for _, b := range acls {
				out = append(out, toACLJSON(b, nil))
			}
		}
		if *output == outputJSON {
			return writeJSON(a.stdout, out)
		}
		printACLs(a.stdout, out)
		return nil
	}
	return cmd
}

func (a *app) aclCreateCmd() *cobra.Command {
	var f aclFlags
	cmd := &cobra.Command{
		Use:   "create",
		Short: "Create ACLs",
		Long: `Create an ACL for each --operation: --principal may (--permission allow,
the default) or may not (deny) do it on the resources --resource-type and
--resource name, literally or as a prefix (--pattern prefixed), from
--host (default: every host).

Each ACL is reported on its own line: created ones on stdout, failures on
stderr. riffle exits with status 1 if any ACL could not be created.`,
		Example: `  riffle acl create --resource-type topic --resource orders --principal User:alice --operation read --operation describe
  riffle acl create --resource-type group --resource billing- --pattern prefixed --principal User:bob --operation read
  riffle acl create --resource-type topic --resource '*' --principal User:mallory --operation all --permission deny`,
		Args: cobra.NoArgs,
	}
	f.add(cmd, false)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		switch {
		case f.resourceType == "":
			return usageErrorf("--resource-type is required")
		case f.resource == "":
			return usageErrorf("--resource is required")
		case f.principal == "":
			return usageErrorf("--principal is required (e.g. User:alice)")
		case len(f.operations) == 0:
			return usageErrorf("--operation is required")
		}
		if f.permission == "" {
			f.permission = "allow"
		}
		if f.pattern == "" {
			f.pattern = "literal"
		}
		filters, err := f.filters()
		if err != nil {
			return err
		}
		bindings := make([]riffle.ACLBinding, len(filters))
		for i, fl := range filters {
			bindings[i] = riffle.ACLBinding(fl) // the same fields
		}
		cl, err := a.connect()
		if err != nil {
			return err
		}
		res, err := cl.Admin().CreateACLs(a.context(), bindings...)
		if err != nil {
			return fmt.Errorf("creating ACLs: %w", err)
		}
		return reportItems(a, res,
			func(r riffle.ACLResult) (string, error) { return fmt.Sprintf("ACL %v", r.ACL), r.Err },
			func(r riffle.ACLResult) string { return fmt.Sprintf("created ACL %v", r.ACL) })
	}
	return cmd
}

func (a *app) aclDeleteCmd() *cobra.Command {
	var (
		f   aclFlags
		all bool
	)
	cmd := &cobra.Command{
		Use:     "delete",
		Aliases: []string{"rm"},
		Short:   "Delete the ACLs a filter matches",
		Long: `Delete the ACLs the filter flags match (each flag left out matches
anything; several --operation flags delete the ACLs of each) and print
them. Without any filter flag, --all is needed to delete every ACL.

Deleted ACLs are printed on stdout, failures on stderr; riffle exits with
status 1 if a filter failed.`,
		Example: `  riffle acl delete --principal User:alice
  riffle acl delete --resource-type topic --resource orders --operation read
  riffle acl delete --all -o json`,
		Args: cobra.NoArgs,
	}
	f.add(cmd, true)
	cmd.Flags().BoolVar(&all, "all", false, "delete every ACL (when no filter flag is given)")
	output := addOutputFlag(cmd)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		filtered := false
		for _, n := range []string{"resource-type", "resource", "pattern", "principal", "host", "operation", "permission"} {
			filtered = filtered || cmd.Flags().Changed(n)
		}
		if !filtered && !all {
			return usageErrorf("no filter flag given: give --all to delete every ACL")
		}
		filters, err := f.filters()
		if err != nil {
			return err
		}
		cl, err := a.connect()
		if err != nil {
			return err
		}
		res, err := cl.Admin().DeleteACLs(a.context(), filters...)
		if err != nil {
			return fmt.Errorf("deleting ACLs: %w", err)
		}
		out := []aclJSON{}
		failed := false
		for _, r := range res {
			if r.Err != nil {
				fmt.Fprintf(a.stderr, "riffle: deleting ACLs: %s\n", errText(r.Err))
				failed = true
				continue
			}
			for _, d := range r.Deleted {
				if d.Err != nil {
					fmt.Fprintf(a.stderr, "riffle: ACL %v: %s\n", d.ACL, errText(d.Err))
					failed = true
				}
				out = append(out, toACLJSON(d.ACL, d.Err))
			}
		}
		if *output == outputJSON {
			if err := writeJSON(a.stdout, out); err != nil {
				return err
			}
		} else {
			for _, b := range out {
				if b.Error == "" {
					fmt.Fprintf(a.stdout, "deleted ACL (%s:%s:%s, %s@%s, %s %s)\n", b.ResourceType, b.Pattern, b.Resource, b.Principal, b.Host, b.Operation, b.Permission)
				}
			}
			if len(out) == 0 && !failed {
				fmt.Fprintln(a.stdout, "no ACL matched")
			}
		}
		if failed {
			return errReported
		}
		return nil
	}
	return cmd
}

// ==== config ====

func (a *app) configCmd() *cobra.Command {
	cmd := groupCmd(&cobra.Command{
		Use:   "config",
		Short: "Describe, set and delete topic, broker and group configs",
		Long: `Manage the dynamic configs of a topic (--topic), a broker (--broker ID, or
--broker default for the cluster-wide default of every broker) or a group
(--group, a consumer or share group: e.g. share.auto.offset.reset and
share.isolation.level, which a share group's members cannot set): describe
them, set keys and delete keys (back to their defaults). Changes are
incremental: keys not named keep their values. With --validate-only the
brokers check a change and apply none of it.`,
		Example: `  riffle config describe --topic orders
  riffle config describe --broker 1 --all
  riffle config describe --group jobs --all
  riffle config set --topic orders retention.ms=86400000 cleanup.policy=compact
  riffle config set --broker default log.retention.ms=604800000
  riffle config set --group jobs share.auto.offset.reset=earliest
  riffle config set --topic orders retention.ms=86400000 --validate-only
  riffle config delete --topic orders retention.ms`,
	})
	cmd.AddCommand(a.configDescribeCmd(), a.configSetCmd(), a.configDeleteCmd())
	return cmd
}

// configKind is the kind of resource a config command is about.
type configKind int8

const (
	configTopic configKind = iota
	configBroker
	configGroup
)

// configTarget is --topic T, --broker N|default or --group G; check sets
// kind (and broker).
type configTarget struct {
	topic   string
	broker  string
	group   string
	loggers bool // the broker's logger levels (BROKER_LOGGER), not its configs

	kind     configKind
	brokerID int32
}

func (t *configTarget) add(cmd *cobra.Command) {
	cmd.Flags().StringVar(&t.topic, "topic", "", "the `TOPIC` whose configs to use")
	cmd.Flags().StringVar(&t.broker, "broker", "", "the broker `ID` whose configs to use, or default for the cluster-wide default")
	cmd.Flags().StringVar(&t.group, "group", "", "the `GROUP` (consumer or share group) whose configs to use")
	cmd.Flags().BoolVar(&t.loggers, "loggers", false, "with --broker ID: the broker's logger levels (BROKER_LOGGER) instead of its configs")
}

// addValidateOnly adds --validate-only to a command that changes configs.
func addValidateOnly(cmd *cobra.Command) *bool {
	return cmd.Flags().Bool("validate-only", false, "only have the broker check the change: apply nothing")
}

// check validates the flags: exactly one of --topic, --broker and --group.
func (t *configTarget) check() error {
	given := 0
	for _, f := range []string{t.topic, t.broker, t.group} {
		if f != "" {
			given++
		}
	}
	switch {
	case given > 1:
		return usageErrorf("give one of --topic, --broker and --group")
	case given == 0:
		return usageErrorf("give --topic TOPIC, --broker ID (or --broker default) or --group GROUP")
	case t.loggers && t.broker == "":
		return usageErrorf("--loggers needs --broker ID")
	case t.topic != "":
		t.kind = configTopic
		return nil
	case t.group != "":
		t.kind = configGroup
		return nil
	case strings.EqualFold(t.broker, "default"):
		if t.loggers {
			return usageErrorf("--loggers needs a broker id: loggers have no cluster-wide default")
		}
		t.kind, t.brokerID = configBroker, riffle.DefaultBroker
		return nil
	}
	n, err := strconv.ParseInt(t.broker, 10, 32)
	if err != nil || n < 0 {
		return usageErrorf("--broker %q: want a broker id (0 or more) or default", t.broker)
	}
	t.kind, t.brokerID = configBroker, int32(n)
	return nil
}

func (t *configTarget) name() string {
	switch {
	case t.kind == configTopic:
		return fmt.Sprintf("topic %q", t.topic)
	case t.kind == configGroup:
		return fmt.Sprintf("group %q", t.group)
	case t.brokerID == riffle.DefaultBroker:
		return "the default broker config"
	case t.loggers:
		return fmt.Sprintf("the loggers of broker %d", t.brokerID)
	}
	return fmt.Sprintf("broker %d", t.brokerID)
}

func (a *app) configDescribeCmd() *cobra.Command {
	var (
		target configTarget
		all    bool
	)
	cmd := &cobra.Command{
		Use:   "describe",
		Short: "Describe the configs of a topic, a broker or a group",
		Long: `Describe the configs of a topic, a broker or a group that differ from the
defaults (all of them with --all), sorted by name, with where each value
comes from. Sensitive values are never shown.`,
		Example: `  riffle config describe --topic orders
  riffle config describe --broker 0 --all
  riffle config describe --broker default -o json
  riffle config describe --broker 1 --loggers
  riffle config describe --group jobs --all`,
		Args: cobra.NoArgs,
	}
	target.add(cmd)
	cmd.Flags().BoolVar(&all, "all", false, "include configs at their defaults")
	output := addOutputFlag(cmd)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if err := target.check(); err != nil {
			return err
		}
		cl, err := a.connect()
		if err != nil {
			return err
		}
		var entries []riffle.ConfigEntry
		var itemErr error
		adm := cl.Admin()
		switch target.kind {
		case configBroker:
			describe := adm.DescribeBrokerConfigs
			if target.loggers {
				describe = adm.DescribeBrokerLoggers
			}
			res, err := describe(a.context(), target.brokerID)
			if err != nil {
				return fmt.Errorf("describing configs: %w", err)
			}
			entries, itemErr = res[0].Configs, res[0].Err
		case configGroup:
			res, err := adm.DescribeGroupConfigs(a.context(), target.group)
			if err != nil {
				return fmt.Errorf("describing configs: %w", err)
			}
			entries, itemErr = res[0].Configs, res[0].Err
		default:
			res, err := adm.DescribeTopicConfigs(a.context(), target.topic)
			if err != nil {
				return fmt.Errorf("describing configs: %w", err)
			}
			entries, itemErr = res[0].Configs, res[0].Err
		}
		if itemErr != nil {
			return fmt.Errorf("%s: %w", target.name(), itemErr)
		}
		out := []configInfo{}
		for _, c := range entries {
			if c.IsDefault && !all {
				continue
			}
			out = append(out, configInfo{Name: c.Name, Value: c.Value, Source: c.Source, Sensitive: c.Sensitive, ReadOnly: c.ReadOnly})
		}
		if *output == outputJSON {
			return writeJSON(a.stdout, out)
		}
		tw := newTable(a.stdout)
		row(tw, "NAME", "VALUE", "SOURCE")
		for _, c := range out {
			value := "(sensitive)"
			if c.Value != nil {
				value = *c.Value
			} else if !c.Sensitive {
				value = "(unset)"
			}
			row(tw, c.Name, value, strings.ToLower(strings.ReplaceAll(c.Source, "_", " ")))
		}
		tw.Flush()
		return nil
	}
	return cmd
}

func (a *app) configSetCmd() *cobra.Command {
	var target configTarget
	cmd := &cobra.Command{
		Use:   "set KEY=VALUE...",
		Short: "Set configs of a topic, a broker or a group",
		Long: `Set configs of a topic, a broker (dynamic broker configs only) or a group.
Keys not named keep their values. With --validate-only the broker checks
the change (names, values, authorization, alter policies) and applies none.`,
		Example: `  riffle config set --topic orders retention.ms=86400000
  riffle config set --broker 1 log.retention.ms=3600000
  riffle config set --broker default log.retention.ms=604800000
  riffle config set --broker 1 --loggers kafka.server.ReplicaManager=DEBUG
  riffle config set --group jobs share.auto.offset.reset=earliest share.isolation.level=read_committed
  riffle config set --topic orders cleanup.policy=compact --validate-only`,
		Args: cobra.MinimumNArgs(1),
	}
	target.add(cmd)
	validateOnly := addValidateOnly(cmd)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if err := target.check(); err != nil {
			return err
		}
		kvs, err := parseConfigs(args)
		if err != nil {
			return err
		}
		keys := make([]string, 0, len(kvs))
		for k := range kvs {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		ops := make([]configOp, len(keys))
		for i, k := range keys {
			v := kvs[k]
			ops[i] = configOp{name: k, value: &v, op: riffle.ConfigOpSet}
		}
		return a.alterConfigs(&target, ops, "set", *validateOnly)
	}
	return cmd
}

func (a *app) configDeleteCmd() *cobra.Command {
	var target configTarget
	cmd := &cobra.Command{
		Use:     "delete KEY...",
		Aliases: []string{"rm"},
		Short:   "Delete configs of a topic, a broker or a group (back to their defaults)",
		Long: `Delete dynamic configs of a topic, a broker or a group: they revert to their
defaults. With --validate-only the broker checks the change and applies
none.`,
		Example: `  riffle config delete --topic orders retention.ms
  riffle config delete --broker default log.retention.ms
  riffle config delete --group jobs share.auto.offset.reset
  riffle config delete --topic orders retention.ms --validate-only`,
		Args: cobra.MinimumNArgs(1),
	}
	target.add(cmd)
	validateOnly := addValidateOnly(cmd)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if err := target.check(); err != nil {
			return err
		}
		ops := make([]configOp, len(args))
		for i, k := range args {
			if strings.TrimSpace(k) == "" || strings.Contains(k, "=") {
				return usageErrorf("config key %q: want a key, without a value", k)
			}
			ops[i] = configOp{name: k, op: riffle.ConfigOpDelete}
		}
		return a.alterConfigs(&target, ops, "delete", *validateOnly)
	}
	return cmd
}

type configOp struct {
	name  string
	value *string
	op    riffle.ConfigOp
}

// alterConfigs applies ops (or has them validated) and reports each change
// with verb ("set", "delete"): "set k=v on ...", "deleted k on ...", "would
// set k=v on ..." when validating.
func (a *app) alterConfigs(target *configTarget, ops []configOp, verb string, validateOnly bool) error {
	cl, err := a.connect()
	if err != nil {
		return err
	}
	adm := cl.Admin()
	what := "altering configs"
	alterBroker, alterLoggers, alterTopic, alterGroup := adm.IncrementalAlterBrokerConfigs, adm.IncrementalAlterBrokerLoggers, adm.AlterTopicConfigs, adm.AlterGroupConfigs
	switch {
	case validateOnly:
		what = "validating config changes"
		v := adm.ValidateOnly()
		alterBroker, alterLoggers, alterTopic, alterGroup = v.IncrementalAlterBrokerConfigs, v.IncrementalAlterBrokerLoggers, v.AlterTopicConfigs, v.AlterGroupConfigs
		verb = "would " + verb
	case verb == "delete":
		verb = "deleted"
	}
	if target.loggers {
		alterBroker = alterLoggers
	}
	var itemErr error
	switch target.kind {
	case configBroker:
		changes := make([]riffle.BrokerConfigChange, len(ops))
		for i, o := range ops {
			changes[i] = riffle.BrokerConfigChange{Broker: target.brokerID, Name: o.name, Value: o.value, Op: o.op}
		}
		res, err := alterBroker(a.context(), changes...)
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		itemErr = res[0].Err
	case configGroup:
		changes := make([]riffle.GroupConfigChange, len(ops))
		for i, o := range ops {
			changes[i] = riffle.GroupConfigChange{Group: target.group, Name: o.name, Value: o.value, Op: o.op}
		}
		res, err := alterGroup(a.context(), changes...)
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		itemErr = res[0].Err
	default:
		changes := make([]riffle.AlterConfig, len(ops))
		for i, o := range ops {
			changes[i] = riffle.AlterConfig{Topic: target.topic, Name: o.name, Value: o.value, Op: o.op}
		}
		res, err := alterTopic(a.context(), changes...)
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		itemErr = res[0].Err
	}
	if itemErr != nil {
		return fmt.Errorf("%s: %w", target.name(), itemErr)
	}
	for _, o := range ops {
		if o.value != nil {
			fmt.Fprintf(a.stdout, "%s %s=%s on %s\n", verb, o.name, *o.value, target.name())
		} else {
			fmt.Fprintf(a.stdout, "%s %s on %s\n", verb, o.name, target.name())
		}
	}
	return nil
}

// ==== records ====

func (a *app) recordsCmd() *cobra.Command {
	cmd := groupCmd(&cobra.Command{
		Use:   "records",
		Short: "Delete the records of a partition below an offset",
		Long: `Manage records in place: delete the records of partitions below an offset
(the partitions' log start offset moves up; consumers there start at it).`,
		Example: `  riffle records delete --topic orders --partition 0 --before 1000
  riffle records delete --topic orders --partition 0,1,2 --before end`,
	})
	cmd.AddCommand(a.recordsDeleteCmd())
	return cmd
}

func (a *app) recordsDeleteCmd() *cobra.Command {
	var (
		topic      string
		partitions []int32
		before     string
	)
	cmd := &cobra.Command{
		Use:   "delete",
		Short: "Delete the records of partitions below an offset",
		Long: `Delete the records of each --partition of --topic below --before (an offset,
or end for every record up to the high watermark). Nothing asks for
confirmation and nothing can be undone. Each partition is reported on its
own line with its new low watermark (its first offset); failures on
stderr, and riffle then exits with status 1.`,
		Example: `  riffle records delete --topic orders --partition 0 --before 1000
  riffle records delete --topic orders --partition 0,1 --before end`,
		Args: cobra.NoArgs,
	}
	cmd.Flags().StringVar(&topic, "topic", "", "the `TOPIC`")
	cmd.Flags().Int32SliceVar(&partitions, "partition", nil, "`PARTITIONS`, comma-separated or repeated")
	cmd.Flags().StringVar(&before, "before", "", "delete records before this `OFFSET` (or end: all of them)")
	defaultInUsage(cmd.Flags(), "partition")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		switch {
		case topic == "":
			return usageErrorf("--topic is required")
		case len(partitions) == 0:
			return usageErrorf("--partition is required")
		case before == "":
			return usageErrorf("--before is required (an offset, or end)")
		}
		offset := riffle.OffsetLatest
		if !strings.EqualFold(before, "end") {
			n, err := strconv.ParseInt(before, 10, 64)
			if err != nil || n < 0 {
				return usageErrorf("--before %q: want an offset (0 or more) or end", before)
			}
			offset = n
		}
		want := map[riffle.TopicPartition]int64{}
		for _, p := range partitions {
			if p < 0 {
				return usageErrorf("--partition %d: want 0 or more", p)
			}
			want[riffle.TopicPartition{Topic: topic, Partition: p}] = offset
		}
		cl, err := a.connect()
		if err != nil {
			return err
		}
		res, err := cl.Admin().DeleteRecords(a.context(), want)
		if err != nil {
			return fmt.Errorf("deleting records: %w", err)
		}
		return reportItems(a, res,
			func(r riffle.DeletedRecords) (string, error) { return r.TopicPartition.String(), r.Err },
			func(r riffle.DeletedRecords) string {
				return fmt.Sprintf("%s: low watermark %d", r.TopicPartition, r.LowWatermark)
			})
	}
	return cmd
}

// ==== user scram ====

func (a *app) userCmd() *cobra.Command {
	cmd := groupCmd(&cobra.Command{
		Use:   "user",
		Short: "Manage users' SCRAM credentials",
		Long: `Manage the SCRAM credentials brokers check SASL/SCRAM logins against
(Kafka 2.7 or later): list them, set a user's password, delete a
credential.`,
		Example: `  riffle user scram list
  RIFFLE_SCRAM_PASSWORD=s3cret riffle user scram set alice --mechanism SCRAM-SHA-512
  riffle user scram delete alice --mechanism SCRAM-SHA-256`,
	})
	scram := groupCmd(&cobra.Command{
		Use:   "scram",
		Short: "List, set and delete SCRAM credentials",
		Long: `List users' SCRAM credentials, set a user's password (the salted password
is computed here, per KIP-554: the password itself is never sent) and
delete credentials.`,
		Example: `  riffle user scram list alice bob
  RIFFLE_SCRAM_PASSWORD=s3cret riffle user scram set alice --mechanism SCRAM-SHA-512 --iterations 8192
  riffle user scram delete alice --mechanism SCRAM-SHA-512`,
	})
	scram.AddCommand(a.scramListCmd(), a.scramSetCmd(), a.scramDeleteCmd())
	cmd.AddCommand(scram)
	return cmd
}

type scramUserJSON struct {
	User        string          `json:"user"`
	Credentials []scramCredJSON `json:"credentials"`
	Error       string          `json:"error,omitempty"`
}

type scramCredJSON struct {
	Mechanism  string `json:"mechanism"`
	Iterations int32  `json:"iterations"`
}

func (a *app) scramListCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "list [USER...]",
		Aliases: []string{"ls"},
		Short:   "List users' SCRAM credentials",
		Long: `List the SCRAM mechanisms and iteration counts of the named users, or of
every user that has credentials. A named user without credentials is
reported on stderr and makes riffle exit with status 1.`,
		Example: `  riffle user scram list
  riffle user scram list alice -o json`,
	}
	output := addOutputFlag(cmd)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		cl, err := a.connect()
		if err != nil {
			return err
		}
		users, err := cl.Admin().DescribeUserScramCredentials(a.context(), args...)
		if err != nil {
			return fmt.Errorf("listing SCRAM credentials: %w", err)
		}
		out := []scramUserJSON{}
		failed := false
		for _, u := range users {
			j := scramUserJSON{User: u.User, Credentials: []scramCredJSON{}, Error: errText(u.Err)}
			if u.Err != nil {
				fmt.Fprintf(a.stderr, "riffle: user %q: %s\n", u.User, errText(u.Err))
				failed = true
			}
			for _, c := range u.Credentials {
				j.Credentials = append(j.Credentials, scramCredJSON{Mechanism: c.Mechanism.String(), Iterations: c.Iterations})
			}
			out = append(out, j)
		}
		if *output == outputJSON {
			if err := writeJSON(a.stdout, out); err != nil {
				return err
			}
		} else {
			tw := newTable(a.stdout)
			row(tw, "USER", "MECHANISM", "ITERATIONS")
			for _, u := range out {
				for _, c := range u.Credentials {
					row(tw, u.User, c.Mechanism, c.Iterations)
				}
			}
			tw.Flush()
		}
		if failed {
			return errReported
		}
		return nil
	}
	return cmd
}

// mechanismFlag is --mechanism.
type mechanismFlag struct{ m riffle.ScramMechanism }

func (f *mechanismFlag) String() string {
	if f.m == 0 {
		return ""
	}
	return f.m.String()
}
func (f *mechanismFlag) Type() string { return "mechanism" }
func (f *mechanismFlag) Set(s string) error {
	m, err := riffle.ParseScramMechanism(s)
	if err != nil {
		return fmt.Errorf("want SCRAM-SHA-256 or SCRAM-SHA-512")
	}
	f.m = m
	return nil
}

func (a *app) scramSetCmd() *cobra.Command {
	var (
		mech       = mechanismFlag{riffle.ScramSHA512}
		iterations int32
		password   string
	)
	cmd := &cobra.Command{
		Use:   "set USER",
		Short: "Set a user's SCRAM password",
		Long: `Create or replace USER's SCRAM credential of --mechanism (SCRAM-SHA-512 by
default) with a password read from the ` + envScramPassword + ` environment
variable (or --password, which other users of the machine can see in the
process list). The salted password is computed here with a random salt;
the password is never sent.`,
		Example: `  RIFFLE_SCRAM_PASSWORD=s3cret riffle user scram set alice
  RIFFLE_SCRAM_PASSWORD=s3cret riffle user scram set alice --mechanism SCRAM-SHA-256 --iterations 8192`,
		Args: cobra.ExactArgs(1),
	}
	cmd.Flags().Var(&mech, "mechanism", "SCRAM `MECHANISM`: SCRAM-SHA-256 or SCRAM-SHA-512")
	cmd.Flags().Int32Var(&iterations, "iterations", 4096, "PBKDF2 iteration `COUNT` (brokers accept 4096 to 16384)")
	cmd.Flags().StringVar(&password, "password", "", "the new `PASSWORD` (prefer env "+envScramPassword+")")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if !cmd.Flags().Changed("password") {
			password = a.getenv(envScramPassword)
		}
		switch {
		case password == "":
			return usageErrorf("no password: set %s or --password", envScramPassword)
		case iterations <= 0:
			return usageErrorf("--iterations must be positive, got %d", iterations)
		case strings.TrimSpace(args[0]) == "":
			return usageErrorf("empty user name")
		}
		cl, err := a.connect()
		if err != nil {
			return err
		}
		return a.reportUserResults(cl.Admin().AlterUserScramCredentials(a.context(),
			riffle.ScramUpsertion(args[0], mech.m, iterations, password)))
	}
	return cmd
}

func (a *app) scramDeleteCmd() *cobra.Command {
	mech := mechanismFlag{}
	cmd := &cobra.Command{
		Use:     "delete USER...",
		Aliases: []string{"rm"},
		Short:   "Delete users' SCRAM credentials",
		Long:    `Delete the SCRAM credential of --mechanism of each USER.`,
		Example: `  riffle user scram delete alice --mechanism SCRAM-SHA-512`,
		Args:    cobra.MinimumNArgs(1),
	}
	cmd.Flags().Var(&mech, "mechanism", "SCRAM `MECHANISM`: SCRAM-SHA-256 or SCRAM-SHA-512 (required)")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if mech.m == 0 {
			return usageErrorf("--mechanism is required (SCRAM-SHA-256 or SCRAM-SHA-512)")
		}
		alts := make([]riffle.ScramAlteration, len(args))
		for i, u := range args {
			alts[i] = riffle.ScramDeletion(u, mech.m)
		}
		cl, err := a.connect()
		if err != nil {
			return err
		}
		return a.reportUserResults(cl.Admin().AlterUserScramCredentials(a.context(), alts...))
	}
	return cmd
}

func (a *app) reportUserResults(res riffle.UserResults, err error) error {
	if err != nil {
		return fmt.Errorf("altering SCRAM credentials: %w", err)
	}
	return reportItems(a, res,
		func(r riffle.UserResult) (string, error) { return fmt.Sprintf("user %q", r.User), r.Err },
		func(r riffle.UserResult) string { return fmt.Sprintf("updated SCRAM credentials of user %q", r.User) })
}
