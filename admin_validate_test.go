package riffle

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/riffle-go/riffle/internal/kafkaerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// validateFlags records the ValidateOnly field of every CreateTopics,
// CreatePartitions and IncrementalAlterConfigs request the cluster gets,
// and lets kfake handle them.
type validateFlags struct {
	mu   sync.Mutex
	seen map[kmsg.Key][]bool
}

func watchValidateOnly(fake *kfake.Cluster) *validateFlags {
	w := &validateFlags{seen: map[kmsg.Key][]bool{}}
	for _, key := range []kmsg.Key{kmsg.CreateTopics, kmsg.CreatePartitions, kmsg.IncrementalAlterConfigs} {
		fake.ControlKey(int16(key), func(req kmsg.Request) (kmsg.Response, error, bool) {
			fake.KeepControl()
			var v bool
			switch r := req.(type) {
			case *kmsg.CreateTopicsRequest:
				v = r.ValidateOnly
			case *kmsg.CreatePartitionsRequest:
				v = r.ValidateOnly
			case *kmsg.IncrementalAlterConfigsRequest:
				v = r.ValidateOnly
			}
			w.mu.Lock()
			w.seen[key] = append(w.seen[key], v)
			w.mu.Unlock()
			return nil, nil, false
		})
	}
	return w
}

// take returns the flags seen for key since the last take.
func (w *validateFlags) take(key kmsg.Key) []bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.seen[key]
	delete(w.seen, key)
	return out
}

func allTrue(bs []bool) bool {
	for _, b := range bs {
		if !b {
			return false
		}
	}
	return len(bs) > 0
}

