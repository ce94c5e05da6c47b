package riffle

import (
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Partitions are grouped under their topic, topics in first-seen order.
func TestTopicEntry(t *testing.T) {
	req := listOffsetsRequest([]offsetsQuery{
		{topic: "a", partition: 1}, {topic: "b", partition: 0}, {topic: "a", partition: 0}, {topic: "b", partition: 2},
	}, ReadCommitted)
	var got []string
	for _, rt := range req.Topics {
		var ps []int32
		for _, rp := range rt.Partitions {
			ps = append(ps, rp.Partition)
		}
		got = append(got, rt.Topic)
		if want := map[string][]int32{"a": {1, 0}, "b": {0, 2}}[rt.Topic]; !slices.Equal(ps, want) {
			t.Fatalf("topic %s partitions %v, want %v", rt.Topic, ps, want)
		}
	}
	if !slices.Equal(got, []string{"a", "b"}) || req.IsolationLevel != 1 {
		t.Fatalf("topics %v isolation %d", got, req.IsolationLevel)
	}
	var ts []kmsg.FetchRequestTopic
	idx := map[string]int{}
	for _, name := range []string{"x", "y", "x"} {
		e := topicEntry(&ts, idx, name, func(n string) kmsg.FetchRequestTopic { return kmsg.FetchRequestTopic{Topic: n} })
		e.Partitions = append(e.Partitions, kmsg.FetchRequestTopicPartition{})
	}
	if len(ts) != 2 || len(ts[0].Partitions) != 2 || len(ts[1].Partitions) != 1 {
		t.Fatalf("entries %+v", ts)
	}
}
