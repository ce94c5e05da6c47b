package riffle

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Every error a record fails with names where it failed exactly once: its
// topic and partition ("t[1]: ") when it had one, its topic alone when it
// failed before it got a partition, through ProduceSync and Produce's
// callback alike. Some paths repeated the prefix (t[0]: t[0]: …) or named a
// partition the record never had.
func TestProduceErrorsNamePartitionOnce(t *testing.T) {
	type setup struct {
		fake *kfake.Cluster
		opts []ProducerOption
		rec  *Record
	}
	cases := []struct {
		name    string
		prepare func(t *testing.T) setup
		want    error  // errors.Is
		names   string // the name the message holds once
		absent  string // a name it must not hold
		manual  bool
		txn     bool
	}{
		{name: "delivery timeout after retries", want: ErrDeliveryTimeout, names: "t[1]",
			prepare: func(t *testing.T) setup {
				fake := newFake(t, kfake.NumBrokers(1), kfake.SeedTopics(2, "t"))
				fake.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: "t", Err: kerr.NotEnoughReplicas, Count: -1})
				return setup{fake, []ProducerOption{DeliveryTimeout(time.Second)}, &Record{Topic: "t", Partition: 1}}
			}},
		{name: "delivery timeout without a producer id", want: ErrDeliveryTimeout, names: "t[1]",
			prepare: func(t *testing.T) setup {
				fake := newFake(t, kfake.NumBrokers(1), kfake.SeedTopics(2, "t"))
				fake.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.InitProducerID}, Err: kerr.CoordinatorLoadInProgress, Count: -1})
				return setup{fake, []ProducerOption{DeliveryTimeout(time.Second)}, &Record{Topic: "t", Partition: 1}}
			}},
		{name: "record too large for MaxBatchBytes", want: ErrRecordTooLarge, names: `"t"`, absent: "t[",
			prepare: func(t *testing.T) setup {
				fake := newFake(t, kfake.NumBrokers(1), kfake.SeedTopics(2, "t"))
				return setup{fake, []ProducerOption{MaxBatchBytes(4 << 10)}, &Record{Topic: "t", Partition: 1, Value: make([]byte, 8<<10)}}
			}},
		{name: "partition out of range", want: ErrInvalidPartition, names: "t[9]", absent: `topic "t"`, manual: true,
			prepare: func(t *testing.T) setup {
				fake := newFake(t, kfake.NumBrokers(1), kfake.SeedTopics(2, "t"))
				return setup{fake, nil, &Record{Topic: "t", Partition: 9}}
			}},
		{name: "record too large for the broker", want: KafkaErrorForCode(kerr.MessageTooLarge.Code), names: "t[1]",
			prepare: func(t *testing.T) setup {
				fake := newFake(t, kfake.NumBrokers(1), kfake.SeedTopics(2, "t"))
				fake.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: "t", Err: kerr.MessageTooLarge, Count: -1})
				return setup{fake, nil, &Record{Topic: "t", Partition: 1}}
			}},
		{name: "topic authorization", want: ErrTopicAuthorization, names: "t[1]",
			prepare: func(t *testing.T) setup {
				fake := newFake(t, kfake.NumBrokers(1), kfake.SeedTopics(2, "t"))
				fake.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: "t", Err: kerr.TopicAuthorizationFailed, Count: -1})
				return setup{fake, nil, &Record{Topic: "t", Partition: 1}}
			}},
		{name: "cluster authorization of the producer id", want: ErrClusterAuthorization, names: "t[1]",
			prepare: func(t *testing.T) setup {
				fake := newFake(t, kfake.NumBrokers(1), kfake.SeedTopics(2, "t"))
				fake.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.InitProducerID}, Err: kerr.ClusterAuthorizationFailed, Count: -1})
				return setup{fake, nil, &Record{Topic: "t", Partition: 1}}
			}},
		{name: "unknown topic", want: ErrUnknownTopic, names: `"never"`, absent: "never[",
			prepare: func(t *testing.T) setup {
				fake := newFake(t, kfake.NumBrokers(1))
				return setup{fake, []ProducerOption{UnknownTopicTimeout(0)}, &Record{Topic: "never", Partition: 1}}
			}},
		{name: "invalid partition", want: ErrInvalidPartition, names: "t[7]",
			prepare: func(t *testing.T) setup {
				fake := newFake(t, kfake.NumBrokers(1), kfake.SeedTopics(2, "t"))
				return setup{fake, nil, &Record{Topic: "t", Partition: 7}}
			}},
		{name: "fenced", want: KafkaErrorForCode(kerr.ProducerFenced.Code), names: "t[1]", txn: true,
			prepare: func(t *testing.T) setup {
				fake := newFake(t, kfake.NumBrokers(1), kfake.SeedTopics(2, "t"))
				fake.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: "t", Err: kerr.ProducerFenced, Count: -1})
				return setup{fake, []ProducerOption{TransactionalID("fenced")}, &Record{Topic: "t", Partition: 1}}
			}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s := c.prepare(t)
			cl := newTestClient(t, SeedBrokers(s.fake.ListenAddrs()...), RequestTimeout(500*time.Millisecond))
			opts := append([]ProducerOption{WithPartitioner(ManualPartitioner()), Linger(0)}, s.opts...)
			p, err := NewProducer(cl, opts...)
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close(context.Background())
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			if c.txn {
				if err := p.InitTransactions(ctx); err != nil {
					t.Fatal(err)
				}
				if err := p.BeginTransaction(); err != nil {
					t.Fatal(err)
				}
			}
			check := func(how string, err error) {
				t.Helper()
				if !errors.Is(err, c.want) {
					t.Fatalf("%s: %v, want %v", how, err, c.want)
				}
				msg := err.Error()
				if n := strings.Count(msg, c.names); n != 1 {
					t.Errorf("%s names %s %d times: %v", how, c.names, n, err)
				}
				if c.absent != "" && strings.Contains(msg, c.absent) {
					t.Errorf("%s names a partition the record never had (%s): %v", how, c.absent, err)
				}
				t.Logf("%s: %v", how, err)
			}
			rec := *s.rec
			check("ProduceSync", p.ProduceSync(ctx, &rec))
			if c.txn {
				// The records after it fail before they get a
				// partition, with the fence as the cause: t[1] named
				// once, as the cause's partition, and no partition of
				// their own.
				for _, part := range []int32{1, 0} {
					next := *s.rec
					next.Partition = part
					err := p.ProduceSync(ctx, &next)
					check("ProduceSync after the fence", err)
					if !errors.Is(err, ErrProducerFenced) || strings.HasPrefix(err.Error(), "t[") {
						t.Errorf("after the fence: %v, want ErrProducerFenced without a partition of the record's", err)
					}
				}
				return
			}
			got := make(chan error, 1)
			rec2 := *s.rec
			p.Produce(ctx, &rec2, func(_ *Record, err error) { got <- err })
			select {
			case err := <-got:
				check("Produce callback", err)
			case <-ctx.Done():
				t.Fatal("no outcome")
			}
		})
	}
}

