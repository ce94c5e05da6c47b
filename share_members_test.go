package riffle

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestShareMembersOwnFetchConnections: two share members on one Client
// and one broker. The broker holds the first member's long-poll
// ShareFetch (a broker answers one connection's requests in order, as
// kfake does); the other member's ShareFetch must still reach it, which
// it can only on a connection of its own: behind the held poll it would
// wait for the whole poll, which made N members on one Client many times
// slower than on N Clients.
func TestShareMembersOwnFetchConnections(t *testing.T) {
	fake := newFake(t, kfake.NumBrokers(1), kfake.SeedTopics(2, "t"), kfake.BrokerConfigs(map[string]string{
		"group.share.heartbeat.interval.ms": "200",
	}))
	release := make(chan struct{})
	var releaseOnce sync.Once
	unhold := func() { releaseOnce.Do(func() { close(release) }) }
	other := make(chan string, 1)
	var mu sync.Mutex
	held := ""
	fake.ControlKey(int16(kmsg.ShareFetch), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		req := kreq.(*kmsg.ShareFetchRequest)
		if req.MemberID == nil || req.MaxWaitMillis == 0 {
			return nil, nil, false
		}
		mu.Lock()
		switch {
		case held == "":
			held = *req.MemberID
			mu.Unlock()
			fake.SleepControl(func() { <-release })
			return nil, nil, false
		case *req.MemberID != held:
			select {
			case other <- *req.MemberID:
			default:
			}
		}
		mu.Unlock()
		return nil, nil, false
	})
	cl := shareClient(t, fake)
	t.Cleanup(unhold) // before the client closes (cleanups run last first)
	noop := HandleRecord(func(context.Context, *Record) error { return nil })
	var members []*ShareConsumer
	for range 2 {
		sc, err := NewShareConsumer(cl, ShareGroup("g"), SubscribeTopics("t"), FetchMaxWait(2*time.Second), noop)
		if err != nil {
			t.Fatal(err)
		}
		members = append(members, sc)
	}
	select {
	case id := <-other:
		mu.Lock()
		first := held
		mu.Unlock()
		t.Logf("member %s fetched while %s's long poll was held", id, first)
	case <-time.After(15 * time.Second):
		t.Fatal("no ShareFetch of the second member reached the broker while the first member's long poll was held: the members share a fetch connection")
	}
	unhold()
	for _, sc := range members {
		closeShare(t, sc)
	}
}
