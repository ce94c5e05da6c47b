package integration_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/riffle-go/riffle"
)

// Group administration, for a classic and a KIP-848 group: offsets set,
// previewed, reset and deleted while the group is inactive; refused while
// a member consumes (offsets, deletion); the group described and listed
// with its member; group configs described, validated and altered; the
// group deleted once its member left.
func TestGroupAdmin(t *testing.T) {
	for _, proto := range []struct {
		name string
		p    riffle.GroupProtocol
	}{{"classic", riffle.GroupProtocolClassic}, {"consumer", riffle.GroupProtocolConsumer}} {
		t.Run(proto.name, func(t *testing.T) {
			need(t)
			if !supports848(t, proto.p) {
				return
			}
			cl := client(t)
			adm := cl.Admin()
			ctx := timeout(t, 3*time.Minute)
			tp := topic(t, cl, 2, nil)
			p0, p1 := riffle.TopicPartition{Topic: tp, Partition: 0}, riffle.TopicPartition{Topic: tp, Partition: 1}
			p, err := riffle.NewProducer(cl, riffle.WithPartitioner(riffle.ManualPartitioner()))
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close(ctx)
			var recs []*riffle.Record
			for i := range 20 {
				recs = append(recs, &riffle.Record{Topic: tp, Partition: int32(i % 2), Value: []byte("v")})
			}
			if err := p.ProduceSync(ctx, recs...); err != nil {
				t.Fatal(err)
			}
			group := name(t, "g")
			committed := func() map[riffle.TopicPartition]int64 {
				t.Helper()
				got, err := adm.FetchOffsets(ctx, group)
				if err != nil {
					t.Fatalf("FetchOffsets: %v", err)
				}
				out := map[riffle.TopicPartition]int64{}
				for tp, o := range got {
					out[tp] = o.Offset
				}
				return out
			}
			expect := func(what string, want map[riffle.TopicPartition]int64) {
				t.Helper()
				if got := committed(); !maps.Equal(got, want) {
					t.Errorf("%s: committed %v, want %v", what, got, want)
				}
			}

			// Inactive: offsets set, previewed, reset, deleted.
			if err := adm.AlterGroupOffsets(ctx, group, map[riffle.TopicPartition]int64{p0: 3, p1: 5}); err != nil {
				t.Fatal(err)
			}
			expect("AlterGroupOffsets", map[riffle.TopicPartition]int64{p0: 3, p1: 5})
			lag, err := adm.GroupLag(ctx, group)
			if err != nil || len(lag) != 2 || lag[0].Lag != 7 || lag[1].Lag != 5 {
				t.Errorf("GroupLag: %v %v", lag, err)
			}
			prev, err := adm.PreviewResetOffsets(ctx, group, riffle.AtEarliest(), tp)
			if err != nil || !maps.Equal(prev, map[riffle.TopicPartition]int64{p0: 0, p1: 0}) {
				t.Errorf("PreviewResetOffsets(earliest): %v %v", prev, err)
			}
			expect("after PreviewResetOffsets", map[riffle.TopicPartition]int64{p0: 3, p1: 5})
			set, err := adm.ResetOffsets(ctx, group, riffle.AtOffset(100)) // the group's topics; clamped to the end
			if err != nil || !maps.Equal(set, map[riffle.TopicPartition]int64{p0: 10, p1: 10}) {
				t.Errorf("ResetOffsets(100): %v %v", set, err)
			}
			expect("ResetOffsets(100)", map[riffle.TopicPartition]int64{p0: 10, p1: 10})
			if res, err := adm.DeleteGroupOffsets(ctx, group, p1); err != nil || res.Err() != nil {
				t.Errorf("DeleteGroupOffsets(%v): %v %v", p1, res, err)
			}
			expect("DeleteGroupOffsets", map[riffle.TopicPartition]int64{p0: 10})

			if is39() {
				// No group configs on Kafka 3.9 (KIP-848's, 4.0).
				gcs, err := adm.DescribeGroupConfigs(ctx, group)
				if err != nil || len(gcs) != 1 {
					t.Fatalf("DescribeGroupConfigs: %v %v", gcs, err)
				}
				unsupportedBy(t, gcs[0].Err, "KIP-848", "4.0")
				two := "2000"
				res, err := adm.AlterGroupConfigs(ctx, riffle.GroupConfigChange{Group: group, Name: "consumer.heartbeat.interval.ms", Value: &two})
				if err != nil || len(res) != 1 {
					t.Fatalf("AlterGroupConfigs: %v %v", res, err)
				}
				unsupportedBy(t, res[0].Err, "KIP-848", "4.0")
				t.Logf("group configs on Kafka %s: %v", env.version, gcs[0].Err)
			} else {
				// Group configs (KIP-848 groups and share groups have them;
				// Kafka accepts them for any group id).
				const key = "consumer.heartbeat.interval.ms"
				groupConfig := func() riffle.ConfigEntry {
					t.Helper()
					gcs, err := adm.DescribeGroupConfigs(ctx, group)
					if err != nil || len(gcs) != 1 || gcs[0].Err != nil {
						t.Fatalf("DescribeGroupConfigs: %v %v", gcs, err)
					}
					e, ok := configEntry(gcs[0].Configs, key)
					if !ok {
						t.Fatalf("no %s among %v", key, gcs[0].Configs)
					}
					return e
				}
				// Not set for the group: the broker's group.consumer.* value
				// (static in the harness) with its synonyms, not
				// DEFAULT_CONFIG.
				before := groupConfig()
				if before.Source == "GROUP_CONFIG" || len(before.Synonyms) == 0 || before.Synonyms[0].Name != "group."+key ||
					before.Synonyms[0].Source != before.Source || deref(before.Synonyms[0].Value) != deref(before.Value) {
					t.Errorf("%s before: %+v, synonyms %v", key, before, synonymSources(before))
				}
				two := "2000"
				if res, err := adm.ValidateOnly().AlterGroupConfigs(ctx, riffle.GroupConfigChange{Group: group, Name: key, Value: &two}); err != nil || res.Err() != nil {
					t.Fatalf("ValidateOnly().AlterGroupConfigs: %v %v", res, err)
				}
				if e := groupConfig(); e.Source != before.Source || deref(e.Value) != deref(before.Value) {
					t.Errorf("%s after a validate-only change: %+v", key, e)
				}
				if res, err := adm.AlterGroupConfigs(ctx, riffle.GroupConfigChange{Group: group, Name: key, Value: &two}); err != nil || res.Err() != nil {
					t.Fatalf("AlterGroupConfigs: %v %v", res, err)
				}
				eventually(t, time.Minute, key+" set", func() error {
					if e := groupConfig(); deref(e.Value) != two || e.Source != "GROUP_CONFIG" || len(e.Synonyms) < 2 || e.Synonyms[1].Source != before.Source {
						return fmt.Errorf("%+v, synonyms %v", e, synonymSources(e))
					}
					return nil
				})
			}

			// A member consumes.
			c, err := riffle.NewConsumer(client(t), riffle.ConsumerGroup(group), riffle.SubscribeTopics(tp),
				riffle.WithGroupProtocol(proto.p), riffle.OffsetReset(riffle.ResetEarliest),
				riffle.HandleRecord(func(_ context.Context, _ *riffle.Record) error { return nil }),
				riffle.OnGroupError(func(err error) { t.Logf("group error: %v", err) }))
			if err != nil {
				t.Fatal(err)
			}
			var desc riffle.GroupDescription
			eventually(t, 2*time.Minute, "the member owning both partitions", func() error {
				ds, err := adm.DescribeGroups(ctx, group)
				if err != nil {
					return err
				}
				desc = ds[0]
				if desc.Err != nil || desc.State != "Stable" || len(desc.Members) != 1 || len(desc.Members[0].Assigned) != 2 {
					return fmt.Errorf("%+v", desc)
				}
				return nil
			})
			if desc.Type != proto.name || desc.ProtocolType != "consumer" || desc.Coordinator < 0 || desc.Members[0].ClientID == "" {
				t.Errorf("DescribeGroups: %+v", desc)
			}
			// Every group operation: PLAINTEXT is ANONYMOUS, a super user
			// (or no authorizer: Kafka then reports every operation).
			want := []riffle.ACLOperation{riffle.ACLOperationRead, riffle.ACLOperationDelete,
				riffle.ACLOperationDescribe, riffle.ACLOperationDescribeConfigs, riffle.ACLOperationAlterConfigs}
			if is39() {
				want = want[:3] // no group configs on Kafka 3.9
			}
			if got := desc.AuthorizedOperations.Operations(); !slices.Equal(got, want) {
				t.Errorf("DescribeGroups authorized operations %v, want %v", got, want)
			}
			gs, err := adm.ListGroups(ctx)
			i := slices.IndexFunc(gs, func(g riffle.GroupListing) bool { return g.Group == group })
			if err != nil || i < 0 || gs[i].ProtocolType != "consumer" || gs[i].State != "Stable" {
				t.Errorf("ListGroups: %v (%d) %v", gs, i, err)
			}
			if res, err := adm.DeleteGroupOffsets(ctx, group, p0); err != nil || len(res) != 1 || !errors.Is(res[0].Err, riffle.ErrGroupSubscribedToTopic) {
				t.Errorf("DeleteGroupOffsets with a member: %v %v, want ErrGroupSubscribedToTopic", res, err)
			}
			if err := adm.AlterGroupOffsets(ctx, group, map[riffle.TopicPartition]int64{p0: 1}); !errors.Is(err, riffle.ErrGroupActive) {
				t.Errorf("AlterGroupOffsets with a member: %v, want ErrGroupActive", err)
			}
			if _, err := adm.ResetOffsets(ctx, group, riffle.AtEarliest(), tp); !errors.Is(err, riffle.ErrGroupActive) {
				t.Errorf("ResetOffsets with a member: %v, want ErrGroupActive", err)
			}
			if prev, err := adm.PreviewResetOffsets(ctx, group, riffle.AtLatest(), tp); err != nil || !maps.Equal(prev, map[riffle.TopicPartition]int64{p0: 10, p1: 10}) {
				t.Errorf("PreviewResetOffsets(latest) with a member: %v %v", prev, err)
			}
			if res, err := adm.DeleteGroups(ctx, group); err != nil || !errors.Is(res.Err(), riffle.ErrNonEmptyGroup) {
				t.Errorf("DeleteGroups with a member: %v %v, want ErrNonEmptyGroup", res, err)
			}

			if _, err := c.Close(ctx); err != nil {
				t.Fatal(err)
			}
			eventually(t, time.Minute, "the group deleted once empty", func() error {
				res, err := adm.DeleteGroups(ctx, group)
				if err != nil {
					return err
				}
				return res.Err()
			})
			ds, err := adm.DescribeGroups(ctx, group)
			if err != nil || len(ds) != 1 || !errors.Is(ds[0].Err, riffle.ErrGroupIDNotFound) {
				t.Errorf("DescribeGroups of the deleted group: %+v %v, want ErrGroupIDNotFound", ds, err)
			}
			if got := committed(); len(got) != 0 {
				t.Errorf("offsets of the deleted group: %v", got)
			}
		})
	}
}

