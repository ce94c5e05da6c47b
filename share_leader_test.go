package riffle

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestShareLeaderDiesMovesPartition: the leader of a share partition dies
// (every request to it closes the connection, as a SIGKILLed broker's
// refused dials and resets do) and the partition moves to another broker.
// No answer names the new leader (a dead broker gives no hint), so only a
// metadata refresh can move the partition's fetching: the share fetcher
// must ask for one when its requests fail, as the consumer's fetcher does.
// The client's periodic refresh (MetadataMaxAge, 5 minutes) is far beyond
// the test's deadline; the group coordinator stays on a live broker.
func TestShareLeaderDiesMovesPartition(t *testing.T) {
	fake := newShareFake(t, 1, 30*time.Second)
	coord := fake.CoordinatorFor("g")
	var old, next int32 = -1, -1
	for _, n := range []int32{0, 1, 2} {
		switch {
		case n == coord:
		case old < 0:
			old = n
		default:
			next = n
		}
	}
	if err := fake.MoveTopicPartition("t", 0, old); err != nil {
		t.Fatal(err)
	}
	pcl := shareClient(t, fake)
	produceN(t, pcl, "t", 1, 50)
	shareFromEarliest(t, pcl, "g")
	first, second := newSeen(50), newSeen(100)
	sc := newShareMember(t, fake, HandleRecord(func(_ context.Context, r *Record) error {
		first.add(r)
		second.add(r)
		return nil
	}))
	waitDone(t, first.done, "the records before the leader died")

	var dead atomic.Bool
	dead.Store(true)
	fake.Control(func(kmsg.Request) (kmsg.Response, error, bool) {
		fake.KeepControl()
		if dead.Load() && fake.CurrentNode() == old {
			return nil, errors.New("broker down"), true
		}
		return nil, nil, false
	})
	if err := fake.MoveTopicPartition("t", 0, next); err != nil {
		t.Fatal(err)
	}
	produceN(t, pcl, "t", 1, 50)
	select {
	case <-second.done:
	case <-time.After(20 * time.Second):
		t.Fatalf("after the leader died, %d of the 50 later records consumed (stats %+v)", second.count.Load()-50, sc.Stats())
	}
	dead.Store(false)
	closeShare(t, sc)
	assertShareDrained(t, pcl, "g", "t", 1, 100)
}
