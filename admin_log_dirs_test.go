package riffle

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/riffle-go/riffle/internal/kafkaerr"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// AlterReplicaLogDirs asks each broker about its own replicas only, in one
// request grouped by directory and topic, and answers per replica, sorted:
// the moves kfake makes (DescribeLogDirs then lists the replica in its new
// directory), a broker's per-replica error, an unknown partition, and a
// broker the metadata does not list.
func TestAdminAlterReplicaLogDirs(t *testing.T) {
	fake := newFake(t, kfake.NumBrokers(3), kfake.SeedTopics(2, "t"))
	cl := newTestClient(t, SeedBrokers(fake.ListenAddrs()...))
	adm := cl.Admin()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	produceRaw(t, ctx, cl, fake.LeaderFor("t", 0), "t", 0, []int64{1, 2})

	var mu sync.Mutex
	asked := map[int32][]*kmsg.AlterReplicaLogDirsRequest{}
	fake.ControlKey(int16(kmsg.AlterReplicaLogDirs), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		fake.KeepControl()
		mu.Lock()
		defer mu.Unlock()
		asked[fake.CurrentNode()] = append(asked[fake.CurrentNode()], kr.(*kmsg.AlterReplicaLogDirsRequest))
		return nil, nil, false
	})
	fake.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.AlterReplicaLogDirs}, Nodes: []int32{2}, Resource: "/offline", Err: kerr.KafkaStorageError, Count: -1})

	res, err := adm.AlterReplicaLogDirs(ctx, map[TopicPartitionReplica]string{
		{TopicPartition{"t", 1}, 1}:       "/b",
		{TopicPartition{"t", 0}, 1}:       "/a",
		{TopicPartition{"t", 1}, 2}:       "/offline",
		{TopicPartition{"missing", 0}, 1}: "/a",
		{TopicPartition{"t", 0}, 9}:       "/a",
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []TopicPartitionReplica{
		{TopicPartition{"missing", 0}, 1}, {TopicPartition{"t", 0}, 1}, {TopicPartition{"t", 1}, 1},
		{TopicPartition{"t", 1}, 2}, {TopicPartition{"t", 0}, 9},
	}
	var got []TopicPartitionReplica
	for _, r := range res {
		got = append(got, r.TopicPartitionReplica)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("results for %v, want %v (sorted by broker, topic, partition)", got, want)
	}
	switch {
	case !errors.Is(res[0].Err, ErrUnknownTopicOrPartition):
		t.Errorf("missing[0]@1: %v", res[0].Err)
	case res[1].Err != nil || res[2].Err != nil:
		t.Errorf("t[0]@1, t[1]@1: %v, %v", res[1].Err, res[2].Err)
	case !errors.Is(res[3].Err, kafkaerr.ForCode(kafkaerr.KafkaStorageError)):
		t.Errorf("t[1]@2 to an offline dir: %v", res[3].Err)
	case !errors.Is(res[4].Err, ErrUnknownBroker):
		t.Errorf("t[0]@9: %v", res[4].Err)
	}
	if err := res.Err(); err == nil || !errors.Is(err, ErrUnknownBroker) {
		t.Errorf("Err() = %v", err)
	}

	mu.Lock()
	if len(asked[1]) != 1 || len(asked[2]) != 1 || len(asked) != 2 {
		t.Fatalf("requests by broker: %v, want one to each of 1 and 2", asked)
	}
	r1 := asked[1][0]
	if len(r1.Dirs) != 2 || r1.Dirs[0].Dir != "/a" || r1.Dirs[1].Dir != "/b" ||
		len(r1.Dirs[0].Topics) != 2 || r1.Dirs[0].Topics[0].Topic != "missing" || r1.Dirs[0].Topics[1].Topic != "t" ||
		!slices.Equal(r1.Dirs[0].Topics[1].Partitions, []int32{0}) ||
		len(r1.Dirs[1].Topics) != 1 || !slices.Equal(r1.Dirs[1].Topics[0].Partitions, []int32{1}) {
		t.Errorf("broker 1's request: %+v", r1.Dirs)
	}
	if r2 := asked[2][0]; len(r2.Dirs) != 1 || r2.Dirs[0].Dir != "/offline" || len(r2.Dirs[0].Topics) != 1 {
		t.Errorf("broker 2's request: %+v", r2.Dirs)
	}
	mu.Unlock()

	// kfake keeps one directory per partition, whichever broker is asked.
	dirs, err := adm.DescribeLogDirs(ctx, 1)
	if err != nil || len(dirs) != 1 || dirs[0].Err != nil {
		t.Fatalf("DescribeLogDirs: %+v %v", dirs, err)
	}
	in := map[TopicPartition]string{}
	for _, d := range dirs[0].Dirs {
		for _, p := range d.Partitions {
			in[p.TopicPartition] = d.Path
		}
	}
	if in[TopicPartition{"t", 0}] != "/a" || in[TopicPartition{"t", 1}] != "/b" {
		t.Errorf("after the moves: %v", in)
	}

	if res, err := adm.AlterReplicaLogDirs(ctx, nil); err != nil || len(res) != 0 {
		t.Errorf("no replicas: %v %v", res, err)
	}
}

// A broker that cannot be reached fails its own replicas only.
func TestAdminAlterReplicaLogDirsBrokerFails(t *testing.T) {
	fake := newFake(t, kfake.NumBrokers(2), kfake.SeedTopics(1, "t"))
	cl := newTestClient(t, SeedBrokers(fake.ListenAddrs()...), RetryTimeout(500*time.Millisecond))
	adm := cl.Admin()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	fake.ControlKey(int16(kmsg.AlterReplicaLogDirs), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		fake.KeepControl()
		if fake.CurrentNode() == 1 {
			return nil, errors.New("connection dropped"), true
		}
		return nil, nil, false
	})
	res, err := adm.AlterReplicaLogDirs(ctx, map[TopicPartitionReplica]string{
		{TopicPartition{"t", 0}, 0}: "/x",
		{TopicPartition{"t", 0}, 1}: "/x",
	})
	if err != nil || len(res) != 2 {
		t.Fatalf("%v %v", res, err)
	}
	if res[0].Broker != 0 || res[0].Err != nil || res[1].Broker != 1 || res[1].Err == nil {
		t.Fatalf("results %v: want broker 0's move and broker 1's failure", res)
	}
}