// TestAdminValidateOnly: kfake honours ValidateOnly in CreateTopics,
// CreatePartitions and IncrementalAlterConfigs (it runs every check and
// applies nothing), so each validate-only call must report per item as
// the real call would, typed, and leave the cluster as it was.
func TestAdminValidateOnly(t *testing.T) {
	fake := newFake(t, kfake.NumBrokers(3), kfake.SeedTopics(2, "t", "u"))
	flags := watchValidateOnly(fake)
	cl := newTestClient(t, SeedBrokers(fake.ListenAddrs()[0]))
	adm := cl.Admin()
	vo := adm.ValidateOnly()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	v := func(s string) *string { return &s }
	invalidRequest := kafkaerr.ForCode(kafkaerr.InvalidRequest)

	// CreateTopics: a valid topic, an existing one, a replication factor
	// above the broker count.
	res, err := vo.CreateTopics(ctx,
		TopicSpec{Name: "new", Partitions: 3, Configs: map[string]string{"cleanup.policy": "compact"}},
		TopicSpec{Name: "t", Partitions: 1},
		TopicSpec{Name: "wide", Partitions: 1, ReplicationFactor: 9},
	)
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 3 || res[0].Topic != "new" || res[0].Err != nil ||
		!errors.Is(res[1].Err, ErrTopicAlreadyExists) || !errors.Is(res[2].Err, ErrInvalidReplicationFactor) {
		t.Fatalf("validate create topics: %+v", res)
	}
	if f := flags.take(kmsg.CreateTopics); !allTrue(f) {
		t.Fatalf("CreateTopics requests sent with ValidateOnly %v, want all true", f)
	}
	listed, err := adm.ListTopics(ctx, "new", "wide")
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range listed {
		if !errors.Is(d.Err, ErrUnknownTopicOrPartition) {
			t.Fatalf("validate-only create made topic %q: %+v", d.Name, d)
		}
	}
	// The real call creates what was validated.
	if res, err := adm.CreateTopics(ctx, TopicSpec{Name: "new", Partitions: 3}); err != nil || res.Err() != nil {
		t.Fatalf("create after validate: %v %v", err, res.Err())
	}
	if f := flags.take(kmsg.CreateTopics); len(f) == 0 || f[0] {
		t.Fatalf("the real CreateTopics went with ValidateOnly %v", f)
	}

	// CreatePartitions: a valid raise, a shrink, an unknown topic.
	res, err = vo.CreatePartitions(ctx, 5, "t")
	if err != nil || len(res) != 1 || res[0].Err != nil {
		t.Fatalf("validate create partitions: %+v %v", res, err)
	}
	res, err = vo.CreatePartitions(ctx, 1, "u", "nope")
	if err != nil || len(res) != 2 || !errors.Is(res[0].Err, ErrInvalidPartitions) || !errors.Is(res[1].Err, ErrUnknownTopicOrPartition) {
		t.Fatalf("invalid partition changes must fail per topic, typed: %+v %v", res, err)
	}
	if f := flags.take(kmsg.CreatePartitions); !allTrue(f) {
		t.Fatalf("CreatePartitions requests sent with ValidateOnly %v", f)
	}
	listed, err = adm.ListTopics(ctx, "t", "u")
	if err != nil || len(listed) != 2 || len(listed[0].Partitions) != 2 || len(listed[1].Partitions) != 2 {
		t.Fatalf("partition counts changed by validate-only: %+v %v", listed, err)
	}

	// AlterTopicConfigs: a valid change, APPEND to a non-list config
	// (INVALID_REQUEST from kfake), an unknown topic, a change that fails
	// locally.
	tres, err := vo.AlterTopicConfigs(ctx,
		AlterConfig{Topic: "t", Name: "retention.ms", Value: v("12345")},
		AlterConfig{Topic: "u", Name: "retention.ms", Value: v("1"), Op: ConfigOpAppend},
		AlterConfig{Topic: "missing", Name: "retention.ms", Value: v("1")},
		AlterConfig{Topic: "bad", Name: "", Value: v("1")},
	)
	if err != nil {
		t.Fatal(err)
	}
	if len(tres) != 4 || tres[0].Err != nil || !errors.Is(tres[1].Err, invalidRequest) ||
		!errors.Is(tres[2].Err, ErrUnknownTopicOrPartition) || !errors.Is(tres[3].Err, ErrInvalidConfig) {
		t.Fatalf("validate topic configs: %+v", tres)
	}
	if f := flags.take(kmsg.IncrementalAlterConfigs); !allTrue(f) {
		t.Fatalf("IncrementalAlterConfigs requests sent with ValidateOnly %v", f)
	}
	cfgs, err := adm.DescribeTopicConfigs(ctx, "t")
	if err != nil || cfgs[0].Err != nil {
		t.Fatalf("describe configs: %+v %v", cfgs, err)
	}
	if got := configValue(cfgs[0], "retention.ms"); got == "12345" {
		t.Fatal("validate-only alter changed retention.ms")
	}

	// IncrementalAlterBrokerConfigs: a valid change, a bad value.
	bres, err := vo.IncrementalAlterBrokerConfigs(ctx,
		BrokerConfigChange{Broker: 1, Name: "log.retention.ms", Value: v("1234")},
		BrokerConfigChange{Broker: 2, Name: "log.retention.ms", Value: v("not a number")},
	)
	if err != nil || len(bres) != 2 || bres[0].Err != nil || !errors.Is(bres[1].Err, invalidRequest) {
		t.Fatalf("validate broker configs: %+v %v", bres, err)
	}
	if f := flags.take(kmsg.IncrementalAlterConfigs); !allTrue(f) {
		t.Fatalf("IncrementalAlterConfigs requests sent with ValidateOnly %v", f)
	}
	got, err := adm.DescribeBrokerConfigs(ctx, 1)
	if err != nil || got[0].Err != nil {
		t.Fatalf("describe broker configs: %+v %v", got, err)
	}
	if val, src := brokerConfigValue(got[0], "log.retention.ms"); val == "1234" || src == "DYNAMIC_BROKER_CONFIG" {
		t.Fatalf("validate-only alter set log.retention.ms = %q (%s)", val, src)
	}
}

// TestAdminValidateOnlyCreateTopicsV0: CreateTopics v0 has no ValidateOnly
// field, so a broker would create the topics; the call must fail with
// ErrUnsupported without sending anything.
func TestAdminValidateOnlyCreateTopicsV0(t *testing.T) {
	fake := newFake(t, kfake.NumBrokers(1))
	flags := watchValidateOnly(fake)
	cl := newTestClient(t, SeedBrokers(fake.ListenAddrs()...), MaxVersions(int16(kmsg.CreateTopics), 0))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	_, err := cl.Admin().ValidateOnly().CreateTopics(ctx, TopicSpec{Name: "x", Partitions: 1, ReplicationFactor: 1})
	if !errors.Is(err, ErrUnsupported) {
		t.Fatalf("validate-only CreateTopics at v0: %v, want ErrUnsupported", err)
	}
	if f := flags.take(kmsg.CreateTopics); len(f) != 0 {
		t.Fatalf("%d CreateTopics requests sent", len(f))
	}
	// A real create still goes out at v0.
	res, err := cl.Admin().CreateTopics(ctx, TopicSpec{Name: "x", Partitions: 1, ReplicationFactor: 1})
	if err != nil || res.Err() != nil {
		t.Fatalf("create at v0: %v %v", err, res.Err())
	}
}
