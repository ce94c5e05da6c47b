package riffle

import (
	"context"
	"errors"
	"net"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestAdminTopics(t *testing.T) {
	fake := newFake(t, kfake.NumBrokers(3))
	cl := newTestClient(t, SeedBrokers(fake.ListenAddrs()[0]))
	adm := cl.Admin()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	res, err := adm.CreateTopics(ctx,
		TopicSpec{Name: "a", Partitions: 3, ReplicationFactor: 1, Configs: map[string]string{"cleanup.policy": "compact"}},
		TopicSpec{Name: "b", Partitions: 2},
	)
	if err != nil || res.Err() != nil {
		t.Fatalf("create: %v %v", err, res.Err())
	}
	// Creating again fails per topic, typed; the other topic's result
	// is independent.
	res, err = adm.CreateTopics(ctx, TopicSpec{Name: "a", Partitions: 1}, TopicSpec{Name: "c", Partitions: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 2 || !errors.Is(res[0].Err, ErrTopicAlreadyExists) || res[1].Err != nil {
		t.Fatalf("per-topic results wrong: %+v", res)
	}
	if !errors.Is(res.Err(), ErrTopicAlreadyExists) {
		t.Fatalf("joined error %v", res.Err())
	}

	topics, err := adm.ListTopics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]TopicDetail{}
	for _, td := range topics {
		byName[td.Name] = td
	}
	if len(byName["a"].Partitions) != 3 || len(byName["b"].Partitions) != 2 || len(byName["c"].Partitions) != 1 {
		t.Fatalf("listed topics %+v", topics)
	}
	for _, p := range byName["a"].Partitions {
		if p.Leader < 0 || len(p.Replicas) == 0 {
			t.Fatalf("partition without leader: %+v", p)
		}
	}
	// Listing a missing topic reports it per topic.
	listed, err := adm.ListTopics(ctx, "nope")
	if err != nil || len(listed) != 1 || !errors.Is(listed[0].Err, ErrUnknownTopicOrPartition) {
		t.Fatalf("missing topic listing: %+v %v", listed, err)
	}

	res, err = adm.CreatePartitions(ctx, 4, "b")
	if err != nil || res.Err() != nil {
		t.Fatalf("create partitions: %v %v", err, res.Err())
	}
	res, err = adm.CreatePartitions(ctx, 1, "b")
	if err != nil || !errors.Is(res[0].Err, ErrInvalidPartitions) {
		t.Fatalf("shrinking partitions must fail per topic: %+v %v", res, err)
	}
	listed, err = adm.ListTopics(ctx, "b")
	if err != nil || len(listed[0].Partitions) != 4 {
		t.Fatalf("after create partitions: %+v %v", listed, err)
	}

	cfgs, err := adm.DescribeTopicConfigs(ctx, "a")
	if err != nil || cfgs[0].Err != nil {
		t.Fatalf("describe configs: %v %v", err, cfgs)
	}
	if v := configValue(cfgs[0], "cleanup.policy"); v != "compact" {
		t.Fatalf("cleanup.policy = %q", v)
	}
	retention := "12345"
	res, err = adm.AlterTopicConfigs(ctx, AlterConfig{Topic: "a", Name: "retention.ms", Value: &retention})
	if err != nil || res.Err() != nil {
		t.Fatalf("alter: %v %v", err, res.Err())
	}
	cfgs, _ = adm.DescribeTopicConfigs(ctx, "a")
	if v := configValue(cfgs[0], "retention.ms"); v != retention {
		t.Fatalf("retention.ms = %q after alter", v)
	}

	res, err = adm.DeleteTopics(ctx, "a", "nope")
	if err != nil || res[0].Err != nil || !errors.Is(res[1].Err, ErrUnknownTopicOrPartition) {
		t.Fatalf("delete: %+v %v", res, err)
	}

	info, err := adm.DescribeCluster(ctx)
	if err != nil || len(info.Brokers) != 3 || info.Controller < 0 {
		t.Fatalf("describe cluster: %+v %v", info, err)
	}
}

func configValue(tc TopicConfigs, name string) string {
	for _, c := range tc.Configs {
		if c.Name == name && c.Value != nil {
			return *c.Value
		}
	}
	return ""
}

func TestAdminListOffsets(t *testing.T) {
	fake := newFake(t, kfake.NumBrokers(2), kfake.SeedTopics(2, "t"))
	cl := newTestClient(t, SeedBrokers(fake.ListenAddrs()...))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	// Write 3 records to partition 0 with a raw produce (the producer
	// comes later), at known timestamps.
	tm, err := cl.cl.LookupTopic(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	produceRaw(t, ctx, cl, tm.Partitions[0].Leader, "t", 0, []int64{1000, 2000, 3000})

	check := func(ts int64, want0, want1 int64) {
		t.Helper()
		offs, err := cl.Admin().ListOffsets(ctx, ts, "t")
		if err != nil {
			t.Fatal(err)
		}
		got := map[int32]int64{}
		for _, o := range offs {
			if o.Err != nil {
				t.Fatalf("partition %d: %v", o.Partition, o.Err)
			}
			got[o.Partition] = o.Offset
		}
		if got[0] != want0 || got[1] != want1 {
			t.Fatalf("ts %d: offsets %v, want [%d %d]", ts, got, want0, want1)
		}
	}
	check(OffsetEarliest, 0, 0)
	check(OffsetLatest, 3, 0)
	check(1500, 1, -1)

	// After the leader moves, ListOffsets follows.
	cur := fake.LeaderFor("t", 0)
	if err := fake.MoveTopicPartition("t", 0, (cur+1)%2); err != nil {
		t.Fatal(err)
	}
	check(OffsetLatest, 3, 0)

	if _, err := cl.Admin().ListOffsets(ctx, OffsetLatest, "missing-topic"); !errors.Is(err, ErrUnknownTopic) {
		t.Fatalf("want ErrUnknownTopic, got %v", err)
	}
}

// produceRaw writes an uncompressed record batch with kmsg's structs so
// admin tests do not depend on the producer.
func produceRaw(t *testing.T, ctx context.Context, cl *Client, leader int32, topic string, partition int32, timestamps []int64) {
	t.Helper()
	rb := kmsg.RecordBatch{
		PartitionLeaderEpoch: -1,
		Magic:                2,
		FirstTimestamp:       timestamps[0],
		MaxTimestamp:         timestamps[len(timestamps)-1],
		ProducerID:           -1,
		ProducerEpoch:        -1,
		FirstSequence:        -1,
		NumRecords:           int32(len(timestamps)),
		LastOffsetDelta:      int32(len(timestamps) - 1),
	}
	var recs []byte
	for i, ts := range timestamps {
		r := kmsg.Record{TimestampDelta64: ts - timestamps[0], OffsetDelta: int32(i), Value: []byte("v")}
		r.Length = int32(len(r.AppendTo(nil)) - 1) // body size; the zero length took one byte
		recs = r.AppendTo(recs)
	}
	rb.Records = recs
	raw := rb.AppendTo(nil)
	rb.Length = int32(len(raw) - 12)
	raw = rb.AppendTo(nil)
	rb.CRC = int32(crc32c(raw[21:]))
	raw = rb.AppendTo(nil)

	req := kmsg.NewPtrProduceRequest()
	req.Acks = -1
	req.TimeoutMillis = 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition = partition
	rp.Records = raw
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := cl.cl.Request(ctx, leader, 1, req)
	if err != nil {
		t.Fatal(err)
	}
	pr := resp.(*kmsg.ProduceResponse)
	if code := pr.Topics[0].Partitions[0].ErrorCode; code != 0 {
		t.Fatalf("produce: %v", KafkaErrorForCode(code))
	}
}

// TestControllerNotAmongBrokers checks that controller requests fall back to
// any broker when the metadata names a controller it does not list (KRaft
// brokers forward to the active controller), instead of retrying until the
// deadline.
func TestControllerNotAmongBrokers(t *testing.T) {
	fake := newFake(t, kfake.NumBrokers(1))
	host, portStr, err := net.SplitHostPort(fake.ListenAddrs()[0])
	if err != nil {
		t.Fatal(err)
	}
	port, _ := strconv.Atoi(portStr)
	fake.ControlKey(int16(kmsg.Metadata), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		fake.KeepControl()
		resp := kr.(*kmsg.MetadataRequest).ResponseKind().(*kmsg.MetadataResponse)
		b := kmsg.NewMetadataResponseBroker()
		b.NodeID, b.Host, b.Port = 0, host, int32(port)
		resp.Brokers = append(resp.Brokers, b)
		resp.ControllerID = 7 // not a broker of this metadata
		return resp, nil, true
	})
	cl := newTestClient(t, SeedBrokers(fake.ListenAddrs()...))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	res, err := cl.Admin().CreateTopics(ctx, TopicSpec{Name: "x", Partitions: 1})
	if err != nil || res.Err() != nil {
		t.Fatalf("create with an unlisted controller: %v %v", err, res.Err())
	}
}

// TestOneOffLookupsAreNotTracked checks that topics looked up once (here by
// Admin.ListOffsets) leave the metadata refreshes once unused, instead of
// being asked about for the client's life.
func TestOneOffLookupsAreNotTracked(t *testing.T) {
	fake := newFake(t, kfake.NumBrokers(1), kfake.SeedTopics(2, "t"))
	var mu sync.Mutex
	var asked [][]string // topics of each metadata request
	fake.ControlKey(int16(kmsg.Metadata), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		fake.KeepControl()
		var topics []string
		for _, rt := range kr.(*kmsg.MetadataRequest).Topics {
			if rt.Topic != nil {
				topics = append(topics, *rt.Topic)
			}
		}
		mu.Lock()
		asked = append(asked, topics)
		mu.Unlock()
		return nil, nil, false
	})
	lastAsked := func() []string {
		mu.Lock()
		defer mu.Unlock()
		return asked[len(asked)-1]
	}
	cl := newTestClient(t, SeedBrokers(fake.ListenAddrs()...))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	offs, err := cl.Admin().ListOffsets(ctx, OffsetLatest, "t")
	if err != nil || len(offs) != 2 {
		t.Fatalf("list offsets: %v %v", offs, err)
	}
	if got := lastAsked(); !slices.Equal(got, []string{"t"}) {
		t.Fatalf("the lookup asked about %v, want [t]", got)
	}
	// A lookup in use is refreshed once more at most; then it is gone.
	for range 2 {
		if err := cl.Ping(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if got := lastAsked(); len(got) != 0 {
		t.Fatalf("refresh after the lookup still asks about %v", got)
	}
	if tm := cl.cl.Snapshot().Topics["t"]; tm != nil {
		t.Fatal("a topic nobody uses is still in the metadata snapshot")
	}
}

// ListOffsetsIsolated with ReadCommitted answers the last stable offset:
// with a transaction open after two committed records, the latest offset
// is the first record of the open transaction under read_committed and
// the high watermark under read_uncommitted.
func TestAdminListOffsetsReadCommitted(t *testing.T) {
	fake := newFake(t, kfake.NumBrokers(1), kfake.SeedTopics(1, "t"))
	cl := newTestClient(t, SeedBrokers(fake.ListenAddrs()...))
	ctx := txnCtx(t)
	produceRecords(t, cl, recs("t", "v", 2))
	p := startTxn(t, cl, "txn")
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := p.ProduceSync(ctx, recs("t", "open", 3)...); err != nil {
		t.Fatal(err)
	}
	latest := func(iso IsolationLevel) int64 {
		t.Helper()
		offs, err := cl.Admin().ListOffsetsIsolated(ctx, iso, OffsetLatest, "t")
		if err != nil || len(offs) != 1 || offs[0].Err != nil {
			t.Fatalf("ListOffsetsIsolated(%d): %v %+v", iso, err, offs)
		}
		return offs[0].Offset
	}
	if got := latest(ReadUncommitted); got != 5 {
		t.Errorf("read_uncommitted latest = %d, want the high watermark 5", got)
	}
	if got := latest(ReadCommitted); got != 2 {
		t.Errorf("read_committed latest = %d, want the last stable offset 2", got)
	}
	if offs, err := cl.Admin().ListOffsets(ctx, OffsetLatest, "t"); err != nil || offs[0].Offset != 5 {
		t.Errorf("ListOffsets latest = %+v, %v; want 5", offs, err)
	}
	if _, err := cl.Admin().ListOffsetsIsolated(ctx, IsolationLevel(7), OffsetLatest, "t"); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("isolation 7: %v, want ErrInvalidConfig", err)
	}
	if err := p.CommitTransaction(ctx); err != nil {
		t.Fatal(err)
	}
	// After the commit the marker is written at 5: both read 6.
	if a, b := latest(ReadUncommitted), latest(ReadCommitted); a != 6 || b != 6 {
		t.Errorf("after commit: latest %d (uncommitted), %d (committed); want 6 and 6", a, b)
	}
}
