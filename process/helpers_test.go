package process_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/riffle-go/riffle"
	"github.com/riffle-go/riffle/rifftest"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func setup(t *testing.T, opts ...rifftest.Option) (*rifftest.Cluster, *riffle.Client) {
	t.Helper()
	c := rifftest.New(t, opts...)
	return c, client(t, c)
}

func client(t *testing.T, c *rifftest.Cluster) *riffle.Client {
	t.Helper()
	cl, err := riffle.NewClient(riffle.SeedBrokers(c.Addrs()...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// produce writes n records to each partition of topic, value = the
// per-partition index, key = key(partition, i) (nil key func: no key).
func produce(t *testing.T, cl *riffle.Client, topic string, partitions int32, n int, key func(p int32, i int) []byte, popts ...riffle.ProducerOption) {
	t.Helper()
	pr, err := riffle.NewProducer(cl, append([]riffle.ProducerOption{riffle.WithPartitioner(riffle.ManualPartitioner())}, popts...)...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for p := int32(0); p < partitions; p++ {
		for i := 0; i < n; i++ {
			r := &riffle.Record{Topic: topic, Partition: p, Value: []byte(fmt.Sprint(i))}
			if key != nil {
				r.Key = key(p, i)
			}
			pr.Produce(ctx, r, func(_ *riffle.Record, err error) {
				if err != nil {
					t.Error(err)
				}
			})
		}
	}
	if err := pr.Close(ctx); err != nil {
		t.Fatal(err)
	}
}

// groupOpts are fast group settings for tests.
func groupOpts(group string, topics ...string) []riffle.ConsumerOption {
	return []riffle.ConsumerOption{
		riffle.ConsumerGroup(group), riffle.SubscribeTopics(topics...),
		riffle.OffsetReset(riffle.ResetEarliest),
		riffle.SessionTimeout(6 * time.Second), riffle.HeartbeatInterval(100 * time.Millisecond),
		riffle.RebalanceTimeout(10 * time.Second), riffle.RevokeTimeout(5 * time.Second),
		riffle.FetchMaxWait(100 * time.Millisecond),
	}
}

// waitFor polls cond until it holds or d passes.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
