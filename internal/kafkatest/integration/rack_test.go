package integration_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/riffle-go/riffle"
	"github.com/riffle-go/riffle/ranges"
)

// fetchTrace records, per broker, the Fetch requests a client sent and
// the bytes their answers took, and the records a consumer's fetches
// brought (FetchBatchEvent.Node).
type fetchTrace struct {
	mu      sync.Mutex
	fetches map[int32]int
	bytes   map[int32]int
	records map[int32]int
}

func newFetchTrace() *fetchTrace {
	return &fetchTrace{fetches: map[int32]int{}, bytes: map[int32]int{}, records: map[int32]int{}}
}

func (f *fetchTrace) OnBrokerRequest(b riffle.BrokerInfo, e riffle.RequestEvent) {
	if e.APIKey != 1 || e.Err != nil { // Fetch
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fetches[b.NodeID]++
	f.bytes[b.NodeID] += e.BytesRead
}

func (f *fetchTrace) OnFetchBatch(e riffle.FetchBatchEvent) {
	if e.Refreshed {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.records[e.Node] += e.Records
}

// snapshot returns copies of the fetches, bytes and records by broker.
func (f *fetchTrace) snapshot() (fetches, bytes, records map[int32]int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return maps.Clone(f.fetches), maps.Clone(f.bytes), maps.Clone(f.records)
}

// rackTopic creates a one-partition topic with a replica on every node,
// writes n+1 records to it (acks=all: every replica in sync has them,
// and every follower's high watermark is past the first n), and
// returns it with its leader and a follower in sync, and the follower's
// rack.
func rackTopic(t *testing.T, admin *riffle.Client, n int) (topic string, leader, follower int32, rack string) {
	t.Helper()
	needNodes(t, 3)
	topic = name(t, "t")
	ctx := timeout(t, 2*time.Minute)
	res, err := admin.Admin().CreateTopics(ctx, riffle.TopicSpec{Name: topic, Partitions: 1, ReplicationFactor: 3})
	if err != nil || res.Err() != nil {
		t.Fatalf("CreateTopics: %v %v", err, res.Err())
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, _ = admin.Admin().DeleteTopics(ctx, topic)
	})
	p, err := riffle.NewProducer(admin)
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		p.Produce(ctx, &riffle.Record{Topic: topic, Value: fmt.Appendf(nil, "v%04d", i)}, nil)
	}
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	// A follower learns the high watermark from its next fetch: once it
	// has a record written after the n (acks=all waits for it), its
	// high watermark is past them, so it serves all n.
	if err := p.ProduceSync(ctx, &riffle.Record{Topic: topic, Value: fmt.Appendf(nil, "v%04d", n)}); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
	// Every replica in sync, so any of them may serve the records.
	var d riffle.PartitionDetail
	eventually(t, time.Minute, "every replica of "+topic+" in sync", func() error {
		ds, err := admin.Admin().ListTopics(ctx, topic)
		if err != nil {
			return err
		}
		if len(ds) != 1 || len(ds[0].Partitions) != 1 {
			return fmt.Errorf("ListTopics: %+v", ds)
		}
		d = ds[0].Partitions[0]
		if len(d.ISR) != 3 || d.Leader < 0 {
			return fmt.Errorf("leader %d, ISR %v", d.Leader, d.ISR)
		}
		return nil
	})
	brokers, err := admin.Brokers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	racks := map[int32]string{}
	for _, b := range brokers {
		racks[b.NodeID] = b.Rack
	}
	for _, id := range d.ISR {
		if id != d.Leader && racks[id] != "" && racks[id] != racks[d.Leader] {
			return topic, d.Leader, id, racks[id]
		}
	}
	t.Skipf("no follower of %s in a rack other than the leader's: racks %v, leader %d", topic, racks, d.Leader)
	return
}

