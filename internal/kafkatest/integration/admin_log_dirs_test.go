package integration_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/riffle-go/riffle"
)

// logDirOf returns the directory of broker's log dirs holding p (as a
// current replica, not a future one) and the paths of the others.
func logDirOf(t *testing.T, adm *riffle.Admin, broker int32, p riffle.TopicPartition) (at string, others []string, err error) {
	t.Helper()
	ds, err := adm.DescribeLogDirs(timeout(t, 30*time.Second), broker)
	if err != nil {
		return "", nil, err
	}
	if len(ds) != 1 || ds[0].Err != nil {
		return "", nil, fmt.Errorf("DescribeLogDirs(%d): %+v", broker, ds)
	}
	for _, d := range ds[0].Dirs {
		if d.Err != nil {
			return "", nil, fmt.Errorf("log dir %s of broker %d: %w", d.Path, broker, d.Err)
		}
		i := slices.IndexFunc(d.Partitions, func(lp riffle.LogDirPartition) bool { return lp.TopicPartition == p })
		switch {
		case i >= 0 && d.Partitions[i].IsFuture:
			return "", nil, fmt.Errorf("%v is moving into %s on broker %d: %+v", p, d.Path, broker, d.Partitions[i])
		case i >= 0:
			at = d.Path
		default:
			others = append(others, d.Path)
		}
	}
	if at == "" {
		return "", nil, fmt.Errorf("no log dir of broker %d holds %v: %+v", broker, p, ds[0].Dirs)
	}
	return at, others, nil
}

