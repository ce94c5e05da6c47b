package cluster

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestLeastLoaded(t *testing.T) {
	conn := func(addr string, inflight int) BrokerLoad {
		return BrokerLoad{Addr: addr, Connected: true, Inflight: inflight}
	}
	dialing := func(addr string) BrokerLoad { return BrokerLoad{Addr: addr, Dialing: true} }
	idle := func(addr string) BrokerLoad { return BrokerLoad{Addr: addr} }
	backoff := func(l BrokerLoad) BrokerLoad { l.BackingOff = true; return l }
	for _, tc := range []struct {
		name  string
		loads []BrokerLoad
		start int
		avoid string
		want  int
	}{
		{"no brokers", nil, 0, "", -1},
		{"the first connected one with nothing in flight", []BrokerLoad{conn("a", 2), conn("b", 0), conn("c", 0)}, 0, "", 1},
		{"the fewest in flight", []BrokerLoad{conn("a", 3), conn("b", 1), conn("c", 2)}, 0, "", 1},
		{"a tie goes to the first from start", []BrokerLoad{conn("a", 1), conn("b", 1)}, 1, "", 1},
		{"a tie goes to the first from start, wrapping", []BrokerLoad{conn("a", 1), conn("b", 1), conn("c", 4)}, 2, "", 0},
		{"start beyond the list wraps", []BrokerLoad{conn("a", 0), conn("b", 0)}, 5, "", 1},
		{"negative start wraps", []BrokerLoad{conn("a", 0), conn("b", 0)}, -1, "", 1},
		{"connected, however loaded, beats dialing and dialable", []BrokerLoad{idle("a"), dialing("b"), conn("c", 9)}, 0, "", 2},
		{"dialing beats dialable", []BrokerLoad{idle("a"), dialing("b")}, 0, "", 1},
		{"dialable when nothing is connected", []BrokerLoad{backoff(idle("a")), idle("b")}, 0, "", 1},
		{"a live connection counts though the last dial failed", []BrokerLoad{idle("a"), backoff(conn("b", 0))}, 0, "", 1},
		{"every broker backing off", []BrokerLoad{backoff(idle("a")), backoff(idle("b"))}, 0, "", -1},
		{"the broker that failed is passed over", []BrokerLoad{conn("a", 0), conn("b", 3)}, 0, "a", 1},
		{"for one not even connected", []BrokerLoad{conn("a", 0), idle("b")}, 0, "a", 1},
		{"unless nothing else qualifies", []BrokerLoad{conn("a", 0), backoff(idle("b"))}, 0, "a", 0},
		{"an unknown avoid changes nothing", []BrokerLoad{conn("a", 1), conn("b", 0)}, 0, "z", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := LeastLoaded(tc.loads, tc.start, tc.avoid); got != tc.want {
				t.Errorf("LeastLoaded(%+v, %d, %q) = %d, want %d", tc.loads, tc.start, tc.avoid, got, tc.want)
			}
		})
	}
}

// Loads reports each broker once (a seed counts with the broker at its
// address), connected or not, with the requests in flight on its
// connections; RequestAt reaches the broker of an address.
func TestLoads(t *testing.T) {
	fake, _ := newKfake(t, kfake.NumBrokers(2))
	c := newTestCluster(t, Config{Seeds: fake.ListenAddrs()[:1]})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.RefreshMetadata(ctx); err != nil {
		t.Fatal(err)
	}
	loads := c.Loads()
	if len(loads) != 2 {
		t.Fatalf("loads %+v, want the 2 brokers (the seed is one of them)", loads)
	}
	var seed, other BrokerLoad
	for _, l := range loads {
		if l.Addr == fake.ListenAddrs()[0] {
			seed = l
		} else {
			other = l
		}
	}
	if seed.NodeID < 0 || !seed.Connected || seed.Inflight != 0 || other.Connected || other.NodeID < 0 {
		t.Fatalf("loads %+v: want the seed's broker connected with nothing in flight, the other not connected", loads)
	}

	// Hold a request on the other broker: it shows in flight there.
	release := make(chan struct{})
	var once sync.Once
	fake.ControlKey(int16(kmsg.ListGroups), func(kmsg.Request) (kmsg.Response, error, bool) {
		fake.SleepControl(func() { <-release })
		return nil, nil, false
	})
	done := make(chan error, 1)
	go func() {
		_, err := c.RequestAt(ctx, other.Addr, kmsg.NewPtrListGroupsRequest())
		done <- err
	}()
	defer once.Do(func() { close(release) })
	deadline := time.Now().Add(20 * time.Second) // only keeps a broken Loads from hanging the run
	for {
		loads = c.Loads()
		var o BrokerLoad
		for _, l := range loads {
			if l.Addr == other.Addr {
				o = l
			}
		}
		if o.Connected && o.Inflight == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("loads %+v, want one request in flight at %s", loads, other.Addr)
		}
		time.Sleep(time.Millisecond)
	}
	for start := range 2 {
		if i := LeastLoaded(loads, start, ""); loads[i].Addr != seed.Addr {
			t.Errorf("start %d: picked %+v, want the idle broker %s", start, loads[i], seed.Addr)
		}
	}
	once.Do(func() { close(release) })
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, err := c.RequestAt(ctx, "127.0.0.1:1", kmsg.NewPtrListGroupsRequest()); err == nil {
		t.Error("RequestAt an address of no broker succeeded")
	}
}
