package riffle

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
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
