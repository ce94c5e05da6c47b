package integration_test

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/riffle-go/riffle"
)

// partitionDetail describes tp's partition p.
func partitionDetail(t *testing.T, adm *riffle.Admin, tp string, p int32) (riffle.PartitionDetail, error) {
	t.Helper()
	ds, err := adm.DescribeTopics(timeout(t, 30*time.Second), []string{tp})
	if err != nil {
		return riffle.PartitionDetail{}, err
	}
	if len(ds) != 1 || ds[0].Err != nil {
		return riffle.PartitionDetail{}, fmt.Errorf("DescribeTopics: %+v", ds)
	}
	for _, pd := range ds[0].Partitions {
		if pd.Partition == p {
			return pd, pd.Err
		}
	}
	return riffle.PartitionDetail{}, fmt.Errorf("%s has no partition %d", tp, p)
}

// A reassignment in progress (held back by a replication throttle, itself
// set with dynamic topic and broker configs) is listed with the replicas
// it adds, and cancelled; cancelling again answers
// ErrNoReassignmentInProgress. Reordering the replicas of a partition
// changes its preferred leader, which ElectLeaders then elects. The
// replicas show in DescribeLogDirs with their size.
func TestReassignAndElectLeaders(t *testing.T) {
	need(t)
	needNodes(t, 2)
	cl := client(t)
	adm := cl.Admin()
	ctx := timeout(t, 4*time.Minute)

	// One replica: acks=all needs min.insync.replicas 1.
	res, err := adm.CreateTopics(ctx, riffle.TopicSpec{Name: name(t, "t"), Partitions: 1, ReplicationFactor: 1,
		Configs: map[string]string{"min.insync.replicas": "1",
			"leader.replication.throttled.replicas": "*", "follower.replication.throttled.replicas": "*"}})
	if err != nil || res.Err() != nil {
		t.Fatalf("CreateTopics: %v %v", res, err)
	}
	tp := res[0].Topic
	t.Cleanup(func() { _, _ = adm.DeleteTopics(timeout(t, 30*time.Second), tp) })
	p0 := riffle.TopicPartition{Topic: tp, Partition: 0}
	var from int32
	eventually(t, time.Minute, "the topic's leader", func() error {
		pd, err := partitionDetail(t, adm, tp, 0)
		if err != nil || pd.Leader < 0 {
			return fmt.Errorf("%+v %v", pd, err)
		}
		from = pd.Leader
		return nil
	})
	to := from%int32(env.nodes) + 1

	// 2 MiB for the new replica to copy at 10 kB/s.
	p, err := riffle.NewProducer(cl)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(ctx)
	var recs []*riffle.Record
	for range 16 {
		recs = append(recs, &riffle.Record{Topic: tp, Value: bytes.Repeat([]byte("x"), 128<<10)})
	}
	if err := p.ProduceSync(ctx, recs...); err != nil {
		t.Fatal(err)
	}
	const rate = "10000"
	r := rate
	t.Cleanup(func() {
		_, _ = adm.IncrementalAlterBrokerConfigs(timeout(t, 30*time.Second),
			riffle.BrokerConfigChange{Broker: from, Name: "leader.replication.throttled.rate", Op: riffle.ConfigOpDelete},
			riffle.BrokerConfigChange{Broker: to, Name: "follower.replication.throttled.rate", Op: riffle.ConfigOpDelete})
	})
	if res, err := adm.IncrementalAlterBrokerConfigs(ctx,
		riffle.BrokerConfigChange{Broker: from, Name: "leader.replication.throttled.rate", Value: &r},
		riffle.BrokerConfigChange{Broker: to, Name: "follower.replication.throttled.rate", Value: &r}); err != nil || res.Err() != nil {
		t.Fatalf("throttling: %v %v", res, err)
	}

	dirs, err := adm.DescribeLogDirs(ctx, from)
	if err != nil || len(dirs) != 1 || dirs[0].Err != nil || len(dirs[0].Dirs) == 0 {
		t.Fatalf("DescribeLogDirs(%d): %+v %v", from, dirs, err)
	}
	// The replica is in one of the broker's log dirs (two per node in
	// the harness).
	d := dirs[0].Dirs[0]
	for _, ld := range dirs[0].Dirs {
		if slices.ContainsFunc(ld.Partitions, func(lp riffle.LogDirPartition) bool { return lp.TopicPartition == p0 }) {
			d = ld
		}
	}
	i := slices.IndexFunc(d.Partitions, func(lp riffle.LogDirPartition) bool { return lp.TopicPartition == p0 })
	if d.Err != nil || i < 0 || d.Partitions[i].Size < 2<<20 || d.Partitions[i].IsFuture || d.TotalBytes <= 0 || d.UsableBytes <= 0 {
		t.Errorf("log dir %s of broker %d: %+v (partition %d)", d.Path, from, d, i)
	}

	if res, err := adm.AlterPartitionReassignments(ctx, map[riffle.TopicPartition][]int32{p0: {from, to}}); err != nil || res.Err() != nil {
		t.Fatalf("AlterPartitionReassignments: %v %v", res, err)
	}
	eventually(t, time.Minute, "the reassignment listed", func() error {
		rs, err := adm.ListPartitionReassignments(ctx, p0)
		if err != nil {
			return err
		}
		if len(rs) != 1 || rs[0].TopicPartition != p0 || !slices.Equal(rs[0].Adding, []int32{to}) || len(rs[0].Removing) != 0 ||
			!slices.Equal(rs[0].Replicas, []int32{from, to}) {
			return fmt.Errorf("%v", rs)
		}
		return nil
	})
	all, err := adm.ListPartitionReassignments(ctx)
	if err != nil || !slices.ContainsFunc(all, func(r riffle.PartitionReassignment) bool { return r.TopicPartition == p0 }) {
		t.Errorf("ListPartitionReassignments of every partition lacks %v: %v %v", p0, all, err)
	}

	if res, err := adm.AlterPartitionReassignments(ctx, map[riffle.TopicPartition][]int32{p0: nil}); err != nil || res.Err() != nil {
		t.Fatalf("cancelling the reassignment: %v %v", res, err)
	}
	eventually(t, time.Minute, "the reassignment cancelled", func() error {
		rs, err := adm.ListPartitionReassignments(ctx, p0)
		if err != nil || len(rs) != 0 {
			return fmt.Errorf("%v %v", rs, err)
		}
		pd, err := partitionDetail(t, adm, tp, 0)
		if err != nil || !slices.Equal(pd.Replicas, []int32{from}) {
			return fmt.Errorf("replicas %+v %v", pd, err)
		}
		return nil
	})
	res2, err := adm.AlterPartitionReassignments(ctx, map[riffle.TopicPartition][]int32{p0: nil})
	if err != nil || len(res2) != 1 || !errors.Is(res2[0].Err, riffle.ErrNoReassignmentInProgress) {
		t.Errorf("cancelling again: %v %v, want ErrNoReassignmentInProgress", res2, err)
	}

	// Preferred leaders: a topic with every broker as a replica, its
	// replica list reversed (no data moves), then elected.
	tp2 := topic(t, cl, 1, nil)
	q0 := riffle.TopicPartition{Topic: tp2, Partition: 0}
	var before riffle.PartitionDetail
	eventually(t, time.Minute, tp2+" in sync", func() error {
		before, err = partitionDetail(t, adm, tp2, 0)
		if err != nil || before.Leader < 0 || len(before.ISR) != int(rf()) || before.Leader != before.Replicas[0] {
			return fmt.Errorf("%+v %v", before, err)
		}
		return nil
	})
	if res, err := adm.ElectLeaders(ctx, riffle.ElectionPreferred, q0); err != nil || len(res) != 1 || !errors.Is(res[0].Err, riffle.ErrElectionNotNeeded) {
		t.Errorf("ElectLeaders on the preferred leader: %v %v, want ErrElectionNotNeeded", res, err)
	}
	if res, err := adm.ElectLeaders(ctx, riffle.ElectionUnclean, q0); err != nil || len(res) != 1 || !errors.Is(res[0].Err, riffle.ErrElectionNotNeeded) {
		t.Errorf("unclean ElectLeaders with a live leader: %v %v, want ErrElectionNotNeeded", res, err)
	}
	reversed := slices.Clone(before.Replicas)
	slices.Reverse(reversed)
	if res, err := adm.AlterPartitionReassignments(ctx, map[riffle.TopicPartition][]int32{q0: reversed}); err != nil || res.Err() != nil {
		t.Fatalf("reordering the replicas: %v %v", res, err)
	}
	eventually(t, time.Minute, "the replicas reordered", func() error {
		pd, err := partitionDetail(t, adm, tp2, 0)
		if err != nil || !slices.Equal(pd.Replicas, reversed) {
			return fmt.Errorf("%+v %v", pd, err)
		}
		return nil
	})
	eventually(t, time.Minute, "the new preferred leader elected", func() error {
		res, err := adm.ElectLeaders(ctx, riffle.ElectionPreferred, q0)
		if err != nil || len(res) != 1 || (res[0].Err != nil && !errors.Is(res[0].Err, riffle.ErrElectionNotNeeded)) {
			return fmt.Errorf("ElectLeaders: %v %v", res, err)
		}
		pd, err := partitionDetail(t, adm, tp2, 0)
		if err != nil || pd.Leader != reversed[0] {
			return fmt.Errorf("leader %d, want %d (%v)", pd.Leader, reversed[0], err)
		}
		return nil
	})
}
