package riffle

import (
	"context"
	"regexp"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// A member joining a group whose members must rejoin first (its first
// JoinGroup is held) causes one rebalance: with the subscription
// unchanged, its subscription checks after the join find nothing to
// rejoin for, whether it subscribes by name or by pattern. Its client
// has metadata already, without the subscribed topics, and a follower
// looks no topic up to join: its metadata gains them only after the
// join (its partitions' leaders), which once read as a change of the
// subscription and cost a second rebalance a second later.
func TestGroupJoinOneRebalance(t *testing.T) {
	for _, tc := range []struct {
		name string
		a, b ConsumerOption
	}{
		{"names", SubscribeTopics("jt", "ju"), SubscribeTopics("jt", "ju")},
		{"pattern", SubscribeTopics("jt", "ju"), SubscribePattern(regexp.MustCompile("j[tu]"))},
		{"pattern-leader", SubscribePattern(regexp.MustCompile("j[tu]")), SubscribeTopics("jt", "ju")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fake := newFake(t, kfake.NumBrokers(2), kfake.SeedTopics(4, "jt"), kfake.SeedTopics(1, "ju"),
				kfake.GroupMinSessionTimeout(100*time.Millisecond))
			member := func(sub ConsumerOption) *Consumer {
				cl := newTestClient(t, SeedBrokers(fake.ListenAddrs()...))
				// A client that has its metadata already (brokers,
				// no topics): the member's join refreshes none.
				if err := cl.cl.RefreshMetadata(context.Background()); err != nil {
					t.Fatal(err)
				}
				cs, err := NewConsumer(cl,
					ConsumerGroup("g-join-"+tc.name), sub, OffsetReset(ResetEarliest),
					SessionTimeout(3*time.Second), HeartbeatInterval(500*time.Millisecond),
					HandleRecord(func(context.Context, *Record) error { return nil }))
				if err != nil {
					t.Fatal(err)
				}
				return cs
			}
			a := member(tc.a)
			defer closeMember(t, a)
			waitFor(t, 20*time.Second, "a to own every partition", func() bool { return len(a.member.ownedList()) == 5 })
			b := member(tc.b)
			defer closeMember(t, b)
			settled := func() bool {
				_, ga := memberIdentity(a)
				_, gb := memberIdentity(b)
				na, nb := len(a.member.ownedList()), len(b.member.ownedList())
				return ga == gb && na > 0 && nb > 0 && na+nb == 5
			}
			waitFor(t, 20*time.Second, "a and b to share the partitions", settled)
			_, gen := memberIdentity(b)
			// Three subscription checks each (one per second) after
			// the join: none may have asked for a rebalance.
			ca, cb := a.member.subChecks.Load(), b.member.subChecks.Load()
			waitFor(t, 20*time.Second, "three subscription checks by each member", func() bool {
				return a.member.subChecks.Load() >= ca+3 && b.member.subChecks.Load() >= cb+3
			})
			_, ga := memberIdentity(a)
			_, gb := memberIdentity(b)
			if ga != gen || gb != gen {
				t.Fatalf("generation %d after b joined, then a %d, b %d: a rebalance with nothing changed (a owns %v, b %v)",
					gen, ga, gb, a.member.ownedList(), b.member.ownedList())
			}
			t.Logf("generation %d: a owns %v, b %v", gen, a.member.ownedList(), b.member.ownedList())
		})
	}
}

// The member that led the assignment watches the partition counts of
// every topic of the group, its own subscription or not: partitions
// added to a topic only a follower subscribes to are assigned.
func TestGroupLeaderWatchesPartitionCounts(t *testing.T) {
	fake := newFake(t, kfake.NumBrokers(1), kfake.SeedTopics(2, "wa"), kfake.SeedTopics(2, "wb"),
		kfake.GroupMinSessionTimeout(100*time.Millisecond))
	var mu sync.Mutex
	var leaders []string // the members that sent an assignment
	fake.ControlKey(int16(kmsg.SyncGroup), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		fake.KeepControl()
		if req := kr.(*kmsg.SyncGroupRequest); len(req.GroupAssignment) > 0 {
			mu.Lock()
			leaders = append(leaders, req.MemberID)
			mu.Unlock()
		}
		return nil, nil, false
	})
	cl := newTestClient(t, SeedBrokers(fake.ListenAddrs()...))
	member := func(topic string) *Consumer {
		// The partition count is seen at a metadata refresh.
		cs, err := NewConsumer(newTestClient(t, SeedBrokers(fake.ListenAddrs()...), MetadataMaxAge(300*time.Millisecond)),
			ConsumerGroup("g-watch"), SubscribeTopics(topic), OffsetReset(ResetEarliest),
			SessionTimeout(3*time.Second), HeartbeatInterval(100*time.Millisecond),
			HandleRecord(func(context.Context, *Record) error { return nil }))
		if err != nil {
			t.Fatal(err)
		}
		return cs
	}
	a := member("wa")
	defer closeMember(t, a)
	waitFor(t, 20*time.Second, "a to own wa", func() bool { return len(a.member.ownedList()) == 2 })
	b := member("wb")
	defer closeMember(t, b)
	waitFor(t, 20*time.Second, "b to own wb", func() bool { return len(b.member.ownedList()) == 2 })
	// a leads (the first member keeps the lead while it rejoins): the
	// partitions are added to b's topic, which a does not consume.
	idA, _ := memberIdentity(a)
	mu.Lock()
	last := leaders[len(leaders)-1]
	mu.Unlock()
	if last != idA {
		t.Fatalf("the last assignment came from %s, not a (%s): the test needs a to lead", last, idA)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := cl.Admin().CreatePartitions(ctx, 4, "wb"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, "b to own the partitions added to wb", func() bool {
		return len(b.member.ownedList()) == 4
	})
}
