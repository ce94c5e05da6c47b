package riffle

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func brokerConfigValue(bc BrokerConfigs, name string) (string, string) {
	for _, c := range bc.Configs {
		if c.Name == name {
			if c.Value == nil {
				return "", c.Source
			}
			return *c.Value, c.Source
		}
	}
	return "", ""
}

// TestAdminBrokerConfigs describes each broker (kfake answers only for
// itself, INVALID_REQUEST otherwise: the request must go to that broker)
// and the cluster-wide default, and alters them with every operation.
func TestAdminBrokerConfigs(t *testing.T) {
	fake := newFake(t, kfake.NumBrokers(3), kfake.SeedTopics(1, "t"))
	cl := newTestClient(t, SeedBrokers(fake.ListenAddrs()[0]))
	adm := cl.Admin()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	got, err := adm.DescribeBrokerConfigs(ctx, 2, 0, 1, DefaultBroker, 2, -7, 9)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 6 || !errors.Is(got[5].Err, ErrUnknownBroker) {
		t.Fatalf("want one result per distinct broker, got %+v", got)
	}
	for i, want := range []int32{2, 0, 1} {
		if got[i].Broker != want || got[i].Err != nil {
			t.Fatalf("broker %d: %+v", want, got[i])
		}
		if v, _ := brokerConfigValue(got[i], "broker.id"); v != brokerName(want) {
			t.Fatalf("broker %d answered as broker.id %q: not routed to the broker itself", want, v)
		}
	}
	if got[3].Broker != DefaultBroker || got[3].Err != nil || len(got[3].Configs) == 0 {
		t.Fatalf("default broker: %+v", got[3])
	}
	if !errors.Is(got[4].Err, ErrInvalidConfig) {
		t.Fatalf("broker -7 must fail locally with ErrInvalidConfig: %+v", got[4])
	}

	v := func(s string) *string { return &s }
	res, err := adm.IncrementalAlterBrokerConfigs(ctx, BrokerConfigChange{Broker: DefaultBroker, Name: "sasl.enabled.mechanisms", Value: v("PLAIN,SCRAM-SHA-512")})
	if err != nil || res.Err() != nil {
		t.Fatalf("set the default: %v %v", err, res.Err())
	}
	res, err = adm.IncrementalAlterBrokerConfigs(ctx,
		BrokerConfigChange{Broker: 1, Name: "log.retention.ms", Value: v("1234")},
		BrokerConfigChange{Broker: DefaultBroker, Name: "sasl.enabled.mechanisms", Value: v("PLAIN"), Op: ConfigOpSubtract},
		BrokerConfigChange{Broker: 2, Name: "log.retention.ms", Value: v("not a number")},
		BrokerConfigChange{Broker: 0, Name: "log.retention.ms", Op: ConfigOpAppend},
	)
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 4 || res[0].Err != nil || res[1].Err != nil {
		t.Fatalf("alter: %+v", res)
	}
	if !errors.Is(res[2].Err, KafkaErrorForCode(42)) { // INVALID_REQUEST from kfake for a bad value
		t.Fatalf("bad value must fail its broker only: %+v", res[2])
	}
	if !errors.Is(res[3].Err, ErrInvalidConfig) {
		t.Fatalf("APPEND without a value must fail locally: %+v", res[3])
	}
	if !errors.Is(res.Err(), ErrInvalidConfig) {
		t.Fatalf("joined: %v", res.Err())
	}
	got, err = adm.DescribeBrokerConfigs(ctx, 1, DefaultBroker)
	if err != nil || got[0].Err != nil || got[1].Err != nil {
		t.Fatalf("describe after alter: %+v %v", got, err)
	}
	if val, src := brokerConfigValue(got[0], "log.retention.ms"); val != "1234" || src != "DYNAMIC_BROKER_CONFIG" {
		t.Fatalf("log.retention.ms = %q (%s)", val, src)
	}
	if val, _ := brokerConfigValue(got[1], "sasl.enabled.mechanisms"); val != "SCRAM-SHA-512" {
		t.Fatalf("after SUBTRACT PLAIN: sasl.enabled.mechanisms = %q", val)
	}

	// Delete reverts to the default.
	res, err = adm.IncrementalAlterBrokerConfigs(ctx, BrokerConfigChange{Broker: 1, Name: "log.retention.ms", Op: ConfigOpDelete})
	if err != nil || res.Err() != nil {
		t.Fatalf("delete: %v %v", err, res.Err())
	}
	got, _ = adm.DescribeBrokerConfigs(ctx, 1)
	if _, src := brokerConfigValue(got[0], "log.retention.ms"); src == "DYNAMIC_BROKER_CONFIG" {
		t.Fatal("log.retention.ms still dynamic after DELETE")
	}
}

