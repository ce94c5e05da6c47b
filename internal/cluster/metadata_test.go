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

func TestWithHints(t *testing.T) {
	now := time.Unix(100, 0)
	bs := []kmsg.MetadataResponseBroker{mdBroker(1, "a", 1), mdBroker(2, "b", 1)}
	tResp := mdTopic("t", 0, mdPart(0, 1, 5), mdPart(1, 2, 5))
	tResp.TopicID = [16]byte{7}
	base, _ := merge(emptySnapshot(), resp(bs, tResp, mdTopic("u", 0, mdPart(0, 1, 3))), []string{"t", "u"}, now)
	ep3 := BrokerMeta{NodeID: 3, Host: "c", Port: 1}
	type lead struct{ leader, epoch int32 }
	for _, tc := range []struct {
		name      string
		hints     []LeaderHint
		endpoints []BrokerMeta
		same      bool                      // the snapshot is prev itself
		all       bool                      // every hint satisfied
		want      map[string]map[int32]lead // partitions to check
		added     []int32                   // brokers added
	}{
		{name: "newer epoch, known broker", hints: []LeaderHint{{Topic: "t", Partition: 0, Leader: 2, Epoch: 6}},
			all: true, want: map[string]map[int32]lead{"t": {0: {2, 6}, 1: {2, 5}}, "u": {0: {1, 3}}}},
		{name: "by topic id", hints: []LeaderHint{{TopicID: [16]byte{7}, Partition: 1, Leader: 1, Epoch: 9}},
			all: true, want: map[string]map[int32]lead{"t": {0: {1, 5}, 1: {1, 9}}}},
		{name: "same epoch, same leader: nothing to do", hints: []LeaderHint{{Topic: "t", Partition: 0, Leader: 1, Epoch: 5}},
			same: true, all: true},
		{name: "same epoch, other leader: a refresh settles it", hints: []LeaderHint{{Topic: "t", Partition: 0, Leader: 2, Epoch: 5}},
			same: true, all: false},
		{name: "older epoch: ours stands", hints: []LeaderHint{{Topic: "t", Partition: 0, Leader: 2, Epoch: 4}},
			same: true, all: true},
		{name: "no leader", hints: []LeaderHint{{Topic: "t", Partition: 0, Leader: -1, Epoch: 7}}, same: true},
		{name: "no epoch", hints: []LeaderHint{{Topic: "t", Partition: 0, Leader: 2, Epoch: -1}}, same: true},
		{name: "unknown topic", hints: []LeaderHint{{Topic: "x", Partition: 0, Leader: 2, Epoch: 7}}, same: true},
		{name: "unknown topic id", hints: []LeaderHint{{TopicID: [16]byte{9}, Partition: 0, Leader: 2, Epoch: 7}}, same: true},
		{name: "unknown partition", hints: []LeaderHint{{Topic: "t", Partition: 5, Leader: 2, Epoch: 7}}, same: true},
		{name: "unknown broker without endpoints", hints: []LeaderHint{{Topic: "t", Partition: 0, Leader: 3, Epoch: 7}}, same: true},
		{name: "unknown broker from endpoints", hints: []LeaderHint{{Topic: "t", Partition: 0, Leader: 3, Epoch: 7}},
			endpoints: []BrokerMeta{{NodeID: 1, Host: "moved", Port: 9}, ep3},
			all:       true, want: map[string]map[int32]lead{"t": {0: {3, 7}}}, added: []int32{3}},
		{name: "partly applied", hints: []LeaderHint{{Topic: "t", Partition: 0, Leader: 2, Epoch: 6}, {Topic: "x", Partition: 0, Leader: 2, Epoch: 7}},
			all: false, want: map[string]map[int32]lead{"t": {0: {2, 6}}}},
		{name: "two hints, one topic", hints: []LeaderHint{{Topic: "t", Partition: 0, Leader: 2, Epoch: 6}, {Topic: "t", Partition: 1, Leader: 1, Epoch: 6}},
			all: true, want: map[string]map[int32]lead{"t": {0: {2, 6}, 1: {1, 6}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			next, changes, all := withHints(base, tc.hints, tc.endpoints)
			if (next == base) != tc.same || all != tc.all {
				t.Fatalf("same snapshot %v (want %v), all %v (want %v)", next == base, tc.same, all, tc.all)
			}
			for topic, ps := range tc.want {
				for p, l := range ps {
					pm, _ := next.Topics[topic].Partition(p)
					if pm.Leader != l.leader || pm.LeaderEpoch != l.epoch {
						t.Errorf("%s[%d]: leader %d epoch %d, want %d %d", topic, p, pm.Leader, pm.LeaderEpoch, l.leader, l.epoch)
					}
				}
			}
			var added []int32
			for _, ch := range changes {
				if ch.OldAddr != "" || ch.NewAddr == "" {
					t.Errorf("change %+v: hints only add brokers", ch)
				}
				added = append(added, ch.NodeID)
			}
			if !reflect.DeepEqual(added, tc.added) {
				t.Errorf("brokers added %v, want %v", added, tc.added)
			}
			if next.Brokers[1].Host != "a" {
				t.Errorf("broker 1 moved by a hint: %+v", next.Brokers[1])
			}
			// prev is never changed.
			if pm, _ := base.Topics["t"].Partition(0); pm.Leader != 1 || pm.LeaderEpoch != 5 || len(base.Brokers) != 2 {
				t.Fatalf("prev changed: %+v, brokers %v", pm, base.Brokers)
			}
		})
	}
}

// TestHintFrom: only the leader errors carry a hint, and only with a
// leader and an epoch.
func TestHintFrom(t *testing.T) {
	for _, tc := range []struct {
		name          string
		code          int16
		leader, epoch int32
		ok            bool
	}{
		{"not leader, leader named", kafkaerr.NotLeaderForPartition, 2, 7, true},
		{"fenced epoch, leader named", kafkaerr.FencedLeaderEpoch, 2, 7, true},
		{"not leader, epoch 0", kafkaerr.NotLeaderForPartition, 0, 0, true},
		{"not leader, no leader", kafkaerr.NotLeaderForPartition, -1, -1, false},
		{"not leader, no epoch", kafkaerr.NotLeaderForPartition, 2, -1, false},
		{"no error", 0, 2, 7, false},
		{"unknown topic", kafkaerr.UnknownTopicOrPartition, 2, 7, false},
		{"unknown leader epoch", kafkaerr.UnknownLeaderEpoch, 2, 7, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, ok := HintFrom(tc.code, "t", 3, tc.leader, tc.epoch)
			if ok != tc.ok {
				t.Fatalf("ok = %v, want %v", ok, tc.ok)
			}
			if want := (LeaderHint{Topic: "t", Partition: 3, Leader: tc.leader, Epoch: tc.epoch}); ok && h != want {
				t.Errorf("hint %+v, want %+v", h, want)
			}
		})
	}
}

// TestHintLeader: the snapshot's leader of a hinted partition, by name or
// by topic id, -1 when unknown.
func TestHintLeader(t *testing.T) {
	now := time.Unix(100, 0)
	bs := []kmsg.MetadataResponseBroker{mdBroker(1, "a", 1), mdBroker(2, "b", 1)}
	tResp := mdTopic("t", 0, mdPart(0, 1, 5), mdPart(1, 2, 5))
	tResp.TopicID = [16]byte{7}
	s, _ := merge(emptySnapshot(), resp(bs, tResp), []string{"t"}, now)
	for _, tc := range []struct {
		h    LeaderHint
		want int32
	}{
		{LeaderHint{Topic: "t", Partition: 0, Leader: 2}, 1},
		{LeaderHint{TopicID: [16]byte{7}, Partition: 1, Leader: 1}, 2},
		{LeaderHint{TopicID: [16]byte{9}, Partition: 1}, -1},
		{LeaderHint{Topic: "x", Partition: 0}, -1},
		{LeaderHint{Topic: "t", Partition: 5}, -1},
	} {
		if got := s.HintLeader(tc.h); got != tc.want {
			t.Errorf("%+v: leader %d, want %d", tc.h, got, tc.want)
		}
	}
}
