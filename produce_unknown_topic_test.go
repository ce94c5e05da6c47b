package riffle

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
)

// defaultClient is a client of fake with the client's default options
// (newTestClient shortens the backoffs).
func defaultClient(t *testing.T, fake *kfake.Cluster, opts ...Option) *Client {
	t.Helper()
	cl, err := NewClient(append([]Option{SeedBrokers(fake.ListenAddrs()...)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// A topic the brokers learn of a while after the first record for it (on
// Kafka, one created a moment ago: brokers answer UNKNOWN_TOPIC_OR_PARTITION
// until they replayed the metadata log) is produced to with the default
// options: the producer waits for it by time (UnknownTopicTimeout, 5 s),
// not for a count of refreshes that pass in well under a second (defect D1
// of docs/real-kafka.md).
func TestProduceWaitsForTopicToAppear(t *testing.T) {
	fake := newFake(t, kfake.NumBrokers(3))
	cl := defaultClient(t, fake)
	p, err := NewProducer(cl)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(context.Background())
	const late = 1500 * time.Millisecond
	created := make(chan error, 1)
	timer := time.AfterFunc(late, func() { created <- fake.CreateTopic("late", 3, nil) })
	t.Cleanup(func() {
		if timer.Stop() {
			return
		}
		<-created // the topic's creation finished before the fake closes
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := time.Now()
	rec := &Record{Topic: "late", Value: []byte("v")}
	if err := p.ProduceSync(ctx, rec); err != nil {
		t.Fatalf("ProduceSync to a topic appearing after %v: %v (after %v)", late, err, time.Since(start))
	}
	if took := time.Since(start); took < late {
		t.Fatalf("written after %v, before the topic existed (%v)", took, late)
	}
	if rec.Offset != 0 {
		t.Fatalf("written at offset %d, want 0", rec.Offset)
	}
}

// A topic that never appears fails the record after UnknownTopicTimeout
// with ErrUnknownTopic, whose message names the topic, the time waited and
// the brokers' answer.
func TestProduceUnknownTopicTimesOut(t *testing.T) {
	fake := newFake(t, kfake.NumBrokers(1))
	cl := defaultClient(t, fake)
	const wait = 400 * time.Millisecond
	p, err := NewProducer(cl, UnknownTopicTimeout(wait))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := time.Now()
	err = p.ProduceSync(ctx, &Record{Topic: "never", Value: []byte("v")})
	took := time.Since(start)
	if !errors.Is(err, ErrUnknownTopic) || !errors.Is(err, ErrUnknownTopicOrPartition) {
		t.Fatalf("ProduceSync: %v, want ErrUnknownTopic with UNKNOWN_TOPIC_OR_PARTITION", err)
	}
	if msg := err.Error(); !strings.Contains(msg, `"never"`) || !strings.Contains(msg, "not in the metadata after") {
		t.Fatalf("the error does not name the topic and the time waited: %v", err)
	}
	// The bound is checked at each refresh; the default backoff spaces
	// them 100 ms doubling to 1 s, and a loaded machine's refreshes take
	// longer: 10 s over it is still far from the 30 s context, the other
	// way this could end.
	if took < wait || took > wait+10*time.Second {
		t.Fatalf("failed after %v, want about UnknownTopicTimeout %v", took, wait)
	}
	t.Logf("after %v: %v", took, err)
}

// The deprecated UnknownTopicRetries, when set, still bounds a producer's
// wait by refreshes, before UnknownTopicTimeout.
func TestProduceUnknownTopicRetriesStillBound(t *testing.T) {
	fake := newFake(t, kfake.NumBrokers(1))
	cl := defaultClient(t, fake, UnknownTopicRetries(2))
	p, err := NewProducer(cl, UnknownTopicTimeout(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := time.Now()
	err = p.ProduceSync(ctx, &Record{Topic: "never", Value: []byte("v")})
	if !errors.Is(err, ErrUnknownTopic) || !strings.Contains(err.Error(), "(2 metadata refreshes)") {
		t.Fatalf("ProduceSync: %v, want ErrUnknownTopic after 2 refreshes", err)
	}
	if took := time.Since(start); took > 20*time.Second { // the timeout is a minute
		t.Fatalf("failed after %v: the refresh bound did not apply", took)
	}
}

// A partition added a moment ago (CreatePartitions, by another client) is
// produced to by number at once: the producer's metadata still shows the
// old count, and it refreshes until the partition appears rather than
// failing with ErrInvalidPartition (on Kafka, the broker asked may not
// have replayed the change yet either: TestAdminBasics failed so in CI).
func TestProduceWaitsForPartitionToAppear(t *testing.T) {
	fake := newFake(t, kfake.NumBrokers(3), kfake.SeedTopics(3, "grown"))
	cl := defaultClient(t, fake)
	p, err := NewProducer(cl, WithPartitioner(ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := p.ProduceSync(ctx, &Record{Topic: "grown", Partition: 2, Value: []byte("v")}); err != nil {
		t.Fatal(err)
	}
	other := defaultClient(t, fake)
	if res, err := other.Admin().CreatePartitions(ctx, 4, "grown"); err != nil || res.Err() != nil {
		t.Fatalf("CreatePartitions: %v %v", res, err)
	}
	rec := &Record{Topic: "grown", Partition: 3, Value: []byte("v")}
	if err := p.ProduceSync(ctx, rec); err != nil {
		t.Fatalf("ProduceSync to the partition just added: %v", err)
	}
	if rec.Partition != 3 || rec.Offset != 0 {
		t.Fatalf("written to [%d] at %d, want [3] at 0", rec.Partition, rec.Offset)
	}
}

// A partition the topic never gets fails after UnknownTopicTimeout with
// ErrInvalidPartition, naming the partition, the count seen and the time
// waited.
func TestProducePartitionOutOfRangeTimesOut(t *testing.T) {
	fake := newFake(t, kfake.NumBrokers(1), kfake.SeedTopics(3, "small"))
	cl := defaultClient(t, fake)
	const wait = 400 * time.Millisecond
	p, err := NewProducer(cl, WithPartitioner(ManualPartitioner()), UnknownTopicTimeout(wait))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := time.Now()
	err = p.ProduceSync(ctx, &Record{Topic: "small", Partition: 7, Value: []byte("v")})
	took := time.Since(start)
	if !errors.Is(err, ErrInvalidPartition) || IsRetriable(err) {
		t.Fatalf("ProduceSync: %v, want ErrInvalidPartition, not retriable", err)
	}
	if msg := err.Error(); !strings.Contains(msg, "small[7]") || !strings.Contains(msg, "not in the metadata after") ||
		!strings.Contains(msg, "topic has 3 partitions") {
		t.Fatalf("the error does not name the partition, the wait and the count: %v", err)
	}
	if took < wait || took > wait+10*time.Second {
		t.Fatalf("failed after %v, want about UnknownTopicTimeout %v", took, wait)
	}
	t.Logf("after %v: %v", took, err)
}
