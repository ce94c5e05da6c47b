package integration_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/riffle-go/riffle"
)

// The cluster as Admin sees it: brokers with their racks, features, and a
// topic's replicas, configs, partitions, offsets, records, log dirs,
// producers, leaders and deletion.
func TestAdminBasics(t *testing.T) {
	need(t)
	cl := client(t)
	adm := cl.Admin()
	ctx := timeout(t, 3*time.Minute)

	info, err := adm.DescribeCluster(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.ClusterID == "" || len(info.Brokers) != env.nodes || info.Controller < 0 {
		t.Errorf("DescribeCluster: %+v", info)
	}
	if env.cluster != nil {
		for i, b := range info.Brokers {
			if b.NodeID != int32(i+1) || b.Rack != fmt.Sprintf("r%d", i+1) {
				t.Errorf("broker %+v, want node %d in rack r%d", b, i+1, i+1)
			}
		}
		if info.ClusterID != env.cluster.ClusterID() {
			t.Errorf("cluster id %s, formatted with %s", info.ClusterID, env.cluster.ClusterID())
		}
	}

	feats, err := adm.DescribeFeatures(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"metadata.version", "transaction.version", "group.version", "share.version"}
	if is39() {
		want = want[:1] // Kafka 3.9 finalizes metadata.version only
		for _, f := range []string{"transaction.version", "group.version", "share.version"} {
			if r, ok := feats.Finalized[f]; ok && r.Max > 0 {
				t.Errorf("feature %s finalized at %+v on Kafka %s", f, r, env.version)
			}
		}
	}
	for _, f := range want {
		if r, ok := feats.Finalized[f]; !ok || r.Max < 1 {
			t.Errorf("feature %s: %+v (finalized %v)", f, r, feats.Finalized)
		}
	}
	t.Logf("finalized features: %v", feats.Finalized)

	tp := topic(t, cl, 3, map[string]string{"retention.ms": "3600000"})
	var detail riffle.TopicDetail
	eventually(t, time.Minute, "the new topic's replicas in sync", func() error {
		ds, err := adm.DescribeTopics(ctx, []string{tp})
		if err != nil {
			return err
		}
		detail = ds[0]
		if detail.Err != nil || len(detail.Partitions) != 3 {
			return fmt.Errorf("%+v", detail)
		}
		for _, p := range detail.Partitions {
			if p.Err != nil || p.Leader < 0 || len(p.Replicas) != int(rf()) || len(p.ISR) != int(rf()) {
				return fmt.Errorf("partition %+v", p)
			}
		}
		return nil
	})

	cfgValue := func(name string) (riffle.ConfigEntry, bool) {
		t.Helper()
		tcs, err := adm.DescribeTopicConfigs(ctx, tp)
		if err != nil || len(tcs) != 1 || tcs[0].Err != nil {
			t.Fatalf("DescribeTopicConfigs: %v %v", tcs, err)
		}
		i := slices.IndexFunc(tcs[0].Configs, func(e riffle.ConfigEntry) bool { return e.Name == name })
		if i < 0 {
			return riffle.ConfigEntry{}, false
		}
		return tcs[0].Configs[i], true
	}
	if e, ok := cfgValue("retention.ms"); !ok || e.Value == nil || *e.Value != "3600000" || e.Source != "DYNAMIC_TOPIC_CONFIG" {
		t.Errorf("retention.ms: %+v", e)
	}
	if env.cluster != nil && env.nodes == 3 {
		// The harness's broker-level min.insync.replicas=2 applies.
		if e, ok := cfgValue("min.insync.replicas"); !ok || e.Value == nil || *e.Value != "2" {
			t.Errorf("min.insync.replicas: %+v", e)
		} else if len(e.Synonyms) == 0 || (e.Synonyms[0].Source != "STATIC_BROKER_CONFIG" && e.Synonyms[0].Source != "DYNAMIC_DEFAULT_BROKER_CONFIG") {
			// Kafka 4 with eligible leader replicas (KIP-966) copies
			// the static value to a cluster-wide dynamic default.
			t.Errorf("min.insync.replicas synonyms: %+v", e.Synonyms)
		}
	}
	v := "7200000"
	if res, err := adm.AlterTopicConfigs(ctx, riffle.AlterConfig{Topic: tp, Name: "retention.ms", Value: &v}); err != nil || res.Err() != nil {
		t.Fatalf("AlterTopicConfigs: %v %v", res, err)
	}
	eventually(t, time.Minute, "retention.ms altered", func() error {
		if e, _ := cfgValue("retention.ms"); e.Value == nil || *e.Value != v {
			return fmt.Errorf("%+v", e)
		}
		return nil
	})

	if res, err := adm.CreatePartitions(ctx, 4, tp); err != nil || res.Err() != nil {
		t.Fatalf("CreatePartitions: %v %v", res, err)
	}
	eventually(t, time.Minute, "4 partitions", func() error {
		ts, err := adm.ListTopics(ctx, tp)
		if err != nil || len(ts) != 1 || len(ts[0].Partitions) != 4 {
			return fmt.Errorf("%v %v", ts, err)
		}
		return nil
	})

	p, err := riffle.NewProducer(cl, riffle.WithPartitioner(riffle.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(ctx)
	var recs []*riffle.Record
	for i := range 10 {
		recs = append(recs, &riffle.Record{Topic: tp, Partition: 3, Value: []byte(fmt.Sprint(i))})
	}
	if err := p.ProduceSync(ctx, recs...); err != nil {
		t.Fatal(err)
	}
	p3 := riffle.TopicPartition{Topic: tp, Partition: 3}

	prods, err := adm.DescribeProducers(ctx, p3)
	if err != nil || len(prods) != 1 || prods[0].Err != nil || len(prods[0].Producers) != 1 || prods[0].Producers[0].LastSequence != 9 {
		t.Errorf("DescribeProducers: %v %v", prods, err)
	}

	dels, err := adm.DeleteRecords(ctx, map[riffle.TopicPartition]int64{p3: 4})
	if err != nil || len(dels) != 1 || dels[0].Err != nil || dels[0].LowWatermark != 4 {
		t.Fatalf("DeleteRecords: %v %v", dels, err)
	}
	los, err := adm.ListOffsets(ctx, riffle.OffsetEarliest, tp)
	if err != nil {
		t.Fatal(err)
	}
	for _, lo := range los {
		want := int64(0)
		if lo.Partition == 3 {
			want = 4
		}
		if lo.Err != nil || lo.Offset != want {
			t.Errorf("earliest of %s[%d]: %d (%v), want %d", tp, lo.Partition, lo.Offset, lo.Err, want)
		}
	}
	if got := values(readAll(t, cl, tp, riffle.ReadUncommitted)[3]); !slices.Equal(got, []string{"4", "5", "6", "7", "8", "9"}) {
		t.Errorf("after DeleteRecords: %q", got)
	}

	dirs, err := adm.DescribeLogDirs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	replicas := 0
	for _, b := range dirs {
		if b.Err != nil {
			t.Errorf("broker %d: %v", b.Broker, b.Err)
		}
		for _, d := range b.Dirs {
			for _, lp := range d.Partitions {
				if lp.Topic == tp {
					replicas++
				}
			}
		}
	}
	if replicas != 4*int(rf()) {
		t.Errorf("DescribeLogDirs: %d replicas of %s, want %d", replicas, tp, 4*rf())
	}

	res, err := adm.ElectLeaders(ctx, riffle.ElectionPreferred, p3)
	if err != nil || len(res) != 1 || (res[0].Err != nil && !errors.Is(res[0].Err, riffle.ErrElectionNotNeeded)) {
		t.Errorf("ElectLeaders preferred: %v %v", res, err)
	}

	group := name(t, "g")
	if err := adm.AlterGroupOffsets(ctx, group, map[riffle.TopicPartition]int64{p3: 7}); err != nil {
		t.Fatal(err)
	}
	lag, err := adm.GroupLag(ctx, group)
	if err != nil || len(lag) != 1 || lag[0].Committed != 7 || lag[0].Lag != 3 {
		t.Errorf("GroupLag: %v %v", lag, err)
	}
	gs, err := adm.ListGroups(ctx)
	if err != nil || !slices.ContainsFunc(gs, func(g riffle.GroupListing) bool { return g.Group == group }) {
		t.Errorf("ListGroups lacks %s: %v", group, err)
	}
	if res, err := adm.DeleteGroups(ctx, group); err != nil || res.Err() != nil {
		t.Errorf("DeleteGroups: %v %v", res, err)
	}

	if res, err := adm.DeleteTopics(ctx, tp); err != nil || res.Err() != nil {
		t.Fatalf("DeleteTopics: %v %v", res, err)
	}
	eventually(t, time.Minute, "the topic gone", func() error {
		ts, err := adm.ListTopics(ctx)
		if err != nil {
			return err
		}
		if slices.ContainsFunc(ts, func(d riffle.TopicDetail) bool { return d.Name == tp }) {
			return errNotYet
		}
		return nil
	})
}
