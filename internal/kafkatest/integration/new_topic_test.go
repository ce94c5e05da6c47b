package integration_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/riffle-go/riffle"
)

// Admin calls that look a topic's partitions and leaders up, right after
// CreateTopics returned, succeed with the client's defaults: the brokers
// answer UNKNOWN_TOPIC_OR_PARTITION until they replayed the topic's
// creation, and the lookups wait for it (UnknownTopicWait; D1 of
// docs/real-kafka.md for the producer, then for the Admin).
func TestAdminOnNewTopic(t *testing.T) {
	need(t)
	cl := client(t)
	adm := cl.Admin()
	for round := range 3 {
		ctx := timeout(t, time.Minute)
		tp := topic(t, cl, 3, nil)
		los, err := adm.ListOffsets(ctx, riffle.OffsetLatest, tp)
		if err != nil || len(los) != 3 {
			t.Fatalf("round %d: ListOffsets on a topic created a moment ago: %v %v", round, los, err)
		}
		tp = topic(t, cl, 3, nil)
		prods, err := adm.DescribeProducers(ctx, riffle.TopicPartition{Topic: tp, Partition: 2})
		if err != nil || len(prods) != 1 || prods[0].Err != nil {
			t.Fatalf("round %d: DescribeProducers on a topic created a moment ago: %v %v", round, prods, err)
		}
		tp = topic(t, cl, 3, nil)
		dels, err := adm.DeleteRecords(ctx, map[riffle.TopicPartition]int64{{Topic: tp, Partition: 1}: riffle.OffsetLatest})
		if err != nil || len(dels) != 1 || dels[0].Err != nil {
			t.Fatalf("round %d: DeleteRecords on a topic created a moment ago: %v %v", round, dels, err)
		}
	}
}

// A topic that does not exist fails an Admin lookup with ErrUnknownTopic
// after UnknownTopicWait, and the error says how long it waited.
func TestAdminUnknownTopicWaits(t *testing.T) {
	need(t)
	const wait = 2 * time.Second
	cl := client(t, riffle.UnknownTopicWait(wait))
	ctx := timeout(t, time.Minute)
	start := time.Now()
	_, err := cl.Admin().ListOffsets(ctx, riffle.OffsetLatest, name(t, "never"))
	took := time.Since(start)
	if !errors.Is(err, riffle.ErrUnknownTopic) || !strings.Contains(err.Error(), "not in the metadata after") {
		t.Fatalf("ListOffsets of a topic that does not exist: %v, want ErrUnknownTopic naming the time waited", err)
	}
	if took < wait || took > wait+3*time.Second {
		t.Fatalf("failed after %v, want about %v", took, wait)
	}
	t.Logf("after %v: %v", took, err)
}

// A consumer assigned a partition of a topic created a moment ago reads
// it and reports nothing: the topic was unknown to some brokers for less
// than UnknownTopicWait.
func TestConsumeNewTopic(t *testing.T) {
	need(t)
	cl := client(t)
	for round := range 3 {
		ctx := timeout(t, time.Minute)
		tp := topic(t, cl, 2, nil)
		col := newCollector()
		c, err := riffle.NewConsumer(cl, riffle.HandleRecord(col.handle),
			riffle.OnPartitionError(func(e *riffle.PartitionError) { t.Errorf("round %d: %v", round, e) }))
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Assign(riffle.Assignment{TopicPartition: riffle.TopicPartition{Topic: tp, Partition: 1}, Start: riffle.AtEarliest()}); err != nil {
			t.Fatal(err)
		}
		p, err := riffle.NewProducer(cl, riffle.WithPartitioner(riffle.ManualPartitioner()))
		if err != nil {
			t.Fatal(err)
		}
		if err := p.ProduceSync(ctx, &riffle.Record{Topic: tp, Partition: 1, Value: []byte("v")}); err != nil {
			t.Fatal(err)
		}
		if got := col.waitValues(t, 1); len(got) != 1 || got[0] != "v" {
			t.Errorf("round %d: read %q, want [v]", round, got)
		}
		_ = p.Close(ctx)
		_, _ = c.Close(ctx)
	}
}