// recordError names a record's partition once, at the start, moving a
// mention of it inside the cause to the front, and leaves other topics'
// names ("at[1]") alone.
func TestRecordErrorNamesOnce(t *testing.T) {
	cases := []struct {
		topic     string
		partition int32
		msg       string
		want      string
	}{
		{"t", 1, "NOT_LEADER", "t[1]: NOT_LEADER"},
		{"t", 1, "t[1]: NOT_LEADER", "t[1]: NOT_LEADER"},
		{"t", 1, "t[1]: riffle: producer fenced: t[1]: PRODUCER_FENCED", "t[1]: riffle: producer fenced: PRODUCER_FENCED"},
		{"t", 1, "riffle: producer fenced: t[1]: PRODUCER_FENCED", "t[1]: riffle: producer fenced: PRODUCER_FENCED"},
		{"t", 2, "riffle: producer fenced: t[1]: PRODUCER_FENCED", "t[2]: riffle: producer fenced: t[1]: PRODUCER_FENCED"},
		{"t", 1, "failed: at[1]: X", "t[1]: failed: at[1]: X"},
		{"t", -1, "riffle: producer closed", `topic "t": riffle: producer closed`},
		{"t", -1, `riffle: unknown topic "t": gone`, `riffle: unknown topic "t": gone`},
		{"", -1, "no topic", "no topic"},
		{"t", -1, "riffle: partition out of range: t[7] (topic has 2 partitions)", "riffle: partition out of range: t[7] (topic has 2 partitions)"},
		{"t", -1, "riffle: partition out of range: at[7] (x)", `topic "t": riffle: partition out of range: at[7] (x)`},
	}
	for _, c := range cases {
		cause := errors.New(c.msg)
		err := recordError(c.topic, c.partition, cause)
		if err.Error() != c.want || !errors.Is(err, cause) {
			t.Errorf("recordError(%q, %d, %q) = %q, want %q (wrapping the cause)", c.topic, c.partition, c.msg, err, c.want)
		}
	}
}
