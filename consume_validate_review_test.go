package riffle

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
)

// A truncation is detected at the fetch position, which runs ahead of what
// the handler has been given: records below the diverging offset that were
// fetched but not yet handled must still be handled (a review found them
// skipped for good, and the processed offset jumping over them).
func TestTruncationKeepsUnhandledRecordsBelowDivergence(t *testing.T) {
	fake := newFake(t, kfake.NumBrokers(2), kfake.SeedTopics(1, "t"))
	cl := newTestClient(t, SeedBrokers(fake.ListenAddrs()...), MetadataMinAge(10*time.Millisecond))
	var recs []*Record
	for i := range 20 {
		recs = append(recs, &Record{Topic: "t", Value: []byte(fmt.Sprint(i))})
	}
	produceRecords(t, cl, recs)
	var mu sync.Mutex
	seen := map[int64]int{}
	var perrs []*PartitionError
	started := make(chan struct{})
	release := make(chan struct{})
	var once sync.Once
	cs, err := NewConsumer(cl,
		HandleRecord(func(_ context.Context, r *Record) error {
			if r.Offset == 0 {
				once.Do(func() { close(started) })
				<-release // a slow handler: 1..19 stay fetched, not handled
			}
			mu.Lock()
			seen[r.Offset]++
			mu.Unlock()
			return nil
		}),
		OnPartitionError(func(pe *PartitionError) { mu.Lock(); perrs = append(perrs, pe); mu.Unlock() }),
		FetchMaxWait(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	assignAll(t, cs, "t", 1, AtEarliest())
	<-started
	waitUntil(t, 30*time.Second, func() bool {
		st := cs.Stats()
		return len(st.Partitions) == 1 && st.Partitions[0].HighWatermark == 20
	}, func() string { return statsString(cs) })
	// An unclean election: the new leader's log ends at 12. Records 0..11
	// are intact and must all still be handled.
	truncateAt(fake, 12)
	if err := fake.MoveTopicPartition("t", 0, 1-fake.LeaderFor("t", 0)); err != nil {
		t.Fatal(err)
	}
	cl.cl.TriggerMetadata()
	waitUntil(t, 20*time.Second, func() bool { mu.Lock(); defer mu.Unlock(); return len(perrs) > 0 }, func() string { return "no truncation reported: " + statsString(cs) })
	close(release)
	waitUntil(t, 20*time.Second, func() bool { mu.Lock(); defer mu.Unlock(); return seen[19] > 0 }, func() string { return statsString(cs) })
	time.Sleep(200 * time.Millisecond)
	closeConsumer(t, cs)
	mu.Lock()
	defer mu.Unlock()
	var missing []int64
	for off := int64(0); off < 12; off++ {
		if seen[off] == 0 {
			missing = append(missing, off)
		}
	}
	if len(missing) > 0 {
		t.Fatalf("records below the diverging offset 12 never handled: %v (reported %v)", missing, perrs[0])
	}
}
