package riffle

import (
	"context"
	"fmt"
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
