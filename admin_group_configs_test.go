package riffle

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// groupConfigEntry returns the named config of gc (nil if absent).
func groupConfigEntry(gc GroupConfigs, name string) *ConfigEntry {
	for i := range gc.Configs {
		if gc.Configs[i].Name == name {
			return &gc.Configs[i]
		}
	}
	return nil
}

// TestAdminGroupConfigs describes and alters GROUP config resources
// against kfake, which has them (share.* and consumer.* names, SET and
// DELETE; unknown names and list operations answer INVALID_CONFIG), and
// checks on the requests kfake decoded that the resource type on the wire
// is GROUP (32, not CLIENT_METRICS' 16) and validate-only is sent.
//
// Where kfake differs from Kafka: it describes a config the group does not
// override with a nil value (Kafka gives the broker's default), and it
// checks neither values (Kafka answers INVALID_CONFIG for
// share.auto.offset.reset=sideways) nor ACLs on the group resource.
func TestAdminGroupConfigs(t *testing.T) {
	fake := newFake(t, kfake.NumBrokers(2))
	var (
		mu       sync.Mutex
		types    []kmsg.ConfigResourceType // every resource type asked or altered
		validate []bool                    // ValidateOnly of each IncrementalAlterConfigs
	)
	fake.ControlKey(kmsg.DescribeConfigs.Int16(), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		fake.KeepControl()
		mu.Lock()
		defer mu.Unlock()
		for _, r := range kr.(*kmsg.DescribeConfigsRequest).Resources {
			types = append(types, r.ResourceType)
		}
		return nil, nil, false
	})
	fake.ControlKey(kmsg.IncrementalAlterConfigs.Int16(), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		fake.KeepControl()
		mu.Lock()
		defer mu.Unlock()
		req := kr.(*kmsg.IncrementalAlterConfigsRequest)
		validate = append(validate, req.ValidateOnly)
		for _, r := range req.Resources {
			types = append(types, r.ResourceType)
		}
		return nil, nil, false
	})
	cl := newTestClient(t, SeedBrokers(fake.ListenAddrs()...))
	adm := cl.Admin()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	v := func(s string) *string { return &s }

	res, err := adm.AlterGroupConfigs(ctx,
		GroupConfigChange{Group: "jobs", Name: "share.auto.offset.reset", Value: v("earliest")},
		GroupConfigChange{Group: "jobs", Name: "share.isolation.level", Value: v("read_committed")},
		GroupConfigChange{Group: "other", Name: "no.such.config", Value: v("1")},
		GroupConfigChange{Group: "", Name: "share.isolation.level", Value: v("read_committed")},
		GroupConfigChange{Group: "unnamed", Name: "", Value: v("1")},
		GroupConfigChange{Group: "listy", Name: "share.isolation.level", Value: v("x"), Op: ConfigOpAppend},
	)
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 5 || res[0].Group != "jobs" || res[0].Err != nil {
		t.Fatalf("results: %+v", res)
	}
	if !errors.Is(res[1].Err, KafkaErrorForCode(40)) {
		t.Fatalf("unknown config name: %v, want INVALID_CONFIG from the broker", res[1].Err)
	}
	if !errors.Is(res[2].Err, ErrInvalidConfig) || !errors.Is(res[3].Err, ErrInvalidConfig) {
		t.Fatalf("empty group or config name must fail locally: %+v", res[2:4])
	}
	if !errors.Is(res[4].Err, KafkaErrorForCode(40)) {
		t.Fatalf("APPEND to a group config: %v, want INVALID_CONFIG", res[4].Err)
	}

	got, err := adm.DescribeGroupConfigs(ctx, "jobs", "fresh", "", "jobs")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || got[0].Group != "jobs" || got[0].Err != nil || got[1].Group != "fresh" || got[1].Err != nil {
		t.Fatalf("describe: %+v", got)
	}
	if !errors.Is(got[2].Err, ErrInvalidConfig) {
		t.Fatalf("empty group: %+v", got[2])
	}
	for name, want := range map[string]string{"share.auto.offset.reset": "earliest", "share.isolation.level": "read_committed"} {
		e := groupConfigEntry(got[0], name)
		if e == nil || e.Value == nil || *e.Value != want || e.Source != "GROUP_CONFIG" || e.IsDefault {
			t.Fatalf("jobs %s: %+v, want %s from GROUP_CONFIG", name, e, want)
		}
	}
	if e := groupConfigEntry(got[1], "share.auto.offset.reset"); e == nil || !e.IsDefault || e.Source != "DEFAULT_CONFIG" {
		t.Fatalf("a group without overrides: %+v, want the default", e)
	}
	for i := 1; i < len(got[0].Configs); i++ {
		if got[0].Configs[i-1].Name >= got[0].Configs[i].Name {
			t.Fatalf("configs not sorted by name: %v then %v", got[0].Configs[i-1].Name, got[0].Configs[i].Name)
		}
	}

	// Validate-only checks and applies nothing.
	res, err = adm.ValidateOnly().AlterGroupConfigs(ctx,
		GroupConfigChange{Group: "jobs", Name: "share.auto.offset.reset", Value: v("latest")},
		GroupConfigChange{Group: "other", Name: "no.such.config", Value: v("1")},
	)
	if err != nil || len(res) != 2 || res[0].Err != nil || !errors.Is(res[1].Err, KafkaErrorForCode(40)) {
		t.Fatalf("validate only: %+v %v", res, err)
	}
	// Deleting reverts to the default.
	if res, err := adm.AlterGroupConfigs(ctx, GroupConfigChange{Group: "jobs", Name: "share.isolation.level", Op: ConfigOpDelete}); err != nil || res.Err() != nil {
		t.Fatalf("delete: %v %v", err, res)
	}
	got, err = adm.DescribeGroupConfigs(ctx, "jobs")
	if err != nil || got[0].Err != nil {
		t.Fatalf("describe: %v %+v", err, got)
	}
	if e := groupConfigEntry(got[0], "share.auto.offset.reset"); e == nil || e.Value == nil || *e.Value != "earliest" {
		t.Fatalf("after a validate-only change: %+v, want earliest still", e)
	}
	if e := groupConfigEntry(got[0], "share.isolation.level"); e == nil || !e.IsDefault {
		t.Fatalf("after DELETE: %+v, want the default", e)
	}

	mu.Lock()
	defer mu.Unlock()
	if len(types) == 0 {
		t.Fatal("no config request seen")
	}
	for _, typ := range types {
		if typ != 32 {
			t.Fatalf("resource type %d on the wire, want 32 (GROUP)", typ)
		}
	}
	if want := []bool{false, true, false}; len(validate) != len(want) || validate[0] || !validate[1] || validate[2] {
		t.Fatalf("ValidateOnly of the alters: %v, want %v", validate, want)
	}
}
