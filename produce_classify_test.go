package riffle

import (
	"testing"

	"github.com/riffle-go/riffle/internal/kafkaerr"
	"github.com/riffle-go/riffle/internal/producer"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Partition errors a broker checks before appending are retried as not
// written. CONCURRENT_TRANSACTIONS is one on Kafka 4 (transaction version
// 2): a transactional produce right after the previous transaction ended,
// before its markers were written, gets it; kfake never answers it
// (integration suite: TestReadCommittedSkipsAborted on Kafka 4.4.0 failed
// the record).
func TestClassifyNotWritten(t *testing.T) {
	part := &partState{topic: &topicState{name: "t"}, id: 0}
	for _, code := range []int16{kafkaerr.UnknownTopicOrPartition, kafkaerr.LeaderNotAvailable, kafkaerr.NotEnoughReplicas, kafkaerr.ConcurrentTransactions} {
		pr := &kmsg.ProduceResponse{Topics: []kmsg.ProduceResponseTopic{{Topic: "t", Partitions: []kmsg.ProduceResponseTopicPartition{{Partition: 0, ErrorCode: code}}}}}
		if got, _, _, err := classify(part, pr, nil, AcksAll); got != producer.Retry {
			t.Errorf("code %d: outcome %v (%v), want Retry", code, got, err)
		}
	}
}