// A replica moved to the other log dir of its broker (JBOD, KIP-113): the
// broker accepts the move, copies the replica and swaps it in, and
// DescribeLogDirs then lists it in the destination only, with its data; a
// directory the broker does not have is refused per replica
// (LOG_DIR_NOT_FOUND), so is a replica the broker does not hold
// (REPLICA_NOT_AVAILABLE), and a broker the cluster does not have fails
// locally. The harness gives every node
// two log dirs (kafkatest.Config.LogDirs).
func TestAlterReplicaLogDirs(t *testing.T) {
	need(t)
	cl := client(t)
	adm := cl.Admin()
	ctx := timeout(t, 3*time.Minute)
	tp := topic(t, cl, 1, nil)
	p0 := riffle.TopicPartition{Topic: tp, Partition: 0}
	p, err := riffle.NewProducer(cl)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(ctx)
	var recs []*riffle.Record
	for i := range 100 {
		recs = append(recs, &riffle.Record{Topic: tp, Value: fmt.Appendf(nil, "r%03d", i)})
	}
	if err := p.ProduceSync(ctx, recs...); err != nil {
		t.Fatal(err)
	}
	var leader int32
	eventually(t, time.Minute, "the partition's leader known", func() error {
		pd, err := partitionDetail(t, adm, tp, 0)
		if err != nil || pd.Leader < 0 {
			return fmt.Errorf("%+v %v", pd, err)
		}
		leader = pd.Leader
		return nil
	})
	var from string
	var others []string
	eventually(t, time.Minute, "the replica in a log dir of the leader", func() error {
		var err error
		from, others, err = logDirOf(t, adm, leader, p0)
		return err
	})
	if len(others) == 0 {
		t.Fatalf("broker %d has a single log dir (%s): the cluster needs two per node (kafkatest.Config.LogDirs)", leader, from)
	}
	to := others[0]
	follower := leader%int32(env.nodes) + 1

	moved := time.Now()
	moves := map[riffle.TopicPartitionReplica]string{
		{TopicPartition: p0, Broker: leader}: to,
		{TopicPartition: p0, Broker: 99}:     to,
	}
	if follower != leader { // one node: no follower
		moves[riffle.TopicPartitionReplica{TopicPartition: p0, Broker: follower}] = "/no/such/log/dir"
	}
	res, err := adm.AlterReplicaLogDirs(ctx, moves)
	if err != nil || len(res) != len(moves) {
		t.Fatalf("AlterReplicaLogDirs: %v %v", res, err)
	}
	by := map[int32]error{}
	for _, r := range res {
		by[r.Broker] = r.Err
	}
	if by[leader] != nil {
		t.Fatalf("moving %v on broker %d from %s to %s: %v", p0, leader, from, to, by[leader])
	}
	if follower != leader && !errors.Is(by[follower], riffle.ErrLogDirNotFound) {
		t.Errorf("moving %v on broker %d to a dir it does not have: %v, want ErrLogDirNotFound", p0, follower, by[follower])
	}
	if !errors.Is(by[99], riffle.ErrUnknownBroker) {
		t.Errorf("broker 99: %v, want ErrUnknownBroker", by[99])
	}

	eventually(t, 2*time.Minute, "the replica in "+to, func() error {
		at, _, err := logDirOf(t, adm, leader, p0)
		if err != nil {
			return err
		}
		if at != to {
			return fmt.Errorf("%v still in %s", p0, at)
		}
		return nil
	})
	t.Logf("%v on broker %d moved from %s to %s in %v", p0, leader, from, to, time.Since(moved).Round(time.Millisecond))
	ds, err := adm.DescribeLogDirs(ctx, leader)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range ds[0].Dirs {
		i := slices.IndexFunc(d.Partitions, func(lp riffle.LogDirPartition) bool { return lp.TopicPartition == p0 })
		switch {
		case d.Path == to && (i < 0 || d.Partitions[i].Size <= 0 || d.Partitions[i].IsFuture):
			t.Errorf("destination %s: %+v", d.Path, d.Partitions)
		case d.Path != to && i >= 0:
			t.Errorf("%v also in %s after the move: %+v", p0, d.Path, d.Partitions[i])
		}
	}
	// The moved replica serves its records.
	if got := values(readAll(t, cl, tp, riffle.ReadUncommitted)[0]); len(got) != 100 || got[0] != "r000" || got[99] != "r099" {
		t.Errorf("read %d records after the move: %v", len(got), got)
	}
	// A broker that holds no replica of the partition.
	if env.nodes >= 2 {
		single := name(t, "single")
		if res, err := adm.CreateTopics(ctx, riffle.TopicSpec{Name: single, Partitions: 1, ReplicationFactor: 1}); err != nil || res.Err() != nil {
			t.Fatalf("CreateTopics: %v %v", res, err)
		}
		t.Cleanup(func() { _, _ = adm.DeleteTopics(timeout(t, 30*time.Second), single) })
		s0 := riffle.TopicPartition{Topic: single, Partition: 0}
		var holder int32
		eventually(t, time.Minute, "the single replica's broker known", func() error {
			pd, err := partitionDetail(t, adm, single, 0)
			if err != nil || len(pd.Replicas) != 1 {
				return fmt.Errorf("%+v %v", pd, err)
			}
			holder = pd.Replicas[0]
			return nil
		})
		other := holder%int32(env.nodes) + 1
		ods, err := adm.DescribeLogDirs(ctx, other)
		if err != nil || len(ods) != 1 || len(ods[0].Dirs) == 0 {
			t.Fatalf("DescribeLogDirs(%d): %v %v", other, ods, err)
		}
		res, err := adm.AlterReplicaLogDirs(ctx, map[riffle.TopicPartitionReplica]string{{TopicPartition: s0, Broker: other}: ods[0].Dirs[0].Path})
		if err != nil || len(res) != 1 || !errors.Is(res[0].Err, riffle.KafkaErrorForCode(9)) {
			t.Errorf("moving %v on broker %d, which holds no replica of it: %v %v, want REPLICA_NOT_AVAILABLE", s0, other, res, err)
		}
	}
	// Moving it where it is now is no change.
	res, err = adm.AlterReplicaLogDirs(ctx, map[riffle.TopicPartitionReplica]string{{TopicPartition: p0, Broker: leader}: to})
	if err != nil || res.Err() != nil {
		t.Errorf("moving %v to the dir it is in: %v %v", p0, res, err)
	}
}
