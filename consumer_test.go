package riffle

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
)

// produceN writes n records per partition (values "p-i") with the producer.
func produceN(t testing.TB, cl *Client, topic string, partitions int32, n int) {
	t.Helper()
	p, err := NewProducer(cl, WithPartitioner(ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	errc := make(chan error, 1)
	for i := 0; i < n; i++ {
		for part := int32(0); part < partitions; part++ {
			p.Produce(ctx, &Record{Topic: topic, Partition: part, Value: []byte(fmt.Sprintf("%d-%d", part, i))}, func(_ *Record, err error) {
				if err != nil {
					select {
					case errc <- err:
					default:
					}
				}
			})
		}
	}
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-errc:
		t.Fatal(err)
	default:
	}
}

func TestConsumeAssigned(t *testing.T) {
	fake := newFake(t, kfake.NumBrokers(3), kfake.SeedTopics(3, "t"))
	cl := newTestClient(t, SeedBrokers(fake.ListenAddrs()...))
	const n = 1000
	produceN(t, cl, "t", 3, n)

	var mu sync.Mutex
	got := map[int32][]int64{}
	done := make(chan struct{})
	total := 0
	cs, err := NewConsumer(cl, HandleRecord(func(ctx context.Context, r *Record) error {
		mu.Lock()
		defer mu.Unlock()
		got[r.Partition] = append(got[r.Partition], r.Offset)
		if want := fmt.Sprintf("%d-%d", r.Partition, r.Offset); string(r.Value) != want {
			t.Errorf("value %q at %s[%d]@%d", r.Value, r.Topic, r.Partition, r.Offset)
		}
		total++
		if total == 3*n {
			close(done)
		}
		return nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	var as []Assignment
	for p := int32(0); p < 3; p++ {
		as = append(as, Assignment{TopicPartition{"t", p}, AtEarliest()})
	}
	if err := cs.Assign(as...); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		for _, ps := range cs.Stats().Partitions {
			t.Logf("%s pos %d processed %d hw %d buffered %d leader %d paused %v err %v", ps.TopicPartition, ps.Position, ps.Processed, ps.HighWatermark, ps.BufferedRecords, ps.Leader, ps.Paused, ps.Err)
		}
		t.Logf("buffered %d reserved %d", cs.buffered.Load(), cs.reserved.Load())
		t.Fatalf("consumed %d of %d", total, 3*n)
	}
	pos, err := cs.Close(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for p := int32(0); p < 3; p++ {
		if len(got[p]) != n {
			t.Fatalf("partition %d: %d records", p, len(got[p]))
		}
		for i, o := range got[p] {
			if o != int64(i) {
				t.Fatalf("partition %d: record %d has offset %d", p, i, o)
			}
		}
		if pos[TopicPartition{"t", p}] != n {
			t.Fatalf("position %v", pos)
		}
	}
}
