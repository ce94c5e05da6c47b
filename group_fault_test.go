package riffle

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
)

// A handler that ignores its context during a revoke: the revoke timeout
// fires, the partition is treated as lost (not committed), the error is
// reported, and the group goes on without deadlock.
func TestGroupRevokeTimeout(t *testing.T) {
	fake := newFake(t, kfake.NumBrokers(1), kfake.SeedTopics(2, "t"), kfake.GroupMinSessionTimeout(100*time.Millisecond))
	cl := newTestClient(t, SeedBrokers(fake.ListenAddrs()...))
	produceN(t, cl, "t", 2, 50)

	release := make(chan struct{})
	var stuck atomic.Int32
	var groupErrs sync.Map
	stuckStarted := make(chan struct{})
	cfg := func(name string, stick bool) []ConsumerOption {
		return []ConsumerOption{
			// The session is long so that a loaded machine's late
			// heartbeats do not fence a (which loses both partitions
			// at once, and no revoke is left to time out); nothing
			// here waits for a session to expire.
			ConsumerGroup("g"), SubscribeTopics("t"), OffsetReset(ResetEarliest),
			SessionTimeout(10 * time.Second), HeartbeatInterval(50 * time.Millisecond),
			RebalanceTimeout(10 * time.Second), RevokeTimeout(300 * time.Millisecond),
			OnGroupError(func(err error) { groupErrs.Store(name, err) }),
			HandleRecord(func(ctx context.Context, r *Record) error {
				if stick && r.Offset == 10 {
					// Both partitions get stuck, so whichever the
					// rebalance revokes has a handler ignoring ctx.
					if stuck.Add(1) == 2 {
						close(stuckStarted)
					}
					<-release
				}
				return nil
			}),
		}
	}
	a, err := NewConsumer(newTestClient(t, SeedBrokers(fake.ListenAddrs()...)), cfg("a", true)...)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-stuckStarted:
	case <-time.After(20 * time.Second):
		t.Fatal("handler never reached the stuck record")
	}
	// A second member joins: the cooperative rebalance revokes one of a's
	// partitions; if that is the stuck one, its revoke times out.
	b, err := NewConsumer(newTestClient(t, SeedBrokers(fake.ListenAddrs()...)), cfg("b", false)...)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(60 * time.Second) // a hang guard
	for {
		aErr, _ := groupErrs.Load("a")
		if aErr != nil && len(b.Stats().Partitions) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the revoke never timed out, or b never got the partition: a's group error %v, b owns %v", aErr, b.Stats().Partitions)
		}
		time.Sleep(20 * time.Millisecond)
	}
	v, _ := groupErrs.Load("a")
	if err := v.(error); !errors.Is(err, ErrGroup) || !strings.Contains(err.Error(), "revoke timeout") {
		t.Fatalf("unexpected group error %v", err)
	}
	// The lost partition was not committed past the stuck record: b
	// starts it at or before offset 10.
	st := b.Stats().Partitions[0]
	if st.Position > 11 && st.Processed > 0 && st.Committed > 10 {
		t.Fatalf("b's partition committed past the stuck record: %+v", st)
	}
	close(release)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	b.Close(ctx)
	a.Close(ctx)
}

// The group coordinator moves (and its old node is removed): members find
// the new coordinator and keep consuming and committing.
func TestGroupCoordinatorMoves(t *testing.T) {
	fake := newFake(t, kfake.NumBrokers(3), kfake.SeedTopics(3, "t"), kfake.GroupMinSessionTimeout(100*time.Millisecond))
	cl := newTestClient(t, SeedBrokers(fake.ListenAddrs()...))
	produceN(t, cl, "t", 3, 300)
	var n atomic.Int32
	mcl := newTestClient(t, SeedBrokers(fake.ListenAddrs()...))
	cs, err := NewConsumer(mcl, ConsumerGroup("g"), SubscribeTopics("t"), OffsetReset(ResetEarliest),
		SessionTimeout(2*time.Second), HeartbeatInterval(50*time.Millisecond), AutoCommitInterval(50*time.Millisecond),
		HandleRecord(func(ctx context.Context, r *Record) error {
			n.Add(1)
			time.Sleep(2 * time.Millisecond)
			return nil
		}))
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "100 records handled", func() bool { return n.Load() >= 100 })
	old := fake.CoordinatorFor("g")
	fake.RehashCoordinators()
	for i := 0; i < 50 && fake.CoordinatorFor("g") == old; i++ {
		fake.RehashCoordinators()
	}
	deadline := time.Now().Add(30 * time.Second)
	for n.Load() < 900 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if n.Load() < 900 {
		t.Fatalf("consumed %d of 900 after the coordinator moved", n.Load())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := cs.Commit(ctx); err != nil {
		t.Fatalf("commit after the coordinator moved: %v", err)
	}
	if _, err := cs.Close(ctx); err != nil {
		t.Fatal(err)
	}
}
