package integration_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/riffle-go/riffle"
)

// Kafka's error codes the config tests expect (riffle has no sentinel for
// them; KafkaErrorForCode matches the broker's typed error).
var (
	errInvalidConfigCode  = riffle.KafkaErrorForCode(40) // INVALID_CONFIG
	errInvalidRequestCode = riffle.KafkaErrorForCode(42) // INVALID_REQUEST
)

// configEntry is the entry name of cs, and whether there is one.
func configEntry(cs []riffle.ConfigEntry, name string) (riffle.ConfigEntry, bool) {
	i := slices.IndexFunc(cs, func(e riffle.ConfigEntry) bool { return e.Name == name })
	if i < 0 {
		return riffle.ConfigEntry{}, false
	}
	return cs[i], true
}

func deref(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}

// synonymSources are the sources of e's synonyms, in order, with values.
func synonymSources(e riffle.ConfigEntry) []string {
	out := make([]string, len(e.Synonyms))
	for i, s := range e.Synonyms {
		out[i] = s.Source + "=" + deref(s.Value)
	}
	return out
}

// Topic configs: validate-only creations, partition raises and config
// changes apply nothing; APPEND and SUBTRACT edit a list config; a bad
// value is refused with INVALID_CONFIG.
func TestTopicConfigsValidateOnly(t *testing.T) {
	need(t)
	cl := client(t)
	adm := cl.Admin()
	vo := adm.ValidateOnly()
	ctx := timeout(t, 3*time.Minute)

	ghost := name(t, "ghost")
	res, err := vo.CreateTopics(ctx, riffle.TopicSpec{Name: ghost, Partitions: 2, ReplicationFactor: rf()})
	if err != nil || res.Err() != nil {
		t.Fatalf("ValidateOnly().CreateTopics: %v %v", res, err)
	}
	res, err = vo.CreateTopics(ctx, riffle.TopicSpec{Name: ghost, Partitions: 1, ReplicationFactor: int16(env.nodes + 1)})
	if err != nil || !errors.Is(res.Err(), riffle.ErrInvalidReplicationFactor) {
		t.Errorf("ValidateOnly().CreateTopics with %d replicas on %d brokers: %v %v, want INVALID_REPLICATION_FACTOR", env.nodes+1, env.nodes, res, err)
	}
	if ds, err := adm.DescribeTopics(ctx, []string{ghost}); err != nil || len(ds) != 1 || !errors.Is(ds[0].Err, riffle.ErrUnknownTopicOrPartition) {
		t.Errorf("a topic created validate-only exists: %+v %v", ds, err)
	}

	tp := topic(t, cl, 1, map[string]string{"cleanup.policy": "delete"})
	if res, err := vo.CreatePartitions(ctx, 3, tp); err != nil || res.Err() != nil {
		t.Fatalf("ValidateOnly().CreatePartitions: %v %v", res, err)
	}
	if res, err := vo.CreatePartitions(ctx, 1, tp); err != nil || !errors.Is(res.Err(), riffle.ErrInvalidPartitions) {
		t.Errorf("ValidateOnly().CreatePartitions to as many: %v %v, want INVALID_PARTITIONS", res, err)
	}
	if ts, err := adm.ListTopics(ctx, tp); err != nil || len(ts) != 1 || len(ts[0].Partitions) != 1 {
		t.Errorf("after validate-only CreatePartitions: %+v %v, want 1 partition", ts, err)
	}

	topicConfig := func(name string) riffle.ConfigEntry {
		t.Helper()
		tcs, err := adm.DescribeTopicConfigs(ctx, tp)
		if err != nil || len(tcs) != 1 || tcs[0].Err != nil {
			t.Fatalf("DescribeTopicConfigs: %v %v", tcs, err)
		}
		e, ok := configEntry(tcs[0].Configs, name)
		if !ok {
			t.Fatalf("no %s in %s's configs", name, tp)
		}
		return e
	}
	v := "123456"
	if res, err := vo.AlterTopicConfigs(ctx, riffle.AlterConfig{Topic: tp, Name: "retention.ms", Value: &v}); err != nil || res.Err() != nil {
		t.Fatalf("ValidateOnly().AlterTopicConfigs: %v %v", res, err)
	}
	if e := topicConfig("retention.ms"); deref(e.Value) == v || e.Source == "DYNAMIC_TOPIC_CONFIG" {
		t.Errorf("retention.ms after a validate-only change: %+v", e)
	}
	bad := "not-a-number"
	if res, err := vo.AlterTopicConfigs(ctx, riffle.AlterConfig{Topic: tp, Name: "retention.ms", Value: &bad}); err != nil || !errors.Is(res.Err(), errInvalidConfigCode) {
		t.Errorf("ValidateOnly().AlterTopicConfigs retention.ms=%s: %v %v, want INVALID_CONFIG", bad, res, err)
	}

	// cleanup.policy is a list: APPEND adds, SUBTRACT removes.
	compact, del := "compact", "delete"
	if res, err := adm.AlterTopicConfigs(ctx, riffle.AlterConfig{Topic: tp, Name: "cleanup.policy", Value: &compact, Op: riffle.ConfigOpAppend}); err != nil || res.Err() != nil {
		t.Fatalf("APPEND cleanup.policy: %v %v", res, err)
	}
	eventually(t, time.Minute, "cleanup.policy appended", func() error {
		if e := topicConfig("cleanup.policy"); deref(e.Value) != "delete,compact" {
			return fmt.Errorf("%+v", e)
		}
		return nil
	})
	if res, err := adm.AlterTopicConfigs(ctx, riffle.AlterConfig{Topic: tp, Name: "cleanup.policy", Value: &del, Op: riffle.ConfigOpSubtract}); err != nil || res.Err() != nil {
		t.Fatalf("SUBTRACT cleanup.policy: %v %v", res, err)
	}
	eventually(t, time.Minute, "cleanup.policy subtracted", func() error {
		if e := topicConfig("cleanup.policy"); deref(e.Value) != "compact" || e.Source != "DYNAMIC_TOPIC_CONFIG" {
			return fmt.Errorf("%+v", e)
		}
		return nil
	})
	if res, err := adm.AlterTopicConfigs(ctx, riffle.AlterConfig{Topic: tp, Name: "cleanup.policy", Op: riffle.ConfigOpDelete}); err != nil || res.Err() != nil {
		t.Fatalf("DELETE cleanup.policy: %v %v", res, err)
	}
	eventually(t, time.Minute, "cleanup.policy back to the default", func() error {
		if e := topicConfig("cleanup.policy"); deref(e.Value) != "delete" || e.Source != "DEFAULT_CONFIG" || !e.IsDefault {
			return fmt.Errorf("%+v", e)
		}
		return nil
	})
}

