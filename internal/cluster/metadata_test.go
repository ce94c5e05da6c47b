package cluster

import (
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/riffle-go/riffle/internal/kafkaerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func mdBroker(id int32, host string, port int32) kmsg.MetadataResponseBroker {
	b := kmsg.NewMetadataResponseBroker()
	b.NodeID, b.Host, b.Port = id, host, port
	return b
}

func mdTopic(name string, code int16, parts ...kmsg.MetadataResponseTopicPartition) kmsg.MetadataResponseTopic {
	t := kmsg.NewMetadataResponseTopic()
	t.Topic = kmsg.StringPtr(name)
	t.ErrorCode = code
	t.Partitions = parts
	return t
}

func mdPart(p, leader, epoch int32) kmsg.MetadataResponseTopicPartition {
	mp := kmsg.NewMetadataResponseTopicPartition()
	mp.Partition, mp.Leader, mp.LeaderEpoch = p, leader, epoch
	return mp
}

func resp(brokers []kmsg.MetadataResponseBroker, topics ...kmsg.MetadataResponseTopic) *kmsg.MetadataResponse {
	r := kmsg.NewPtrMetadataResponse()
	r.Brokers = brokers
	r.Topics = topics
	r.ControllerID = 1
	return r
}

func TestMergeBrokers(t *testing.T) {
	now := time.Unix(100, 0)
	s1, ch := merge(emptySnapshot(), resp([]kmsg.MetadataResponseBroker{mdBroker(1, "a", 9092), mdBroker(2, "b", 9092)}), nil, now)
	if len(s1.Brokers) != 2 || len(ch) != 2 {
		t.Fatalf("brokers %v changes %v", s1.Brokers, ch)
	}
	// 1 moves, 2 leaves, 3 joins.
	s2, ch := merge(s1, resp([]kmsg.MetadataResponseBroker{mdBroker(1, "a2", 9092), mdBroker(3, "c", 9093)}), nil, now)
	want := map[int32]BrokerChange{
		1: {NodeID: 1, OldAddr: "a:9092", NewAddr: "a2:9092"},
		2: {NodeID: 2, OldAddr: "b:9092"},
		3: {NodeID: 3, NewAddr: "c:9093"},
	}
	if len(ch) != 3 {
		t.Fatalf("changes %v", ch)
	}
	for _, c := range ch {
		if want[c.NodeID] != c {
			t.Fatalf("change %+v, want %+v", c, want[c.NodeID])
		}
	}
	if _, ok := s2.Brokers[2]; ok {
		t.Fatal("removed broker still present")
	}
	// An empty broker list keeps what we know.
	s3, ch := merge(s2, resp(nil), nil, now)
	if len(ch) != 0 || len(s3.Brokers) != 2 {
		t.Fatalf("empty broker list changed membership: %v %v", ch, s3.Brokers)
	}
}

func TestMergeTopics(t *testing.T) {
	now := time.Unix(100, 0)
	bs := []kmsg.MetadataResponseBroker{mdBroker(1, "a", 1), mdBroker(2, "b", 1)}
	s1, _ := merge(emptySnapshot(), resp(bs,
		mdTopic("t", 0, mdPart(1, 2, 5), mdPart(0, 1, 5)),
		mdTopic("u", 0, mdPart(0, 1, 1)),
	), []string{"t", "u"}, now)
	tm := s1.Topics["t"]
	if tm.Partitions[0].Partition != 0 || tm.Partitions[1].Leader != 2 {
		t.Fatalf("partitions not sorted/merged: %+v", tm.Partitions)
	}

	tests := []struct {
		name       string
		asked      []string // sorted
		topics     []kmsg.MetadataResponseTopic
		wantLeader map[string][]int32 // topic -> leader per partition; nil slice = topic absent
		wantErr    map[string]error
	}{
		{
			name:       "newer epoch moves leader",
			asked:      []string{"t", "u"},
			topics:     []kmsg.MetadataResponseTopic{mdTopic("t", 0, mdPart(0, 2, 6), mdPart(1, 2, 5))},
			wantLeader: map[string][]int32{"t": {2, 2}, "u": {1}},
		},
		{
			name:       "stale epoch ignored per partition",
			asked:      []string{"t", "u"},
			topics:     []kmsg.MetadataResponseTopic{mdTopic("t", 0, mdPart(0, 2, 4), mdPart(1, 1, 6))},
			wantLeader: map[string][]int32{"t": {1, 1}, "u": {1}},
		},
		{
			name:       "topic no longer asked about is dropped",
			asked:      []string{"t"},
			topics:     []kmsg.MetadataResponseTopic{mdTopic("t", 0, mdPart(0, 1, 5), mdPart(1, 2, 5))},
			wantLeader: map[string][]int32{"t": {1, 2}, "u": nil},
		},
		{
			name:       "brokers only drops every topic",
			topics:     nil,
			wantLeader: map[string][]int32{"t": nil, "u": nil},
		},
		{
			name:       "asked topic missing from the response keeps its entry",
			asked:      []string{"t", "u"},
			topics:     []kmsg.MetadataResponseTopic{mdTopic("t", 0, mdPart(0, 1, 5), mdPart(1, 2, 5))},
			wantLeader: map[string][]int32{"t": {1, 2}, "u": {1}},
		},
		{
			name:       "topic not asked about is not kept",
			asked:      []string{"t"},
			topics:     []kmsg.MetadataResponseTopic{mdTopic("t", 0, mdPart(0, 1, 5), mdPart(1, 2, 5)), mdTopic("v", 0, mdPart(0, 1, 1))},
			wantLeader: map[string][]int32{"t": {1, 2}, "v": nil},
		},
		{
			name:       "unknown topic recorded",
			asked:      []string{"t", "x"},
			topics:     []kmsg.MetadataResponseTopic{mdTopic("x", kafkaerr.UnknownTopicOrPartition)},
			wantLeader: map[string][]int32{"t": {1, 2}, "x": {}},
			wantErr:    map[string]error{"x": kafkaerr.ForCode(kafkaerr.UnknownTopicOrPartition)},
		},
		{
			name:       "transient topic error keeps old entry",
			asked:      []string{"t"},
			topics:     []kmsg.MetadataResponseTopic{mdTopic("t", kafkaerr.LeaderNotAvailable)},
			wantLeader: map[string][]int32{"t": {1, 2}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s2, _ := merge(s1, resp(bs, tt.topics...), tt.asked, now)
			for name, leaders := range tt.wantLeader {
				tm := s2.Topics[name]
				if leaders == nil {
					if tm != nil {
						t.Fatalf("%s should be gone", name)
					}
					continue
				}
				if tm == nil {
					t.Fatalf("%s missing", name)
				}
				var got []int32
				for _, p := range tm.Partitions {
					got = append(got, p.Leader)
				}
				if len(got) == 0 {
					got = []int32{}
				}
				if !reflect.DeepEqual(got, leaders) {
					t.Fatalf("%s leaders %v, want %v", name, got, leaders)
				}
				if want := tt.wantErr[name]; !errors.Is(tm.Err, want) || (want == nil && tm.Err != nil) {
					t.Fatalf("%s err %v, want %v", name, tm.Err, want)
				}
			}
			if len(s2.Topics) > len(tt.asked) {
				t.Fatalf("snapshot holds %d topics, asked about %v", len(s2.Topics), tt.asked)
			}
			// prev must not have been mutated
			if s1.Topics["t"].Partitions[0].Leader != 1 {
				t.Fatal("merge mutated the previous snapshot")
			}
		})
	}
}