// Share group offsets without a member: set (which makes the group),
// described, the group listed, deleted. (The share-group tests cover the
// calls with members.)
func TestShareGroupOffsetsAdmin(t *testing.T) {
	need(t)
	if !supportsShare(t) {
		return
	}
	cl := client(t)
	adm := cl.Admin()
	ctx := timeout(t, 2*time.Minute)
	tp := topic(t, cl, 1, nil)
	p0 := riffle.TopicPartition{Topic: tp, Partition: 0}
	p, err := riffle.NewProducer(cl)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(ctx)
	if err := p.ProduceSync(ctx, &riffle.Record{Topic: tp}, &riffle.Record{Topic: tp}, &riffle.Record{Topic: tp}); err != nil {
		t.Fatal(err)
	}
	group := name(t, "sg")
	res, err := adm.AlterShareGroupOffsets(ctx, group, map[riffle.TopicPartition]int64{p0: 2})
	if err != nil || len(res) != 1 || res[p0] != nil {
		t.Fatalf("AlterShareGroupOffsets: %v %v", res, err)
	}
	eventually(t, time.Minute, "the start offset set", func() error {
		offs, err := adm.DescribeShareGroupOffsets(ctx, group, tp)
		if err != nil || len(offs) != 1 || offs[0].Err != nil || offs[0].StartOffset != 2 || offs[0].Lag != 1 {
			return fmt.Errorf("%v %v", offs, err)
		}
		return nil
	})
	gs, err := adm.ListShareGroups(ctx)
	if i := slices.IndexFunc(gs, func(g riffle.GroupListing) bool { return g.Group == group }); err != nil || i < 0 || gs[i].State != "Empty" {
		t.Errorf("ListShareGroups: %v %v, want %s Empty", gs, err, group)
	}
	if dr, err := adm.DeleteShareGroupOffsets(ctx, group, tp); err != nil || dr.Err() != nil {
		t.Fatalf("DeleteShareGroupOffsets: %v %v", dr, err)
	}
	eventually(t, time.Minute, "the share group's state deleted", func() error {
		offs, err := adm.DescribeShareGroupOffsets(ctx, group, tp)
		if err != nil {
			return err
		}
		// Kafka answers the partition with start offset and lag -1.
		if len(offs) != 1 || offs[0].Err != nil || offs[0].StartOffset != -1 || offs[0].Lag != -1 {
			return fmt.Errorf("%v", offs)
		}
		return nil
	})
	if res, err := adm.DeleteGroups(ctx, group); err != nil || res.Err() != nil {
		t.Errorf("DeleteGroups(share group): %v %v", res, err)
	}
}