// TestAdminTopicConfigOps checks the topic path shares the operations:
// APPEND to a list config, and an unknown topic failing alone.
func TestAdminTopicConfigOps(t *testing.T) {
	fake := newFake(t, kfake.NumBrokers(2), kfake.SeedTopics(1, "t"))
	cl := newTestClient(t, SeedBrokers(fake.ListenAddrs()...))
	adm := cl.Admin()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	v := func(s string) *string { return &s }
	res, err := adm.AlterTopicConfigs(ctx,
		AlterConfig{Topic: "t", Name: "cleanup.policy", Value: v("delete")},
		AlterConfig{Topic: "t", Name: "cleanup.policy", Value: v("compact"), Op: ConfigOpAppend},
		AlterConfig{Topic: "missing", Name: "retention.ms", Value: v("1")},
		AlterConfig{Topic: "bad", Name: "", Value: v("1")},
	)
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 3 || res[0].Topic != "t" || res[0].Err != nil ||
		!errors.Is(res[1].Err, ErrUnknownTopicOrPartition) || !errors.Is(res[2].Err, ErrInvalidConfig) {
		t.Fatalf("per-topic results: %+v", res)
	}
	cfgs, err := adm.DescribeTopicConfigs(ctx, "t", "missing")
	if err != nil || cfgs[0].Err != nil || !errors.Is(cfgs[1].Err, ErrUnknownTopicOrPartition) {
		t.Fatalf("describe: %+v %v", cfgs, err)
	}
	if got := configValue(cfgs[0], "cleanup.policy"); got != "delete,compact" {
		t.Fatalf("cleanup.policy = %q after APPEND", got)
	}
}

// TestAdminConfigSynonymsAndType: DescribeConfigs asks for synonyms, and
// an entry carries its type and the values it falls back to: a topic's
// dynamic retention.ms over the default.
func TestAdminConfigSynonymsAndType(t *testing.T) {
	fake := newFake(t, kfake.NumBrokers(1), kfake.SeedTopics(1, "t"))
	var asked, withSynonyms atomic.Int32
	fake.ControlKey(kmsg.DescribeConfigs.Int16(), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		fake.KeepControl()
		asked.Add(1)
		if kr.(*kmsg.DescribeConfigsRequest).IncludeSynonyms {
			withSynonyms.Add(1)
		}
		return nil, nil, false
	})
	cl := newTestClient(t, SeedBrokers(fake.ListenAddrs()...))
	adm := cl.Admin()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	v := "1234"
	if res, err := adm.AlterTopicConfigs(ctx, AlterConfig{Topic: "t", Name: "retention.ms", Value: &v}); err != nil || res.Err() != nil {
		t.Fatalf("alter: %v %v", err, res)
	}
	got, err := adm.DescribeTopicConfigs(ctx, "t")
	if err != nil || len(got) != 1 || got[0].Err != nil {
		t.Fatalf("describe: %v %+v", err, got)
	}
	var e *ConfigEntry
	for i := range got[0].Configs {
		if got[0].Configs[i].Name == "retention.ms" {
			e = &got[0].Configs[i]
		}
	}
	if e == nil || e.Value == nil || *e.Value != "1234" || e.Source != "DYNAMIC_TOPIC_CONFIG" || e.Type != "LONG" {
		t.Fatalf("retention.ms: %+v", e)
	}
	var def bool
	for _, syn := range e.Synonyms {
		def = def || (syn.Source == "DEFAULT_CONFIG" && syn.Value != nil && *syn.Value == "604800000")
	}
	if !def {
		t.Fatalf("retention.ms synonyms %+v: no default to fall back to", e.Synonyms)
	}
	if asked.Load() == 0 || withSynonyms.Load() != asked.Load() {
		t.Fatalf("%d of %d DescribeConfigs asked for synonyms", withSynonyms.Load(), asked.Load())
	}
}