// Dynamic broker configs: a validate-only change applies nothing; a
// per-broker value and a cluster-wide default show as synonyms in the
// order the broker applies them (per broker, cluster default, static,
// default); deleting both restores the default; a bad value is refused
// with INVALID_CONFIG and a read-only config with INVALID_REQUEST.
func TestBrokerConfigsSynonyms(t *testing.T) {
	need(t)
	needNodes(t, 2)
	adm := client(t).Admin()
	vo := adm.ValidateOnly()
	ctx := timeout(t, 3*time.Minute)
	// log.cleaner.backoff.ms: dynamic (cluster-wide or per broker), a
	// LONG, harmless to change while other tests run.
	const key = "log.cleaner.backoff.ms"
	t.Cleanup(func() {
		_, _ = adm.IncrementalAlterBrokerConfigs(timeout(t, 30*time.Second),
			riffle.BrokerConfigChange{Broker: 1, Name: key, Op: riffle.ConfigOpDelete},
			riffle.BrokerConfigChange{Broker: riffle.DefaultBroker, Name: key, Op: riffle.ConfigOpDelete})
	})
	brokerConfig := func(broker int32) riffle.ConfigEntry {
		t.Helper()
		bcs, err := adm.DescribeBrokerConfigs(ctx, broker)
		if err != nil || len(bcs) != 1 || bcs[0].Err != nil || bcs[0].Broker != broker {
			t.Fatalf("DescribeBrokerConfigs(%d): %v %v", broker, bcs, err)
		}
		e, _ := configEntry(bcs[0].Configs, key)
		return e
	}
	before := brokerConfig(1)
	if before.Source != "DEFAULT_CONFIG" || deref(before.Value) != "15000" || before.Type != "LONG" || before.ReadOnly {
		t.Fatalf("%s on broker 1 before: %+v", key, before)
	}
	// Static broker configs show on the broker's resource with their source.
	bcs, err := adm.DescribeBrokerConfigs(ctx, 1, riffle.DefaultBroker)
	if err != nil || len(bcs) != 2 || bcs[1].Broker != riffle.DefaultBroker || bcs[1].Err != nil {
		t.Fatalf("DescribeBrokerConfigs(1, DefaultBroker): %v %v", bcs, err)
	}
	if e, ok := configEntry(bcs[0].Configs, "broker.rack"); !ok || e.Source != "STATIC_BROKER_CONFIG" || !e.ReadOnly ||
		(env.cluster != nil && deref(e.Value) != "r1") {
		t.Errorf("broker.rack of broker 1: %+v", e)
	}

	one, all := "16000", "17000"
	if res, err := vo.IncrementalAlterBrokerConfigs(ctx, riffle.BrokerConfigChange{Broker: 1, Name: key, Value: &one}); err != nil || res.Err() != nil {
		t.Fatalf("ValidateOnly().IncrementalAlterBrokerConfigs: %v %v", res, err)
	}
	if e := brokerConfig(1); e.Source != "DEFAULT_CONFIG" {
		t.Errorf("after a validate-only change: %+v", e)
	}
	bad := "soon"
	// Kafka refuses a bad broker config value with INVALID_REQUEST (a
	// bad topic config value with INVALID_CONFIG).
	if res, err := vo.IncrementalAlterBrokerConfigs(ctx, riffle.BrokerConfigChange{Broker: 1, Name: key, Value: &bad}); err != nil || !errors.Is(res.Err(), errInvalidRequestCode) {
		t.Errorf("%s=%s: %v %v, want INVALID_REQUEST", key, bad, res, err)
	}
	rack := "elsewhere"
	res, err := vo.IncrementalAlterBrokerConfigs(ctx, riffle.BrokerConfigChange{Broker: 1, Name: "broker.rack", Value: &rack})
	var ke *riffle.KafkaError
	if err != nil || !errors.As(res.Err(), &ke) || ke.Code != 42 {
		t.Errorf("altering read-only broker.rack: %v %v, want INVALID_REQUEST (42)", res, err)
	}

	res, err = adm.IncrementalAlterBrokerConfigs(ctx,
		riffle.BrokerConfigChange{Broker: 1, Name: key, Value: &one},
		riffle.BrokerConfigChange{Broker: riffle.DefaultBroker, Name: key, Value: &all})
	if err != nil || res.Err() != nil || len(res) != 2 {
		t.Fatalf("IncrementalAlterBrokerConfigs: %v %v", res, err)
	}
	want1 := []string{"DYNAMIC_BROKER_CONFIG=16000", "DYNAMIC_DEFAULT_BROKER_CONFIG=17000", "DEFAULT_CONFIG=15000"}
	want2 := []string{"DYNAMIC_DEFAULT_BROKER_CONFIG=17000", "DEFAULT_CONFIG=15000"}
	eventually(t, time.Minute, "the per-broker and default values in force", func() error {
		e1, e2 := brokerConfig(1), brokerConfig(2)
		if deref(e1.Value) != one || e1.Source != "DYNAMIC_BROKER_CONFIG" || !slices.Equal(synonymSources(e1), want1) {
			return fmt.Errorf("broker 1: %+v synonyms %v", e1, synonymSources(e1))
		}
		if deref(e2.Value) != all || e2.Source != "DYNAMIC_DEFAULT_BROKER_CONFIG" || !slices.Equal(synonymSources(e2), want2) {
			return fmt.Errorf("broker 2: %+v synonyms %v", e2, synonymSources(e2))
		}
		return nil
	})
	dcs, err := adm.DescribeBrokerConfigs(ctx, riffle.DefaultBroker)
	if err != nil || len(dcs) != 1 || dcs[0].Err != nil {
		t.Fatalf("DescribeBrokerConfigs(DefaultBroker): %v %v", dcs, err)
	}
	if e, ok := configEntry(dcs[0].Configs, key); !ok || deref(e.Value) != all || e.Source != "DYNAMIC_DEFAULT_BROKER_CONFIG" {
		t.Errorf("the cluster-wide default: %+v", e)
	}

	res, err = adm.IncrementalAlterBrokerConfigs(ctx,
		riffle.BrokerConfigChange{Broker: 1, Name: key, Op: riffle.ConfigOpDelete},
		riffle.BrokerConfigChange{Broker: riffle.DefaultBroker, Name: key})
	if err != nil || res.Err() != nil {
		t.Fatalf("deleting: %v %v", res, err)
	}
	eventually(t, time.Minute, "back to the default", func() error {
		if e := brokerConfig(1); e.Source != "DEFAULT_CONFIG" || deref(e.Value) != "15000" {
			return fmt.Errorf("%+v", e)
		}
		return nil
	})
}

