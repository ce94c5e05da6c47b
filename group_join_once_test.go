package riffle

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// A member joining a stable group, with nothing changed, causes one
// rebalance: the first subscription check after its join (1 s) must not
// count the topics' metadata arriving as a change.
func TestGroupJoinUnchangedSubscriptionRebalancesOnce(t *testing.T) {
	fake := newFake(t, kfake.NumBrokers(1), kfake.SeedTopics(4, "jo"), kfake.GroupMinSessionTimeout(100*time.Millisecond))
	var joins atomic.Int32
	fake.ControlKey(int16(kmsg.JoinGroup), func(kmsg.Request) (kmsg.Response, error, bool) {
		fake.KeepControl()
		joins.Add(1)
		return nil, nil, false
	})
	member := func() *Consumer {
		cs, err := NewConsumer(newTestClient(t, SeedBrokers(fake.ListenAddrs()...)),
			ConsumerGroup("g-jo"), SubscribeTopics("jo"), OffsetReset(ResetEarliest),
			HandleRecord(func(context.Context, *Record) error { return nil }))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { closeMember(t, cs) })
		return cs
	}
	owned := func(cs *Consumer) int { return len(cs.Stats().Partitions) }
	a := member()
	waitFor(t, 20*time.Second, "a to own every partition", func() bool { return owned(a) == 4 })
	b := member()
	waitFor(t, 20*time.Second, "a and b to share the partitions", func() bool {
		_, ga := memberIdentity(a)
		_, gb := memberIdentity(b)
		return ga == gb && owned(a) == 2 && owned(b) == 2
	})
	_, gen := memberIdentity(b)
	n := joins.Load()
	// The check runs every second: over 3.5 s a spurious change shows.
	end := time.Now().Add(3500 * time.Millisecond)
	for time.Now().Before(end) {
		_, ga := memberIdentity(a)
		_, gb := memberIdentity(b)
		if ga != gen || gb != gen || joins.Load() != n {
			t.Fatalf("a rebalance for nothing: generation %d -> a %d b %d, JoinGroups %d -> %d", gen, ga, gb, n, joins.Load())
		}
		time.Sleep(20 * time.Millisecond)
	}
}
