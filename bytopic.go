package riffle

import "github.com/twmb/franz-go/pkg/kmsg"

// topicEntry returns the entry for topic in *topics, a request's
// per-topic list, appending mk(topic) the first time the topic is seen
// (idx, one per request, remembers the positions). It is the one
// group-by-topic builder of every request that lists partitions by topic.
// The pointer is valid until the next append to *topics.
func topicEntry[T any](topics *[]T, idx map[string]int, topic string, mk func(string) T) *T {
	i, ok := idx[topic]
	if !ok {
		i = len(*topics)
		idx[topic] = i
		*topics = append(*topics, mk(topic))
	}
	return &(*topics)[i]
}

// offsetsQuery is one partition of a ListOffsets request.
type offsetsQuery struct {
	topic       string
	partition   int32
	timestamp   int64 // OffsetEarliest, OffsetLatest or a time in ms
	leaderEpoch int32 // the current leader epoch (KIP-320), -1 if unknown
}

// listOffsetsRequest builds a ListOffsets request for qs, grouped by topic.
func listOffsetsRequest(qs []offsetsQuery, isolation IsolationLevel) *kmsg.ListOffsetsRequest {
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID = -1
	req.IsolationLevel = int8(isolation)
	idx := map[string]int{}
	for _, q := range qs {
		rt := topicEntry(&req.Topics, idx, q.topic, func(t string) kmsg.ListOffsetsRequestTopic {
			rt := kmsg.NewListOffsetsRequestTopic()
			rt.Topic = t
			return rt
		})
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition = q.partition
		rp.Timestamp = q.timestamp
		rp.CurrentLeaderEpoch = q.leaderEpoch
		rt.Partitions = append(rt.Partitions, rp)
	}
	return req
}
