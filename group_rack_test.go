package riffle

import (
	"context"
	"fmt"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/riffle-go/riffle/internal/assign"
	"github.com/riffle-go/riffle/internal/cluster"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// A member with Rack("b") sends its rack in the classic protocol's
// subscription metadata (v3) and in KIP-848 heartbeats.
func TestGroupSendsRack(t *testing.T) {
	for _, proto := range []GroupProtocol{GroupProtocolClassic, GroupProtocolConsumer} {
		t.Run(fmt.Sprint(proto), func(t *testing.T) {
			fake := newFake(t, kfake.NumBrokers(1), kfake.SeedTopics(2, "t"))
			var mu sync.Mutex
			var racks []string
			key := kmsg.JoinGroup
			if proto == GroupProtocolConsumer {
				key = kmsg.ConsumerGroupHeartbeat
			}
			fake.ControlKey(key.Int16(), func(kr kmsg.Request) (kmsg.Response, error, bool) {
				fake.KeepControl()
				mu.Lock()
				defer mu.Unlock()
				switch r := kr.(type) {
				case *kmsg.JoinGroupRequest:
					for _, p := range r.Protocols {
						m, err := assign.DecodeSubscription(p.Name, r.MemberID, p.Metadata)
						if err != nil {
							t.Errorf("subscription: %v", err)
						}
						racks = append(racks, m.Rack)
					}
				case *kmsg.ConsumerGroupHeartbeatRequest:
					if r.RackID == nil {
						racks = append(racks, "<nil>")
					} else {
						racks = append(racks, *r.RackID)
					}
				}
				return nil, nil, false
			})
			cl := newTestClient(t, SeedBrokers(fake.ListenAddrs()...), Rack("b"))
			assigned := make(chan struct{}, 4)
			cs, err := NewConsumer(cl, ConsumerGroup("g"), SubscribeTopics("t"), WithGroupProtocol(proto),
				OnPartitionsAssigned(func(context.Context, []TopicPartition) { assigned <- struct{}{} }),
				HandleRecord(func(context.Context, *Record) error { return nil }))
			if err != nil {
				t.Fatal(err)
			}
			defer cs.Close(context.Background())
			select {
			case <-assigned:
			case <-time.After(30 * time.Second): // a hang guard
				t.Fatal("never assigned")
			}
			mu.Lock()
			defer mu.Unlock()
			if len(racks) == 0 {
				t.Fatal("no join or heartbeat seen")
			}
			for _, r := range racks {
				if r != "b" {
					t.Fatalf("racks sent: %q", racks)
				}
			}
		})
	}
}

func TestPartitionRacks(t *testing.T) {
	brokers := map[int32]cluster.BrokerMeta{1: {NodeID: 1, Rack: "a"}, 2: {NodeID: 2, Rack: "b"}, 3: {NodeID: 3}, 4: {NodeID: 4, Rack: "a"}}
	tm := &cluster.TopicMeta{Partitions: []cluster.PartitionMeta{
		{Partition: 0, Replicas: []int32{1, 2}},
		{Partition: 1, Replicas: []int32{3}},    // broker without a rack
		{Partition: 2, Replicas: []int32{9, 2}}, // broker unknown
		{Partition: 3, Replicas: []int32{1, 4}}, // same rack twice
		{Partition: 7, Replicas: []int32{1}},    // out of range: ignored
	}}
	got := fmt.Sprint(partitionRacks(tm, brokers))
	if want := "[[a b] [] [b] [a] []]"; got != want {
		t.Fatalf("got %s, want %s", got, want)
	}
}

// TestGroupAssignsByRack: end to end through the group protocol, members
// in racks r0 and r1 get the partitions whose replica is in their rack
// (KIP-881), from racks the group leader reads in the metadata. kfake
// gives brokers no racks and replicates every partition on every broker,
// so the members dial through a proxy that rewrites Metadata answers:
// broker n is in rack rn, and each partition's only replica is its
// leader. Six partitions over three brokers: two in each rack; the two in
// r2, where no member is, go one to each for balance.
func TestGroupAssignsByRack(t *testing.T) {
	for _, bal := range []struct {
		name string
		b    GroupBalancer
	}{{"range", RangeBalancer()}, {"cooperative-sticky", CooperativeStickyBalancer()}} {
		t.Run(bal.name, func(t *testing.T) {
			fake := newFake(t, kfake.NumBrokers(3), kfake.SeedTopics(6, "t"))
			leaders := map[int32]int32{} // partition => leader: p % 3
			for p := int32(0); p < 6; p++ {
				leaders[p] = p % 3
				if err := fake.MoveTopicPartition("t", p, p%3); err != nil {
					t.Fatal(err)
				}
			}
			plain := newTestClient(t, SeedBrokers(fake.ListenAddrs()...))
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			bs, err := plain.Brokers(ctx)
			if err != nil {
				t.Fatal(err)
			}
			px := &fetchProxy{addrs: map[string]int32{}, served: map[int32]int{}, down: map[int32]bool{},
				conns: map[int32][]net.Conn{}, fetched: map[int32]int{}}
			for _, b := range bs {
				px.addrs[net.JoinHostPort(b.Host, fmt.Sprint(b.Port))] = b.NodeID
			}
			px.editMeta = func(_ int32, r *kmsg.MetadataResponse) {
				for i := range r.Brokers {
					rack := fmt.Sprintf("r%d", r.Brokers[i].NodeID)
					r.Brokers[i].Rack = &rack
				}
				for i := range r.Topics {
					for j := range r.Topics[i].Partitions {
						p := &r.Topics[i].Partitions[j]
						p.Replicas, p.ISR = []int32{p.Leader}, []int32{p.Leader}
					}
				}
			}
			member := func(rack string) *Consumer {
				cl := newTestClient(t, SeedBrokers(fake.ListenAddrs()...), Dialer(px.dial), Rack(rack))
				cs, err := NewConsumer(cl, ConsumerGroup("g"), SubscribeTopics("t"), Balancers(bal.b),
					HandleRecord(func(context.Context, *Record) error { return nil }))
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { closeConsumer(t, cs) })
				return cs
			}
			owned := func(cs *Consumer) []int32 {
				var ps []int32
				for _, s := range cs.Stats().Partitions {
					ps = append(ps, s.Partition)
				}
				slices.Sort(ps)
				return ps
			}
			a, b := member("r0"), member("r1")
			// Wait (a hang guard only) until the two own every
			// partition between them, three each.
			var pa, pb []int32
			for deadline := time.Now().Add(30 * time.Second); ; {
				pa, pb = owned(a), owned(b)
				if len(pa) == 3 && len(pb) == 3 && len(slices.Compact(slices.Sorted(slices.Values(append(slices.Clone(pa), pb...))))) == 6 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("never balanced: r0 owns %v, r1 owns %v", pa, pb)
				}
				time.Sleep(20 * time.Millisecond)
			}
			racksOf := func(ps []int32) []int32 {
				var rs []int32
				for _, p := range ps {
					rs = append(rs, leaders[p])
				}
				slices.Sort(rs)
				return rs
			}
			// r0's member: both partitions of broker 0 and one of broker
			// 2; r1's: both of broker 1 and one of broker 2.
			if got := racksOf(pa); !slices.Equal(got, []int32{0, 0, 2}) {
				t.Errorf("the r0 member owns %v, led by brokers %v; want 0, 0, 2", pa, got)
			}
			if got := racksOf(pb); !slices.Equal(got, []int32{1, 1, 2}) {
				t.Errorf("the r1 member owns %v, led by brokers %v; want 1, 1, 2", pb, got)
			}
		})
	}
}
