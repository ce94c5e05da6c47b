package riffle

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// fetchLog records the session fields of every Fetch request per broker,
// and how many requests asked for some partition's offset 0.
type fetchLog struct {
	mu         sync.Mutex
	reqs       map[int32][][2]int32 // node -> (session id, epoch)
	firstReads int                  // requests naming a partition at offset 0
	firstParts int                  // partitions named at offset 0, summed
}

func watchFetches(fake *kfake.Cluster) *fetchLog {
	l := &fetchLog{reqs: map[int32][][2]int32{}}
	fake.ControlKey(kmsg.Fetch.Int16(), func(r kmsg.Request) (kmsg.Response, error, bool) {
		fake.KeepControl()
		req := r.(*kmsg.FetchRequest)
		l.mu.Lock()
		l.reqs[fake.CurrentNode()] = append(l.reqs[fake.CurrentNode()], [2]int32{req.SessionID, req.SessionEpoch})
		first := 0
		for _, t := range req.Topics {
			for _, p := range t.Partitions {
				if p.FetchOffset == 0 {
					first++
				}
			}
		}
		if first > 0 {
			l.firstReads++
			l.firstParts += first
		}
		l.mu.Unlock()
		return nil, nil, false
	})
	return l
}

// closed reports whether node got a request closing a session (id != 0,
// epoch -1).
func (l *fetchLog) closed(node int32) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, r := range l.reqs[node] {
		if r[0] != 0 && r[1] == -1 {
			return true
		}
	}
	return false
}

func (l *fetchLog) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, rs := range l.reqs {
		n += len(rs)
	}
	return n
}

// Issue 10, point 10: a broker that no longer leads any of the consumer's
// partitions loses its fetcher (which closes its fetch session on the
// broker), so it no longer counts in the budget shares; and the remaining
// fetcher keeps reading.
func TestFetcherRetiredWhenBrokerLeadsNothing(t *testing.T) {
	fake := newFake(t, kfake.NumBrokers(2), kfake.SeedTopics(4, "t"))
	for p := int32(0); p < 4; p++ { // two partitions on each broker
		if err := fake.MoveTopicPartition("t", p, p%2); err != nil {
			t.Fatal(err)
		}
	}
	cl := newTestClient(t, SeedBrokers(fake.ListenAddrs()...), MetadataMinAge(10*time.Millisecond))
	log := watchFetches(fake)
	var got atomic.Int64
	cs, err := NewConsumer(cl, HandleRecord(func(context.Context, *Record) error { got.Add(1); return nil }), FetchMaxWait(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer closeConsumer(t, cs)
	assignAll(t, cs, "t", 4, AtEarliest())
	fetchers := func() int {
		cs.mu.Lock()
		defer cs.mu.Unlock()
		return len(cs.fetchers)
	}
	waitUntil(t, 20*time.Second, func() bool { return fetchers() == 2 }, func() string { return statsString(cs) })
	// Everything moves to broker 0.
	var from int32 = 1
	for p := int32(0); p < 4; p++ {
		if err := fake.MoveTopicPartition("t", p, 0); err != nil {
			t.Fatal(err)
		}
	}
	cl.cl.TriggerMetadata()
	waitUntil(t, 20*time.Second, func() bool { return fetchers() == 1 }, func() string {
		return "fetchers: " + statsString(cs)
	})
	waitUntil(t, 30*time.Second, func() bool { return log.closed(from) }, func() string { return "no session close sent to the retired broker" })
	// The consumer still reads everything, now from broker 0.
	var recs []*Record
	for p := int32(0); p < 4; p++ {
		for range 25 {
			recs = append(recs, &Record{Topic: "t", Partition: p, Value: []byte("v")})
		}
	}
	produceRecords(t, cl, recs)
	waitUntil(t, 20*time.Second, func() bool { return got.Load() == 100 }, func() string { return statsString(cs) })
}

// Thousands of partitions with little data each are read in a few
// requests: every wanting partition goes into one request, the broker
// bounding the response by its MaxBytes. When each partition reserved its
// full 1 MiB limit in the 64 MiB budget, 2,000 partitions took at least 32
// requests.
func TestFetchManyPartitionsFewRequests(t *testing.T) {
	const parts = 2000
	fake := newFake(t, kfake.SeedTopics(parts, "t"))
	cl := newTestClient(t, SeedBrokers(fake.ListenAddrs()...))
	var recs []*Record
	for p := int32(0); p < parts; p++ {
		recs = append(recs, &Record{Topic: "t", Partition: p, Value: []byte("v")})
	}
	produceRecords(t, cl, recs)
	log := watchFetches(fake)
	var got atomic.Int64
	cs, err := NewConsumer(cl, HandleBatch(func(_ context.Context, b *FetchBatch) error { got.Add(int64(len(b.Records))); return nil }))
	if err != nil {
		t.Fatal(err)
	}
	defer closeConsumer(t, cs)
	assignAll(t, cs, "t", parts, AtEarliest())
	waitUntil(t, 60*time.Second, func() bool { return got.Load() == parts }, func() string { return statsString(cs) })
	// Counted are the requests that asked for some partition's first
	// record: the reads of the data. Idle long polls after it (which name
	// no partition, or a partition at its new position) depend on how long
	// the handler takes on a busy machine (69 of them were seen under
	// load), so they are not what this test is about.
	log.mu.Lock()
	reads, named := log.firstReads, log.firstParts
	log.mu.Unlock()
	if reads > 8 {
		t.Fatalf("%d fetch requests asked for a first record (%d partitions named at offset 0) to read %d partitions of one record each; %d requests in all", reads, named, parts, log.count())
	}
}