// A consumer whose client has a Rack reads a partition from the replica
// in its rack (KIP-392: the leader, with RackAwareReplicaSelector, names
// it as the preferred read replica): every record comes from that
// follower, in order, none from the leader.
func TestConsumerFetchesFromRackReplica(t *testing.T) {
	need(t)
	const written = 300
	admin := client(t)
	tp, leader, follower, rack := rackTopic(t, admin, written)
	const n = written + 1
	trace := newFetchTrace()
	cl := client(t, riffle.Rack(rack), riffle.WithHooks(trace))
	var mu sync.Mutex
	var got []string
	c, err := riffle.NewConsumer(cl,
		riffle.HandleRecord(func(_ context.Context, r *riffle.Record) error {
			mu.Lock()
			defer mu.Unlock()
			got = append(got, string(r.Value))
			return nil
		}),
		riffle.OnPartitionError(func(e *riffle.PartitionError) { t.Errorf("consumer: %v", e) }))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Assign(riffle.Assignment{TopicPartition: riffle.TopicPartition{Topic: tp}, Start: riffle.AtEarliest()}); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, "consuming "+tp, func() error {
		mu.Lock()
		defer mu.Unlock()
		if len(got) < n {
			return fmt.Errorf("%d of %d records", len(got), n)
		}
		return nil
	})
	if _, err := c.Close(timeout(t, 30*time.Second)); err != nil {
		t.Fatal(err)
	}
	fetches, _, records := trace.snapshot()
	t.Logf("rack %s: leader %d, follower %d; fetches by broker %v, records by broker %v", rack, leader, follower, fetches, records)
	mu.Lock()
	defer mu.Unlock()
	for i, v := range got {
		if want := fmt.Sprintf("v%04d", i); v != want || i >= n {
			t.Fatalf("record %d is %q, want %q (%d records)", i, v, want, len(got))
		}
	}
	if records[follower] != n {
		t.Errorf("%d of %d records came from the follower %d in rack %s (records by broker %v)", records[follower], n, follower, rack, records)
	}
	if fetches[follower] == 0 {
		t.Errorf("no fetch went to the follower %d (fetches by broker %v)", follower, fetches)
	}
}

// A ranges.Reader whose client has a Rack reads from the replica in its
// rack too: the leader names it on the first fetch (answering with no
// records), the records come from the follower, and the next read of
// the partition goes to the follower at once.
func TestReaderFetchesFromRackReplica(t *testing.T) {
	need(t)
	const n = 300
	admin := client(t)
	tp, leader, follower, rack := rackTopic(t, admin, n)
	trace := newFetchTrace()
	cl := client(t, riffle.Rack(rack), riffle.WithHooks(trace))
	r := ranges.NewReader(cl)
	defer r.Close()
	ctx := timeout(t, time.Minute)
	read := func(rg ranges.Range) []string {
		t.Helper()
		var vals []string
		if err := r.Read(ctx, rg, func(rec *riffle.Record) error {
			vals = append(vals, string(rec.Value))
			return nil
		}); err != nil {
			t.Fatalf("Read %v: %v", rg, err)
		}
		return vals
	}
	want := make([]string, n)
	for i := range want {
		want[i] = fmt.Sprintf("v%04d", i)
	}
	if got := read(ranges.Range{Topic: tp, Low: 0, High: n / 2}); !slices.Equal(got, want[:n/2]) {
		t.Fatalf("first read: %d records %v..., want %d", len(got), got[:min(len(got), 3)], n/2)
	}
	fetches1, bytes1, _ := trace.snapshot()
	if got := read(ranges.Range{Topic: tp, Low: n / 2, High: n}); !slices.Equal(got, want[n/2:]) {
		t.Fatalf("second read: %d records %v..., want %d", len(got), got[:min(len(got), 3)], n-n/2)
	}
	fetches2, bytes2, _ := trace.snapshot()
	t.Logf("rack %s: leader %d, follower %d; first read: fetches %v, bytes %v; both reads: fetches %v, bytes %v",
		rack, leader, follower, fetches1, bytes1, fetches2, bytes2)
	valueBytes := 5 * n / 2 // the first read's values alone
	if bytes1[follower] < valueBytes {
		t.Errorf("first read: the follower %d answered %d bytes, less than the %d bytes of values", follower, bytes1[follower], valueBytes)
	}
	if bytes1[leader] >= valueBytes {
		t.Errorf("first read: the leader %d answered %d bytes, as if it served the records", leader, bytes1[leader])
	}
	if fetches2[leader] != fetches1[leader] {
		t.Errorf("second read fetched from the leader %d (%d fetches), want only the follower", leader, fetches2[leader]-fetches1[leader])
	}
	if fetches2[follower] <= fetches1[follower] {
		t.Errorf("second read sent no fetch to the follower %d", follower)
	}
}
