package riffle

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
)

// A member restarted with a new member id waits for its previous
// instance's session to expire; the wait is logged once at Info, naming
// InstanceID as the way out.
func TestGroupSlowJoinLoggedOnce(t *testing.T) {
	fake := newFake(t, kfake.NumBrokers(1), kfake.SeedTopics(2, "sj"), kfake.GroupMinSessionTimeout(100*time.Millisecond))
	fastSlowJoin := ConsumerOption(func(c *consumerConfig) { c.group.slowJoinAfter = 500 * time.Millisecond })
	member := func(h slog.Handler) *Consumer {
		cs, err := NewConsumer(newTestClient(t, SeedBrokers(fake.ListenAddrs()...), Logger(slog.New(h))),
			ConsumerGroup("g-sj"), SubscribeTopics("sj"), OffsetReset(ResetEarliest),
			SessionTimeout(3*time.Second), HeartbeatInterval(100*time.Millisecond), fastSlowJoin,
			HandleRecord(func(context.Context, *Record) error { return nil }))
		if err != nil {
			t.Fatal(err)
		}
		return cs
	}
	const msg = "group join waits for members that have not rejoined"
	ha := &countingHandler{level: slog.LevelInfo, sub: msg}
	a := member(ha)
	waitFor(t, 20*time.Second, "a to own both partitions", func() bool { return len(a.Stats().Partitions) == 2 })
	a.kill() // a crash: no LeaveGroup, the coordinator waits for its session
	hb := &countingHandler{level: slog.LevelInfo, sub: msg}
	b := member(hb)
	defer closeMember(t, b)
	waitFor(t, 20*time.Second, "b to own both partitions", func() bool { return len(b.Stats().Partitions) == 2 })
	if n := hb.n.Load(); n != 1 {
		t.Fatalf("the restarted member logged the slow join %d times, want once", n)
	}
	if n := ha.n.Load(); n != 0 {
		t.Fatalf("the first member, whose joins were quick, logged it %d times", n)
	}
}
