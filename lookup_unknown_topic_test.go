package riffle

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
)

// createLater creates topic on fake after d, as a Kafka broker that learns
// of a topic created a moment ago (D1 of docs/real-kafka.md) answers
// UNKNOWN_TOPIC_OR_PARTITION until it replayed the metadata log. The
// creation finishes before the fake closes.
func createLater(t *testing.T, fake *kfake.Cluster, d time.Duration, topic string, partitions int32) {
	t.Helper()
	created := make(chan error, 1)
	timer := time.AfterFunc(d, func() { created <- fake.CreateTopic(topic, partitions, nil) })
	t.Cleanup(func() {
		if timer.Stop() {
			return
		}
		if err := <-created; err != nil {
			t.Errorf("creating %q: %v", topic, err)
		}
	})
}

// The Admin calls that look a topic's partitions or leaders up wait for a
// topic that appears 1.5 s after the call started, with the default
// options (UnknownTopicWait, 5 s): a count of 4 refreshes, the budget
// before, passes in well under a second.
func TestAdminWaitsForTopicToAppear(t *testing.T) {
	const late = 1500 * time.Millisecond
	calls := map[string]func(ctx context.Context, adm *Admin, topic string) error{
		"ListOffsets": func(ctx context.Context, adm *Admin, topic string) error {
			got, err := adm.ListOffsets(ctx, OffsetLatest, topic)
			if err == nil && (len(got) != 2 || got[0].Err != nil || got[1].Err != nil) {
				return errors.New("want 2 partitions without error")
			}
			return err
		},
		"DeleteRecords": func(ctx context.Context, adm *Admin, topic string) error {
			got, err := adm.DeleteRecords(ctx, map[TopicPartition]int64{{topic, 0}: OffsetLatest})
			if err == nil && len(got) == 1 {
				err = got[0].Err
			}
			return err
		},
		"DescribeProducers": func(ctx context.Context, adm *Admin, topic string) error {
			got, err := adm.DescribeProducers(ctx, TopicPartition{topic, 1})
			if err == nil && len(got) == 1 {
				err = got[0].Err
			}
			return err
		},
	}
	for name, call := range calls {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			fake := newFake(t, kfake.NumBrokers(3))
			cl := defaultClient(t, fake)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			start := time.Now()
			createLater(t, fake, late, "late", 2)
			if err := call(ctx, cl.Admin(), "late"); err != nil {
				t.Fatalf("%s on a topic appearing after %v: %v (after %v)", name, late, err, time.Since(start))
			}
			if took := time.Since(start); took < late {
				t.Fatalf("answered after %v, before the topic existed (%v)", took, late)
			}
		})
	}
}

// A topic that never appears fails an Admin lookup after UnknownTopicWait
// with ErrUnknownTopic, naming the topic and the time waited.
func TestAdminUnknownTopicFailsAfterWait(t *testing.T) {
	fake := newFake(t, kfake.NumBrokers(1))
	const wait = 400 * time.Millisecond
	cl := defaultClient(t, fake, UnknownTopicWait(wait))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := time.Now()
	_, err := cl.Admin().ListOffsets(ctx, OffsetLatest, "never")
	took := time.Since(start)
	if !errors.Is(err, ErrUnknownTopic) || !errors.Is(err, ErrUnknownTopicOrPartition) {
		t.Fatalf("ListOffsets: %v, want ErrUnknownTopic with UNKNOWN_TOPIC_OR_PARTITION", err)
	}
	if msg := err.Error(); !strings.Contains(msg, `"never"`) || !strings.Contains(msg, "not in the metadata after") {
		t.Fatalf("the error does not name the topic and the time waited: %v", err)
	}
	// Checked at each refresh, spaced 100 ms doubling to 1 s.
	if took < wait || took > wait+2*time.Second {
		t.Fatalf("failed after %v, want about UnknownTopicWait %v", took, wait)
	}
	t.Logf("after %v: %v", took, err)
}

// The deprecated UnknownTopicRetries, set, still ends Admin lookups at
// that many refreshes, before UnknownTopicWait.
func TestAdminUnknownTopicRetriesStillBound(t *testing.T) {
	fake := newFake(t, kfake.NumBrokers(1))
	cl := defaultClient(t, fake, UnknownTopicRetries(2), UnknownTopicWait(time.Minute))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := time.Now()
	_, err := cl.Admin().ListOffsets(ctx, OffsetLatest, "never")
	if !errors.Is(err, ErrUnknownTopic) || !strings.Contains(err.Error(), "(2 metadata refreshes)") {
		t.Fatalf("ListOffsets: %v, want ErrUnknownTopic after 2 refreshes", err)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Fatalf("failed after %v: the refresh bound did not apply", took)
	}
}