// TestAdminBrokerLoggers: kfake has no BROKER_LOGGER resource, so a
// control function answers for it, as a broker does: each broker only for
// itself. Describing and altering go to the named broker; ids without
// loggers and list operations fail locally; validate-only passes through.
func TestAdminBrokerLoggers(t *testing.T) {
	fake := newFake(t, kfake.NumBrokers(3))
	type call struct {
		node         int32
		name         string
		ops          string
		validateOnly bool
	}
	var mu sync.Mutex
	var calls []call
	level := "INFO"
	fake.ControlKey(kmsg.DescribeConfigs.Int16(), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		fake.KeepControl()
		req := kr.(*kmsg.DescribeConfigsRequest)
		resp := req.ResponseKind().(*kmsg.DescribeConfigsResponse)
		for _, rr := range req.Resources {
			if rr.ResourceType != kmsg.ConfigResourceTypeBrokerLogger {
				return nil, nil, false
			}
			r := kmsg.NewDescribeConfigsResponseResource()
			r.ResourceType, r.ResourceName = rr.ResourceType, rr.ResourceName
			if rr.ResourceName != strconv.Itoa(int(fake.CurrentNode())) {
				r.ErrorCode = 42 // INVALID_REQUEST: a broker answers for itself only
			} else {
				mu.Lock()
				calls = append(calls, call{node: fake.CurrentNode(), name: rr.ResourceName})
				lv := level
				mu.Unlock()
				c := kmsg.NewDescribeConfigsResponseResourceConfig()
				c.Name, c.Value, c.Source = "kafka.server.ReplicaManager", &lv, kmsg.ConfigSourceDynamicBrokerLoggerConfig
				r.Configs = append(r.Configs, c)
			}
			resp.Resources = append(resp.Resources, r)
		}
		return resp, nil, true
	})
	fake.ControlKey(kmsg.IncrementalAlterConfigs.Int16(), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		fake.KeepControl()
		req := kr.(*kmsg.IncrementalAlterConfigsRequest)
		resp := req.ResponseKind().(*kmsg.IncrementalAlterConfigsResponse)
		for _, rr := range req.Resources {
			if rr.ResourceType != kmsg.ConfigResourceTypeBrokerLogger {
				return nil, nil, false
			}
			r := kmsg.NewIncrementalAlterConfigsResponseResource()
			r.ResourceType, r.ResourceName = rr.ResourceType, rr.ResourceName
			if rr.ResourceName != strconv.Itoa(int(fake.CurrentNode())) {
				r.ErrorCode = 42
			} else {
				var ops []string
				mu.Lock()
				for _, c := range rr.Configs {
					ops = append(ops, fmt.Sprintf("%s %s=%v", c.Op, c.Name, deref(c.Value)))
					if !req.ValidateOnly && c.Op == kmsg.IncrementalAlterConfigOpSet && c.Value != nil {
						level = *c.Value
					}
				}
				calls = append(calls, call{node: fake.CurrentNode(), name: rr.ResourceName, ops: strings.Join(ops, ","), validateOnly: req.ValidateOnly})
				mu.Unlock()
			}
			resp.Resources = append(resp.Resources, r)
		}
		return resp, nil, true
	})
	cl := newTestClient(t, SeedBrokers(fake.ListenAddrs()[0]))
	adm := cl.Admin()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	got, err := adm.DescribeBrokerLoggers(ctx, 2, DefaultBroker, 1, 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || got[0].Err != nil || got[2].Err != nil || !errors.Is(got[1].Err, ErrInvalidConfig) {
		t.Fatalf("describe: %+v", got)
	}
	if c := got[0].Configs; len(c) != 1 || c[0].Name != "kafka.server.ReplicaManager" || deref(c[0].Value) != "INFO" || c[0].Source != "DYNAMIC_BROKER_LOGGER_CONFIG" {
		t.Fatalf("broker 2 loggers: %+v", c)
	}
	debug := "DEBUG"
	res, err := adm.ValidateOnly().IncrementalAlterBrokerLoggers(ctx, BrokerConfigChange{Broker: 1, Name: "kafka.server.ReplicaManager", Value: &debug})
	if err != nil || res.Err() != nil {
		t.Fatalf("validate: %v %v", err, res)
	}
	res, err = adm.IncrementalAlterBrokerLoggers(ctx,
		BrokerConfigChange{Broker: 1, Name: "kafka.server.ReplicaManager", Value: &debug},
		BrokerConfigChange{Broker: 0, Name: "kafka.log.LogCleaner", Value: &debug, Op: ConfigOpAppend},
		BrokerConfigChange{Broker: DefaultBroker, Name: "kafka.log.LogCleaner", Value: &debug},
		BrokerConfigChange{Broker: 2, Name: "kafka.log.LogCleaner", Op: ConfigOpDelete},
	)
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 4 || res[0].Err != nil || res[3].Err != nil || !errors.Is(res[1].Err, ErrInvalidConfig) || !errors.Is(res[2].Err, ErrInvalidConfig) {
		t.Fatalf("alter: %+v", res)
	}
	got, err = adm.DescribeBrokerLoggers(ctx, 1)
	if err != nil || got[0].Err != nil || deref(got[0].Configs[0].Value) != "DEBUG" {
		t.Fatalf("after the change: %v %+v", err, got)
	}
	mu.Lock()
	defer mu.Unlock()
	want := []call{
		{node: 2, name: "2"}, {node: 1, name: "1"},
		{node: 1, name: "1", ops: "SET kafka.server.ReplicaManager=DEBUG", validateOnly: true},
		{node: 1, name: "1", ops: "SET kafka.server.ReplicaManager=DEBUG"},
		{node: 2, name: "2", ops: "DELETE kafka.log.LogCleaner="},
		{node: 1, name: "1"},
	}
	// Brokers 1 and 2 are asked at once: compare without their order.
	sortCalls := func(cs []call) {
		slices.SortStableFunc(cs, func(a, b call) int {
			return cmp.Or(cmp.Compare(a.ops, b.ops), cmp.Compare(a.node, b.node), cmp.Compare(fmt.Sprint(a.validateOnly), fmt.Sprint(b.validateOnly)))
		})
	}
	sortCalls(calls)
	sortCalls(want)
	if !slices.Equal(calls, want) {
		t.Fatalf("requests seen by brokers:\n got %+v\nwant %+v", calls, want)
	}
}
