package riffle

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/riffle-go/riffle/internal/kafkaerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// GroupRemoteAssignor goes out in every ConsumerGroupHeartbeat, and the
// broker (kfake: "uniform" and "range") assigns with it.
func TestGroupRemoteAssignor(t *testing.T) {
	for _, name := range []string{"uniform", "range"} {
		t.Run(name, func(t *testing.T) {
			fake := newFake(t, kfake.NumBrokers(1), kfake.SeedTopics(2, "ra"))
			var mu sync.Mutex
			var sent []string
			fake.ControlKey(int16(kmsg.ConsumerGroupHeartbeat), func(kr kmsg.Request) (kmsg.Response, error, bool) {
				fake.KeepControl()
				a := "<nil>"
				if p := kr.(*kmsg.ConsumerGroupHeartbeatRequest).ServerAssignor; p != nil {
					a = *p
				}
				mu.Lock()
				sent = append(sent, a)
				mu.Unlock()
				return nil, nil, false
			})
			cs, err := NewConsumer(newTestClient(t, SeedBrokers(fake.ListenAddrs()...)),
				ConsumerGroup("g-ra-"+name), SubscribeTopics("ra"), WithGroupProtocol(GroupProtocolConsumer),
				GroupRemoteAssignor(name), HandleRecord(func(context.Context, *Record) error { return nil }))
			if err != nil {
				t.Fatal(err)
			}
			defer closeMember(t, cs)
			waitFor(t, 20*time.Second, "both partitions assigned", func() bool { return len(cs.Stats().Partitions) == 2 })
			mu.Lock()
			defer mu.Unlock()
			if len(sent) == 0 {
				t.Fatal("no heartbeat seen")
			}
			for i, a := range sent {
				if a != name {
					t.Fatalf("heartbeat %d carried ServerAssignor %s, want %q", i, a, name)
				}
			}
		})
	}
}

func TestGroupRemoteAssignorValidation(t *testing.T) {
	cl := newTestClient(t, SeedBrokers("127.0.0.1:1"))
	noop := HandleRecord(func(context.Context, *Record) error { return nil })
	for _, tc := range []struct {
		name string
		opts []ConsumerOption
	}{
		{"empty", []ConsumerOption{ConsumerGroup("g"), SubscribeTopics("t"), WithGroupProtocol(GroupProtocolConsumer), GroupRemoteAssignor("")}},
		{"classic", []ConsumerOption{ConsumerGroup("g"), SubscribeTopics("t"), GroupRemoteAssignor("uniform")}},
		{"no group", []ConsumerOption{GroupRemoteAssignor("uniform")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewConsumer(cl, append(tc.opts, noop)...)
			if !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("err %v, want ErrInvalidConfig", err)
			}
		})
	}
}

// An assignor the broker does not know is a group error carrying
// UNSUPPORTED_ASSIGNOR.
func TestGroupRemoteAssignorUnknown(t *testing.T) {
	fake := newFake(t, kfake.NumBrokers(1), kfake.SeedTopics(1, "ru"))
	var hbs atomic.Int32
	fake.ControlKey(int16(kmsg.ConsumerGroupHeartbeat), func(kmsg.Request) (kmsg.Response, error, bool) {
		fake.KeepControl()
		hbs.Add(1)
		return nil, nil, false
	})
	errc := make(chan error, 16)
	cs, err := NewConsumer(newTestClient(t, SeedBrokers(fake.ListenAddrs()...)),
		ConsumerGroup("g-ru"), SubscribeTopics("ru"), WithGroupProtocol(GroupProtocolConsumer),
		GroupRemoteAssignor("nonexistent"), HandleRecord(func(context.Context, *Record) error { return nil }),
		OnGroupError(func(err error) {
			select {
			case errc <- err:
			default:
			}
		}))
	if err != nil {
		t.Fatal(err)
	}
	defer closeMember(t, cs)
	select {
	case err := <-errc:
		t.Logf("group error: %v", err)
		if !errors.Is(err, ErrGroup) || !errors.Is(err, kafkaerr.ForCode(kafkaerr.UnsupportedAssignor)) {
			t.Fatalf("group error %v, want ErrGroup with UNSUPPORTED_ASSIGNOR", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("no group error for an unknown server assignor")
	}
	// The member retries (the option may be fixed broker-side by an
	// upgrade) after backoffs, not in a loop.
	n, took := countOver(time.Second, func() int64 { return int64(hbs.Load()) })
	if n > rateLimit(20, took) {
		t.Fatalf("%d heartbeats in %v after UNSUPPORTED_ASSIGNOR (want at most 20 a second): a spin", n, took)
	}
	t.Logf("%d heartbeats in %v", n, took)
}