// A producer that does not set UnknownTopicTimeout waits the client's
// UnknownTopicWait.
func TestProducerTakesClientUnknownTopicWait(t *testing.T) {
	fake := newFake(t, kfake.NumBrokers(1))
	const wait = 300 * time.Millisecond
	cl := defaultClient(t, fake, UnknownTopicWait(wait))
	p, err := NewProducer(cl)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := time.Now()
	err = p.ProduceSync(ctx, &Record{Topic: "never", Value: []byte("v")})
	if took := time.Since(start); !errors.Is(err, ErrUnknownTopic) || took < wait || took > wait+2*time.Second {
		t.Fatalf("ProduceSync after %v: %v, want ErrUnknownTopic after about %v", took, err, wait)
	}
}

// UnknownTopicTimeout(0) fails at the first answer naming the topic
// unknown, as documented (it used to wait the whole RetryTimeout).
func TestProduceUnknownTopicTimeoutZeroFailsAtOnce(t *testing.T) {
	fake := newFake(t, kfake.NumBrokers(1))
	cl := defaultClient(t, fake)
	p, err := NewProducer(cl, UnknownTopicTimeout(0))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := time.Now()
	err = p.ProduceSync(ctx, &Record{Topic: "never", Value: []byte("v")})
	if took := time.Since(start); !errors.Is(err, ErrUnknownTopic) || took > 2*time.Second {
		t.Fatalf("ProduceSync after %v: %v, want ErrUnknownTopic at the first refresh", took, err)
	}
}

// A consumer assigned a partition of a topic that appears 1.5 s later
// reads it with the default options and reports nothing: the topic was
// unknown for less than UnknownTopicWait.
func TestConsumerAssignWaitsForTopicToAppear(t *testing.T) {
	fake := newFake(t, kfake.NumBrokers(3))
	cl := defaultClient(t, fake)
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
	const late = 1500 * time.Millisecond
	createLater(t, fake, late, "late", 1)
	if err := cs.Assign(Assignment{TopicPartition{"late", 0}, AtEarliest()}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p, err := NewProducer(cl)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(context.Background())
	if err := p.ProduceSync(ctx, &Record{Topic: "late", Value: []byte("v")}); err != nil {
		t.Fatal(err)
	}
	select {
	case off := <-got:
		if off != 0 {
			t.Fatalf("got offset %d, want 0", off)
		}
	case <-ctx.Done():
		t.Fatalf("no record: %v", cs.Stats().Partitions)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(reported) != 0 {
		t.Fatalf("reported %v for a topic unknown for %v, under UnknownTopicWait", reported, late)
	}
}

// A consumer's partition of a topic that never appears is reported once
// it has been unknown for UnknownTopicWait, not before, naming the wait;
// it keeps waiting (see TestAssignMissingTopicWaitsWithoutSpin).
func TestConsumerReportsUnknownTopicAfterWait(t *testing.T) {
	fake := newFake(t, kfake.NumBrokers(1))
	const wait = 800 * time.Millisecond
	cl := defaultClient(t, fake, UnknownTopicWait(wait))
	reported := make(chan *PartitionError, 10)
	cs, err := NewConsumer(cl,
		HandleRecord(func(ctx context.Context, r *Record) error { return nil }),
		OnPartitionError(func(pe *PartitionError) { reported <- pe }))
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close(context.Background())
	start := time.Now()
	if err := cs.Assign(Assignment{TopicPartition{"never", 0}, AtEarliest()}); err != nil {
		t.Fatal(err)
	}
	select {
	case pe := <-reported:
		took := time.Since(start)
		if !errors.Is(pe, ErrUnknownTopic) || !strings.Contains(pe.Error(), "not in the metadata for 800ms") {
			t.Fatalf("reported %v, want ErrUnknownTopic naming the wait", pe)
		}
		if took < wait {
			t.Fatalf("reported after %v, before UnknownTopicWait %v", took, wait)
		}
		t.Logf("after %v: %v", took, pe)
	case <-time.After(20 * time.Second):
		t.Fatal("the unknown topic was never reported")
	}
}