// Broker loggers (BROKER_LOGGER): every broker lists its loggers with their
// levels, root among them; a validate-only change applies nothing; a level
// set on one broker shows there only, and deleting it falls back to the
// root logger's level; a level that is no level is refused.
func TestBrokerLoggers(t *testing.T) {
	need(t)
	adm := client(t).Admin()
	vo := adm.ValidateOnly()
	ctx := timeout(t, 2*time.Minute)
	ids := make([]int32, env.nodes)
	for i := range ids {
		ids[i] = int32(i + 1)
	}
	bls, err := adm.DescribeBrokerLoggers(ctx, ids...)
	if err != nil || len(bls) != env.nodes {
		t.Fatalf("DescribeBrokerLoggers: %v %v", bls, err)
	}
	for _, bl := range bls {
		root, ok := configEntry(bl.Configs, "root")
		if bl.Err != nil || !ok || root.Value == nil {
			t.Fatalf("broker %d loggers: %v root %+v", bl.Broker, bl.Err, root)
		}
		if env.cluster != nil && *root.Value != "WARN" {
			t.Errorf("broker %d root level %s, the harness sets WARN", bl.Broker, *root.Value)
		}
	}
	rootLevel := *func() *string { e, _ := configEntry(bls[0].Configs, "root"); return e.Value }()
	// Loggers are per broker: DefaultBroker fails its result locally.
	if res, err := adm.DescribeBrokerLoggers(ctx, riffle.DefaultBroker); err != nil || len(res) != 1 || !errors.Is(res[0].Err, riffle.ErrInvalidConfig) {
		t.Errorf("DescribeBrokerLoggers(DefaultBroker): %v %v, want ErrInvalidConfig", res, err)
	}

	const logger = "kafka.server.ReplicaFetcherManager"
	level := func(broker int32) string {
		t.Helper()
		bls, err := adm.DescribeBrokerLoggers(ctx, broker)
		if err != nil || len(bls) != 1 || bls[0].Err != nil {
			t.Fatalf("DescribeBrokerLoggers(%d): %v %v", broker, bls, err)
		}
		e, ok := configEntry(bls[0].Configs, logger)
		if !ok {
			return "<absent>"
		}
		return deref(e.Value)
	}
	t.Cleanup(func() {
		_, _ = adm.IncrementalAlterBrokerLoggers(timeout(t, 30*time.Second), riffle.BrokerConfigChange{Broker: 1, Name: logger, Op: riffle.ConfigOpDelete})
	})
	errLevel := "ERROR"
	if res, err := vo.IncrementalAlterBrokerLoggers(ctx, riffle.BrokerConfigChange{Broker: 1, Name: logger, Value: &errLevel}); err != nil || res.Err() != nil {
		t.Fatalf("ValidateOnly().IncrementalAlterBrokerLoggers: %v %v", res, err)
	}
	if l := level(1); l == errLevel {
		t.Errorf("%s after a validate-only change: %s", logger, l)
	}
	nope := "LOUD"
	if res, err := vo.IncrementalAlterBrokerLoggers(ctx, riffle.BrokerConfigChange{Broker: 1, Name: logger, Value: &nope}); err != nil || !errors.Is(res.Err(), errInvalidConfigCode) {
		t.Errorf("level %s: %v %v, want INVALID_CONFIG", nope, res, err)
	}
	if res, err := adm.IncrementalAlterBrokerLoggers(ctx, riffle.BrokerConfigChange{Broker: 1, Name: logger, Value: &errLevel}); err != nil || res.Err() != nil {
		t.Fatalf("IncrementalAlterBrokerLoggers: %v %v", res, err)
	}
	if l := level(1); l != errLevel {
		t.Errorf("%s on broker 1: %s, want %s", logger, l, errLevel)
	}
	if env.nodes > 1 {
		if l := level(2); l == errLevel {
			t.Errorf("%s on broker 2: %s, set on broker 1 only", logger, l)
		}
	}
	if res, err := adm.IncrementalAlterBrokerLoggers(ctx, riffle.BrokerConfigChange{Broker: 1, Name: logger, Op: riffle.ConfigOpDelete}); err != nil || res.Err() != nil {
		t.Fatalf("resetting %s: %v %v", logger, res, err)
	}
	if l := level(1); l != rootLevel {
		t.Errorf("%s after its reset: %s, want the root level %s", logger, l, rootLevel)
	}
}
