package riffle

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
)

// A partition of a topic that does not exist waits for it: the coordinator
// retries after backoffs (no spin), the wait is reported once through
// OnPartitionError (after UnknownTopicWait) and shown in Stats, and records
// flow once the topic is created.
func TestAssignMissingTopicWaitsWithoutSpin(t *testing.T) {
	fake := newFake(t, kfake.NumBrokers(1))
	cl := newTestClient(t, SeedBrokers(fake.ListenAddrs()...), UnknownTopicWait(200*time.Millisecond))
	var mu sync.Mutex
	var reported []*PartitionError
	got := make(chan int64, 10)
	cs, err := NewConsumer(cl,
		HandleRecord(func(ctx context.Context, r *Record) error { got <- r.Offset; return nil }),
		OnPartitionError(func(pe *PartitionError) { mu.Lock(); reported = append(reported, pe); mu.Unlock() }))
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close(context.Background())
	if err := cs.Assign(Assignment{TopicPartition{"missing", 0}, AtEarliest()}); err != nil {
		t.Fatal(err)
	}
	nReported := func() int { mu.Lock(); defer mu.Unlock(); return len(reported) }
	waitFor(t, 30*time.Second, "the unknown topic reported", func() bool { return nReported() > 0 })
	mu.Lock()
	pe := reported[0]
	mu.Unlock()
	if !errors.Is(pe, ErrUnknownTopic) || pe.Topic != "missing" || pe.Partition != 0 {
		t.Fatalf("reported %v, want ErrUnknownTopic for missing[0]", pe)
	}
	if st := cs.Stats().Partitions; len(st) != 1 || !errors.Is(st[0].Err, ErrUnknownTopic) {
		t.Fatalf("stats %v, want the partition's Err to be ErrUnknownTopic", st)
	}
	// Wake-ups over a window: the coordinator's 250 ms tick and the
	// retry backoff (here 10..100 ms) bound them; a spinning coordinator
	// made hundreds of thousands.
	// 20 a second, over the time the window really took.
	n, took := countOver(2*time.Second, cs.passes.Load)
	if n > rateLimit(20, took) {
		t.Fatalf("the coordinator woke %d times in %v while the topic was missing (want at most 20 a second: backoff-bound)", n, took)
	}
	if n := nReported(); n != 1 {
		t.Fatalf("reported %d times, want once per change", n)
	}

	adm := cl.Admin()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if res, err := adm.CreateTopics(ctx, TopicSpec{Name: "missing", Partitions: 1}); err != nil || res.Err() != nil {
		t.Fatalf("create: %v %v", err, res.Err())
	}
	produceN(t, cl, "missing", 1, 3)
	for i := 0; i < 3; i++ {
		select {
		case <-got:
		case <-ctx.Done():
			t.Fatalf("no records after the topic was created: %v", cs.Stats().Partitions)
		}
	}
	if st := cs.Stats().Partitions; len(st) != 1 || st[0].Err != nil {
		t.Fatalf("stats %v, want no error once the partition started", st)
	}
}
